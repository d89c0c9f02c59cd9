import ExtensionProtocol
import SupervisorCore
import Testing

@Suite("Launch: not-running → launching → active")
struct LaunchTests {
    @Test func beginOnNotRunningSpawnsAndArmsTheLaunchDeadline() {
        var h = Harness()
        #expect(h.state == .notRunning)
        let e = h.begin(tag: 11, at: 5)
        #expect(e.spawns.count == 1)
        #expect(e.spawns.first?.id == extID)
        #expect(e.spawns.first?.generation == 1)
        #expect(e.spawns.first?.manifest == manifest())
        #expect(e.openRequests.isEmpty)
        #expect(e.replies.isEmpty)
        #expect(h.state == .launching)
        #expect(h.phase == .launching(deadline: .seconds(15)))
        #expect(h.record.pending.count == 1)
        #expect(h.record.pending.first?.tag == 11)
        #expect(e.timers == [.seconds(15)])
        #expect(h.record.since == .seconds(5))
    }

    @Test func spawnedRecordsThePidButStaysLaunching() {
        var h = Harness()
        h.begin(at: 0)
        let e = h.step(.spawned(extensionID: extID, generation: 1, pid: 777), at: 0.5)
        #expect(h.pid == 777)
        #expect(h.record.startedAt == .seconds(0.5))
        #expect(h.state == .launching)
        #expect(e.events.map(\.kind) == [.launch])
        #expect(e.events.first?.pid == 777)
        #expect(e.openRequests.isEmpty)
        #expect(e.timers.isEmpty, "the launch deadline does not move when the process appears")
    }

    @Test func readyOpensThePendingRequestAndDisarmsTheTimer() {
        var h = Harness()
        h.begin(host: 3, tag: 42, at: 0)
        h.step(.spawned(extensionID: extID, generation: 1, pid: 555), at: 1)
        let e = h.ready(at: 2)
        #expect(h.state == .active)
        #expect(
            e.openRequests == [
                OpenedRequest(extensionID: extID, generation: 1, requestID: 1, host: 3, tag: 42, pid: 555, channel: true)
            ])
        #expect(e.events.map(\.kind) == [.ready, .begin])
        #expect(e.events.last?.requestID == 1)
        #expect(e.timers == [nil])
        #expect(h.record.pending.isEmpty)
        #expect(h.record.requests.map(\.id) == [1])
        #expect(h.record.requests.first?.host == 3)
    }

    @Test func beginsDuringLaunchAreQueuedAndOpenedInOrderOnReady() {
        var h = Harness()
        let first = h.begin(host: 1, tag: 1, at: 0)
        let second = h.begin(host: 2, tag: 2, at: 0.1)
        let third = h.begin(host: 1, tag: 3, at: 0.2)
        #expect(first.spawns.count == 1)
        #expect(second.spawns.isEmpty && third.spawns.isEmpty, "one process serves every queued begin")
        h.spawned(at: 0.3)
        let e = h.ready(at: 0.4)
        #expect(e.openRequests.map(\.tag) == [1, 2, 3])
        #expect(e.openRequests.map(\.host) == [1, 2, 1])
        #expect(Set(e.openRequests.map(\.requestID)).count == 3, "request ids are unique")
        #expect(e.openRequests.allSatisfy { $0.pid == 100 && $0.generation == 1 })
    }

    @Test func beginOnActiveOpensAtOnceWithoutSpawning() {
        var h = Harness()
        let first = h.activate(at: 0)
        let e = h.begin(host: 2, tag: 9, at: 1)
        #expect(e.spawns.isEmpty)
        #expect(e.openRequests.count == 1)
        #expect(e.openRequests.first?.pid == 100)
        #expect(e.openRequests.first?.requestID != first)
        #expect(h.record.requests.count == 2)
    }

    @Test func execReadinessOpensRequestsWithoutAChannel() {
        var h = Harness(policy: testPolicy, readiness: .exec)
        h.begin(at: 0)
        h.spawned(at: 0)
        let e = h.ready(at: 0)
        #expect(e.openRequests.count == 1)
        #expect(e.openRequests.first?.channel == false)
        let ended = h.end(request: e.openRequests[0].requestID, at: 1)
        #expect(ended.endedRequests.isEmpty, "an exec extension has no runtime channel to tell")
        #expect(ended.stops == [extID])
    }

    @Test func launchTimeoutFailsTheHostKillsAndRecordsTheExit() {
        var h = Harness()
        h.begin(host: 1, tag: 5, at: 0)
        h.begin(host: 2, tag: 6, at: 1)
        h.spawned(at: 1)
        #expect(h.tick(at: 9.999).isEmpty, "nothing happens before launchTimeoutSeconds")
        #expect(h.state == .launching)

        let e = h.tick(at: 10)
        #expect(e.failures.map(\.code) == [.launchTimeout, .launchTimeout])
        #expect(e.failures.map(\.host) == [1, 2])
        #expect(e.failures.map(\.tag) == [5, 6])
        #expect(e.signals == [SignalSent(extensionID: extID, generation: 1, signal: SignalNumber.kill, thenContinue: false)])
        #expect(e.events(.launchTimeout).count == 1)
        #expect(h.state == .terminating)
        #expect(h.record.pending.isEmpty)
        #expect(e.timers == [nil], "SIGKILL needs no follow-up deadline")

        let x = h.exited(.signaled(9), at: 10.1)
        #expect(h.state == .notRunning)
        #expect(h.record.lastExit?.reason == .launchTimeout)
        #expect(h.record.lastExit?.reason.rawValue == "launch-timeout")
        #expect(h.record.lastExit?.status == .signaled(9))
        #expect(h.record.lastExit?.pid == 100)
        #expect(x.events.map(\.kind) == [.exit])
        #expect(x.events.first?.detail?.hasPrefix("launch-timeout") == true)
        #expect(x.spawns.isEmpty, "no pending begin is left to relaunch for")
    }

    @Test func launchTimeoutBeforeTheProcessAppearsStillKillsWhatAppears() {
        var h = Harness()
        h.begin(at: 0)
        let timeout = h.tick(at: 10)
        #expect(timeout.signals.map(\.signal) == [SignalNumber.kill])
        #expect(h.state == .terminating)
        let late = h.spawned(at: 11)
        #expect(late.signals == [SignalSent(extensionID: extID, generation: 1, signal: SignalNumber.kill, thenContinue: true)])
        h.exited(.signaled(9), at: 11)
        #expect(h.record.lastExit?.reason == .launchTimeout)
    }

    @Test func readyAfterTheTimeoutIsIgnored() {
        var h = Harness()
        h.begin(at: 0)
        h.spawned(at: 0)
        h.tick(at: 10)
        let e = h.ready(at: 10.5)
        #expect(e.openRequests.isEmpty)
        #expect(h.state == .terminating)
    }

    @Test func spawnFailureFailsPendingBeginsAndCountsAsACrash() {
        var h = Harness()
        h.begin(host: 4, tag: 8, at: 0)
        let e = h.step(.spawnFailed(extensionID: extID, generation: 1, error: "ENOENT"), at: 0.1)
        #expect(e.failures.map(\.code) == [.launchFailed])
        #expect(e.failures.first?.host == 4)
        #expect(e.failures.first?.tag == 8)
        #expect(e.events(.launchFailed).first?.detail == "ENOENT")
        #expect(h.state == .notRunning)
        #expect(h.record.lastExit?.reason == .launchFailed)
        #expect(h.record.consecutiveCrashes == 1)
        #expect(e.timers == [nil])
    }

    @Test func exitBeforeReadyFailsPendingBeginsAsLaunchFailed() {
        var h = Harness()
        h.begin(host: 1, tag: 3, at: 0)
        h.spawned(at: 0)
        let e = h.exited(.exited(1), at: 0.5)
        #expect(e.failures.map(\.code) == [.launchFailed])
        #expect(e.spawns.isEmpty)
        #expect(h.record.lastExit?.reason == .crashed)
        #expect(h.state == .notRunning)
    }

    @Test func beginOnAnUnknownExtensionIsRefused() {
        var h = Harness()
        let e = h.begin(tag: 77, id: "com.example.missing", at: 0)
        #expect(e.failures.count == 1)
        #expect(e.failures.first?.code == .unknownExtension)
        #expect(e.failures.first?.tag == 77)
        #expect(e.spawns.isEmpty)
    }

    @Test func endOfAnUnknownOrForeignRequestIsRefused() {
        var h = Harness()
        let rid = h.activate(host: 1, at: 0)
        let foreign = h.end(host: 2, tag: 4, request: rid, at: 1)
        #expect(foreign.failures.map(\.code) == [.unknownRequest])
        #expect(foreign.failures.first?.tag == 4)
        let unknown = h.end(host: 1, tag: 5, request: 999, at: 1)
        #expect(unknown.failures.map(\.code) == [.unknownRequest])
        #expect(h.state == .active)
        #expect(h.record.requests.count == 1)
    }

    @Test func endRepliesOkAndTellsTheExtensionOnceItsStopIsConfirmed() {
        var h = Harness()
        let rid = h.activate(host: 1, at: 0)
        let e = h.end(host: 1, tag: 12, request: rid, at: 1)
        #expect(e.oks.map(\.tag) == [12])
        #expect(e.oks.first?.host == 1)
        #expect(e.stops == [extID])
        #expect(e.endedRequests.isEmpty, "not while the stop is in flight: the message would wake the extension")
        #expect(e.events(.end).first?.requestID == rid)
        #expect(h.stopConfirmed(at: 1.001).endedRequests == [rid])
    }

    @Test func endTellsTheExtensionAtOnceWhenItIsNotStopped() {
        var h = Harness()
        let rid = h.activate(host: 1, at: 0)
        _ = h.grant(at: 0.5)
        let e = h.end(host: 1, tag: 12, request: rid, at: 1)
        #expect(e.stops.isEmpty, "an assertion keeps it running in the background")
        #expect(e.endedRequests == [rid])
    }

    @Test func endedHeldDuringAStopGoesOutWhenABeginResumesItFirst() {
        var h = Harness()
        let rid = h.activate(host: 1, at: 0)
        #expect(h.end(host: 1, tag: 12, request: rid, at: 1).endedRequests.isEmpty)
        let resumed = h.begin(host: 1, tag: 13, at: 1.001)
        #expect(resumed.endedRequests == [rid], "sent as the stop is given up, before the new request")
        #expect(h.exited(.exited(0), at: 1.002).endedRequests.isEmpty)
    }

    @Test func endedHeldDuringAStopIsDroppedWhenTheProcessExits() {
        var h = Harness()
        let rid = h.activate(host: 1, at: 0)
        #expect(h.end(host: 1, tag: 12, request: rid, at: 1).endedRequests.isEmpty)
        #expect(h.exited(.exited(0), at: 1.001).endedRequests.isEmpty)
    }

    @Test func deliveryFailureAnswersTheHostsBeginAndClosesTheRequest() {
        var h = Harness()
        let rid = h.activate(host: 6, tag: 9, at: 0)
        let e = h.step(.deliveryFailed(extensionID: extID, generation: 1, requestID: rid, error: "EBADF"), at: 1)
        #expect(e.failures.map(\.code) == [.interrupted])
        #expect(e.failures.first?.host == 6 && e.failures.first?.tag == 9, "the begin (tag 9) is answered")
        #expect(e.endedRequests.isEmpty, "told once the stop is confirmed")
        #expect(e.stops == [extID], "the last request is gone: the idle extension is stopped")
        #expect(h.record.requests.isEmpty)
        #expect(h.stopConfirmed(at: 1.001).endedRequests == [rid])
    }

    @Test func eventsForAnotherExtensionDoNotTouchThisOne() {
        var h = Harness([manifest("a.one"), manifest("b.two")], focus: "a.one")
        h.activate(at: 0)
        let e = h.step(.ready(extensionID: "b.two", generation: 1), at: 1)
        #expect(e.isEmpty)
        #expect(h.record("b.two")?.state == .notRunning)
        #expect(h.state == .active)
    }
}
