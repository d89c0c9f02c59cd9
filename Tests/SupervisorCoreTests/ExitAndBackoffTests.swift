import ExtensionProtocol
import SupervisorCore
import Testing

@Suite("Exits, crashes and crash-loop backoff")
struct ExitAndBackoffTests {
    /// Crash backoff: base 1 s, capped at 4 s; a run of 30 s counts as stable.
    static let backoffLimits = testLimits {
        $0.crashBackoffBaseSeconds = 1
        $0.crashBackoffMaxSeconds = 4
        $0.stableRunSeconds = 30
    }

    @Test func exitZeroIsAnOrdinaryExitAndInterruptsOpenRequests() {
        var h = Harness()
        let r1 = h.activate(host: 1, at: 0)
        let r2 = h.begin(host: 2, at: 1).openRequests[0].requestID
        let x = h.exited(.exited(0), at: 5)
        #expect(h.state == .notRunning)
        #expect(h.record.lastExit?.reason == .exited)
        #expect(h.record.lastExit?.status == .exited(0))
        #expect(h.record.lastExit?.at == .seconds(5))
        #expect(h.record.lastExit?.pid == 100)
        #expect(h.pid == nil)
        #expect(x.events.map(\.kind) == [.exit])
        #expect(Set(x.interruptions.map(\.requestID)) == [r1, r2])
        #expect(x.interruptions.count == 2)
        #expect(h.record.requests.isEmpty)
        #expect(h.record.consecutiveCrashes == 0)
    }

    @Test(arguments: [SupervisorCore.ExitStatus.exited(1), .exited(139), .signaled(11), .signaled(9), .signaled(15)])
    func nonZeroExitOrForeignSignalIsACrash(status: SupervisorCore.ExitStatus) {
        var h = Harness()
        let rid = h.activate(host: 3, at: 0)
        let x = h.exited(status, at: 2)
        #expect(h.record.lastExit?.reason == .crashed)
        #expect(h.record.lastExit?.status == status)
        #expect(x.events.map(\.kind) == [.crash])
        #expect(x.interruptions.map(\.host) == [3])
        #expect(x.interruptions.map(\.requestID) == [rid])
        if case .interrupted(_, let reason)? = x.replies.first?.message {
            #expect(reason.contains("crashed"))
        } else {
            Issue.record("expected an interrupted reply, got \(x)")
        }
        #expect(h.record.consecutiveCrashes == 1)
        #expect(h.record.throttledUntil == nil, "no delay after the first crash")
    }

    @Test func anOOMKillAtTheMemoryLimitIsRecordedAsMemoryLimitAndCountsAsACrash() {
        var h = Harness()
        let rid = h.activate(host: 3, at: 0)
        let x = h.step(.exited(extensionID: h.id, generation: h.gen, status: .signaled(9), memoryLimit: true), at: 2)
        #expect(h.record.lastExit?.reason == .memoryLimit)
        #expect(h.record.lastExit?.reason.rawValue == "memory-limit")
        #expect(x.events.map(\.kind) == [.crash])
        #expect(x.events.first?.detail?.hasPrefix("memory-limit, signal 9") == true)
        #expect(x.interruptions.map(\.requestID) == [rid], "its hosts are told")
        if case .interrupted(_, let reason)? = x.replies.first?.message {
            #expect(reason == "'\(h.id)' ended: memory-limit (signal 9)")
        } else {
            Issue.record("expected an interrupted reply, got \(x)")
        }
        #expect(h.record.consecutiveCrashes == 1, "the crash-loop throttle applies")
    }

    @Test func theNextBeginAfterACrashRelaunchesANewGeneration() {
        var h = Harness()
        h.activate(at: 0)
        h.exited(.exited(2), at: 1)
        let b = h.begin(tag: 8, at: 1)
        #expect(b.spawns.map(\.generation) == [2])
        #expect(h.gen == 2)
        h.spawned(at: 1)
        let r = h.ready(at: 1)
        #expect(r.openRequests.map(\.generation) == [2])
        #expect(r.openRequests.map(\.pid) == [101])
    }

    @Test func crashLoopBackoffThrottlesBeginsAndDoubles() {
        var h = Harness([manifest()], limits: Self.backoffLimits)
        // The launch delay after n consecutive crashes (index n): 0, 0, 1, 2, 4, 4 (capped), 4.
        let delayAfterCrashes = [0.0, 0, 1, 2, 4, 4, 4]
        var t = 0.0
        for n in 1...6 {
            let delay = delayAfterCrashes[n - 1]
            if delay > 0 {
                let refused = h.begin(tag: UInt32(100 + n), at: t + delay / 2)
                #expect(refused.failures.map(\.code) == [.throttled], "after \(n - 1) crashes: begin during the backoff")
                #expect(refused.failures.first?.tag == UInt32(100 + n))
                #expect(refused.spawns.isEmpty)
                #expect(refused.events(.throttle).count == 1)
                #expect(h.state == .notRunning)
                t += delay
            }
            let b = h.begin(tag: UInt32(n), at: t)
            #expect(b.spawns.count == 1, "after \(n - 1) crashes: the backoff is over at exactly +\(delay)s")
            #expect(b.failures.isEmpty)
            h.spawned(at: t)
            h.ready(at: t)
            t += 1
            let x = h.exited(.exited(1), at: t)
            #expect(h.record.consecutiveCrashes == n)
            let next = delayAfterCrashes[n]
            if next > 0 {
                #expect(h.record.throttledUntil == .seconds(t + next))
                #expect(x.events(.throttle).count == 1)
            } else {
                #expect(h.record.throttledUntil == nil)
                #expect(x.events(.throttle).isEmpty)
            }
        }
    }

    @Test func aStableRunStartsANewCrashCount() {
        var h = Harness([manifest()], limits: Self.backoffLimits)
        h.activate(at: 0)
        h.exited(.exited(1), at: 1)  // crash 1
        h.activate(at: 1)
        h.exited(.exited(1), at: 2)  // crash 2: 1 s backoff
        #expect(h.record.consecutiveCrashes == 2)
        h.activate(at: 3)
        h.exited(.exited(1), at: 3 + 30)  // ran for stableRunSeconds
        #expect(h.record.consecutiveCrashes == 1)
        #expect(h.record.throttledUntil == nil)
        #expect(h.begin(at: 33).spawns.count == 1)
    }

    @Test func aCleanExitResetsTheCrashCount() {
        var h = Harness([manifest()], limits: Self.backoffLimits)
        h.activate(at: 0)
        h.exited(.exited(1), at: 1)
        h.activate(at: 1)
        h.exited(.exited(1), at: 2)
        #expect(h.record.consecutiveCrashes == 2)
        h.activate(at: 3)
        h.exited(.exited(0), at: 4)
        #expect(h.record.consecutiveCrashes == 0)
        #expect(h.record.throttledUntil == nil)
    }

    @Test func repeatedSpawnFailuresAreThrottled() {
        var h = Harness([manifest()], limits: Self.backoffLimits)
        h.begin(at: 0)
        h.step(.spawnFailed(extensionID: extID, generation: 1, error: "EACCES"), at: 0)
        h.begin(at: 0)
        let e = h.step(.spawnFailed(extensionID: extID, generation: 2, error: "EACCES"), at: 0)
        #expect(e.events(.throttle).count == 1)
        #expect(h.begin(at: 0.5).failures.map(\.code) == [.throttled])
        #expect(h.begin(at: 1).spawns.count == 1)
    }

    /// A program the extension's uid cannot reach or run (a configuration error) fails each
    /// request with the reason, and never throttles the next launch.
    @Test func configurationSpawnFailuresAreNotThrottled() {
        var h = Harness([manifest()], limits: Self.backoffLimits)
        for generation in 1...3 {
            h.begin(at: 0)
            let e = h.step(.spawnFailed(extensionID: extID, generation: UInt64(generation), error: "EACCES", configuration: true), at: 0)
            #expect(e.events(.throttle).isEmpty)
            #expect(h.record.consecutiveCrashes == 0)
        }
        #expect(h.begin(at: 0).spawns.count == 1)
    }

    @Test func staleGenerationEventsAreIgnored() {
        var h = Harness()
        h.activate(at: 0)
        h.exited(.exited(1), at: 1)
        h.begin(at: 2)
        #expect(h.gen == 2)
        // Everything still addressed to generation 1 is dropped.
        let events: [Event] = [
            .spawned(extensionID: extID, generation: 1, pid: 9),
            .ready(extensionID: extID, generation: 1),
            .exited(extensionID: extID, generation: 1, status: .exited(0)),
            .stopConfirmed(extensionID: extID, generation: 1),
            .continueConfirmed(extensionID: extID, generation: 1),
            .acquire(extensionID: extID, generation: 1, tag: 1, reason: "r"),
            .release(extensionID: extID, generation: 1, assertionID: 1),
            .expireReceived(extensionID: extID, generation: 1, assertionID: 1),
            .channelClosed(extensionID: extID, generation: 1, reason: "EOF"),
            .deliveryFailed(extensionID: extID, generation: 1, requestID: 1, error: "x"),
            .spawnFailed(extensionID: extID, generation: 1, error: "x"),
        ]
        for event in events {
            let before = h.record
            let e = h.step(event, at: 3)
            #expect(e.isEmpty, "\(event) must be ignored")
            #expect(h.record == before, "\(event) must not change the record")
        }
        #expect(h.state == .launching)
        #expect(h.pid == nil)
    }

    @Test func eventsForANotRunningExtensionAreIgnoredEvenWithTheCurrentGeneration() {
        var h = Harness()
        h.activate(at: 0)
        h.exited(.exited(0), at: 1)
        let before = h.record
        let e = h.step(.exited(extensionID: extID, generation: 1, status: .exited(1)), at: 2)
        #expect(e.isEmpty)
        #expect(h.record == before)
        #expect(h.record.lastExit?.reason == .exited)
    }

    @Test func channelClosedTerminatesThenKillsAfterTheGrace() {
        var h = Harness([manifest()], limits: testLimits { $0.terminateGraceSeconds = 5 })
        let rid = h.activate(host: 2, at: 0)
        let c = h.step(.channelClosed(extensionID: extID, generation: 1, reason: "protocol error"), at: 1)
        #expect(c.signals == [SignalSent(extensionID: extID, generation: 1, signal: SignalNumber.terminate, thenContinue: false)])
        #expect(c.events(.kill).count == 1)
        #expect(h.state == .terminating)
        #expect(c.timers == [.seconds(6)])
        #expect(h.tick(at: 5.999).isEmpty)
        let k = h.tick(at: 6)
        #expect(k.signals == [SignalSent(extensionID: extID, generation: 1, signal: SignalNumber.kill, thenContinue: true)])
        #expect(k.timers == [nil])
        #expect(h.tick(at: 6.05).isEmpty, "SIGKILL is sent once")
        let x = h.exited(.signaled(9), at: 6.1)
        #expect(h.record.lastExit?.reason == .channelClosed)
        #expect(x.interruptions.map(\.requestID) == [rid])
    }

    @Test func aBeginWhileTerminatingGetsAFreshProcessAfterTheExit() {
        var h = Harness()
        h.activate(at: 0)
        h.step(.channelClosed(extensionID: extID, generation: 1, reason: "EOF"), at: 1)
        let b = h.begin(host: 4, tag: 14, at: 1.5)
        #expect(b.spawns.isEmpty && b.openRequests.isEmpty)
        let x = h.exited(.exited(0), at: 2)
        #expect(x.spawns.map(\.generation) == [2])
        h.spawned(at: 2)
        #expect(h.ready(at: 2).openRequests.map(\.tag) == [14])
    }

    @Test func aCrashWhileResumingDuringBackoffFailsTheQueuedBeginAsThrottled() {
        var h = Harness([manifest()], limits: Self.backoffLimits)
        h.activate(at: 0)
        h.exited(.exited(1), at: 1)  // crash 1
        let rid = h.activate(at: 1)
        h.suspendIdle(request: rid, at: 2)
        h.begin(host: 5, tag: 50, at: 3)
        #expect(h.phase == .resuming)
        let x = h.exited(.signaled(11), at: 4)  // crash 2: 1 s backoff
        #expect(x.failures.map(\.code) == [.throttled])
        #expect(x.failures.first?.host == 5)
        #expect(x.spawns.isEmpty)
    }

    // MARK: SupervisorLimits.backoff

    @Test(arguments: [
        (0, 0.0), (1, 0.0), (2, 1.0), (3, 2.0), (4, 4.0), (5, 8.0), (6, 16.0), (7, 32.0), (8, 60.0), (9, 60.0),
        (40, 60.0), (1_000_000, 60.0), (-3, 0.0),
    ])
    func backoffTable(crashes: Int, expected: Double) {
        let limits = SupervisorLimits()  // base 1, max 60
        #expect(limits.backoff(afterCrashes: crashes) == expected)
    }

    @Test func backoffScalesWithTheBaseAndRespectsTheCap() {
        var limits = SupervisorLimits()
        limits.crashBackoffBaseSeconds = 0.5
        limits.crashBackoffMaxSeconds = 3
        #expect((0...6).map { limits.backoff(afterCrashes: $0) } == [0, 0, 0.5, 1, 2, 3, 3])
        limits.crashBackoffBaseSeconds = 0
        #expect(limits.backoff(afterCrashes: 10) == 0, "a zero base disables the backoff")
    }
}

/// `PathTraversal`: the first component a uid may not pass.
@Suite struct PathTraversalTests {
    static let user = Credentials(uid: 1000, gid: 1000, groups: [27])

    static func component(_ path: String, _ mode: UInt32, owner: UInt32 = 0, group: UInt32 = 0, directory: Bool = true) -> PathTraversal.Component {
        PathTraversal.Component(path: path, permissions: mode, owner: owner, group: group, isDirectory: directory)
    }

    @Test func prefixesAreTheDirectoriesThenTheFile() {
        #expect(PathTraversal.prefixes("/root/.pyenv/bin/python") == ["/root", "/root/.pyenv", "/root/.pyenv/bin", "/root/.pyenv/bin/python"])
        #expect(PathTraversal.prefixes("//a//b/") == ["/a", "/a/b"])
    }

    @Test func theFirstDirectoryWithoutSearchPermissionIsNamed() {
        let path = [Self.component("/root", 0o700), Self.component("/root/bin", 0o755), Self.component("/root/bin/x", 0o755, directory: false)]
        let refused = PathTraversal.firstRefused(path, as: Self.user)
        #expect(refused?.path == "/root")
        #expect(
            PathTraversal.explanation(refused!, target: "/root/bin/x", as: Self.user)
                == "uid 1000 (the extension's) cannot search the directory /root (mode 0700, owner 0, group 0) on the way to /root/bin/x")
    }

    @Test func ownerGroupAndOtherBitsApplyInThatOrder() {
        // The owner's bits decide for the owner even when others may pass.
        #expect(PathTraversal.firstRefused([Self.component("/d", 0o075, owner: 1000)], as: Self.user)?.path == "/d")
        // A supplementary group's bits.
        #expect(PathTraversal.firstRefused([Self.component("/d", 0o710, group: 27)], as: Self.user) == nil)
        #expect(PathTraversal.firstRefused([Self.component("/d", 0o701, group: 27)], as: Self.user)?.path == "/d")
        // A file without execute permission for the user.
        #expect(PathTraversal.firstRefused([Self.component("/f", 0o644, directory: false)], as: Self.user)?.path == "/f")
        // Root searches every directory, and executes a file with any execute bit, but not one
        // with none.
        let root = Credentials(uid: 0, gid: 0)
        #expect(PathTraversal.firstRefused([Self.component("/d", 0o000), Self.component("/d/f", 0o001, owner: 5, directory: false)], as: root) == nil)
        #expect(PathTraversal.firstRefused([Self.component("/d", 0o000), Self.component("/d/f", 0o644, directory: false)], as: root)?.path == "/d/f")
    }
}
