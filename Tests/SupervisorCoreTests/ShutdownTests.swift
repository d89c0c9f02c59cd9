import ExtensionProtocol
import SupervisorCore
import Testing

@Suite("Shutdown")
struct ShutdownTests {
    @Test func shutdownWithNothingRunningExitsAtOnce() {
        var h = Harness([manifest("a.one"), manifest("b.two")])
        let e = h.step(.shutdown, at: 0)
        #expect(e.exits == 1)
        #expect(e.signals.isEmpty)
        #expect(h.sup.shuttingDown)
    }

    @Test func everyRunningExtensionIsTerminatedAndExitWaitsForAllOfThem() {
        var h = Harness(
            [manifest("a.active"), manifest("b.suspended"), manifest("c.launching"), manifest("d.idle")],
            limits: testLimits { $0.terminateGraceSeconds = 5 })
        h.id = "a.active"
        h.activate(host: 1, at: 0)
        h.id = "b.suspended"
        let rid = h.activate(host: 2, at: 0)
        h.suspendIdle(host: 2, request: rid, at: 1)
        h.id = "c.launching"
        h.begin(host: 3, tag: 33, at: 2)
        h.spawned(at: 2)

        let e = h.step(.shutdown, at: 3)
        #expect(e.exits == 0)
        let signals = Dictionary(uniqueKeysWithValues: e.signals.map { ($0.extensionID, $0) })
        #expect(signals.count == 3)
        #expect(signals["a.active"]?.signal == SignalNumber.terminate)
        #expect(signals["a.active"]?.thenContinue == false)
        #expect(signals["b.suspended"]?.signal == SignalNumber.terminate)
        #expect(signals["b.suspended"]?.thenContinue == true, "a stopped group must be continued to die")
        #expect(signals["c.launching"]?.thenContinue == false)
        #expect(signals["d.idle"] == nil)
        #expect(e.failures.map(\.code) == [.shuttingDown], "the pending begin fails")
        #expect(e.failures.first?.tag == 33)
        #expect(e.timers == [.seconds(8)])
        for id in ["a.active", "b.suspended", "c.launching"] {
            #expect(h.record(id)?.state == .terminating)
        }

        // New work is refused while shutting down.
        #expect(h.begin(host: 4, tag: 1, id: "d.idle", at: 3.5).failures.map(\.code) == [.shuttingDown])
        #expect(h.step(.prewarm(host: 4, peer: ownPeer, tag: 2, extensionIDs: ["d.idle"]), at: 3.5).failures.map(\.code) == [.shuttingDown])
        #expect(h.record("d.idle")?.state == .notRunning)

        h.id = "a.active"
        let x1 = h.exited(.signaled(15), at: 4)
        #expect(x1.exits == 0)
        #expect(x1.interruptions.count == 1)
        #expect(h.record.lastExit?.reason == .shutdown)
        h.id = "b.suspended"
        #expect(h.exited(.signaled(15), at: 4).exits == 0)

        // The straggler gets SIGKILL at the grace deadline.
        let k = h.tick(at: 8)
        #expect(k.signals == [SignalSent(extensionID: "c.launching", generation: 1, signal: SignalNumber.kill, thenContinue: true)])
        h.id = "c.launching"
        let last = h.exited(.signaled(9), at: 8.1)
        #expect(last.exits == 1)
        #expect(last.spawns.isEmpty)
    }

    @Test func aProcessNotSpawnedYetIsKilledWhenItAppears() {
        var h = Harness()
        h.begin(host: 1, tag: 7, at: 0)
        let s = h.step(.shutdown, at: 1)
        #expect(s.signals.isEmpty, "there is no process to signal yet")
        #expect(s.failures.map(\.code) == [.shuttingDown])
        #expect(s.exits == 0)
        #expect(h.state == .terminating)
        let sp = h.spawned(at: 2)
        #expect(sp.signals == [SignalSent(extensionID: extID, generation: 1, signal: SignalNumber.kill, thenContinue: true)])
        #expect(h.ready(at: 2).openRequests.isEmpty)
        let x = h.exited(.signaled(9), at: 3)
        #expect(x.exits == 1)
        #expect(h.record.lastExit?.reason == .shutdown)
    }

    @Test func anExtensionAlreadyTerminatingForAnotherReasonIsLeftToFinish() {
        var h = Harness()
        h.activate(at: 0)
        h.step(.channelClosed(extensionID: extID, generation: 1, reason: "EOF"), at: 1)
        let s = h.step(.shutdown, at: 2)
        #expect(s.signals.isEmpty)
        #expect(s.exits == 0)
        let x = h.exited(.signaled(15), at: 3)
        #expect(x.exits == 1)
        #expect(h.record.lastExit?.reason == .channelClosed)
    }

    @Test func pendingBeginsWhileTerminatingFailInsteadOfRelaunching() {
        var h = Harness()
        h.activate(at: 0)
        h.step(.channelClosed(extensionID: extID, generation: 1, reason: "EOF"), at: 1)
        h.begin(host: 2, tag: 20, at: 1)
        let s = h.step(.shutdown, at: 2)
        #expect(s.failures.map(\.code) == [.shuttingDown])
        let x = h.exited(.exited(0), at: 3)
        #expect(x.spawns.isEmpty)
        #expect(x.exits == 1)
    }

    @Test func aSecondShutdownSendsNoSecondSignal() {
        var h = Harness()
        h.activate(at: 0)
        #expect(h.step(.shutdown, at: 1).signals.count == 1)
        let again = h.step(.shutdown, at: 2)
        #expect(again.signals.isEmpty)
        #expect(again.exits == 0)
    }
}
