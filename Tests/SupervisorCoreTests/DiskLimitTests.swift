import SupervisorCore
import Testing

/// An extension whose container is measured over its `limits.diskMaxBytes` (`ContainerQuota`).
@Suite("Disk limit")
struct DiskLimitTests {
    var limited: Policy {
        var p = testPolicy
        p.limits.diskMaxBytes = 1 << 20
        return p
    }

    @Test func aContainerOverItsLimitEndsItsExtensionAtOnce() {
        var h = Harness(policy: limited)
        _ = h.activate(at: 0)
        let e = h.step(.diskLimitExceeded(extensionID: extID, generation: h.gen, bytes: 3 << 20), at: 2)
        #expect(e.signals == [SignalSent(extensionID: extID, generation: h.gen, signal: SignalNumber.kill, thenContinue: false)])
        #expect(h.state == .terminating)
        #expect(e.events(.kill).first?.detail == "its container holds 3145728 bytes, over its limits.diskMaxBytes (1048576): killed")
        h.exited(.signaled(9), at: 2.01)
        #expect(h.record.lastExit?.reason == .diskLimit)
        #expect(ExitReason.diskLimit.rawValue == "disk-limit")
    }

    @Test func aLateOrStrayMeasurementChangesNothing() {
        // A measurement of an earlier generation, or of an extension with no limit, or one
        // that arrives once it is already ending, is ignored.
        var h = Harness(policy: limited)
        _ = h.activate(at: 0)
        #expect(h.step(.diskLimitExceeded(extensionID: extID, generation: h.gen + 1, bytes: 3 << 20), at: 1).signals.isEmpty)
        var unlimited = Harness(policy: testPolicy)
        _ = unlimited.activate(at: 0)
        #expect(unlimited.step(.diskLimitExceeded(extensionID: extID, generation: unlimited.gen, bytes: 3 << 20), at: 1).signals.isEmpty)
        _ = h.step(.diskLimitExceeded(extensionID: extID, generation: h.gen, bytes: 3 << 20), at: 2)
        #expect(h.step(.diskLimitExceeded(extensionID: extID, generation: h.gen, bytes: 4 << 20), at: 2.5).signals.isEmpty)
    }

    @Test func theLimitIsAManifestKeyWithARange() throws {
        let ok = ManifestParser.parse(
            Array(#"{"id": "a.b", "executable": "/x", "limits": {"diskMaxBytes": 104857600}}"#.utf8), file: "m.json", directory: "/", points: .builtIn)
        #expect(try ok.get().policy.limits.diskMaxBytes == 104_857_600)
        let small = ManifestParser.parse(
            Array(#"{"id": "a.b", "executable": "/x", "limits": {"diskMaxBytes": 100}}"#.utf8), file: "m.json", directory: "/", points: .builtIn)
        guard case .failure(let e) = small else { Issue.record("accepted"); return }
        #expect(e.field == "limits.diskMaxBytes")
        let enforcement = try ok.get().policy.limits.enforcement(controllers: [], ownUID: true)
        #expect(enforcement.last == LimitEnforcement(key: "diskMaxBytes", value: 104_857_600, by: .measured, control: "container size"))
    }
}
