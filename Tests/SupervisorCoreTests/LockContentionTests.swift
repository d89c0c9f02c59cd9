import ExtensionProtocol
import SupervisorCore
import Testing

/// A suspended extension holding a file lock someone waits for (0xdead10cc).
@Suite("Lock held while suspended")
struct LockContentionTests {
    func suspended(_ policy: Policy) -> Harness {
        var h = Harness(policy: policy)
        let request = h.activate(at: 0)
        h.suspendIdle(request: request, at: 1)
        #expect(h.state == .suspended)
        return h
    }

    @Test func byDefaultTheHolderIsKilled() {
        var h = suspended(testPolicy)
        let e = h.step(.lockContention(extensionID: extID, generation: h.gen, detail: "FLOCK on 8:1:42, 1 waiter"), at: 5)
        #expect(e.signals == [SignalSent(extensionID: extID, generation: h.gen, signal: SignalNumber.kill, thenContinue: true)])
        #expect(h.state == .terminating)
        #expect(!e.events(.lockHeldWhileSuspended).isEmpty)
        h.exited(.signaled(9), at: 5.01)
        #expect(h.record.lastExit?.reason == .lockHeldWhileSuspended)
    }

    @Test func aStopItsProcessesRefuseEndsTheExtension() {
        var h = Harness(policy: testPolicy)
        let request = h.activate(at: 0)
        let e = h.end(request: request, at: 1)
        #expect(e.stops.count == 1)
        let refused = h.step(.stopRefused(extensionID: extID, generation: h.gen, seconds: 10), at: 11)
        #expect(refused.signals == [SignalSent(extensionID: extID, generation: h.gen, signal: SignalNumber.kill, thenContinue: true)])
        #expect(h.state == .terminating)
        #expect(refused.events(.kill).first?.detail == "its processes kept running 10 s into its suspension: killed")
        h.exited(.signaled(9), at: 11.01)
        #expect(h.record.lastExit?.reason == .stopRefused)
        // Late, once the stop was confirmed or the extension resumed: nothing.
        var again = Harness(policy: testPolicy)
        let second = again.activate(at: 0)
        again.suspendIdle(request: second, at: 1)
        #expect(again.step(.stopRefused(extensionID: extID, generation: again.gen, seconds: 10), at: 11).signals.isEmpty)
        #expect(again.state == .suspended)
    }

    @Test func theResumePolicyRunsItForItsBackgroundTimeThenStopsAgain() {
        var policy = testPolicy
        policy.lockedWhileSuspended = .resume
        var h = suspended(policy)
        let e = h.step(.lockContention(extensionID: extID, generation: h.gen, detail: "FLOCK"), at: 5)
        #expect(e.resumes == [extID])
        #expect(e.signals.isEmpty)
        h.continueConfirmed(at: 5.001)
        #expect(h.state == .background, "runs without an assertion during the reprieve")
        // backgroundSeconds 10, grace 3: the reprieve ends at 5 + 7.
        #expect(h.tick(at: 11).stops.isEmpty)
        #expect(h.tick(at: 12.001).stops == [extID])
    }

    @Test func contentionReportsForAnythingButASuspendedProcessAreIgnored() {
        var h = Harness()
        _ = h.activate(at: 0)
        let e = h.step(.lockContention(extensionID: extID, generation: h.gen, detail: "FLOCK"), at: 1)
        #expect(e.signals.isEmpty && e.resumes.isEmpty)
        #expect(h.state == .active)
    }
}
