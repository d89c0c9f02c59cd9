import ExtensionProtocol
import SupervisorCore
import SupervisorKernel
import Testing

@testable import SupervisorShell

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
    /// and, for the stop model (the shell's `ProcessControl` and each process's `GroupControl`
    /// over the simulated kernel `SimulatedKernel`, both containments, SIGSTOP and freeze,
    /// members that fork, block in the kernel, leave the process group and outlive their
    /// leader), after every event and every kernel step:
    /// - no stop is confirmed while a member runs user code (a pending SIGSTOP counts as
    ///   running), and none runs while a confirmed stop holds;
    /// - a confirmation names exactly the group's processes, and the leader is taken to be
    ///   alone only when it is;
    /// - after a resume no member is stopped, stop-pending, asked to stop or frozen;
    /// - an exit is reported only once the leader exited and was reaped and the cgroup is
    ///   empty (or, on the process-group fallback, every member left was killed);
    /// - no stop check stays armed once the group is held, and no timer is armed for a process
    ///   that is not live; `ProcessControl` logs no warning or error but a slow stop, and
    ///   makes no kernel call outside its process handling.
    @Test(arguments: [SupervisorCore.Containment.cgroup, .processGroup])
    func theCoreKeepsItsGuaranteesOverRandomSequences(containment: SupervisorCore.Containment) {
        var totals = (grants: 0, expires: 0, stops: 0, stopsWithHeld: 0, reclaims: 0, crashes: 0)
        var model = (stops: 0, freezes: 0, forks: 0, outlived: 0, blocked: 0, alone: 0, orphansOnly: 0)
        for seed in UInt64(1)...300 {
            let sim = Simulation(seed: seed, containment: containment)
            sim.run(steps: 300)
            #expect(sim.violations.isEmpty, "seed \(seed): \(sim.violations.prefix(5))")
            if !sim.violations.isEmpty { return }
            #expect(sim.stopsRefused == 0, "seed \(seed): processes that only stop late, never refuse, had a stop refused")
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
            model.alone += sim.confirmedAloneWithoutARead
            model.orphansOnly += sim.orphansOnlyAtConfirm
        }
        // The stop model's races must be exercised too.
        #expect(model.stops > 150, "stops confirmed: \(model)")
        if containment == .cgroup {
            // (On the fallback, kill(-pgid) reaches every member at once: no fork race.)
            #expect(model.forks > 20, "members forking while a stop is in flight: \(model)")
            #expect(model.blocked > 5, "stops confirmed with a member blocked in the kernel: \(model)")
            #expect(model.freezes > 100, "freezes confirmed: \(model)")
            #expect(model.outlived > 20, "members that outlived their leader: \(model)")
        } else {
            #expect(model.alone > 50, "process-group leaders confirmed alone with no scan of /proc: \(model)")
            #expect(model.orphansOnly > 10, "leaders with no child whose group held adopted orphans: \(model)")
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
        let a = Simulation(seed: 42, containment: .cgroup)
        let b = Simulation(seed: 42, containment: .cgroup)
        a.run(steps: 200)
        b.run(steps: 200)
        #expect(a.sup.records == b.sup.records)
        #expect(a.grants == b.grants && a.stops == b.stops && a.expires == b.expires)
        #expect(a.stopsConfirmed == b.stopsConfirmed && a.forksDuringStops == b.forksDuringStops && a.now == b.now)
    }

    /// A supervisor handed over at random points (snapshot, JSON, restore, as `extctl reexec`
    /// does) behaves exactly as one that never was: the same effects in the same order, the
    /// same timer instants, the same final records.
    @Test(arguments: [SupervisorCore.Containment.cgroup, .processGroup])
    func aHandOverAtRandomPointsChangesNoOutcome(containment: SupervisorCore.Containment) {
        for seed in UInt64(1)...20 {
            let plain = Simulation(seed: seed, containment: containment)
            let handedOver = Simulation(seed: seed, containment: containment)
            handedOver.handovers = (SplitMix64(seed: seed &* 7919), 0.2)
            plain.run(steps: 300)
            handedOver.run(steps: 300)
            #expect(handedOver.handoverCount > 10, "seed \(seed): only \(handedOver.handoverCount) hand-overs")
            #expect(handedOver.violations.isEmpty, "seed \(seed): \(handedOver.violations.prefix(3))")
            #expect(handedOver.outcome == plain.outcome, "seed \(seed): the effects differ from the \(firstDifference(plain.outcome, handedOver.outcome))th on")
            #expect(handedOver.armedInstants == plain.armedInstants, "seed \(seed)")
            #expect(handedOver.sup.records == plain.sup.records, "seed \(seed)")
        }
    }

    func firstDifference(_ a: [String], _ b: [String]) -> Int {
        zip(a, b).enumerated().first { $0.element.0 != $0.element.1 }?.offset ?? min(a.count, b.count)
    }

    /// The checker itself must catch a violation: feed it a stop while an unexpired assertion is held.
    @Test func theCheckerDetectsAStopWithAnUnexpiredAssertion() {
        let sim = Simulation(seed: 1)
        sim.deliver(.begin(host: 1, peer: ownPeer, tag: 1, extensionID: "sim.a"))
        sim.deliver(.spawned(extensionID: "sim.a", generation: 1, pid: 5))
        sim.deliver(.ready(extensionID: "sim.a", generation: 1))
        sim.deliver(.acquire(extensionID: "sim.a", generation: 1, tag: 2, reason: "work"))
        #expect(sim.violations.isEmpty)
        #expect(sim.grants == 1)
        sim.check(.tick, [.stop(extensionID: "sim.a", generation: 1)], sim.sup.records)
        #expect(sim.violations.contains { $0.contains("never expired") })
    }

    /// The stop-model checks catch a confirmation while a member runs or that names other
    /// members, a leader wrongly taken to be alone, and a resume that leaves a member held.
    @Test func theCheckerDetectsAWrongConfirmationAndAnIncompleteResume() throws {
        let sim = Simulation(seed: 1, containment: .cgroup)
        sim.deliver(.begin(host: 1, peer: ownPeer, tag: 1, extensionID: "sim.a"))
        let g = sim.sup.records["sim.a"]!.generation
        let p = try #require(sim.live("sim.a", g), "spawned at once: a handle on the generation")
        let world = try #require(sim.kernel.world(p.pid))
        world.addMember(.running)
        sim.stopConfirmed(p, members: [p.pid])
        #expect(sim.violations.contains { $0.contains("confirmed while a member runs") })
        #expect(sim.violations.contains { $0.contains("confirmed with the members") })

        let alone = Simulation(seed: 3, containment: .cgroup)
        alone.deliver(.begin(host: 1, peer: ownPeer, tag: 1, extensionID: "sim.a"))
        let q = try #require(alone.live("sim.a", alone.sup.records["sim.a"]!.generation))
        let w = try #require(alone.kernel.world(q.pid))
        for pid in w.members.keys { w.setState(pid, .stopped) }
        w.addMember(.stopped)
        // A model that took the leader to be alone although another member is there.
        var wrong = GroupControl(leader: q.pid, containment: .cgroup, mechanism: .stop)
        _ = wrong.suspend(at: alone.now)
        _ = wrong.observe(.leaderStopReported, at: alone.now)
        _ = wrong.observe(.members([Member(pid: q.pid, state: .stopped)]), at: alone.now)
        _ = q.decide { group in
            group = wrong
            return []
        }
        alone.stopConfirmed(q, members: [q.pid])
        #expect(alone.violations.contains { $0.contains("taken as the leader alone") })

        let other = Simulation(seed: 2, containment: .cgroup)
        other.deliver(.begin(host: 1, peer: ownPeer, tag: 1, extensionID: "sim.a"))
        let g2 = other.sup.records["sim.a"]!.generation
        let r = try #require(other.live("sim.a", g2))
        let held = try #require(other.kernel.world(r.pid))
        held.setState(r.pid, .stopped)
        other.check(.tick, [.resume(extensionID: "sim.a", generation: g2)], other.sup.records)
        #expect(other.violations.isEmpty, "the resume continues every member")
        // sim.a is suspended with SIGSTOP: its resume sends SIGCONT, which does not lift a freeze.
        held.addMember(.stopped)
        held.setFrozen(true, atOnce: true)
        other.check(.tick, [.resume(extensionID: "sim.a", generation: g2)], other.sup.records)
        #expect(other.violations.contains { $0.contains("still held") }, "a freeze the resume does not lift is caught")
    }

    /// The shell checks catch a warning logged by the shell, a kernel call outside process
    /// handling, and a timer armed for no process.
    @Test func theCheckerDetectsWarningsStrayCallsAndStrayTimers() {
        let sim = Simulation(seed: 1, containment: .cgroup)
        sim.logged.logger(label: "test").warning("cannot read cgroup.events")
        _ = sim.kernel.spawn(
            SpawnRequest(
                path: "/bin/true", arguments: [], environment: [], directory: nil, channelFD: nil, cgroupFD: nil, credentials: nil))
        _ = sim.kernel.addTimer(at: .seconds(5), priority: 0) {}
        var found: [String] = []
        sim.checkShell { found.append($0) }
        #expect(found.contains { $0.contains("logged warning: cannot read cgroup.events") })
        #expect(found.contains { $0.contains("unexpected kernel call spawn(/bin/true)") })
        #expect(found.contains { $0.contains("armed for no live process") })
    }
}
