import SupervisorCore
import Testing

@Suite("The signals of a pid namespace's first process")
struct NamespaceInitSignalTests {
    /// A /proc/PID/status as Linux 6.x writes it, trimmed to the lines read and their neighbours.
    func status(nspid: String, caught: String, ignored: String) -> [UInt8] {
        Array(
            """
            Name:\tpython3
            Pid:\t4242
            NSpid:\t\(nspid)
            SigQ:\t0/95712
            SigPnd:\t0000000000000000
            SigBlk:\t0000000000000000
            SigIgn:\t\(ignored)
            SigCgt:\t\(caught)
            CapInh:\t0000000000000000

            """.utf8)
    }

    @Test func aProcessOfTheDaemonsNamespaceIsSentWhatWasAskedFor() throws {
        let facts = try #require(NamespaceInitSignals(status: status(nspid: "4242", caught: "0000000000000000", ignored: "0000000000000000")))
        #expect(!facts.isNamespaceInit)
        #expect(facts.deliverable(SignalNumber.terminate) == SignalNumber.terminate)
        #expect(facts.deliverable(SignalNumber.child) == SignalNumber.child)
    }

    @Test func withNoHandlerATerminatingSignalBecomesSIGKILL() throws {
        let facts = try #require(NamespaceInitSignals(status: status(nspid: "4242\t1", caught: "0000000000000000", ignored: "0000000000000000")))
        #expect(facts.isNamespaceInit)
        #expect(facts.deliverable(SignalNumber.terminate) == SignalNumber.kill)
        #expect(facts.deliverable(SignalNumber.hangup) == SignalNumber.kill)
        #expect(facts.deliverable(SignalNumber.user2) == SignalNumber.kill)
        #expect(facts.deliverable(40) == SignalNumber.kill)  // a real-time signal ends a process by default
        #expect(facts.deliverable(SignalNumber.terminalStop) == SignalNumber.stop)
        #expect(facts.deliverable(SignalNumber.child) == nil)
        #expect(facts.deliverable(28) == nil)  // SIGWINCH
    }

    @Test func aHandledSignalIsSentAsItIsAndAnIgnoredOneNotAtAll() throws {
        // SIGTERM (15) handled: bit 14 = 0x4000; SIGHUP (1) ignored: bit 0.
        let facts = try #require(NamespaceInitSignals(status: status(nspid: "4242\t1", caught: "0000000000004000", ignored: "0000000000000001")))
        #expect(facts.deliverable(SignalNumber.terminate) == SignalNumber.terminate)
        #expect(facts.deliverable(SignalNumber.hangup) == nil)
        #expect(facts.deliverable(SignalNumber.interrupt) == SignalNumber.kill)
    }

    @Test func signalsTheKernelAlwaysDeliversAreSentAsTheyAre() throws {
        let facts = try #require(NamespaceInitSignals(status: status(nspid: "9\t1", caught: "0000000000000000", ignored: "ffffffffffffffff")))
        for signal in [SignalNumber.kill, SignalNumber.stop, SignalNumber.cont] { #expect(facts.deliverable(signal) == signal) }
    }

    @Test func aProcessDeeperInTheNamespaceIsNotItsFirst() throws {
        let facts = try #require(NamespaceInitSignals(status: status(nspid: "4243\t2", caught: "0000000000000000", ignored: "0000000000000000")))
        #expect(facts.deliverable(SignalNumber.terminate) == SignalNumber.terminate)
    }

    @Test func aStatusWithoutTheLinesReadIsRefused() {
        #expect(NamespaceInitSignals(status: Array("Name:\tx\nPid:\t3\n".utf8)) == nil)
        #expect(NamespaceInitSignals(status: status(nspid: "3\t1", caught: "zz", ignored: "0")) == nil)
    }
}
