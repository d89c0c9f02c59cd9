import ExtensionProtocol
import SupervisorCore
import Testing

@Suite("Administrative kill")
struct AdministrationTests {
    @Test func killOfAnUnknownExtensionIsRefused() {
        var h = Harness()
        let e = h.step(.kill(host: 1, tag: 3, extensionID: "com.example.nope", signal: 15), at: 0)
        #expect(e.failures.map(\.code) == [.unknownExtension])
        #expect(e.failures.first?.tag == 3)
        #expect(e.signals.isEmpty)
    }

    @Test(arguments: [SignalNumber.stop, SignalNumber.cont, SignalNumber.terminalStop, SignalNumber.ttin, SignalNumber.ttou])
    func reservedSignalsAreRefused(signal: Int32) {
        #expect([19, 18, 20, 21, 22].contains(signal))
        var h = Harness()
        h.activate(at: 0)
        let e = h.step(.kill(host: 1, tag: 4, extensionID: extID, signal: signal), at: 1)
        #expect(e.failures.map(\.code) == [.badRequest])
        #expect(e.signals.isEmpty)
        #expect(h.state == .active)
        #expect(h.record.adminSignaled == false)
    }

    @Test(arguments: [Int32(0), -1, 65, 1000, Int32.min])
    func outOfRangeSignalsAreRefused(signal: Int32) {
        var h = Harness()
        h.activate(at: 0)
        let e = h.step(.kill(host: 1, tag: 4, extensionID: extID, signal: signal), at: 1)
        #expect(e.failures.map(\.code) == [.badRequest])
        #expect(e.signals.isEmpty)
    }

    @Test func killOfANotRunningExtensionIsRefused() {
        var h = Harness()
        let e = h.step(.kill(host: 1, tag: 5, extensionID: extID, signal: 15), at: 0)
        #expect(e.failures.map(\.code) == [.notRunning])
        #expect(e.signals.isEmpty)
    }

    @Test func killBeforeTheProcessExistsIsRefusedAsNotRunning() {
        var h = Harness()
        h.begin(at: 0)  // launching, no pid yet
        let e = h.step(.kill(host: 1, tag: 5, extensionID: extID, signal: 15), at: 0.1)
        #expect(e.failures.map(\.code) == [.notRunning])
        #expect(e.signals.isEmpty)
    }

    @Test func killOfASuspendedExtensionContinuesItAndTerminates() {
        var h = Harness([manifest()], limits: testLimits { $0.terminateGraceSeconds = 5 })
        let rid = h.activate(at: 0)
        h.suspendIdle(request: rid, at: 1)
        let e = h.step(.kill(host: 9, tag: 6, extensionID: extID, signal: SignalNumber.terminate), at: 10)
        #expect(e.signals == [SignalSent(extensionID: extID, generation: 1, signal: SignalNumber.terminate, thenContinue: true)])
        #expect(e.oks.map(\.tag) == [6])
        #expect(e.oks.first?.host == 9)
        #expect(e.events(.kill).count == 1)
        #expect(h.state == .terminating)
        #expect(h.phase == .terminating(reason: .killedByAdmin, killAt: .seconds(15)))
        #expect(e.timers == [.seconds(15)], "the reclaim deadline is replaced by the SIGKILL deadline")

        let k = h.tick(at: 15)
        #expect(k.signals.map(\.signal) == [SignalNumber.kill])
        h.exited(.signaled(15), at: 15.1)
        #expect(h.record.lastExit?.reason == .killedByAdmin)
        #expect(h.record.lastExit?.reason.rawValue == "killed-by-admin")
        #expect(h.record.consecutiveCrashes == 0, "an administrator's kill is not a crash")
    }

    @Test func killOfAnActiveExtensionSignalsWithoutContinueAndInterruptsItsHosts() {
        var h = Harness()
        let rid = h.activate(host: 2, at: 0)
        let e = h.step(.kill(host: 9, tag: 6, extensionID: extID, signal: SignalNumber.hangup), at: 1)
        #expect(e.signals == [SignalSent(extensionID: extID, generation: 1, signal: SignalNumber.hangup, thenContinue: false)])
        #expect(e.oks.map(\.tag) == [6])
        #expect(h.state == .active, "the state follows the process, not the signal")
        #expect(h.record.adminSignaled)
        let x = h.exited(.signaled(1), at: 2)
        #expect(h.record.lastExit?.reason == .killedByAdmin)
        #expect(x.interruptions.map(\.requestID) == [rid])
        #expect(x.events(.crash).isEmpty)
        #expect(x.events(.exit).count == 1)
    }

    @Test func killWhileTheStopIsInFlightAlsoContinues() {
        var h = Harness()
        let rid = h.activate(at: 0)
        h.end(request: rid, at: 1)  // stopping
        let e = h.step(.kill(host: 9, tag: 1, extensionID: extID, signal: SignalNumber.kill), at: 1)
        #expect(e.signals.first?.thenContinue == true)
        #expect(h.state == .terminating)
    }

    @Test func theAdminMarkIsClearedByTheNextLaunch() {
        var h = Harness()
        h.activate(at: 0)
        h.step(.kill(host: 9, tag: 1, extensionID: extID, signal: SignalNumber.terminate), at: 1)
        h.exited(.signaled(15), at: 2)
        h.activate(at: 3)
        #expect(h.record.adminSignaled == false)
        h.exited(.exited(3), at: 4)
        #expect(h.record.lastExit?.reason == .crashed)
    }
}
