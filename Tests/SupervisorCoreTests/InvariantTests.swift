import ExtensionProtocol
import SupervisorCore
import Testing

@Suite("Guarantees over randomized event sequences")
struct InvariantTests {
    /// 300 seeded runs of 300 random events each (plus shutdown and drain), with a punctual
    /// timer and spawn effects answered at once, as the shell does.
    /// Checks, after every event (see `Simulation.check`):
    /// - no `.stop` while an assertion is held whose `.expire` went out less than
    ///   `expiryGraceSeconds` earlier (or never) — assertions are revoked at the stop;
    /// - every signal to a possibly stopped group is followed by SIGCONT;
    /// - events for a stale generation produce no effect and change nothing;
    /// - grants only in launching/active/background, never twice the same id, one expire per assertion;
    /// - the armed timer is always `nextDeadline()`, and a tick at a deadline consumes it;
    /// - the assertions tracked from effects equal the supervisor's ledgers;
    /// - `.exit` comes exactly once, after shutdown, when no process runs.
    @Test func theCoreKeepsItsGuaranteesOverRandomSequences() {
        var totals = (grants: 0, expires: 0, stops: 0, stopsWithHeld: 0, reclaims: 0, crashes: 0)
        for seed in UInt64(1)...300 {
            var sim = Simulation(seed: seed)
            sim.run(steps: 300)
            #expect(sim.violations.isEmpty, "seed \(seed): \(sim.violations.prefix(5))")
            if !sim.violations.isEmpty { return }
            totals.grants += sim.grants
            totals.expires += sim.expires
            totals.stops += sim.stops
            totals.stopsWithHeld += sim.stopsWithHeldAssertions
            totals.reclaims += sim.reclaims
            totals.crashes += sim.crashes
        }
        // The runs must actually exercise the paths the invariant is about.
        #expect(totals.grants > 1_000)
        #expect(totals.expires > 400)
        #expect(totals.stops > 800)
        #expect(totals.stopsWithHeld > 50, "stops at the background deadline with assertions still held")
        #expect(totals.reclaims > 100)
        #expect(totals.crashes > 400)
    }

    @Test func theSimulationIsDeterministic() {
        var a = Simulation(seed: 42)
        var b = Simulation(seed: 42)
        a.run(steps: 200)
        b.run(steps: 200)
        #expect(a.sup.records == b.sup.records)
        #expect(a.grants == b.grants && a.stops == b.stops && a.expires == b.expires)
    }

    /// The checker itself must catch a violation: feed it a stop while an unexpired assertion is held.
    @Test func theCheckerDetectsAStopWithAnUnexpiredAssertion() {
        var sim = Simulation(seed: 1)
        sim.deliver(.begin(host: 1, peer: ownPeer, tag: 1, extensionID: "sim.a"))
        sim.deliver(.spawned(extensionID: "sim.a", generation: 1, pid: 5))
        sim.deliver(.ready(extensionID: "sim.a", generation: 1))
        sim.deliver(.acquire(extensionID: "sim.a", generation: 1, tag: 2, reason: "work"))
        #expect(sim.violations.isEmpty)
        #expect(sim.grants == 1)
        sim.check(.tick, [.stop(extensionID: "sim.a", generation: 1)], sim.sup.records)
        #expect(sim.violations.contains { $0.contains("never expired") })
    }
}
