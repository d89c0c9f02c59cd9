import Logging
import SupervisorCore
import SupervisorKernel
import Testing

@testable import SupervisorShell

/// How `LockWatch` spends threads on surveys: the surveys of stops confirmed in one loop
/// iteration share one thread, and each gets its own result, in order.
struct LockWatchTests {
    @Test func theSurveysOfOneIterationShareOneThread() throws {
        let k = RecordingKernel()
        let watch = LockWatch(kernel: k, logger: Logger(label: "test"), containersRoot: { "/state/containers" })
        // Two stopped groups, each holding a POSIX lock through its descriptor 3.
        var lines = ""
        for (n, pid) in [(1, 100), (2, 200)] {
            let line = "\(n): POSIX  ADVISORY  WRITE \(pid) 08:01:4\(n) 0 EOF\n"
            lines += line
            k.directories["/proc/\(pid)/fdinfo"] = ["3"]
            k.files["/proc/\(pid)/fdinfo/3"] = "pos:\t0\nflags:\t02\nlock:\t\(line)"
            k.links["/proc/\(pid)/fd/3"] = "/data/\(pid).db"
        }
        k.descriptors[try #require(k.opened["/proc/locks"])] = lines
        var found: [Int32: [LockSurvey.Found]] = [:]
        var order: [Int32] = []
        for pid: Int32 in [100, 200] {
            watch.survey(members: [pid]) { result in
                found[pid] = result.found
                order.append(pid)
            }
        }
        #expect(k.backgroundWork.count == 1, "one read of /proc/locks for both")
        k.clearCalls()
        // The read returns; both surveys are queued, and start together on the loop's next turn.
        k.finishBackgroundWork()
        #expect(k.backgroundWork.isEmpty, "a survey started before the loop's next turn")
        #expect(watch.isSurveying)
        k.advance(to: k.clock)
        #expect(k.calls.filter { $0 == .inBackground }.count == 1, "one thread for both surveys: \(k.calls)")
        #expect(k.backgroundWork.count == 1)
        #expect(found.isEmpty)
        #expect(watch.isSurveying)
        k.finishBackgroundWork()
        #expect(order == [100, 200])
        #expect(found[100]?.map(\.lock.path) == ["/data/100.db"])
        #expect(found[200]?.map(\.lock.path) == ["/data/200.db"])
        #expect(!watch.isSurveying)
    }

    /// Records what the watch posts.
    final class Posts: EventSink {
        var events: [Event] = []
        func post(_ event: Event) { events.append(event) }
        func batch(_ body: () -> Void) { body() }
    }

    /// A suspended group with a lock on a file open elsewhere, as the survey found it: checked
    /// for waiters from then on.
    func checkedGroup(_ id: String, pid: Int32, _ watch: LockWatch) -> SupervisedProcess {
        let p = SupervisedProcess(
            extensionID: id, generation: 1, pid: pid, pidfd: pid + 1, cgroup: nil, mechanism: .stop, channel: nil, queueLimit: 16)
        let lock = HeldLock(kind: .flock, exclusive: false, path: "/data/\(id)", pid: pid, openElsewhere: true)
        watch.watch(p, LockSurvey.Outcome(found: [LockSurvey.Found(lock: lock, link: "")], openWatch: nil))
        return p
    }

    /// Every group checked for waiters shares one read of /proc/locks per check, on another
    /// thread; a group found blocking is reported and no longer checked, and once none is
    /// checked no timer runs.
    @Test func theGroupsCheckedForWaitersShareOneReadPerCheck() {
        let k = RecordingKernel()
        let posts = Posts()
        let watch = LockWatch(kernel: k, logger: Logger(label: "test"), containersRoot: { "/state/containers" })
        watch.attach(posts)
        let a = checkedGroup("a", pid: 100, watch)
        let b = checkedGroup("b", pid: 200, watch)
        k.files["/proc/locks"] = """
            1: FLOCK  ADVISORY  READ 100 08:01:1 0 EOF
            1: -> FLOCK  ADVISORY  WRITE 999 08:01:1 0 EOF
            2: FLOCK  ADVISORY  READ 200 08:01:2 0 EOF

            """
        k.clearCalls()
        k.advance(to: k.clock.adding(seconds: WaiterChecks.checkSeconds))
        #expect(k.calls == [.inBackground], "one read for both groups, off the loop: \(k.calls)")
        k.finishBackgroundWork()
        #expect(k.calls.filter { $0 == .read("/proc/locks") }.count == 1)
        #expect(posts.events.count == 1)
        guard case .lockContention(let id, _, let detail)? = posts.events.first else {
            Issue.record("no contention: \(posts.events)")
            return
        }
        #expect(id == "a")
        #expect(detail == "pid 100 holds a FLOCK lock on 08:01:1 that 1 process(es) wait for")

        // b is still checked, a no longer.
        k.clearCalls()
        k.advance(to: k.clock.adding(seconds: WaiterChecks.checkSeconds))
        #expect(k.calls == [.inBackground])
        k.finishBackgroundWork()
        #expect(posts.events.count == 1)

        // b resumed: its watch stops, and with it the checks.
        b.locks.stop()
        k.clearCalls()
        k.advance(to: k.clock.adding(seconds: 10 * WaiterChecks.checkSeconds))
        #expect(k.calls.isEmpty, "\(k.calls)")
        #expect(k.backgroundWork.isEmpty)
        #expect(!k.timers.contains { !$0.cancelled }, "a timer runs with no group checked")
        _ = a
    }
}
