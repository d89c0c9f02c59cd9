import ExtensionProtocol
import SupervisorCore

// A small harness around the pure `Supervisor`: one (or more) manifests, simulated time in
// seconds, and helpers to pick effects out of what `handle(_:at:)` returns.

/// The policy most tests use (the built-in `default` point, spelled out so tests read on their own).
let testPolicy = Policy(
    backgroundSeconds: 10, expiryGraceSeconds: 3, assertionMaxSeconds: 60,
    launchTimeoutSeconds: 10, suspendedLifetimeSeconds: 600)

let extID = "com.example.test"
/// The daemon's uid in tests; hosts with this uid may open every extension.
let daemonUID: UInt32 = 1000
let ownPeer = PeerIdentity(pid: 4242, uid: daemonUID, gid: 1000)

func manifest(
    _ id: String = extID, policy: Policy = testPolicy, readiness: Readiness = .runtime,
    hosts: HostRestriction = HostRestriction()
) -> Manifest {
    Manifest(id: id, executable: "/usr/libexec/\(id)", readiness: readiness, policy: policy, hosts: hosts)
}

func testLimits(_ change: (inout SupervisorLimits) -> Void = { _ in }) -> SupervisorLimits {
    var l = SupervisorLimits()
    l.daemonUID = daemonUID
    change(&l)
    return l
}

struct Harness {
    var sup: Supervisor
    /// The extension most helpers act on.
    var id: String
    /// Every effect returned so far, with the instant of the event that produced it.
    private(set) var log: [(at: Instant, effect: Effect)] = []
    private(set) var now: Instant = .seconds(0)
    /// The pid handed out by the next `spawned` the harness sends.
    var nextPid: Int32 = 100

    init(_ manifests: [Manifest] = [manifest()], limits: SupervisorLimits = testLimits(), focus: String? = nil) {
        sup = Supervisor(manifests: manifests, limits: limits, now: .seconds(0))
        id = focus ?? manifests.first?.id ?? extID
    }

    init(policy: Policy, readiness: Readiness = .runtime, limits: SupervisorLimits = testLimits()) {
        self.init([manifest(policy: policy, readiness: readiness)], limits: limits)
    }

    /// Handles `event` at `t` seconds of simulated time and returns its effects.
    @discardableResult
    mutating func step(_ event: Event, at t: Double) -> [Effect] {
        now = .seconds(t)
        let effects = sup.handle(event, at: now)
        for e in effects { log.append((now, e)) }
        return effects
    }

    // MARK: State

    var record: ExtensionRecord { sup.records[id]! }
    func record(_ id: String) -> ExtensionRecord? { sup.records[id] }
    var state: LifecycleState { record.state }
    var phase: Phase { record.phase }
    var gen: UInt64 { record.generation }
    var pid: Int32? { record.pid }

    // MARK: Events for the focused extension

    @discardableResult
    mutating func begin(host: HostID = 1, tag: UInt32 = 1, peer: PeerIdentity = ownPeer, id other: String? = nil, at t: Double) -> [Effect] {
        step(.begin(host: host, peer: peer, tag: tag, extensionID: other ?? id), at: t)
    }

    @discardableResult
    mutating func end(host: HostID = 1, tag: UInt32 = 2, request: UInt64, at t: Double) -> [Effect] {
        step(.end(host: host, tag: tag, requestID: request), at: t)
    }

    @discardableResult
    mutating func spawned(at t: Double) -> [Effect] {
        let pid = nextPid
        nextPid += 1
        return step(.spawned(extensionID: id, generation: gen, pid: pid), at: t)
    }

    @discardableResult
    mutating func ready(at t: Double) -> [Effect] { step(.ready(extensionID: id, generation: gen), at: t) }

    @discardableResult
    mutating func stopConfirmed(at t: Double, locks: [HeldLock] = []) -> [Effect] {
        step(.stopConfirmed(extensionID: id, generation: gen, locks: locks), at: t)
    }

    @discardableResult
    mutating func continueConfirmed(at t: Double) -> [Effect] { step(.continueConfirmed(extensionID: id, generation: gen), at: t) }

    @discardableResult
    mutating func exited(_ status: ExitStatus, at t: Double) -> [Effect] {
        step(.exited(extensionID: id, generation: gen, status: status), at: t)
    }

    @discardableResult
    mutating func acquire(tag: UInt32 = 7, reason: String = "upload", at t: Double) -> [Effect] {
        step(.acquire(extensionID: id, generation: gen, tag: tag, reason: reason), at: t)
    }

    @discardableResult
    mutating func release(_ assertion: UInt64, at t: Double) -> [Effect] {
        step(.release(extensionID: id, generation: gen, assertionID: assertion), at: t)
    }

    @discardableResult
    mutating func expireReceived(_ assertion: UInt64, at t: Double) -> [Effect] {
        step(.expireReceived(extensionID: id, generation: gen, assertionID: assertion), at: t)
    }

    @discardableResult
    mutating func tick(at t: Double) -> [Effect] { step(.tick, at: t) }

    // MARK: Scenarios

    /// begin → spawn → spawned → ready: the extension is active with one request from `host`.
    /// Returns the request id.
    @discardableResult
    mutating func activate(host: HostID = 1, tag: UInt32 = 1, at t: Double = 0) -> UInt64 {
        let b = begin(host: host, tag: tag, at: t)
        precondition(b.spawns.count == 1, "activate: expected a spawn, got \(b)")
        spawned(at: t)
        let r = ready(at: t)
        precondition(r.openRequests.count == 1, "activate: expected an openRequest, got \(r)")
        return r.openRequests[0].requestID
    }

    /// From active with one request: end it, confirm the stop. Returns the stop instant.
    mutating func suspendIdle(host: HostID = 1, request: UInt64, at t: Double) {
        let e = end(host: host, request: request, at: t)
        precondition(e.stops.count == 1, "suspendIdle: expected a stop, got \(e)")
        stopConfirmed(at: t)
    }

    /// Acquires an assertion and returns its id (precondition: it is granted).
    mutating func grant(tag: UInt32 = 7, reason: String = "upload", at t: Double) -> UInt64 {
        let e = acquire(tag: tag, reason: reason, at: t)
        guard let id = e.granted.first?.assertionID else { preconditionFailure("grant: not granted: \(e)") }
        return id
    }

    /// The last `armTimer` effect emitted so far (nil inside: the timer was disarmed).
    var armedTimer: Instant?? {
        for (_, e) in log.reversed() { if case .armTimer(let t) = e { return .some(t) } }
        return nil
    }
}

// MARK: - Picking effects apart

struct OpenedRequest: Equatable {
    var extensionID: String, generation: UInt64, requestID: UInt64, host: HostID, tag: UInt32, pid: Int32, channel: Bool
}

struct SignalSent: Equatable {
    var extensionID: String, generation: UInt64, signal: Int32, thenContinue: Bool
}

extension Array where Element == Effect {
    var spawns: [(id: String, generation: UInt64, manifest: Manifest)] {
        compactMap { if case let .spawn(id, g, m) = $0 { (id, g, m) } else { nil } }
    }
    var stops: [String] { compactMap { if case let .stop(id, _) = $0 { id } else { nil } } }
    var resumes: [String] { compactMap { if case let .resume(id, _) = $0 { id } else { nil } } }
    var signals: [SignalSent] {
        compactMap { if case let .signal(id, g, s, c) = $0 { SignalSent(extensionID: id, generation: g, signal: s, thenContinue: c) } else { nil } }
    }
    var openRequests: [OpenedRequest] {
        compactMap {
            if case let .openRequest(id, g, r, h, t, p, c) = $0 {
                OpenedRequest(extensionID: id, generation: g, requestID: r, host: h, tag: t, pid: p, channel: c)
            } else {
                nil
            }
        }
    }
    var replies: [(host: HostID, message: Message)] {
        compactMap { if case let .reply(h, m) = $0 { (h, m) } else { nil } }
    }
    /// Failure replies as (host, tag, code).
    var failures: [(host: HostID, tag: UInt32, code: FailureCode)] {
        replies.compactMap { if case let .failure(tag, code, _) = $0.message { ($0.host, tag, code) } else { nil } }
    }
    var oks: [(host: HostID, tag: UInt32)] {
        replies.compactMap { if case let .ok(tag) = $0.message { ($0.host, tag) } else { nil } }
    }
    var interruptions: [(host: HostID, requestID: UInt64)] {
        replies.compactMap { if case let .interrupted(r, _) = $0.message { ($0.host, r) } else { nil } }
    }
    var sent: [Message] { compactMap { if case let .send(_, _, m) = $0 { m } else { nil } } }
    var granted: [(tag: UInt32, assertionID: UInt64)] {
        sent.compactMap { if case let .granted(t, a) = $0 { (t, a) } else { nil } }
    }
    var deniedTags: [UInt32] { sent.compactMap { if case let .denied(t, _) = $0 { t } else { nil } } }
    var expires: [UInt64] { sent.compactMap { if case let .expire(a) = $0 { a } else { nil } } }
    var endedRequests: [UInt64] { sent.compactMap { if case let .ended(r) = $0 { r } else { nil } } }
    var events: [LifecycleEvent] { compactMap { if case let .record(e) = $0 { e } else { nil } } }
    func events(_ kind: LifecycleEvent.Kind) -> [LifecycleEvent] { events.filter { $0.kind == kind } }
    var timers: [Instant?] { compactMap { if case let .armTimer(t) = $0 { t } else { nil } } }
    var exits: Int { filter { $0 == .exit }.count }
}

extension Message {
    var failureCode: FailureCode? { if case let .failure(_, code, _) = self { code } else { nil } }
}

// MARK: - Deterministic PRNG

/// SplitMix64: tiny, fast and fully deterministic, so every randomized test is reproducible.
struct SplitMix64: RandomNumberGenerator {
    private var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
