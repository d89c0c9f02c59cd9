import ExtensionProtocol
import SupervisorCore

/// A randomized, deterministic driver for the supervisor: it plays the shell (answering
/// spawn effects, sometimes late; carrying out stop, resume and signal effects through a
/// `GroupControl` per process generation over a simulated kernel, `GroupWorld`, as
/// `ProcessControl` does), the hosts (begin, end, disconnect, prewarm, admin kill) and the
/// extension runtimes (acquire, release, acknowledge expiry, crash, close the channel), with
/// simulated time.
///
/// While it runs it tracks, from the effects alone, which assertions each extension holds
/// and when their *expire* went out, and checks the supervisor's guarantees and the stop
/// model's (no stop confirmed while a member runs user code, every member running after a
/// resume, an exit reported only for an empty group) after every event.
struct Simulation {
    struct Held {
        var expireSentAt: Instant?
        /// Revoked by the core in the current batch (leak guard); forgotten after the batch.
        var revoked = false
    }

    /// A shell duty created by an effect and not answered yet.
    enum Duty: Equatable {
        case answerSpawn(String, UInt64)
        case announceReady(String, UInt64)
        /// A step of the simulated kernel for this generation's processes.
        case kernel(String, UInt64)

        var target: (String, UInt64) {
            switch self {
            case let .answerSpawn(id, g), let .announceReady(id, g), let .kernel(id, g): (id, g)
            }
        }
    }

    static let ids = ["sim.a", "sim.b", "sim.never", "sim.frozen"]
    static let manifests: [Manifest] = [
        manifest("sim.a", policy: Policy(
            backgroundSeconds: 10, expiryGraceSeconds: 3, assertionMaxSeconds: 20,
            launchTimeoutSeconds: 5, suspendedLifetimeSeconds: 40)),
        // Grace equal to the whole background time: expire goes out at the dismissal.
        manifest("sim.b", policy: Policy(
            backgroundSeconds: 4, expiryGraceSeconds: 4, assertionMaxSeconds: 8,
            launchTimeoutSeconds: 3, suspendedLifetimeSeconds: 15)),
        manifest("sim.never", policy: Policy(
            backgroundSeconds: 6, expiryGraceSeconds: 2, assertionMaxSeconds: 12,
            launchTimeoutSeconds: 4, suspendedLifetimeSeconds: 30, suspend: .never)),
        manifest("sim.frozen", policy: Policy(
            backgroundSeconds: 5, expiryGraceSeconds: 2, assertionMaxSeconds: 10,
            launchTimeoutSeconds: 4, suspendedLifetimeSeconds: 25, suspend: .freeze)),
    ]
    static let limits = testLimits {
        $0.maxRequestsPerHost = 3
        $0.maxAssertionsPerProcess = 4
        $0.maxPrewarmed = 1
        $0.terminateGraceSeconds = 2
        $0.crashBackoffBaseSeconds = 1
        $0.crashBackoffMaxSeconds = 4
        $0.stableRunSeconds = 20
    }

    var sup = Supervisor(manifests: Simulation.manifests, limits: Simulation.limits, now: .seconds(0))
    var rng: SplitMix64
    /// The most a timer tick may be late (0: the timer fires exactly at the armed instant).
    let timerLateness: Double
    /// Whether spawn effects are answered (`spawned` or `spawnFailed`) right after the batch
    /// that asked for them, as the shell does (it spawns synchronously and queues the answer),
    /// or at a random later point like every other duty. (With late answers the core currently
    /// ignores a `spawnFailed` that arrives after shutdown or a launch timeout: see the report.)
    let spawnAnswersImmediately: Bool
    var now = Instant.seconds(0)
    var armed: Instant?
    var duties: [Duty] = []
    var open: [(host: HostID, requestID: UInt64)] = []
    var held: [String: [UInt64: Held]] = [:]
    /// Every assertion id ever granted per extension (releases pick from these, stale ones included).
    var everGranted: [String: [UInt64]] = [:]
    var nextPid: Int32 = 1000
    var nextTag: UInt32 = 1
    /// The containment every generation gets (cgroup, or the process-group fallback).
    let containment: Containment
    /// The simulated kernel of each extension's live generation.
    var worlds: [String: (generation: UInt64, world: GroupWorld)] = [:]
    /// Events the simulated shell queued while effects were carried out (delivered after them,
    /// as the daemon's re-entrancy queue does).
    var queued: [Event] = []
    var draining = false
    var exitCount = 0
    /// When set, every event and its effects (lifecycle records left out) are logged, for debugging a seed.
    var trace = false
    var log: [String] = []
    /// Called by `run` after each random event with the supervisor, which it may replace (the
    /// hand-over test restores it from its snapshot here), and the current instant.
    var betweenEvents: ((inout Supervisor, Instant) -> Void)?
    /// Called with every event delivered and the effects the supervisor returned for it.
    var onEffects: ((Event, [Effect]) -> Void)?

    /// Guarantee violations, described for people. Empty when all is well.
    var violations: [String] = []
    // Coverage counters, so a test can show the interesting paths were taken.
    var grants = 0, expires = 0, stops = 0, stopsWithHeldAssertions = 0, reclaims = 0, crashes = 0
    var stopsConfirmed = 0, freezesConfirmed = 0, forksDuringStops = 0, outlivedLeaders = 0, blockedAtConfirm = 0

    init(seed: UInt64, timerLateness: Double = 0, spawnAnswersImmediately: Bool = true, containment: Containment = .cgroup) {
        rng = SplitMix64(seed: seed)
        self.containment = containment
        self.timerLateness = timerLateness
        self.spawnAnswersImmediately = spawnAnswersImmediately
    }

    func grace(_ id: String) -> Double { sup.records[id]?.manifest.policy.expiryGraceSeconds ?? 0 }

    mutating func random(_ n: Int) -> Int { Int.random(in: 0..<n, using: &rng) }
    mutating func chance(_ p: Double) -> Bool { Double.random(in: 0..<1, using: &rng) < p }
    mutating func pick<T>(_ xs: [T]) -> T? { xs.isEmpty ? nil : xs[random(xs.count)] }

    // MARK: Driving

    /// Runs `steps` random events, then shuts down and drains every duty.
    mutating func run(steps: Int) {
        for _ in 0..<steps {
            advance()
            randomEvent()
            betweenEvents?(&sup, now)
        }
        deliver(.shutdown)
        var guardCount = 0
        while exitCount == 0 && guardCount < 10_000 {
            guardCount += 1
            advance(by: 0.5)
            answerSomeDuty()
        }
        if exitCount != 1 { violations.append("shutdown did not complete with exactly one .exit (got \(exitCount))") }
        for (id, r) in sup.records where r.isRunning { violations.append("\(id) still running after .exit: \(r.phase)") }
    }

    /// Moves simulated time forward, firing the timer (late by up to `timerLateness`) on the way.
    mutating func advance(by fixed: Double? = nil) {
        // Mostly short steps (so launches usually become ready in time), sometimes long idle gaps.
        let dt = fixed ?? (chance(0.05) ? Double(random(60)) : Double(random(9)) * 0.25)
        let target = now.adding(seconds: dt)
        while let a = armed {
            let late = timerLateness > 0 ? Double(random(Int(timerLateness * 4) + 1)) * 0.25 : 0
            let fire = a.adding(seconds: late)
            guard fire <= target else { break }
            deliver(.tick, at: max(fire, now))
            if armed == a {
                violations.append("at \(now): a tick at or after the deadline \(a) left it armed")
                break
            }
        }
        now = max(now, target)
    }

    mutating func randomEvent() {
        let id = pick(Self.ids)!
        let record = sup.records[id]!
        let gen = record.generation
        switch random(20) {
        case 0, 1, 2:
            deliver(.begin(host: HostID(1 + random(3)), peer: ownPeer, tag: takeTag(), extensionID: id))
        case 3, 4:
            if let (host, rid) = pick(open) {
                deliver(.end(host: host, tag: takeTag(), requestID: rid))
            } else {
                deliver(.end(host: 1, tag: takeTag(), requestID: UInt64(random(50))))
            }
        case 5:
            let host = HostID(1 + random(3))
            deliver(.hostGone(host: host))
            open.removeAll { $0.host == host }
        case 6, 7, 8, 9:
            answerSomeDuty()
        case 10...11 where record.pid != nil:
            deliver(.acquire(extensionID: id, generation: gen, tag: takeTag(), reason: chance(0.05) ? "" : "work"))
        case 12...13 where record.pid != nil:
            if let aid = pick(everGranted[id] ?? []) {
                deliver(.release(extensionID: id, generation: gen, assertionID: aid))
            }
        case 14 where record.pid != nil:
            let expired = (held[id] ?? [:]).filter { $0.value.expireSentAt != nil }.map(\.key).sorted()
            if let aid = pick(expired) { deliver(.expireReceived(extensionID: id, generation: gen, assertionID: aid)) }
        case 15:
            // The leader exits on its own (or crashes); its other members, if any, stay.
            if record.isRunning && record.pid != nil, worlds[id]?.generation == gen {
                let status: ExitStatus = pick([.exited(0), .exited(1), .signaled(11)])!
                worlds[id]!.world.leaderExits(status)
                schedule(id, gen)
            }
        case 16:
            if chance(0.3) && record.pid != nil {
                deliver(.channelClosed(extensionID: id, generation: gen, reason: "EOF"))
            } else {
                deliver(.kill(host: 9, tag: takeTag(), extensionID: id, signal: pick([SignalNumber.terminate, SignalNumber.kill, SignalNumber.stop])!))
            }
        case 17:
            deliver(.prewarm(host: HostID(1 + random(3)), peer: ownPeer, tag: takeTag(), extensionIDs: [id]))
        case 18:
            // A stale event for an older generation.
            if gen > 1 {
                let old = UInt64(1 + random(Int(gen - 1)))
                let stale: [Event] = [
                    .ready(extensionID: id, generation: old), .stopConfirmed(extensionID: id, generation: old),
                    .exited(extensionID: id, generation: old, status: .exited(1)),
                    .acquire(extensionID: id, generation: old, tag: 1, reason: "old"),
                ]
                deliver(pick(stale)!)
            }
        default:
            deliver(.tick)
        }
    }

    /// Answers one outstanding duty, usually one for a live process (duties for dead
    /// generations are answered too, now and then: they become stale events).
    mutating func answerSomeDuty() {
        guard !duties.isEmpty else { return }
        let live = duties.indices.filter { i in
            let (id, g) = duties[i].target
            return sup.records[id]?.generation == g
        }
        let i = !live.isEmpty && chance(0.8) ? live[random(live.count)] : random(duties.count)
        answer(duties.remove(at: i))
    }

    mutating func takeTag() -> UInt32 {
        defer { nextTag += 1 }
        return nextTag
    }

    mutating func answer(_ duty: Duty) {
        switch duty {
        case let .answerSpawn(id, g):
            if chance(0.05) {
                deliver(.spawnFailed(extensionID: id, generation: g, error: "ENOENT"))
            } else {
                nextPid += 1
                let mechanism = sup.records[id]?.manifest.policy.suspend ?? .stop
                worlds[id] = (g, GroupWorld(
                    leader: nextPid, containment: containment, mechanism: mechanism, extraMembers: random(3), ignoresTerm: chance(0.2)))
                deliver(.spawned(extensionID: id, generation: g, pid: nextPid))
                if !chance(0.05) { duties.append(.announceReady(id, g)) }  // sometimes it never gets ready
            }
        case let .announceReady(id, g): deliver(.ready(extensionID: id, generation: g))
        case let .kernel(id, g): kernelStep(id, g)
        }
    }

    // MARK: The simulated shell and kernel around each GroupControl

    /// Makes sure a kernel step is pending for the generation while its kernel has work.
    mutating func schedule(_ id: String, _ g: UInt64) {
        guard let w = worlds[id], w.generation == g, w.world.busy, !duties.contains(.kernel(id, g)) else { return }
        duties.append(.kernel(id, g))
    }

    mutating func kernelStep(_ id: String, _ g: UInt64) {
        guard worlds[id]?.generation == g else { return }
        let stoppingBefore = worlds[id]!.world.control.stop
        let countBefore = worlds[id]!.world.members.count
        var rng = self.rng
        worlds[id]!.world.kernelStep { p in Double.random(in: 0..<1, using: &rng) < p }
        self.rng = rng
        if case .stopping = stoppingBefore, worlds[id]!.world.members.count > countBefore { forksDuringStops += 1 }
        if worlds[id]!.world.stopReportPending {
            worlds[id]!.world.stopReportPending = false
            observe(.leaderStopReported, id, g)
        }
        if worlds[id]?.generation == g, worlds[id]!.world.frozenNotificationPending {
            worlds[id]!.world.frozenNotificationPending = false
            observe(.frozen(true), id, g)
        }
        if worlds[id]?.generation == g, worlds[id]!.world.leaderExitPending, let status = worlds[id]!.world.leaderExit {
            worlds[id]!.world.leaderExitPending = false
            let w = worlds[id]!.world
            observe(.leaderExited(status, populated: !w.isEmpty), id, g)
        }
        if worlds[id]?.generation == g, worlds[id]!.world.inCgroup, worlds[id]!.world.isEmpty, !worlds[id]!.world.emptiedReported {
            worlds[id]!.world.emptiedReported = true
            observe(.emptied, id, g)
        }
        if worlds[id]?.generation == g, let at = worlds[id]!.world.checkAt, at <= now {
            worlds[id]!.world.checkAt = nil
            observe(.checkDue, id, g)
        }
        drain()
        schedule(id, g)
    }

    mutating func observe(_ observation: GroupObservation, _ id: String, _ g: UInt64) {
        guard worlds[id]?.generation == g else { return }
        let actions = worlds[id]!.world.control.observe(observation, at: now)
        perform(actions, id, g)
    }

    /// Carries out the stop model's actions on the simulated kernel, as `ProcessControl.perform`.
    mutating func perform(_ actions: [GroupAction], _ id: String, _ g: UInt64) {
        for action in actions {
            guard worlds[id]?.generation == g else { return }
            switch action {
            case .readMembers:
                observe(.members(worlds[id]!.world.observed()), id, g)
            case .readFrozen:
                observe(.frozen(worlds[id]!.world.frozen), id, g)
            case let .signal(signal, target):
                switch target {
                case .all: worlds[id]!.world.deliver(signal, to: nil)
                case .pids(let pids): worlds[id]!.world.deliver(signal, to: pids)
                case .leaderGroup: worlds[id]!.world.deliver(signal, to: worlds[id]!.world.inLeaderGroup)
                }
            case .setFrozen(let on):
                worlds[id]!.world.freezeRequested = on
                if on && chance(0.3) {
                    // Every member froze within the write: a read right after it sees `frozen 1`.
                    worlds[id]!.world.frozen = true
                    worlds[id]!.world.frozenNotificationPending = true
                }
                if !on {
                    worlds[id]!.world.frozen = false
                    worlds[id]!.world.frozenNotificationPending = false
                }
            case .killAll:
                worlds[id]!.world.dying = Set(worlds[id]!.world.members.keys)
            case .checkAgain(let seconds):
                worlds[id]!.world.checkAt = now.adding(seconds: seconds)
            case .cancelCheck:
                worlds[id]!.world.checkAt = nil
            case .slowStop:
                break
            case .stopConfirmed:
                let w = worlds[id]!.world
                if w.anyRunsUserCode {
                    violations.append("at \(now): stop of \(id) confirmed while a member runs: \(w.members.sorted { $0.key < $1.key })")
                }
                if w.control.mechanism == .freeze && w.inCgroup { freezesConfirmed += 1 } else { stopsConfirmed += 1 }
                if w.members.values.contains(.blocked) { blockedAtConfirm += 1 }
                queued.append(.stopConfirmed(extensionID: id, generation: g))
            case let .exited(status, outlivedLeader):
                let w = worlds[id]!.world
                if w.leaderExit == nil { violations.append("at \(now): exit of \(id) reported while its leader lives") }
                if w.inCgroup && !w.isEmpty { violations.append("at \(now): exit of \(id) reported while its cgroup holds \(w.members.keys.sorted())") }
                if !w.inCgroup && !w.members.keys.allSatisfy({ w.dying.contains($0) }) {
                    violations.append("at \(now): exit of \(id) reported while group members live unkilled")
                }
                if outlivedLeader { outlivedLeaders += 1 }
                worlds[id] = nil
                duties.removeAll { $0 == .kernel(id, g) }
                queued.append(.exited(extensionID: id, generation: g, status: status, outlivedLeader: outlivedLeader))
            }
        }
        schedule(id, g)
    }

    /// Delivers the events the simulated shell queued, in order.
    mutating func drain() {
        guard !draining else { return }
        draining = true
        while !queued.isEmpty { deliver(queued.removeFirst()) }
        draining = false
    }

    // MARK: Checking

    mutating func deliver(_ event: Event, at instant: Instant? = nil) {
        if let instant { now = instant }
        let before = sup.records
        let effects = sup.handle(event, at: now)
        onEffects?(event, effects)
        if trace { log.append("\(now) \(event) -> \(effects.filter { if case .record = $0 { false } else { true } })") }
        check(event, effects, before)
        if spawnAnswersImmediately {
            for case let .spawn(id, g, _) in effects {
                duties.removeAll { if case let .answerSpawn(i, x) = $0 { i == id && x == g } else { false } }
                answer(.answerSpawn(id, g))
            }
        }
        drain()
    }

    mutating func check(_ event: Event, _ effects: [Effect], _ before: [String: ExtensionRecord]) {
        func fail(_ what: String) { violations.append("at \(now) after \(event): \(what)") }

        // A confirmed suspension costs no wakeup: no stop check stays armed.
        for (id, entry) in worlds where entry.world.checkAt != nil {
            switch entry.world.control.stop {
            case .stopped, .frozen: fail("\(id) is held (\(entry.world.control.stop)) with a stop check still armed")
            default: break
            }
        }

        // Events for a generation that is not the live process change nothing.
        if let (id, g) = event.generationTarget, let r = before[id], !(r.generation == g && r.isRunning) {
            if !effects.isEmpty { fail("stale event produced \(effects)") }
            if sup.records[id] != r { fail("stale event changed the record") }
        }

        for effect in effects {
            switch effect {
            case let .send(id, _, .granted(_, aid)):
                grants += 1
                guard let phase = before[id]?.phase else { fail("grant for unknown \(id)"); continue }
                switch phase {
                case .launching, .active, .background: break
                default: fail("granted \(aid) in phase \(phase)")
                }
                if held[id]?[aid] != nil { fail("assertion id \(aid) granted twice") }
                held[id, default: [:]][aid] = Held()
                everGranted[id, default: []].append(aid)
            case let .send(id, _, .expire(aid)):
                expires += 1
                guard held[id]?[aid] != nil else { fail("expire for an assertion not held: \(aid)"); continue }
                if held[id]![aid]!.expireSentAt != nil { fail("second expire for \(aid)") }
                held[id]![aid]!.expireSentAt = now
            case let .record(e):
                switch e.kind {
                case .release:
                    if let aid = e.assertionID, held[e.extensionID]?.removeValue(forKey: aid) == nil {
                        fail("release of an assertion not held: \(aid)")
                    }
                case .overrun:
                    if let aid = e.assertionID { held[e.extensionID]?[aid]?.revoked = true }
                case .exit, .crash, .reclaim:
                    held[e.extensionID] = [:]
                    if e.kind == .crash { crashes += 1 }
                    if e.kind == .reclaim { reclaims += 1 }
                default: break
                }
            case let .stop(id, g):
                stops += 1
                // THE invariant: no stop while an assertion is held whose expire went out less
                // than expiryGraceSeconds ago (or never).
                let live = held[id] ?? [:]
                if !live.isEmpty { stopsWithHeldAssertions += 1 }
                for (aid, a) in live.sorted(by: { $0.key < $1.key }) {
                    guard let sent = a.expireSentAt else {
                        fail("stop of \(id) while assertion \(aid) was never expired")
                        continue
                    }
                    if now.seconds(since: sent) < grace(id) - 1e-9 {
                        fail("stop of \(id) only \(now.seconds(since: sent))s after expire of \(aid) (grace \(grace(id)))")
                    }
                }
                held[id] = [:]  // revoked at the stop
                if worlds[id]?.generation == g { perform(worlds[id]!.world.control.suspend(at: now), id, g) }
            case let .signal(id, g, signal, thenContinue):
                if before[id]?.phase.mayBeStopped == true && !thenContinue {
                    fail("signal \(signal) to a possibly stopped \(id) without SIGCONT")
                }
                if worlds[id]?.generation == g {
                    perform(worlds[id]!.world.control.signal(signal, thenContinue: thenContinue), id, g)
                }
            case let .spawn(id, g, _): duties.append(.answerSpawn(id, g))
            case let .resume(id, g):
                guard worlds[id]?.generation == g else { break }
                perform(worlds[id]!.world.control.resume(), id, g)
                if let w = worlds[id]?.world, w.frozen || w.freezeRequested || w.members.values.contains(where: { $0 == .stopped || $0 == .stopPending }) {
                    fail("after the resume of \(id) a member is still held: \(w.members.sorted { $0.key < $1.key }), frozen \(w.frozen)")
                }
                queued.append(.continueConfirmed(extensionID: id, generation: g))
            case let .openRequest(id, _, rid, host, _, pid, _):
                if sup.records[id]?.pid != pid { fail("openRequest with a pid that is not the live one") }
                open.append((host, rid))
            case let .reply(_, .interrupted(rid, _)):
                open.removeAll { $0.requestID == rid }
            case .armTimer(let t):
                armed = t
            case .exit:
                exitCount += 1
                if !sup.shuttingDown { fail(".exit without shutdown") }
                if sup.records.values.contains(where: \.isRunning) { fail(".exit while a process runs") }
            default: break
            }
        }
        for id in held.keys {
            for (aid, a) in held[id]! where a.revoked { held[id]![aid] = nil }
        }
        if case .end(_, _, let rid) = event, effects.oks.count == 1 { open.removeAll { $0.requestID == rid } }

        // The indexes (deadline heap, request owners, hosts, state counts) agree with the records.
        for d in sup.indexDiscrepancies() { fail("index: \(d)") }
        // The armed timer is always the supervisor's next deadline.
        if armed != sup.nextDeadline() { fail("armed \(String(describing: armed)) but next deadline is \(String(describing: sup.nextDeadline()))") }
        // Held assertions agree with the supervisor's ledgers.
        for (id, r) in sup.records {
            let mine = Set((held[id] ?? [:]).keys)
            let theirs = Set(r.assertions.assertions.map(\.id))
            if mine != theirs { fail("\(id): tracked assertions \(mine.sorted()) but ledger has \(theirs.sorted())") }
            switch r.phase {
            case .stopping, .suspended, .resuming, .notRunning:
                if !r.assertions.isEmpty { fail("\(id) holds assertions while \(r.phase)") }
            default: break
            }
            if r.phase == .notRunning && (r.pid != nil || !r.requests.isEmpty) { fail("\(id) not running but has a pid or requests") }
            if !r.requests.isEmpty {
                switch r.phase {
                case .active, .terminating: break
                default: fail("\(id) has open requests while \(r.phase)")
                }
            }
        }
    }
}

extension Event {
    /// The (extension, generation) an event from a process is addressed to.
    var generationTarget: (String, UInt64)? {
        switch self {
        case let .spawned(id, g, _), let .spawnFailed(id, g, _), let .ready(id, g), let .stopConfirmed(id, g, _),
             let .continueConfirmed(id, g), let .exited(id, g, _, _, _), let .acquire(id, g, _, _), let .release(id, g, _),
             let .expireReceived(id, g, _), let .channelClosed(id, g, _), let .deliveryFailed(id, g, _, _):
            (id, g)
        default: nil
        }
    }
}
