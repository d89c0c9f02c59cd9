import ExtensionProtocol
import ExtensionTransport
import Logging
import SupervisorCore

@testable import SupervisorShell

/// A randomized, deterministic driver for the supervisor and the shell's process handling:
/// it runs the core (`Supervisor`) and the shell's real `ProcessControl`, with a real
/// `SupervisedProcess` per process generation, over a simulated kernel (`SimulatedKernel`, one
/// `GroupWorld` per generation), and plays the rest of the daemon: it answers spawn effects
/// (sometimes late), dispatches what the kernel reports (SIGCHLD, a leader's pidfd becoming
/// readable, `cgroup.events` notifications, due timers) as the event loop does, and plays
/// the hosts (begin, end, disconnect, prewarm, admin kill) and the extension runtimes
/// (acquire, release, acknowledge expiry, crash, close the channel), with simulated time.
/// It is `ProcessControl`'s delegate, as the daemon is.
///
/// While it runs it tracks, from the effects alone, which assertions each extension holds
/// and when their *expire* went out, and checks the supervisor's guarantees after every event,
/// and the stop model's (no stop confirmed while a member runs user code, nor with other
/// members than the group's, none running while a stop holds, every member running after a
/// resume, an exit reported only for an empty group with its leader reaped, no stop check
/// armed once held or for no process, no warning or error logged by `ProcessControl` but
/// slow stops, no kernel call outside what process handling makes) after every event and
/// every kernel step.
final class Simulation: ProcessControlDelegate {
    struct Held {
        var expireSentAt: Instant?
        /// Revoked by the core in the current batch (leak guard); forgotten after the batch.
        var revoked = false
    }

    /// A shell duty created by an effect and not answered yet.
    enum Duty: Equatable {
        case answerSpawn(String, UInt64)
        case announceReady(String, UInt64)
        /// A step of the simulated kernel for this generation's processes, and the dispatch
        /// of what it reports.
        case kernel(String, UInt64)

        var target: (String, UInt64) {
            switch self {
            case let .answerSpawn(id, g), let .announceReady(id, g), let .kernel(id, g): (id, g)
            }
        }
    }

    static let ids = ["sim.a", "sim.b", "sim.never", "sim.frozen"]
    static let manifests: [Manifest] = [
        manifest(
            "sim.a",
            policy: Policy(
                backgroundSeconds: 10, expiryGraceSeconds: 3, assertionMaxSeconds: 20,
                launchTimeoutSeconds: 5, suspendedLifetimeSeconds: 40)),
        // Grace equal to the whole background time: expire goes out at the dismissal.
        manifest(
            "sim.b",
            policy: Policy(
                backgroundSeconds: 4, expiryGraceSeconds: 4, assertionMaxSeconds: 8,
                launchTimeoutSeconds: 3, suspendedLifetimeSeconds: 15)),
        manifest(
            "sim.never",
            policy: Policy(
                backgroundSeconds: 6, expiryGraceSeconds: 2, assertionMaxSeconds: 12,
                launchTimeoutSeconds: 4, suspendedLifetimeSeconds: 30, suspend: .never)),
        manifest(
            "sim.frozen",
            policy: Policy(
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
    /// The kernel, which also holds the random generator every step draws from.
    let kernel: SimulatedKernel
    /// The shell's process handling under test, and what it logs.
    let control: ProcessControl
    let logged: CapturedLog
    /// The most a timer tick may be late (0: the timer fires exactly at the armed instant).
    let timerLateness: Double
    /// Whether spawn effects are answered (`spawned` or `spawnFailed`) right after the batch
    /// that asked for them, as the shell does (it spawns synchronously and queues the answer),
    /// or at a random later point like every other duty.
    let spawnAnswersImmediately: Bool
    var now: Instant {
        get { kernel.clock }
        set { kernel.clock = newValue }
    }
    var armed: Instant?
    var duties: [Duty] = []
    var open: [(host: HostID, requestID: UInt64)] = []
    var held: [String: [UInt64: Held]] = [:]
    /// Every assertion id ever granted per extension (releases pick from these, stale ones included).
    var everGranted: [String: [UInt64]] = [:]
    /// Per extension (runtime readiness), the requests that closed and whose `ended` the
    /// extension has not been sent yet.
    var owedEnded: [String: Set<UInt64>] = [:]
    var nextTag: UInt32 = 1
    /// The containment every generation gets (cgroup, or the process-group fallback).
    let containment: SupervisorCore.Containment
    /// The shell's handle on each extension's live generation, as the daemon keeps them.
    var processes: [String: SupervisedProcess] = [:]
    /// Events the simulated shell queued while effects were carried out (delivered after them,
    /// as the daemon's re-entrancy queue does).
    var queued: [Event] = []
    var draining = false
    var exitCount = 0
    /// When set, every event and its effects (lifecycle records left out) are logged, for debugging a seed.
    var trace = false
    var log: [String] = []

    /// Guarantee violations, described for people. Empty when all is well.
    var violations: [String] = []
    // Coverage counters, so a test can show the interesting paths were taken.
    var grants = 0, expires = 0, stops = 0, stopsWithHeldAssertions = 0, reclaims = 0, crashes = 0
    var stopsConfirmed = 0, freezesConfirmed = 0, forksDuringStops = 0, outlivedLeaders = 0, blockedAtConfirm = 0
    /// Process-group leaders confirmed alone with no read; confirmations of a leader with no
    /// child whose group held orphans (which alone keep it from being alone).
    var confirmedAloneWithoutARead = 0, orphansOnlyAtConfirm = 0, stopsRefused = 0

    init(seed: UInt64, timerLateness: Double = 0, spawnAnswersImmediately: Bool = true, containment: SupervisorCore.Containment = .cgroup) {
        kernel = SimulatedKernel(seed: seed)
        self.containment = containment
        self.timerLateness = timerLateness
        self.spawnAnswersImmediately = spawnAnswersImmediately
        logged = CapturedLog()
        let logger = logged.logger(label: "simulation")
        var cgroups: CgroupTree?
        var problem: String?
        if containment == .cgroup {
            switch CgroupTree.setUp(kernel: kernel, underSystemd: false, socketPath: "/run/sim/control.sock", logger: logger) {
            case .success(let tree): cgroups = tree
            case .failure(let why): problem = "the simulated kernel has no cgroup tree: \(why)"
            }
        }
        control = ProcessControl(kernel: kernel, cgroups: cgroups, isSubreaper: true, logger: logger)
        control.attach(self)
        if let problem { violations.append(problem) }
    }

    func grace(_ id: String) -> Double { sup.records[id]?.manifest.policy.expiryGraceSeconds ?? 0 }

    func random(_ n: Int) -> Int { Int.random(in: 0..<n, using: &kernel.rng) }
    func chance(_ p: Double) -> Bool { kernel.chance(p) }
    func pick<T>(_ xs: [T]) -> T? { xs.isEmpty ? nil : xs[random(xs.count)] }

    /// The handle of `id`'s generation `g`, if it is the live one.
    func live(_ id: String, _ g: UInt64) -> SupervisedProcess? {
        guard let p = processes[id], p.generation == g else { return nil }
        return p
    }

    // MARK: Driving

    /// Hands the supervisor over between events (`extctl reexec`): with this probability per
    /// step, drawn from its own generator so the simulation's stream is the same as without.
    var handovers: (rng: SplitMix64, probability: Double)?
    var handoverCount = 0
    /// What the run produced, for comparing runs: every effect but timer arming, in order,
    /// and each distinct instant the timer was armed for.
    var outcome: [String] = []
    var armedInstants: [Instant?] = []

    /// Runs `steps` random events, then shuts down and drains every duty.
    func run(steps: Int) {
        for _ in 0..<steps {
            advance()
            randomEvent()
            handOverSometimes()
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
    func advance(by fixed: Double? = nil) {
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

    func randomEvent() {
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
            if record.isRunning && record.pid != nil, let p = live(id, gen) {
                let status: ExitStatus = pick([.exited(0), .exited(1), .signaled(11)])!
                kernel.world(p.pid)?.leaderExits(status)
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
    func answerSomeDuty() {
        guard !duties.isEmpty else { return }
        let live = duties.indices.filter { i in
            let (id, g) = duties[i].target
            return sup.records[id]?.generation == g
        }
        let i = !live.isEmpty && chance(0.8) ? live[random(live.count)] : random(duties.count)
        answer(duties.remove(at: i))
    }

    func takeTag() -> UInt32 {
        defer { nextTag += 1 }
        return nextTag
    }

    func answer(_ duty: Duty) {
        switch duty {
        case let .answerSpawn(id, g):
            if chance(0.05) {
                deliver(.spawnFailed(extensionID: id, generation: g, error: "ENOENT"))
            } else {
                let mechanism = sup.records[id]?.manifest.policy.suspend ?? .stop
                let extra = random(3)
                let ignoresTerm = chance(0.2)
                let orphans = chance(0.2) ? 1 : 0
                // The daemon spawns at the effect, for the generation it names: an answer for
                // a generation that is no longer the record's starts nothing.
                guard sup.records[id]?.generation == g else {
                    deliver(.spawned(extensionID: id, generation: g, pid: 0))  // stale: its pid is never used
                    break
                }
                let spawned = kernel.spawn(
                    containment: containment, cgroupBase: control.cgroups?.extensionsPath, name: "\(id).\(g)",
                    freezer: mechanism == .freeze, extraMembers: extra, orphans: orphans, ignoresTerm: ignoresTerm)
                if let old = processes[id] {
                    // As the daemon does when a generation replaces one whose exit it has not seen.
                    control.forget(old)
                    old.tearDown(kernel)
                    kernel.discard(old.pid)
                    duties.removeAll { $0 == .kernel(id, old.generation) }
                }
                processes[id] = SupervisedProcess(
                    extensionID: id, generation: g, pid: spawned.pid, pidfd: spawned.pidfd, cgroup: spawned.cgroup,
                    mechanism: mechanism, channel: nil, queueLimit: 16)
                deliver(.spawned(extensionID: id, generation: g, pid: spawned.pid))
                if !chance(0.05) { duties.append(.announceReady(id, g)) }  // sometimes it never gets ready
            }
        case let .announceReady(id, g): deliver(.ready(extensionID: id, generation: g))
        case let .kernel(id, g): kernelStep(id, g)
        }
    }

    // MARK: The kernel, and the daemon's loop around ProcessControl

    /// Whether the generation's kernel or its stop model still has work: a kernel step is due.
    func busy(_ p: SupervisedProcess) -> Bool {
        guard let w = kernel.world(p.pid) else { return false }
        if w.busy || p.check != nil { return true }
        switch p.group.stop {
        case .stopping, .freezing: return true
        default: return false
        }
    }

    /// Makes sure a kernel step is pending for the generation while it has work.
    func schedule(_ id: String, _ g: UInt64) {
        guard let p = live(id, g), busy(p), !duties.contains(.kernel(id, g)) else { return }
        duties.append(.kernel(id, g))
    }

    func scheduleAll() {
        for (id, p) in processes.sorted(by: { $0.key < $1.key }) { schedule(id, p.generation) }
    }

    /// One step of the generation's processes, then what the loop dispatches from it, in
    /// sd-event's order: descriptor events (the leader's pidfd, `cgroup.events`), then SIGCHLD
    /// (a later priority), then the stop check's timer (later still).
    func kernelStep(_ id: String, _ g: UInt64) {
        guard let p = live(id, g), let w = kernel.world(p.pid) else { return }
        var stoppingBefore = false
        if case .stopping = p.group.stop { stoppingBefore = true }
        let countBefore = w.members.count
        w.step { kernel.chance($0) }
        if stoppingBefore && w.members.count > countBefore { forksDuringStops += 1 }
        if w.exitNotification {
            w.exitNotification = false
            control.leaderMayHaveExited(p)
        }
        if live(id, g) != nil && w.eventsNotification { control.cgroupEventsChanged(p) }
        if kernel.takeChildSignal() { control.childrenChanged() }
        if live(id, g) != nil, let timer = p.check as? SimulatedKernel.Timer, timer.at <= now { timer.fire() }
        drain()
        checkShell { violations.append("at \(now) after a kernel step of \(id): \($0)") }
        scheduleAll()
    }

    // MARK: ProcessControlDelegate

    func stopConfirmed(_ p: SupervisedProcess, members: [Int32]) {
        let id = p.extensionID
        guard let w = kernel.world(p.pid) else {
            violations.append("at \(now): stop of \(id) confirmed for processes the kernel no longer has")
            return
        }
        if w.anyRunsUserCode {
            violations.append("at \(now): stop of \(id) confirmed while a member runs: \(w.members.sorted { $0.key < $1.key })")
        }
        if members.sorted() != w.members.keys.sorted() {
            violations.append("at \(now): stop of \(id) confirmed with the members \(members) but its processes are \(w.members.keys.sorted())")
        }
        if p.group.aloneAtLastStop && w.members.keys.sorted() != [p.pid] {
            violations.append("at \(now): stop of \(id) taken as the leader alone, but its processes are \(w.members.keys.sorted())")
        }
        if p.group.aloneAtLastStop && !w.inCgroup { confirmedAloneWithoutARead += 1 }
        if p.group.mechanism == .freeze && w.inCgroup { freezesConfirmed += 1 } else { stopsConfirmed += 1 }
        if w.members.values.contains(where: { $0.state == .blocked }) { blockedAtConfirm += 1 }
        if w.children(of: p.pid).isEmpty && w.members.contains(where: { $0.key != p.pid && $0.value.parent == kernel.daemon }) {
            orphansOnlyAtConfirm += 1
        }
        queued.append(.stopConfirmed(extensionID: id, generation: p.generation))
    }

    /// As the daemon does: the core is told, and ends the extension. Counted: the simulated
    /// processes never keep each other running, so a refusal is a stop that took too long.
    func stopRefused(_ p: SupervisedProcess, seconds: Double) {
        stopsRefused += 1
        queued.append(.stopRefused(extensionID: p.extensionID, generation: p.generation, seconds: seconds))
    }

    func exited(_ p: SupervisedProcess, status: ExitStatus, outlivedLeader: Bool, oomKills: Result<Int, SystemError>?) {
        let id = p.extensionID, g = p.generation
        if let w = kernel.world(p.pid) {
            if w.leaderExit == nil { violations.append("at \(now): exit of \(id) reported while its leader lives") }
            if !w.leaderReaped { violations.append("at \(now): exit of \(id) reported before its leader was reaped") }
            if w.inCgroup && !w.isEmpty { violations.append("at \(now): exit of \(id) reported while its cgroup holds \(w.members.keys.sorted())") }
            if !w.inCgroup && !w.members.keys.allSatisfy({ w.dying.contains($0) }) {
                violations.append("at \(now): exit of \(id) reported while group members live unkilled")
            }
        } else {
            violations.append("at \(now): exit of \(id) reported for processes the kernel no longer has")
        }
        if outlivedLeader { outlivedLeaders += 1 }
        // As the daemon does: the handle is torn down and the core told.
        guard processes[id] === p else { return }
        p.tearDown(kernel)
        processes[id] = nil
        kernel.discard(p.pid)
        duties.removeAll { $0 == .kernel(id, g) }
        queued.append(.exited(extensionID: id, generation: g, status: status, outlivedLeader: outlivedLeader))
    }

    func isLeader(_ pid: Int32) -> Bool { processes.values.contains { $0.pid == pid } }

    /// Delivers the events the simulated shell queued, in order.
    func drain() {
        guard !draining else { return }
        draining = true
        while !queued.isEmpty { deliver(queued.removeFirst()) }
        draining = false
    }

    /// Replaces the supervisor by the one restored from its snapshot, through the bytes the
    /// daemon writes, when the hand-over generator says so and the core allows it now.
    func handOverSometimes() {
        guard var h = handovers else { return }
        defer { handovers = h }
        guard Double.random(in: 0..<1, using: &h.rng) < h.probability, case .success(let snapshot) = sup.snapshot() else { return }
        do {
            let decoded = try Supervisor.Snapshot.decode(try snapshot.encode())
            sup = try Supervisor(restoring: decoded, limits: Simulation.limits, now: now)
            handoverCount += 1
        } catch {
            violations.append("at \(now): the hand-over failed: \(error)")
        }
    }

    // MARK: Checking

    func deliver(_ event: Event, at instant: Instant? = nil) {
        if let instant { now = instant }
        let before = sup.records
        let effects = sup.handle(event, at: now)
        for effect in effects {
            if case .armTimer(let at) = effect {
                if armedInstants.last != .some(at) { armedInstants.append(at) }
            } else {
                outcome.append("\(now) \(effect)")
            }
        }
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

    /// The stop model's state checks, after every event and every kernel step: a held group
    /// runs no user code and has no stop check armed, every armed timer is a live process's
    /// stop check, `ProcessControl` logged nothing worse than a slow stop, and the kernel saw
    /// no call outside process handling.
    func checkShell(_ fail: (String) -> Void) {
        for (id, p) in processes.sorted(by: { $0.key < $1.key }) {
            switch p.group.stop {
            case .stopped, .frozen:
                // A confirmed suspension costs no wakeup.
                if p.check != nil { fail("\(id) is held (\(p.group.stop)) with a stop check still armed") }
                if let w = kernel.world(p.pid), w.anyRunsUserCode {
                    fail("\(id) is held (\(p.group.stop)) while a member runs: \(w.members.sorted { $0.key < $1.key })")
                }
            default: break
            }
        }
        for timer in kernel.armed where !processes.values.contains(where: { $0.check === timer }) {
            fail("a timer at \(timer.at) is armed for no live process's stop check")
        }
        for entry in logged.take() where entry.level >= .warning && !entry.message.contains("has not stopped after") {
            fail("ProcessControl logged \(entry)")
        }
        for call in kernel.unexpected.dropFirst(reportedUnexpected) { fail("unexpected kernel call \(call)") }
        reportedUnexpected = kernel.unexpected.count
    }

    private var reportedUnexpected = 0

    func check(_ event: Event, _ effects: [Effect], _ before: [String: ExtensionRecord]) {
        func fail(_ what: String) { violations.append("at \(now) after \(event): \(what)") }

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
            case let .send(id, _, .ended(rid)):
                if owedEnded[id]?.remove(rid) == nil { fail("ended(\(rid)) sent to \(id) for no request of it that closed") }
                if case .stopping = sup.records[id]?.phase { fail("ended(\(rid)) sent to \(id) while its stop is in flight") }
            case let .send(id, _, .expire(aid)):
                expires += 1
                guard held[id]?[aid] != nil else { fail("expire for an assertion not held: \(aid)"); continue }
                if held[id]![aid]!.expireSentAt != nil { fail("second expire for \(aid)") }
                held[id]![aid]!.expireSentAt = now
            case let .record(e):
                switch e.kind {
                case .end:
                    if let rid = e.requestID, sup.records[e.extensionID]?.manifest.readiness == .runtime {
                        owedEnded[e.extensionID, default: []].insert(rid)
                    }
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
                let holding = held[id] ?? [:]
                if !holding.isEmpty { stopsWithHeldAssertions += 1 }
                for (aid, a) in holding.sorted(by: { $0.key < $1.key }) {
                    guard let sent = a.expireSentAt else {
                        fail("stop of \(id) while assertion \(aid) was never expired")
                        continue
                    }
                    if now.seconds(since: sent) < grace(id) - 1e-9 {
                        fail("stop of \(id) only \(now.seconds(since: sent))s after expire of \(aid) (grace \(grace(id)))")
                    }
                }
                held[id] = [:]  // revoked at the stop
                if let p = live(id, g) {
                    control.suspend(p)
                    schedule(id, g)
                }
            case let .signal(id, g, signal, thenContinue):
                if before[id]?.phase.mayBeStopped == true && !thenContinue {
                    fail("signal \(signal) to a possibly stopped \(id) without SIGCONT")
                }
                if let p = live(id, g) {
                    control.signal(p, signal, thenContinue: thenContinue)
                    schedule(id, g)
                }
            case let .spawn(id, g, _): duties.append(.answerSpawn(id, g))
            case let .resume(id, g):
                guard let p = live(id, g) else { break }
                control.resume(p)
                if let w = kernel.world(p.pid), w.anyHeld {
                    fail(
                        "after the resume of \(id) a member is still held: \(w.members.sorted { $0.key < $1.key }), stop asked of \(w.stopAsked.sorted()), frozen \(w.frozen) (asked: \(w.freezeRequested))"
                    )
                }
                queued.append(.continueConfirmed(extensionID: id, generation: g))
                schedule(id, g)
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

        checkShell(fail)

        // Every request that closed is told to its extension (`ended`) in the same event, or,
        // when its dismissal stopped the extension, as it leaves `stopping`; nothing is owed
        // to a process that is gone.
        for (id, owed) in owedEnded.sorted(by: { $0.key < $1.key }) where !owed.isEmpty {
            guard let r = sup.records[id], r.phase != .notRunning else {
                owedEnded[id] = nil
                continue
            }
            if case .stopping = r.phase { continue }
            fail("\(id) is \(r.phase) and was not sent ended for the requests \(owed.sorted()) that closed")
        }

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
        case let .spawned(id, g, _), let .spawnFailed(id, g, _, _), let .ready(id, g), let .stopConfirmed(id, g, _),
            let .continueConfirmed(id, g), let .exited(id, g, _, _, _), let .acquire(id, g, _, _), let .release(id, g, _),
            let .expireReceived(id, g, _), let .channelClosed(id, g, _), let .deliveryFailed(id, g, _, _):
            (id, g)
        default: nil
        }
    }
}
