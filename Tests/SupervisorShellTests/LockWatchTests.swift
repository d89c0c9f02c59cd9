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
                found[pid] = result
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
}
