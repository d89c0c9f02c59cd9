import ExtensionProtocol
import SupervisorCore
import Testing

// testPolicy: backgroundSeconds 10, expiryGraceSeconds 3, assertionMaxSeconds 60.

@Suite("Task assertions")
struct AssertionTests {
    @Test func acquireWhileActiveIsGrantedAndArmsTheLeakGuard() {
        var h = Harness()
        h.activate(at: 0)
        let e = h.acquire(tag: 33, reason: "finish upload", at: 2)
        #expect(e.granted.count == 1)
        #expect(e.granted.first?.tag == 33)
        #expect(e.sent.count == 1)
        let a = h.record.assertions.assertions
        #expect(a.count == 1)
        #expect(a.first?.id == e.granted.first?.assertionID)
        #expect(a.first?.reason == "finish upload")
        #expect(a.first?.grantedAt == .seconds(2))
        #expect(a.first?.hardDeadline == .seconds(62))
        #expect(e.events(.acquire).first?.detail == "finish upload")
        #expect(e.events(.acquire).first?.assertionID == a.first?.id)
        #expect(e.timers == [.seconds(59)], "expire is due at grantedAt + assertionMaxSeconds − expiryGraceSeconds")
    }

    @Test func assertionIDsAreUnique() {
        var h = Harness()
        h.activate(at: 0)
        let ids = (0..<5).map { i in h.grant(tag: UInt32(i), at: Double(i)) }
        #expect(Set(ids).count == 5)
    }

    @Test func anEmptyReasonIsDenied() {
        var h = Harness()
        h.activate(at: 0)
        let e = h.acquire(tag: 4, reason: "", at: 1)
        #expect(e.deniedTags == [4])
        #expect(e.granted.isEmpty)
        #expect(e.events(.deny).count == 1)
        #expect(h.record.assertions.isEmpty)
    }

    @Test func acquireWhileLaunchingIsGranted() {
        var h = Harness()
        h.begin(at: 0)
        h.spawned(at: 0)
        let e = h.acquire(at: 1)
        #expect(e.granted.count == 1)
    }

    @Test func thePerProcessAssertionLimitIsEnforced() {
        var h = Harness([manifest()], limits: testLimits { $0.maxAssertionsPerProcess = 2 })
        h.activate(at: 0)
        _ = h.grant(tag: 1, at: 1)
        _ = h.grant(tag: 2, at: 1)
        let third = h.acquire(tag: 3, at: 1)
        #expect(third.deniedTags == [3])
        #expect(h.record.assertions.count == 2)
    }

    @Test func leakGuardExpiresThenRecordsTheOverrunWhileARequestIsOpen() {
        var h = Harness()
        h.activate(at: 0)
        let aid = h.grant(at: 1)
        #expect(h.tick(at: 57.999).isEmpty, "no expiry while a request is open and the assertion is young")
        let expire = h.tick(at: 58)
        #expect(expire.expires == [aid])
        #expect(expire.events(.expire).first?.assertionID == aid)
        #expect(expire.timers == [.seconds(61)])
        #expect(h.state == .active)
        #expect(h.record.assertions.assertions.first?.expireSentAt == .seconds(58))

        #expect(h.tick(at: 60.999).isEmpty)
        let overrun = h.tick(at: 61)
        #expect(overrun.events(.overrun).map(\.assertionID) == [aid])
        #expect(overrun.stops.isEmpty, "a request is still open")
        #expect(h.record.assertions.isEmpty)
        #expect(h.record.overruns == 1)
        #expect(h.state == .active)
        #expect(overrun.timers == [nil])
    }

    @Test func releaseBeforeTheLeakGuardCancelsIt() {
        var h = Harness()
        h.activate(at: 0)
        let aid = h.grant(at: 1)
        let r = h.release(aid, at: 5)
        #expect(r.events(.release).map(\.assertionID) == [aid])
        #expect(r.stops.isEmpty)
        #expect(r.timers == [nil])
        #expect(h.tick(at: 61).isEmpty)
    }

    @Test func lastRequestEndingWithALiveAssertionGoesToBackground() {
        var h = Harness()
        let rid = h.activate(at: 0)
        _ = h.grant(at: 1)
        let e = h.end(request: rid, at: 20)
        #expect(e.stops.isEmpty)
        #expect(h.state == .background)
        #expect(h.phase == .background(expireAt: .seconds(27), stopAt: .seconds(30)))
        #expect(e.timers == [.seconds(27)], "expire is due backgroundSeconds − expiryGraceSeconds after the dismissal")
    }

    @Test func releasingTheLastAssertionInTheBackgroundStopsAtOnce() {
        var h = Harness()
        let rid = h.activate(at: 0)
        let a = h.grant(tag: 1, at: 1)
        let b = h.grant(tag: 2, at: 1)
        h.end(request: rid, at: 20)
        let first = h.release(a, at: 22)
        #expect(first.stops.isEmpty, "another assertion is still held")
        let last = h.release(b, at: 23)
        #expect(last.stops == [extID])
        #expect(h.phase == .stopping(wasExpiring: false))
        #expect(last.events(.overrun).isEmpty && last.events(.expiryUnacknowledged).isEmpty)
        h.stopConfirmed(at: 23)
        #expect(h.state == .suspended)
    }

    @Test func unreleasedAssertionsAreExpiredThenStoppedAtTheBackgroundDeadline() {
        var h = Harness()
        let rid = h.activate(at: 0)
        let a = h.grant(tag: 1, at: 1)
        let b = h.grant(tag: 2, at: 2)
        h.end(request: rid, at: 20)

        #expect(h.tick(at: 26.999).isEmpty)
        let expire = h.tick(at: 27)
        #expect(Set(expire.expires) == [a, b])
        #expect(expire.expires.count == 2)
        #expect(expire.stops.isEmpty)
        #expect(expire.events(.expire).map(\.state) == [.background, .background], "an expire shows the state it ends (docs/json.md)")
        #expect(h.state == .expiring)
        #expect(h.phase == .expiring(stopAt: .seconds(30)))
        #expect(expire.timers == [.seconds(30)])

        #expect(h.tick(at: 29.999).isEmpty)
        let stop = h.tick(at: 30)
        #expect(stop.stops == [extID])
        #expect(Set(stop.events(.expiryUnacknowledged).compactMap(\.assertionID)) == [a, b])
        #expect(Set(stop.events(.overrun).compactMap(\.assertionID)) == [a, b])
        #expect(h.record.assertions.isEmpty, "assertions are revoked at the stop")
        #expect(h.record.unacknowledgedExpiries == 2)
        #expect(h.record.overruns == 2)
        #expect(h.state == .expiring, "the stop in flight keeps showing expiring")
        #expect(h.phase == .stopping(wasExpiring: true))
        h.stopConfirmed(at: 30.01)
        #expect(h.state == .suspended)
    }

    @Test func acknowledgedExpiriesAreNotReportedAsUnacknowledged() {
        var h = Harness()
        let rid = h.activate(at: 0)
        let a = h.grant(tag: 1, at: 1)
        let b = h.grant(tag: 2, at: 1)
        h.end(request: rid, at: 20)
        h.tick(at: 27)
        #expect(h.expireReceived(a, at: 27.1).isEmpty)
        #expect(h.record.assertions.assertions.first { $0.id == a }?.expireAcknowledged == true)
        let stop = h.tick(at: 30)
        #expect(stop.events(.expiryUnacknowledged).map(\.assertionID) == [b])
        #expect(Set(stop.events(.overrun).compactMap(\.assertionID)) == [a, b])
    }

    @Test func releasingEverythingWhileExpiringStopsWithoutWaiting() {
        var h = Harness()
        let rid = h.activate(at: 0)
        let a = h.grant(at: 1)
        h.end(request: rid, at: 20)
        h.tick(at: 27)
        h.expireReceived(a, at: 27.5)
        let r = h.release(a, at: 28)
        #expect(r.stops == [extID])
        #expect(r.events(.overrun).isEmpty)
        #expect(r.events(.expiryUnacknowledged).isEmpty)
        #expect(h.phase == .stopping(wasExpiring: true))
    }

    @Test func acquireIsDeniedWhileExpiring() {
        var h = Harness()
        let rid = h.activate(at: 0)
        _ = h.grant(at: 1)
        h.end(request: rid, at: 20)
        h.tick(at: 27)
        let e = h.acquire(tag: 9, at: 28)
        #expect(e.deniedTags == [9])
        #expect(e.granted.isEmpty)
    }

    @Test func acquireIsGrantedInTheBackgroundBeforeTheBudgetIsSpentAndDeniedAfter() {
        var h = Harness()
        let rid = h.activate(at: 0)
        _ = h.grant(tag: 1, at: 1)
        h.end(request: rid, at: 20)
        let early = h.acquire(tag: 2, at: 26.9)
        #expect(early.granted.map(\.tag) == [2])
        // No tick yet: the extension is still in the background phase, but its time is spent.
        let late = h.acquire(tag: 3, at: 27)
        #expect(late.deniedTags == [3])
        #expect(h.record.assertions.count == 2)
    }

    @Test func anAssertionGrantedInTheBackgroundIsExpiredWithTheOthers() {
        var h = Harness()
        let rid = h.activate(at: 0)
        let a = h.grant(tag: 1, at: 1)
        h.end(request: rid, at: 20)
        let b = h.grant(tag: 2, at: 25)
        let e = h.tick(at: 27)
        #expect(Set(e.expires) == [a, b])
    }

    @Test func acquireIsDeniedWhileStoppingSuspendedOrResuming() {
        var h = Harness()
        let rid = h.activate(at: 0)
        h.end(request: rid, at: 1)
        #expect(h.acquire(tag: 1, at: 1).deniedTags == [1], "stopping")
        h.stopConfirmed(at: 1)
        #expect(h.acquire(tag: 2, at: 2).deniedTags == [2], "suspended")
        h.begin(at: 3)
        #expect(h.acquire(tag: 3, at: 3).deniedTags == [3], "resuming")
        h.continueConfirmed(at: 3)
        #expect(h.acquire(tag: 4, at: 4).granted.map(\.tag) == [4], "active again")
    }

    @Test func acquireIsDeniedWhileTerminating() {
        var h = Harness()
        h.activate(at: 0)
        h.step(.channelClosed(extensionID: extID, generation: 1, reason: "EOF"), at: 1)
        #expect(h.state == .terminating)
        let e = h.acquire(tag: 5, at: 1.5)
        #expect(e.deniedTags == [5])
    }

    @Test func aBeginInTheBackgroundCancelsTheSuspension() {
        var h = Harness()
        let rid = h.activate(at: 0)
        let a = h.grant(at: 1)
        h.end(request: rid, at: 20)
        let b = h.begin(host: 2, tag: 4, at: 22)
        #expect(b.openRequests.map(\.tag) == [4])
        #expect(b.stops.isEmpty && b.resumes.isEmpty)
        #expect(h.state == .active)
        #expect(b.timers == [.seconds(58)], "only the leak guard remains")
        let later = h.tick(at: 30)
        #expect(later.stops.isEmpty && later.expires.isEmpty, "the old background deadlines are gone")
        #expect(h.record.assertions.assertions.map(\.id) == [a])
    }

    @Test func aBeginWhileExpiringCancelsTheStopButTheExpiryStands() {
        var h = Harness()
        let rid = h.activate(at: 0)
        let a = h.grant(at: 1)
        h.end(request: rid, at: 20)
        h.tick(at: 27)
        #expect(h.state == .expiring)

        let b = h.begin(host: 2, tag: 4, at: 28)
        #expect(b.openRequests.count == 1)
        #expect(b.stops.isEmpty)
        #expect(h.state == .active)
        #expect(h.tick(at: 30).stops.isEmpty)
        #expect(h.record.assertions.assertions.first?.expireSentAt == .seconds(27))

        // Dismissed again: a fresh background period, and no second expire for the same assertion.
        let rid2 = b.openRequests[0].requestID
        let e = h.end(host: 2, request: rid2, at: 40)
        #expect(h.phase == .background(expireAt: .seconds(47), stopAt: .seconds(50)))
        #expect(e.stops.isEmpty)
        #expect(h.tick(at: 47).expires.isEmpty)
        #expect(h.state == .expiring)
        let stop = h.tick(at: 50)
        #expect(stop.stops == [extID])
        #expect(stop.events(.overrun).map(\.assertionID) == [a])
    }

    @Test func doubleReleaseIsHarmless() {
        var h = Harness()
        h.activate(at: 0)
        let a = h.grant(at: 1)
        let first = h.release(a, at: 2)
        #expect(first.events(.release).count == 1)
        let second = h.release(a, at: 3)
        #expect(second.isEmpty)
        let unknown = h.release(9_999, at: 3)
        #expect(unknown.isEmpty)
        #expect(h.state == .active)
    }

    @Test func releaseAfterTheStopRevokedTheAssertionIsHarmless() {
        var h = Harness()
        let rid = h.activate(at: 0)
        let a = h.grant(at: 1)
        h.end(request: rid, at: 20)
        h.tick(at: 27)
        h.tick(at: 30)
        h.stopConfirmed(at: 30)
        let late = h.release(a, at: 31)
        #expect(late.isEmpty)
        #expect(h.state == .suspended)
    }

    @Test func theLeakGuardAppliesInTheBackgroundToo() {
        // An assertion granted early whose hard deadline falls before the background deadline.
        var h = Harness()
        let rid = h.activate(at: 0)
        let a = h.grant(at: 0)
        h.end(request: rid, at: 55)  // background until 65; hard deadline 60, expire at 57
        #expect(h.armedTimer == .some(.seconds(57)))
        let expire = h.tick(at: 57)
        #expect(expire.expires == [a])
        #expect(h.state == .background)
        let overrun = h.tick(at: 60)
        #expect(overrun.events(.overrun).map(\.assertionID) == [a])
        #expect(overrun.stops == [extID], "nothing is held any more: suspend at once")
    }

    @Test func staleGenerationAssertionEventsAreIgnored() {
        var h = Harness()
        h.activate(at: 0)
        let a = h.grant(at: 1)
        #expect(h.step(.acquire(extensionID: extID, generation: 0, tag: 1, reason: "x"), at: 2).isEmpty)
        #expect(h.step(.release(extensionID: extID, generation: 2, assertionID: a), at: 2).isEmpty)
        #expect(h.record.assertions.count == 1)
    }

    @Test func exitDropsEveryAssertion() {
        var h = Harness()
        h.activate(at: 0)
        _ = h.grant(at: 1)
        let x = h.exited(.exited(0), at: 2)
        #expect(h.record.assertions.isEmpty)
        #expect(x.events(.exit).first?.detail?.contains("1 assertion(s) dropped") == true)
        #expect(x.timers == [nil])
    }
}
