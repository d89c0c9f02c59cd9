import ExtensionProtocol
import SupervisorCore
import Testing

@Suite("Suspend, resume and reclaim")
struct SuspendResumeTests {
    @Test func endingTheLastIdleRequestStopsAtOnce() {
        var h = Harness()
        let rid = h.activate(at: 0)
        let e = h.end(request: rid, at: 4)
        #expect(e.stops == [extID])
        #expect(e.events.map(\.kind) == [.end, .stopSent])
        #expect(h.state == .background, "the public state is background until the kernel confirms the stop")
        #expect(h.phase == .stopping(wasExpiring: false))
        #expect(e.timers.isEmpty, "no deadline while the stop is in flight")

        let c = h.stopConfirmed(at: 4.01)
        #expect(h.state == .suspended)
        #expect(h.phase == .suspended(reclaimAt: .seconds(604.01)))
        #expect(c.events.map(\.kind) == [.suspend])
        #expect(c.timers == [.seconds(604.01)], "the reclaim deadline is suspendedLifetimeSeconds after the stop")
    }

    @Test func hostGoneDismissesEveryRequestOfThatHost() {
        var h = Harness()
        h.activate(host: 1, at: 0)
        h.begin(host: 1, tag: 2, at: 1)
        h.begin(host: 2, tag: 3, at: 1)
        #expect(h.record.requests.count == 3)
        let first = h.step(.hostGone(host: 1), at: 2)
        #expect(first.endedRequests.count == 2)
        #expect(first.stops.isEmpty, "host 2 still holds a request")
        #expect(h.state == .active)
        let second = h.step(.hostGone(host: 2), at: 3)
        #expect(second.endedRequests.isEmpty, "the last request's ended waits for the stop")
        #expect(second.stops == [extID])
        #expect(h.state == .background)
        #expect(h.stopConfirmed(at: 3.001).endedRequests.count == 1)
    }

    @Test func hostGoneWithoutRequestsChangesNothing() {
        var h = Harness()
        h.activate(host: 1, at: 0)
        let e = h.step(.hostGone(host: 9), at: 1)
        #expect(e.isEmpty)
        #expect(h.state == .active)
    }

    @Test func beginOnSuspendedResumesTheSameProcess() {
        var h = Harness()
        let rid = h.activate(host: 1, at: 0)
        let pid = h.pid
        h.suspendIdle(request: rid, at: 1)
        #expect(h.state == .suspended)

        let b = h.begin(host: 2, tag: 21, at: 50)
        #expect(b.resumes == [extID])
        #expect(b.spawns.isEmpty)
        #expect(b.openRequests.isEmpty, "the request opens only once the group runs again")
        #expect(h.state == .suspended, "resuming shows as suspended")
        #expect(h.phase == .resuming)
        #expect(b.timers == [nil], "the reclaim deadline is cancelled")

        let c = h.continueConfirmed(at: 50.01)
        #expect(h.state == .active)
        #expect(c.events.map(\.kind) == [.resume, .begin])
        #expect(c.openRequests.count == 1)
        #expect(c.openRequests.first?.pid == pid)
        #expect(c.openRequests.first?.generation == 1)
        #expect(c.openRequests.first?.tag == 21)
        #expect(c.openRequests.first?.host == 2)
        #expect(h.gen == 1)
    }

    @Test func severalBeginsWhileResumingOpenTogether() {
        var h = Harness()
        let rid = h.activate(at: 0)
        h.suspendIdle(request: rid, at: 1)
        let a = h.begin(host: 1, tag: 1, at: 2)
        let b = h.begin(host: 2, tag: 2, at: 2)
        #expect(a.resumes.count == 1)
        #expect(b.resumes.isEmpty, "one SIGCONT is enough")
        let c = h.continueConfirmed(at: 2)
        #expect(c.openRequests.map(\.tag) == [1, 2])
    }

    @Test func beginWhileTheStopIsInFlightResumes() {
        var h = Harness()
        let rid = h.activate(at: 0)
        h.end(request: rid, at: 1)
        #expect(h.phase == .stopping(wasExpiring: false))
        let b = h.begin(tag: 5, at: 1.001)
        #expect(b.resumes == [extID])
        #expect(b.spawns.isEmpty)
        #expect(h.phase == .resuming)

        // The late stop confirmation must not suspend the extension again.
        let late = h.stopConfirmed(at: 1.002)
        #expect(late.isEmpty)
        #expect(h.phase == .resuming)

        let c = h.continueConfirmed(at: 1.003)
        #expect(h.state == .active)
        #expect(c.openRequests.map(\.tag) == [5])
        #expect(c.openRequests.first?.pid == 100)
    }

    @Test func resumeWhosePendingHostLeftGoesBackToSleep() {
        var h = Harness()
        let rid = h.activate(host: 1, at: 0)
        h.suspendIdle(request: rid, at: 1)
        h.begin(host: 2, at: 2)
        h.step(.hostGone(host: 2), at: 2.5)
        #expect(h.record.pending.isEmpty)
        let c = h.continueConfirmed(at: 3)
        #expect(c.openRequests.isEmpty)
        #expect(c.stops == [extID])
        #expect(h.phase == .stopping(wasExpiring: false))
    }

    @Test func reclaimAfterTheSuspendedLifetime() {
        var h = Harness()
        let rid = h.activate(at: 0)
        h.suspendIdle(request: rid, at: 20)
        #expect(h.armedTimer == .some(.seconds(620)))

        #expect(h.tick(at: 619.999).isEmpty)
        #expect(h.state == .suspended)

        let e = h.tick(at: 620)
        #expect(e.signals == [SignalSent(extensionID: extID, generation: 1, signal: SignalNumber.kill, thenContinue: true)])
        #expect(h.state == .terminating)
        #expect(e.timers == [nil], "after SIGKILL only the exit is awaited")

        let x = h.exited(.signaled(9), at: 620.01)
        #expect(h.state == .notRunning)
        #expect(h.record.lastExit?.reason == .reclaimed)
        #expect(h.record.lastExit?.reason.rawValue == "reclaimed")
        #expect(x.events.map(\.kind) == [.reclaim])
        #expect(h.record.consecutiveCrashes == 0, "a reclaim is not a crash")
        #expect(x.spawns.isEmpty)
    }

    @Test func aBeginAfterAReclaimLaunchesANewGeneration() {
        var h = Harness()
        let rid = h.activate(at: 0)
        h.suspendIdle(request: rid, at: 0)
        h.tick(at: 600)
        h.exited(.signaled(9), at: 600)
        let b = h.begin(at: 700)
        #expect(b.spawns.map(\.generation) == [2])
        #expect(b.resumes.isEmpty)
    }

    @Test func aBeginWhileReclaimingWaitsForTheExitThenRelaunches() {
        var h = Harness()
        let rid = h.activate(at: 0)
        h.suspendIdle(request: rid, at: 0)
        h.tick(at: 600)
        let b = h.begin(tag: 31, at: 600.5)
        #expect(b.spawns.isEmpty && b.resumes.isEmpty)
        #expect(h.record.pending.count == 1)
        let x = h.exited(.signaled(9), at: 601)
        #expect(x.spawns.map(\.generation) == [2], "the queued begin gets a fresh process")
        h.spawned(at: 601)
        let r = h.ready(at: 601)
        #expect(r.openRequests.map(\.tag) == [31])
    }

    @Test func suspendNeverKeepsTheExtensionRunningInTheBackground() {
        var policy = testPolicy
        policy.suspend = .never
        var h = Harness(policy: policy)
        let rid = h.activate(at: 0)
        let e = h.end(request: rid, at: 1)
        #expect(e.stops.isEmpty)
        #expect(h.state == .background)
        #expect(h.phase == .background(expireAt: nil, stopAt: nil))
        #expect(e.timers.isEmpty, "no stop and no reclaim is ever scheduled")
        #expect(h.tick(at: 100_000).isEmpty)
        #expect(h.state == .background)

        let b = h.begin(tag: 3, at: 100_001)
        #expect(b.openRequests.map(\.tag) == [3], "an idle, running extension serves a new request at once")
        #expect(b.resumes.isEmpty && b.spawns.isEmpty)
        #expect(h.state == .active)
    }

    @Test func suspendNeverStillGrantsAssertionsInTheBackground() {
        var policy = testPolicy
        policy.suspend = .never
        var h = Harness(policy: policy)
        let rid = h.activate(at: 0)
        h.end(request: rid, at: 1)
        let e = h.acquire(at: 500)
        #expect(e.granted.count == 1)
        // The leak guard still applies.
        let expire = h.tick(at: 557)
        #expect(expire.expires.count == 1)
        let overrun = h.tick(at: 560)
        #expect(overrun.events(.overrun).count == 1)
        #expect(overrun.stops.isEmpty)
    }

    @Test func prewarmedReadyWithoutRequestIsStoppedAtOnce() {
        var h = Harness()
        h.step(.prewarm(host: 1, peer: ownPeer, tag: 1, extensionIDs: [extID]), at: 0)
        h.spawned(at: 0)
        let r = h.ready(at: 1)
        #expect(r.openRequests.isEmpty)
        #expect(r.stops == [extID])
    }

    @Test func staleStopAndContinueConfirmationsAreIgnored() {
        var h = Harness()
        let rid = h.activate(at: 0)
        h.end(request: rid, at: 1)
        let stale = h.step(.stopConfirmed(extensionID: extID, generation: 0), at: 1)
        #expect(stale.isEmpty)
        #expect(h.phase == .stopping(wasExpiring: false))
        h.stopConfirmed(at: 1)
        h.begin(at: 2)
        let staleContinue = h.step(.continueConfirmed(extensionID: extID, generation: 7), at: 2)
        #expect(staleContinue.isEmpty)
        #expect(h.phase == .resuming)
    }

    @Test func continueConfirmedWithoutAResumeIsIgnored() {
        var h = Harness()
        h.activate(at: 0)
        let e = h.continueConfirmed(at: 1)
        #expect(e.isEmpty)
        #expect(h.state == .active)
    }
}

@Suite("State version")
struct StateVersionTests {
    @Test func itMovesWithPublicStatesNotWithEveryMessage() {
        var h = Harness()
        let start = h.sup.stateVersion
        let request = h.activate(at: 0)
        let active = h.sup.stateVersion
        #expect(active != start, "not-running → launching → active")
        let a = h.grant(at: 1)
        h.release(a, at: 2)
        #expect(h.sup.stateVersion == active, "assertions alone change no public state")
        h.suspendIdle(request: request, at: 3)
        #expect(h.sup.stateVersion != active)
    }
}
