import ExtensionProtocol
import SupervisorCore
import Testing

/// Background refresh in simulated time: the schedule (due times, batching, widening on
/// no-data and unseen results, backoff on failure, the daily budget), and the lifecycle around
/// one refresh (resume or launch, the answer, back to suspended; forced refreshes; no answer).
@Suite("Background refresh")
struct RefreshTests {
    static func refreshing(_ id: String = extID, interval: Double = 900, budget: Int = 48) -> Manifest {
        var p = testPolicy
        p.suspendedLifetimeSeconds = 86_400  // no reclaim in between: each refresh resumes
        p.refresh = RefreshSchedule(minimumIntervalSeconds: interval, dailyBudget: budget)
        return manifest(id, policy: p)
    }

    /// The one refresh sent in `e` (recorded as an issue when there is not exactly one).
    func one(_ e: [Effect], sourceLocation: SourceLocation = #_sourceLocation) -> UInt64 {
        let ids = refreshes(e)
        #expect(ids.count == 1, "one refresh sent: \(e)", sourceLocation: sourceLocation)
        return ids.first ?? 0
    }

    func refreshes(_ e: [Effect]) -> [UInt64] { e.sent.compactMap { if case let .refresh(id) = $0 { id } else { nil } } }

    func answer(_ h: inout Harness, _ id: UInt64, _ a: RefreshAnswer, at t: Double) -> [Effect] {
        h.step(.refreshDone(extensionID: h.id, generation: h.gen, refreshID: id, answer: a), at: t)
    }

    /// Launched for its first scheduled refresh (due at the first whole minute after 900 s),
    /// answered, and suspended: returns the harness and the instant of the suspension.
    func firstRefresh(_ h: inout Harness, answer a: RefreshAnswer = .newData) -> Double {
        #expect(h.record.refresh?.nextAt == .seconds(900), "due one interval after load, on a whole minute")
        let due = h.tick(at: 900)
        #expect(due.spawns.count == 1, "not running: launched for the refresh")
        h.spawned(at: 900)
        let ready = h.ready(at: 900.1)
        let ids = refreshes(ready)
        #expect(ids.count == 1)
        #expect(h.state == .background, "running for the refresh only, as under an assertion")
        let done = answer(&h, ids[0], a, at: 901)
        #expect(done.stops == [extID], "the answer releases it: back to suspended")
        h.stopConfirmed(at: 901.01)
        return 901.01
    }

    @Test func aDueRefreshLaunchesAnsweredAndSuspends() {
        var h = Harness([Self.refreshing()])
        _ = firstRefresh(&h)
        #expect(h.state == .suspended)
        let r = h.record.refresh!
        #expect(r.lastOutcome == .newData)
        #expect(r.lastAt == .seconds(901))
        #expect(r.budgetLeft(at: .seconds(902)) == 47)
        // Nobody looked at the result: the next interval doubles (1800 s), on a whole minute.
        #expect(r.nextAt == .seconds(2760))
    }

    @Test func aSuspendedWidgetIsResumedForItsRefreshAndSuspendedAgain() {
        var h = Harness([Self.refreshing()])
        _ = firstRefresh(&h)
        let due = h.tick(at: 2760)
        #expect(due.resumes == [extID], "resumed, not relaunched")
        let resumed = h.continueConfirmed(at: 2760.01)
        let ids = refreshes(resumed)
        #expect(ids.count == 1)
        #expect(h.state == .background)
        #expect(resumed.events.map(\.kind).contains(.refresh))
        let done = answer(&h, ids[0], .noData, at: 2761)
        #expect(done.stops == [extID])
        #expect(done.events.map(\.kind) == [.refreshed, .release, .stopSent])
        #expect(done.events.first?.detail == "no-data")
    }

    @Test func anActiveWidgetIsRefreshedInPlace() {
        var h = Harness([Self.refreshing()])
        let rid = h.activate(at: 0)
        let e = h.tick(at: 900)
        let ids = refreshes(e)
        #expect(ids.count == 1)
        #expect(h.state == .active)
        _ = answer(&h, ids[0], .newData, at: 901)
        #expect(h.state == .active, "the open request keeps it active")
        // A host had it open: the previous result counted as seen, the interval stays 900 s.
        #expect(h.record.refresh?.nextAt == .seconds(1860))
        #expect(h.record.refresh?.seen == true, "the new result is seen at once: the request is open")
        let end = h.end(request: rid, at: 902)
        #expect(end.stops == [extID])
    }

    @Test func aSeenResultKeepsTheBaseIntervalAndAnUnseenOneWidensIt() {
        var h = Harness([Self.refreshing(interval: 600)])
        #expect(h.record.refresh?.nextAt == .seconds(600))
        _ = h.tick(at: 600)
        h.spawned(at: 600)
        let id1 = one(h.ready(at: 600))
        _ = answer(&h, id1, .newData, at: 601)
        h.stopConfirmed(at: 601)
        #expect(h.record.refresh?.nextAt == .seconds(1860), "unseen: 2 × 600 s after 601, rounded up to a whole minute")
        // Nobody opens it: unseen again, 4 × 600 s.
        _ = h.tick(at: 1860)
        let id2 = one(h.continueConfirmed(at: 1860))
        _ = answer(&h, id2, .newData, at: 1861)
        h.stopConfirmed(at: 1861)
        #expect(h.record.refresh?.nextAt == .seconds(4320))
        // A host opens it in between: that result was seen, back to the base interval.
        let rid = h.begin(at: 4000).openRequests.first?.requestID
        #expect(rid == nil, "resuming: the request opens on confirmation")
        let opened = h.continueConfirmed(at: 4000.01).openRequests
        h.end(request: opened[0].requestID, at: 4001)
        h.stopConfirmed(at: 4001)
        _ = h.tick(at: 4320)
        let id3 = one(h.continueConfirmed(at: 4320))
        _ = answer(&h, id3, .newData, at: 4321)
        #expect(h.record.refresh?.nextAt == .seconds(4980), "seen: 600 s after 4321, rounded up")
    }

    @Test func noDataWidensAndFailureBacksOff() {
        var s = RefreshStateDriver(interval: 100)
        #expect(s.answerDue(.noData) == 200)
        #expect(s.answerDue(.noData) == 400)
        #expect(s.answerDue(.noData) == 800)
        #expect(s.answerDue(.noData) == 800, "widening stops at 8×")
        #expect(s.answerDue(.newData) == 800, "unseen results keep it wide")
        var f = RefreshStateDriver(interval: 100, seen: true)
        #expect(f.answerDue(.failed) == 200)
        #expect(f.answerDue(.failed) == 400)
        #expect(f.answerDue(nil) == 800, "no answer backs off like a failure")
        #expect(f.answerDue(.newData) == 100, "an answer resets the backoff")
    }

    @Test func refreshesDueCloseTogetherShareOneWakeup() {
        let h = Harness([Self.refreshing("com.example.a", interval: 900), Self.refreshing("com.example.b", interval: 930)])
        // a: due at 900; b: 930 rounds up to 960. Batches are whole minutes: 900 and 960 differ.
        #expect(h.record("com.example.a")?.refresh?.nextAt == .seconds(900))
        #expect(h.record("com.example.b")?.refresh?.nextAt == .seconds(960))
        var g = Harness([Self.refreshing("com.example.a", interval: 905), Self.refreshing("com.example.b", interval: 950)])
        #expect(g.tick(at: 1).timers == [.seconds(960)], "both due in the same minute: one timer")
        let e = g.tick(at: 960)
        #expect(e.spawns.map(\.id) == ["com.example.a", "com.example.b"], "one wakeup launches both")
    }

    @Test func theDailyBudgetIsSpentThenTheNextWaitsForTheWindowToEnd() {
        var h = Harness([Self.refreshing(interval: 60, budget: 2)])
        var t = 60.0
        for _ in 0..<2 {
            let due = h.tick(at: t)
            if due.spawns.count == 1 {
                h.spawned(at: t); _ = answer(&h, one(h.ready(at: t)), .newData, at: t + 1)
            } else {
                _ = answer(&h, one(h.continueConfirmed(at: t)), .newData, at: t + 1)
            }
            h.stopConfirmed(at: t + 1)
            t = h.record.refresh!.nextAt!.seconds(since: .seconds(0))
        }
        #expect(h.record.refresh?.budgetLeft(at: .seconds(t)) == 0)
        let spent = h.tick(at: t)
        #expect(spent.resumes.isEmpty && spent.spawns.isEmpty, "budget spent: no refresh")
        #expect(h.record.refresh?.nextAt == .seconds(60 + 86_400), "due when the window opened by the first refresh ends")
        #expect(h.armedTimer == .some(.seconds(86_460)), "the next wakeup is when the budget window ends")
    }

    @Test func withNothingDueTheOnlyTimerIsTheNextDueTime() {
        var h = Harness((0..<100).map { Self.refreshing("com.example.w\($0)", interval: 3600) })
        let first = h.step(.hostGone(host: 99), at: 10)
        #expect(first.timers == [.seconds(3600)], "one timer, at the first due time: no wakeup before it")
        #expect(first.spawns.isEmpty && first.resumes.isEmpty)
    }

    @Test func aForcedRefreshAnswersItsHostAndSpendsNoBudget() {
        var h = Harness([Self.refreshing()])
        let e = h.step(.forceRefresh(host: 3, peer: ownPeer, tag: 21, extensionID: extID), at: 5)
        #expect(e.spawns.count == 1)
        h.spawned(at: 5)
        let id = one(h.ready(at: 5.1))
        let done = answer(&h, id, .noData, at: 6)
        #expect(done.replies.map(\.message) == [.refreshed(tag: 21, answer: .noData)])
        #expect(h.record.refresh?.budgetLeft(at: .seconds(7)) == 48)
    }

    @Test func aForcedRefreshOfAnExtensionWithoutRefreshOrWithoutAHandlerFails() {
        var h = Harness([manifest(), Self.refreshing("com.example.r")])
        let none = h.step(.forceRefresh(host: 3, peer: ownPeer, tag: 1, extensionID: extID), at: 1)
        #expect(none.failures.map(\.code) == [.badRequest])
        var g = Harness([Self.refreshing()])
        _ = g.step(.forceRefresh(host: 3, peer: ownPeer, tag: 2, extensionID: extID), at: 1)
        g.spawned(at: 1)
        let id = one(g.ready(at: 1))
        let done = answer(&g, id, .unsupported, at: 1.1)
        #expect(done.failures.map(\.code) == [.badRequest])
        #expect(done.stops == [extID])
        let stranger = PeerIdentity(pid: 1, uid: 4242, gid: 4242)
        #expect(g.step(.forceRefresh(host: 4, peer: stranger, tag: 3, extensionID: extID), at: 2).failures.map(\.code) == [.notPermitted])
    }

    @Test func anUnansweredRefreshGetsExpireThenCountsAsFailedAndTheExtensionIsSuspended() {
        var h = Harness([Self.refreshing()])
        _ = h.step(.forceRefresh(host: 3, peer: ownPeer, tag: 9, extensionID: extID), at: 0)
        h.spawned(at: 0)
        let id = one(h.ready(at: 0))
        // refreshSeconds 10, grace 3: expire at 7, stop at 10.
        #expect(h.tick(at: 7).expires == [id])
        let end = h.tick(at: 10)
        #expect(end.stops == [extID])
        #expect(end.failures.map(\.code) == [.interrupted])
        #expect(end.events.map(\.kind).contains(.overrun), "treated like an assertion overrun")
        #expect(h.record.refresh?.lastOutcome == .failed)
    }

    @Test func newDataIsToldToSubscribedHostsOnly() {
        var h = Harness([Self.refreshing()])
        #expect(h.step(.subscribe(host: 5, peer: ownPeer, tag: 1, extensionIDs: [extID]), at: 0).oks.count == 1)
        let stranger = PeerIdentity(pid: 1, uid: 4242, gid: 4242)
        #expect(h.step(.subscribe(host: 6, peer: stranger, tag: 1, extensionIDs: [extID]), at: 0).failures.map(\.code) == [.notPermitted])
        _ = h.tick(at: 900)
        h.spawned(at: 900)
        let id = one(h.ready(at: 900))
        let done = answer(&h, id, .newData, at: 901)
        #expect(done.replies.filter { $0.message == .newData(extensionID: extID) }.map(\.host) == [5])
        h.step(.hostGone(host: 5), at: 902)
        h.stopConfirmed(at: 902)
        _ = h.tick(at: 2760)
        let id2 = one(h.continueConfirmed(at: 2760))
        #expect(answer(&h, id2, .newData, at: 2761).replies.isEmpty, "the subscription ended with the host")
    }

    @Test func aRefreshDueDuringAStopResumesAtOnceAsABeginWould() {
        var h = Harness([Self.refreshing()])
        let rid = h.activate(at: 899)
        h.end(request: rid, at: 899.5)
        #expect(h.phase == .stopping(wasExpiring: false))
        #expect(h.tick(at: 900).resumes == [extID])
        #expect(h.stopConfirmed(at: 900.01).isEmpty, "the late stop report of a resumed group changes nothing")
        #expect(refreshes(h.continueConfirmed(at: 900.02)).count == 1)
    }

    @Test func aRefreshDueWhileExpiringWaitsForTheStopThenResumes() {
        var p = testPolicy
        p.suspendedLifetimeSeconds = 86_400
        p.backgroundSeconds = 30  // background until 900 + 30 - 3 = 927 expire, 930 stop
        p.refresh = RefreshSchedule(minimumIntervalSeconds: 960, dailyBudget: 48)
        var h = Harness([manifest(policy: p)])
        let rid = h.activate(at: 900)
        _ = h.grant(at: 901)
        h.end(request: rid, at: 902)
        _ = h.tick(at: 929)
        #expect(h.state == .expiring)
        let due = h.tick(at: 960)  // the refresh is due; the expiring stop (932) passed too
        #expect(due.stops == [extID])
        #expect(due.resumes == [extID], "stopped as the expiry demands, then resumed for the refresh")
        #expect(refreshes(h.continueConfirmed(at: 960.02)).count == 1)
    }

    @Test func aForcedRefreshWhileExpiringWaitsForTheStop() {
        var p = testPolicy
        p.refresh = RefreshSchedule(minimumIntervalSeconds: 86_400, dailyBudget: 1)
        var h = Harness([manifest(policy: p)])
        let rid = h.activate(at: 0)
        _ = h.grant(at: 0.5)
        h.end(request: rid, at: 1)  // background: expire at 8, stop at 11
        _ = h.tick(at: 8)
        #expect(h.state == .expiring)
        let forced = h.step(.forceRefresh(host: 3, peer: ownPeer, tag: 5, extensionID: extID), at: 9)
        #expect(forced.resumes.isEmpty && refreshes(forced).isEmpty, "waits for the stop")
        #expect(h.tick(at: 11).stops == [extID])
        #expect(h.stopConfirmed(at: 11.01).resumes == [extID], "resumed for the refresh once stopped")
        let id = one(h.continueConfirmed(at: 11.02))
        #expect(answer(&h, id, .newData, at: 12).replies.map(\.message) == [.refreshed(tag: 5, answer: .newData)])
    }
}

/// Drives a `RefreshState` through answers through the core's only public path: a supervisor
/// with one extension that is refreshed and answers at each due time. Returns the interval the
/// answer led to.
struct RefreshStateDriver {
    var h: Harness
    var t: Double
    let seen: Bool

    init(interval: Double, seen: Bool = false) {
        var p = testPolicy
        p.suspendedLifetimeSeconds = 86_400
        p.refresh = RefreshSchedule(minimumIntervalSeconds: interval, dailyBudget: 1_000)
        h = Harness([manifest(policy: p)])
        t = h.record.refresh!.nextAt!.seconds(since: .seconds(0))
        self.seen = seen
    }

    mutating func answerDue(_ answer: RefreshAnswer?) -> Double {
        if seen {
            // A host opens and dismisses it before each refresh: its results are seen.
            let e = h.begin(host: 7, tag: 1, at: t - 1)
            if !e.spawns.isEmpty { h.spawned(at: t - 1); h.ready(at: t - 1) } else { h.continueConfirmed(at: t - 1) }
            let rid = h.record.requests.first?.id ?? 0
            h.end(host: 7, request: rid, at: t - 0.5)
            h.stopConfirmed(at: t - 0.5)
        }
        let due = h.tick(at: t)
        let sent: [Effect]
        if !due.spawns.isEmpty {
            h.spawned(at: t)
            sent = h.ready(at: t)
        } else {
            sent = h.continueConfirmed(at: t)
        }
        let id: UInt64 = sent.sent.compactMap { m -> UInt64? in if case let .refresh(id) = m { id } else { nil } }.first ?? 0
        let answeredAt: Double
        if let answer {
            h.step(.refreshDone(extensionID: h.id, generation: h.gen, refreshID: id, answer: answer), at: t + 1)
            answeredAt = t + 1
        } else {
            h.tick(at: t + 7)
            h.tick(at: t + 10)
            answeredAt = t + 10
        }
        h.stopConfirmed(at: answeredAt)
        t = h.record.refresh!.nextAt!.seconds(since: .seconds(0))
        // The scheduled interval, before rounding up to the whole minute.
        return h.record.refresh!.interval
    }
}

/// The `refresh` manifest key and `policy.refreshSeconds`.
@Suite("Refresh in manifests")
struct RefreshManifestTests {
    @Test func refreshIsReadWithDefaultsAndOffWithoutIt() throws {
        let m = try parseManifest(minimal(#", "point": "widget", "refresh": {"minimumIntervalSeconds": 1800}"#)).get()
        #expect(m.policy.refresh == RefreshSchedule(minimumIntervalSeconds: 1800, dailyBudget: 48))
        #expect(m.policy.refreshSeconds == 10, "the default answer time")
        #expect(try parseManifest(minimal(#", "point": "widget""#)).get().policy.refresh == nil, "the built-in widget point has refresh off")
        let full = try parseManifest(minimal(#", "refresh": {"minimumIntervalSeconds": 900, "dailyBudget": 12}, "policy": {"refreshSeconds": 20}"#)).get()
        #expect(full.policy.refresh == RefreshSchedule(minimumIntervalSeconds: 900, dailyBudget: 12))
        #expect(full.policy.refreshSeconds == 20)
    }

    @Test(arguments: [
        (#", "refresh": {"minimumIntervalSeconds": 0}"#, "refresh.minimumIntervalSeconds"),
        (#", "refresh": {"dailyBudget": 5000}"#, "refresh.dailyBudget"),
        (#", "refresh": {"dailyBudget": 1.5}"#, "refresh.dailyBudget"),
        (#", "refresh": {"every": 60}"#, "refresh.every"),
        (#", "refresh": {}, "readiness": "exec""#, "refresh"),
        (#", "refresh": {}, "policy": {"refreshSeconds": 1, "expiryGraceSeconds": 2}"#, "policy.refreshSeconds"),
    ])
    func badRefreshIsRefusedNamingTheField(extra: String, field: String) {
        guard case .failure(let e) = parseManifest(minimal(extra)) else {
            Issue.record("accepted: \(extra)")
            return
        }
        #expect(e.field == field, "\(e)")
    }

    @Test func aPointMayTurnRefreshOnForItsExtensions() throws {
        let config = try DaemonConfig.parse(Array(#"{"points": {"widget": {"refresh": {"dailyBudget": 24}}}}"#.utf8), file: "/etc/extensiond.json").get()
        let m = try parseManifest(minimal(#", "point": "widget""#), points: config.points).get()
        #expect(m.policy.refresh == RefreshSchedule(minimumIntervalSeconds: 900, dailyBudget: 24))
        let exec = try parseManifest(minimal(#", "point": "widget", "readiness": "exec""#), points: config.points).get()
        #expect(exec.policy.refresh == nil, "an exec extension cannot answer: the point's default does not apply")
    }
}

@Suite("Refresh of a never-suspended extension")
struct RefreshNeverSuspendedTests {
    @Test func itIsRefreshedAndStaysRunningInTheBackground() {
        var p = testPolicy
        p.suspend = .never
        p.refresh = RefreshSchedule(minimumIntervalSeconds: 900, dailyBudget: 48)
        var h = Harness([manifest(policy: p)])
        _ = h.step(.forceRefresh(host: 3, peer: ownPeer, tag: 1, extensionID: extID), at: 0)
        h.spawned(at: 0)
        let sent = h.ready(at: 0).sent.compactMap { m -> UInt64? in if case let .refresh(id) = m { id } else { nil } }
        #expect(sent.count == 1)
        #expect(h.phase == .background(expireAt: nil, stopAt: nil))
        let done = h.step(.refreshDone(extensionID: extID, generation: h.gen, refreshID: sent.first ?? 0, answer: .newData), at: 1)
        #expect(done.stops.isEmpty, "never suspended, not even after a refresh")
        #expect(h.phase == .background(expireAt: nil, stopAt: nil))
    }
}
