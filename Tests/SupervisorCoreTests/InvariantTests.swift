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
    /// - `.exit` comes exactly once, after shutdown, when no process runs;
    /// and, for the stop model (`GroupControl` over the simulated kernel `GroupWorld`, both
    /// containments, SIGSTOP and freeze, members that fork, block in the kernel and outlive
    /// their leader):
    /// - no stop is confirmed while a member runs user code (a pending SIGSTOP counts as running);
    /// - after a resume no member is stopped, stop-pending or frozen;
    /// - an exit is reported only once the leader exited and the cgroup is empty (or, on the
    ///   process-group fallback, every member left was killed).
    @Test(arguments: [Containment.cgroup, .processGroup])
    func theCoreKeepsItsGuaranteesOverRandomSequences(containment: Containment) {
        var totals = (grants: 0, expires: 0, stops: 0, stopsWithHeld: 0, reclaims: 0, crashes: 0)
        var model = (stops: 0, freezes: 0, forks: 0, outlived: 0, blocked: 0)
        for seed in UInt64(1)...300 {
            var sim = Simulation(seed: seed, containment: containment)
            sim.run(steps: 300)
            #expect(sim.violations.isEmpty, "seed \(seed): \(sim.violations.prefix(5))")
            if !sim.violations.isEmpty { return }
            totals.grants += sim.grants
            totals.expires += sim.expires
            totals.stops += sim.stops
            totals.stopsWithHeld += sim.stopsWithHeldAssertions
            totals.reclaims += sim.reclaims
            totals.crashes += sim.crashes
            model.stops += sim.stopsConfirmed
            model.freezes += sim.freezesConfirmed
            model.forks += sim.forksDuringStops
            model.outlived += sim.outlivedLeaders
            model.blocked += sim.blockedAtConfirm
        }
        // The stop model's races must be exercised too.
        #expect(model.stops > 150, "stops confirmed: \(model)")
        if containment == .cgroup {
            // (On the fallback, kill(-pgid) reaches every member at once: no fork race.)
            #expect(model.forks > 20, "members forking while a stop is in flight: \(model)")
            #expect(model.blocked > 5, "stops confirmed with a member blocked in the kernel: \(model)")
            #expect(model.freezes > 100, "freezes confirmed: \(model)")
            #expect(model.outlived > 20, "members that outlived their leader: \(model)")
        }
        // The runs must actually exercise the paths the invariant is about.
        #expect(totals.grants > 1_000)
        #expect(totals.expires > 400)
        #expect(totals.stops > 800)
        #expect(totals.stopsWithHeld > 50, "stops at the background deadline with assertions still held")
        #expect(totals.reclaims > 100)
        #expect(totals.crashes > 200)
    }

    @Test func theSimulationIsDeterministic() {
        var a = Simulation(seed: 42, containment: .cgroup)
        var b = Simulation(seed: 42, containment: .cgroup)
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

    /// The stop-model checks catch a confirmation while a member runs, and a resume that leaves
    /// a member stopped.
    @Test func theCheckerDetectsAConfirmedStopWhileAMemberRunsAndAnIncompleteResume() {
        var sim = Simulation(seed: 1, containment: .cgroup)
        sim.deliver(.begin(host: 1, peer: ownPeer, tag: 1, extensionID: "sim.a"))
        let g = sim.sup.records["sim.a"]!.generation
        #expect(sim.worlds["sim.a"]?.generation == g, "spawned at once: a world for the generation")
        sim.worlds["sim.a"]!.world.addMember(.running)
        sim.perform([.stopConfirmed], "sim.a", g)
        #expect(sim.violations.contains { $0.contains("confirmed while a member runs") })

        var other = Simulation(seed: 2, containment: .cgroup)
        other.deliver(.begin(host: 1, peer: ownPeer, tag: 1, extensionID: "sim.a"))
        let g2 = other.sup.records["sim.a"]!.generation
        other.worlds["sim.a"]!.world.members[other.worlds["sim.a"]!.world.leader] = .stopped
        // A resume whose actions do not continue the members (as if the model forgot SIGCONT).
        other.check(.tick, [.resume(extensionID: "sim.a", generation: g2)], other.sup.records)
        #expect(other.violations.isEmpty, "the model's resume continues every member")
        other.worlds["sim.a"]!.world.addMember(.stopped)
        other.worlds["sim.a"]!.world.freezeRequested = true
        other.worlds["sim.a"]!.world.control = GroupControl(leader: 1, containment: .cgroup, mechanism: .stop)
        var held = other.worlds["sim.a"]!.world
        held.deliver(SignalNumber.cont, to: nil)
        other.worlds["sim.a"]!.world = held
        other.worlds["sim.a"]!.world.freezeRequested = true
        other.check(.tick, [.resume(extensionID: "sim.a", generation: g2)], other.sup.records)
        #expect(other.violations.contains { $0.contains("still held") }, "a freeze the stop model does not lift is caught")
    }
}
