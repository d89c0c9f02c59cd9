/// A request a host holds open on an extension.
public struct OpenRequest: Equatable, Sendable, Codable {
    /// The request's id, unique for the daemon's lifetime.
    public var id: UInt64
    /// The host connection that opened it.
    public var host: HostID
    /// The tag of the host's `begin`, answered by the shell once the channel is handed over.
    public var tag: UInt32
    /// Who opened it.
    public var peer: PeerIdentity
    /// When it was opened.
    public var begunAt: Instant
}

/// A begin waiting for the extension to launch or resume.
public struct PendingBegin: Equatable, Sendable, Codable {
    /// The host connection waiting for the request to open.
    public var host: HostID
    /// Who asked.
    public var peer: PeerIdentity
    /// The tag of the host's `begin`, answered when the request opens or fails.
    public var tag: UInt32
    /// The id the request has once it opens.
    public var requestID: UInt64
}

/// Everything the supervisor knows about one extension. Owned by `Supervisor`.
public struct ExtensionRecord: Equatable, Sendable, Codable {
    /// The extension's current definition.
    public var manifest: Manifest
    /// Where the extension is in its lifecycle, with the deadlines the supervisor waits for.
    public internal(set) var phase: Phase = .notRunning
    /// When the public state last changed.
    public internal(set) var since: Instant
    /// Incremented at every launch; events for older generations are ignored.
    public internal(set) var generation: UInt64 = 0
    /// The process group leader's pid: nil until the spawn is answered, and after the process
    /// exits.
    public internal(set) var pid: Int32?
    /// When the current process was spawned; nil whenever `pid` is.
    public internal(set) var startedAt: Instant?
    /// The requests open on the extension, oldest first.
    public internal(set) var requests: [OpenRequest] = []
    /// Begins waiting for the process to launch or resume, in arrival order.
    public internal(set) var pending: [PendingBegin] = []
    /// The live assertions of the current process; emptied at each launch and exit.
    public internal(set) var assertions = AssertionLedger()
    /// How the most recent process ended; nil until one has.
    public internal(set) var lastExit: ExitRecord?
    /// Crashes since the last stable run; drives the launch backoff.
    public internal(set) var consecutiveCrashes = 0
    /// No launch before this instant (crash-loop backoff).
    public internal(set) var throttledUntil: Instant?
    /// The most recent lifecycle events, oldest first.
    public internal(set) var recentEvents: [LifecycleEvent] = []
    /// The manifest was removed by a reload; the record goes once the process is gone.
    public internal(set) var retired = false
    /// An administrator signalled the process; its exit counts as `killed-by-admin`.
    public internal(set) var adminSignaled = false
    /// The `reset` requests waiting for the process to end (host, tag), answered once its
    /// container is emptied.
    public internal(set) var resetWaiters: [ResetWaiter] = []
    /// Assertions held past their hard deadline, over the daemon's lifetime.
    public internal(set) var overruns = 0
    /// Stops made while an *expire* had not been read, over the daemon's lifetime.
    public internal(set) var unacknowledgedExpiries = 0
    /// Launched by a prewarm hint rather than a request.
    public internal(set) var prewarmed = false
    /// Resumed to release a contended lock: it may run in the background until this instant
    /// even without assertions.
    public internal(set) var reprieveUntil: Instant?
    /// Stops at which a process held a lock that blocks others, over the daemon's lifetime.
    public internal(set) var locksHeldAtSuspend = 0
    /// Where it is on the `lockedWhileSuspended: "resume"` path.
    public internal(set) var lockGrace = LockGrace.none

    /// The notification hints the current process observes, and those held while it is stopped.
    public internal(set) var hints = NotificationHints()

    /// How many recent events are kept per extension.
    public static let historyLimit = 20

    /// The background-refresh schedule, when the manifest (or its point) turns refresh on.
    public internal(set) var refresh: RefreshState?

    /// A record of an extension with no process, `not-running` since `since`. Its refresh
    /// schedule, when the policy turns refresh on, starts at `since`.
    public init(manifest: Manifest, since: Instant) {
        self.manifest = manifest
        self.since = since
        self.refresh = manifest.policy.refresh.map { RefreshState(schedule: $0, now: since) }
    }

    /// The public lifecycle state its phase shows as.
    public var state: LifecycleState { phase.state }

    var policy: Policy { manifest.policy }

    /// Whether a live process exists for this record.
    public var isRunning: Bool { phase != .notRunning }

    /// The earliest instant at which this record needs a `tick`.
    func nextDeadline() -> Instant? {
        var next: Instant?
        func consider(_ t: Instant?) {
            guard let t else { return }
            if next == nil || t < next! { next = t }
        }
        if let refresh, !refresh.wanted, refresh.inFlight == nil { consider(refresh.nextAt) }
        switch phase {
        case .launching(let deadline): consider(deadline)
        case .background(let expireAt, _): consider(expireAt)
        case .expiring(let stopAt): consider(stopAt)
        case .suspended(let reclaimAt): consider(reclaimAt)
        case .terminating(_, let killAt): consider(killAt)
        case .notRunning, .active, .stopping, .resuming: break
        }
        switch phase {
        case .launching, .active, .background, .expiring:
            consider(assertions.nextDeadline(grace: policy.expiryGraceSeconds))
        default: break
        }
        return next
    }
}

/// A host waiting for an extension's container to be emptied (`extctl reset`).
public struct ResetWaiter: Equatable, Sendable, Codable {
    /// The host connection waiting.
    public var host: HostID
    /// The tag of its `reset`, answered once the container is emptied.
    public var tag: UInt32
}
