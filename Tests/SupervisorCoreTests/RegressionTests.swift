import ExtensionProtocol
import SupervisorCore
import Testing

// Edge cases of the core, each in a test of its own: late answers, late ticks, counters that
// must be cleared, and the field names errors give.

@Suite("Core regressions")
struct CoreRegressionTests {
    // A spawnFailed that arrives once the phase has left .launching (shutdown or a launch
    // timeout before the spawn was answered) still ends the record: `.exit` comes.
    @Test func spawnFailureAfterShutdownStillCompletesTheShutdown() {
        var h = Harness()
        h.begin(host: 1, tag: 7, at: 0)  // spawn effect out, no answer yet
        #expect(h.step(.shutdown, at: 0.5).exits == 0)
        let e = h.step(.spawnFailed(extensionID: extID, generation: 1, error: "ENOENT"), at: 1)
        #expect(h.state == .notRunning)
        #expect(e.exits == 1)
    }

    @Test func spawnFailureAfterALaunchTimeoutLeavesTheExtensionUsable() {
        var h = Harness()
        h.begin(host: 1, tag: 7, at: 0)
        h.tick(at: 10)  // launch timeout before the spawn was answered
        h.step(.spawnFailed(extensionID: extID, generation: 1, error: "ENOENT"), at: 11)
        #expect(h.state == .notRunning)
        #expect(h.begin(host: 1, tag: 8, at: 12).spawns.count == 1)
    }

    // A record holding many requests (past RecordIndex.listedRequests, where the index compares
    // them by sets) keeps its index exact as they open and end in any order.
    @Test func manyRequestsOfOneExtensionKeepTheIndexExact() {
        var h = Harness(limits: testLimits { $0.maxRequestsPerHost = 1_000 })
        var open = [h.activate(at: 0)]
        for tag in UInt32(2)...200 {
            let opened = h.begin(host: HostID(tag % 3 + 1), tag: tag, at: 1).openRequests
            #expect(opened.count == 1)
            open += opened.map(\.requestID)
            #expect(h.sup.indexDiscrepancies().isEmpty)
        }
        var rng = SplitMix64(seed: 7)
        open.shuffle(using: &rng)
        for (i, request) in open.enumerated() {
            let host = h.sup.records.values.first?.requests.first { $0.id == request }?.host ?? 1
            _ = h.end(host: host, tag: UInt32(1_000 + i), request: request, at: 2)
            #expect(h.sup.indexDiscrepancies().isEmpty, "after ending \(i + 1) of \(open.count)")
        }
        #expect(h.sup.records.values.first?.requests.isEmpty == true)
    }

    // A tick that comes late still sends *expire* a full grace period before the stop.
    @Test func aLateTimerStillGivesTheFullGraceBeforeTheStop() {
        var h = Harness()
        let rid = h.activate(at: 0)
        let a = h.grant(at: 1)
        h.end(request: rid, at: 20)  // expire due at 27, stop due at 30
        let late = h.tick(at: 29)  // the timer fired 2 s late
        #expect(late.expires == [a])
        #expect(h.tick(at: 30).stops.isEmpty, "expire went out at 29: the stop must wait until 32")
        #expect(h.tick(at: 32).stops == [extID])
    }

    @Test func aVeryLateTimerDoesNotExpireAndStopInTheSameInstant() {
        var h = Harness()
        let rid = h.activate(at: 0)
        _ = h.grant(at: 1)
        h.end(request: rid, at: 20)
        let e = h.tick(at: 31)  // past both deadlines
        #expect(e.expires.count == 1)
        #expect(e.stops.isEmpty, "the extension must get expiryGraceSeconds after its expire")
    }

    @Test func theInvariantHoldsWithALateTimer() {
        for seed in UInt64(1)...200 {
            let sim = Simulation(seed: seed, timerLateness: 3)
            sim.run(steps: 300)
            #expect(sim.violations.isEmpty, "seed \(seed): \(sim.violations.prefix(3))")
            if !sim.violations.isEmpty { return }
        }
    }

    @Test func theGuaranteesHoldWhenSpawnAnswersAreDelayed() {
        for seed in UInt64(1)...200 {
            let sim = Simulation(seed: seed, spawnAnswersImmediately: false)
            sim.run(steps: 300)
            #expect(sim.violations.isEmpty, "seed \(seed): \(sim.violations.prefix(3))")
            if !sim.violations.isEmpty { return }
        }
    }

    // `prewarmed` is cleared once the extension is used, so it stops counting against
    // maxPrewarmed ("extensions launched by prewarm hints that may wait unused").
    @Test func aUsedPrewarmedExtensionNoLongerCountsAgainstTheCap() {
        var h = Harness([manifest("p.a"), manifest("p.b")], limits: testLimits { $0.maxPrewarmed = 1 }, focus: "p.a")
        h.step(.prewarm(host: 1, peer: ownPeer, tag: 1, extensionIDs: ["p.a"]), at: 0)
        h.spawned(at: 0)
        h.ready(at: 0)
        h.stopConfirmed(at: 0)
        h.begin(host: 1, tag: 2, at: 1)  // used: resumed and served
        let rid = h.continueConfirmed(at: 1).openRequests[0].requestID
        h.suspendIdle(request: rid, at: 2)
        let e = h.step(.prewarm(host: 1, peer: ownPeer, tag: 3, extensionIDs: ["p.b"]), at: 3)
        #expect(e.spawns.map(\.id) == ["p.b"])
    }

    // Errors inside a config point name the field as 'points.<name>.…', not 'policy.…'.
    @Test(arguments: [
        (#"{"points": {"widget": {"backgroundSeconds": -1}}}"#, "points.widget.backgroundSeconds"),
        (#"{"points": {"widget": {"backgroundSeconds": 90000}}}"#, "points.widget.backgroundSeconds"),
        (#"{"points": {"widget": {"bogus": 1}}}"#, "points.widget.bogus"),
        (#"{"points": {"widget": {"suspend": "sometimes"}}}"#, "points.widget.suspend"),
    ])
    func configPointErrorsNameThePoint(json: String, field: String) {
        guard case .failure(let e) = DaemonConfig.parse(Array(json.utf8), file: "c.json") else {
            Issue.record("accepted")
            return
        }
        #expect(e.field == field)
    }

    // Out-of-range integers are reported with their field, not as "invalid JSON" (Foundation on
    // Linux reports them as dataCorrupted with an empty coding path).
    @Test(arguments: [
        (#"{"id": "a.b", "executable": "/x", "hosts": {"uids": [-1]}}"#, "hosts.uids[0]"),
        (#"{"id": "a.b", "executable": "/x", "hosts": {"gids": [1, 4294967296]}}"#, "hosts.gids[1]"),
        (#"{"id": "a.b", "executable": "/x", "hosts": {"uids": [1.5]}}"#, "hosts.uids[0]"),
    ])
    func outOfRangeIdsNameTheirField(json: String, field: String) {
        guard case .failure(let e) = ManifestParser.parse(Array(json.utf8), file: "m.json", directory: "/", points: .builtIn) else {
            Issue.record("accepted")
            return
        }
        #expect(e.field == field, "\(e.problem)")
    }

    @Test func aNegativeAdminGroupNamesTheField() {
        guard case .failure(let e) = DaemonConfig.parse(Array(#"{"adminGroup": -1}"#.utf8), file: "c.json") else {
            Issue.record("accepted")
            return
        }
        #expect(e.field == "adminGroup", "\(e.problem)")
    }
}
