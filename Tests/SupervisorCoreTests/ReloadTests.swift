import ExtensionProtocol
import SupervisorCore
import Testing

@Suite("Reload")
struct ReloadTests {
    static func reload(_ manifests: [Manifest]) -> Event {
        .reload(manifests: manifests, errors: [], host: nil, tag: 0)
    }

    @Test func newManifestsAreAdded() {
        var h = Harness([manifest("a.one")])
        #expect(h.begin(id: "b.two", at: 0).failures.map(\.code) == [.unknownExtension])
        h.step(Self.reload([manifest("a.one"), manifest("b.two")]), at: 1)
        #expect(h.record("b.two")?.state == .notRunning)
        let b = h.begin(id: "b.two", at: 2)
        #expect(b.spawns.map(\.id) == ["b.two"])
        #expect(b.failures.isEmpty)
    }

    @Test func aRemovedIdleExtensionDisappearsAtOnce() {
        var h = Harness([manifest("a.one"), manifest("b.two")])
        let e = h.step(Self.reload([manifest("a.one")]), at: 1)
        #expect(e.signals.isEmpty)
        #expect(h.record("b.two") == nil)
        #expect(h.begin(id: "b.two", at: 2).failures.map(\.code) == [.unknownExtension])
        #expect(h.step(.kill(host: 1, tag: 1, extensionID: "b.two", signal: 15), at: 2).failures.map(\.code) == [.unknownExtension])
        #expect(h.step(.prewarm(host: 1, peer: ownPeer, tag: 1, extensionIDs: ["b.two"]), at: 2).failures.map(\.code) == [.unknownExtension])
    }

    @Test func aRemovedSuspendedExtensionIsTerminatedThenForgotten() {
        var h = Harness([manifest("a.one"), manifest("b.two")], focus: "b.two")
        let rid = h.activate(at: 0)
        h.suspendIdle(request: rid, at: 1)
        let e = h.step(Self.reload([manifest("a.one")]), at: 2)
        #expect(e.signals == [SignalSent(extensionID: "b.two", generation: 1, signal: SignalNumber.terminate, thenContinue: true)])
        #expect(h.record("b.two")?.state == .terminating)
        #expect(h.record("b.two")?.retired == true)
        #expect(h.begin(id: "b.two", at: 3).failures.map(\.code) == [.unknownExtension], "refused while it goes away")
        h.exited(.signaled(15), at: 4)
        #expect(h.record("b.two") == nil)
        #expect(h.begin(id: "b.two", at: 5).failures.map(\.code) == [.unknownExtension])
    }

    @Test func aRemovedExtensionWithOpenRequestsRunsUntilItsLastRequestEnds() {
        var h = Harness([manifest("a.one"), manifest("b.two")], focus: "b.two")
        let r1 = h.activate(host: 1, at: 0)
        let r2 = h.begin(host: 2, id: "b.two", at: 0).openRequests[0].requestID
        let e = h.step(Self.reload([manifest("a.one")]), at: 1)
        #expect(e.signals.isEmpty)
        #expect(h.state == .active)
        #expect(h.begin(host: 3, id: "b.two", at: 1.5).failures.map(\.code) == [.unknownExtension])

        let first = h.end(host: 1, request: r1, at: 2)
        #expect(first.signals.isEmpty)
        #expect(h.state == .active)
        let last = h.end(host: 2, request: r2, at: 3)
        #expect(last.stops.isEmpty, "a retired extension is not suspended, it is ended")
        #expect(last.signals == [SignalSent(extensionID: "b.two", generation: 1, signal: SignalNumber.terminate, thenContinue: false)])
        #expect(h.state == .terminating)
        h.exited(.signaled(15), at: 3.5)
        #expect(h.record("b.two") == nil)
    }

    @Test func aRemovedLaunchingExtensionFailsItsPendingBeginsAndIsTerminated() {
        var h = Harness([manifest("a.one"), manifest("b.two")], focus: "b.two")
        h.begin(host: 4, tag: 44, id: "b.two", at: 0)
        h.spawned(at: 0)
        let e = h.step(Self.reload([manifest("a.one")]), at: 1)
        #expect(e.failures.map(\.code) == [.unknownExtension])
        #expect(e.failures.first?.tag == 44)
        #expect(e.signals.map(\.signal) == [SignalNumber.terminate])
        let x = h.exited(.signaled(15), at: 2)
        #expect(x.spawns.isEmpty)
        #expect(h.record("b.two") == nil)
    }

    @Test func theExitOfARemovedExtensionIsRecordedAsRemoved() {
        var h = Harness([manifest("a.one"), manifest("b.two")], focus: "b.two")
        let rid = h.activate(at: 0)
        h.suspendIdle(request: rid, at: 1)
        h.step(Self.reload([manifest("a.one")]), at: 2)
        let x = h.exited(.signaled(15), at: 3)
        #expect(x.events.first?.detail?.hasPrefix("removed") == true)
    }

    @Test func aChangedPolicyAppliesToTheRunningExtension() {
        var h = Harness()
        let rid = h.activate(at: 0)
        var policy = testPolicy
        policy.suspendedLifetimeSeconds = 30
        h.step(Self.reload([manifest(policy: policy)]), at: 1)
        #expect(h.record.manifest.policy.suspendedLifetimeSeconds == 30)
        #expect(h.pid == 100, "the running process is kept")
        h.suspendIdle(request: rid, at: 2)
        #expect(h.phase == .suspended(reclaimAt: .seconds(32)))
    }

    @Test func reAddingARetiredExtensionBeforeItIsGoneRevivesIt() {
        var h = Harness([manifest("a.one"), manifest("b.two")], focus: "b.two")
        h.activate(at: 0)
        h.step(Self.reload([manifest("a.one")]), at: 1)
        #expect(h.record.retired)
        h.step(Self.reload([manifest("a.one"), manifest("b.two")]), at: 2)
        #expect(h.record.retired == false)
        #expect(h.begin(host: 2, id: "b.two", at: 3).openRequests.count == 1)
    }

    @Test func reloadingTheSameManifestsChangesNothing() {
        var h = Harness([manifest("a.one"), manifest("b.two")], focus: "b.two")
        h.activate(at: 0)
        let before = h.sup.records
        let e = h.step(Self.reload([manifest("a.one"), manifest("b.two")]), at: 1)
        #expect(e.isEmpty)
        #expect(h.sup.records == before)
    }
}
