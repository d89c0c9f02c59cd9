/// One recorded lifecycle event: logged to the journal, kept in the extension's recent
/// history, and streamed to `extctl monitor`.
public struct LifecycleEvent: Equatable, Sendable, Codable {
    /// What happened. The raw values are stable (they appear in JSON and the journal).
    public enum Kind: String, Sendable, Equatable, CaseIterable, Codable {
        /// A process was spawned (`launch`), became ready (`ready`), could not be executed
        /// (`launch-failed`), or did not become ready in time (`launch-timeout`).
        case launch, ready, launchFailed = "launch-failed", launchTimeout = "launch-timeout"
        /// A request was opened (`begin`) or closed (`end`), or a `begin` was refused because the
        /// host may not open the extension (`refuse`).
        case begin, end, refuse
        /// The kernel confirmed the stop (`suspend`) or the resume (`resume`) of every process of
        /// the extension, or a stop was asked for (`stop-sent`).
        case suspend, resume, stopSent = "stop-sent"
        /// An assertion was granted (`acquire`), released by the extension (`release`), sent
        /// its *expire* (`expire`), refused (`deny`), or dropped for outliving
        /// `assertionMaxSeconds` or the hard stop (`assertion-overrun`).
        case acquire, release, expire, deny, overrun = "assertion-overrun"
        /// An assertion revoked at the stop had not acknowledged its *expire*.
        case expiryUnacknowledged = "expiry-unacknowledged"
        /// The process ended: with reason `crashed` or `memory-limit` (`crash`), `reclaimed`
        /// (`reclaim`), or any other (`exit`). An administrator signalled or reset the
        /// extension, or its runtime channel closed (`kill`). A crash-loop backoff began, or
        /// refused a `begin` (`throttle`).
        case exit, crash, reclaim, kill, throttle
        /// Reserved and never recorded (`reload`, `manifest-error`); the extension was launched
        /// by a prewarm hint (`prewarm`).
        case reload, manifestError = "manifest-error", prewarm
        /// A suspended extension held a file lock that another process waits for.
        case lockHeldWhileSuspended = "lock-held-while-suspended"
        /// When the stop was confirmed, a process held a lock that blocks others; one event per
        /// such lock, carrying `lock`.
        case lockHeldAtSuspend = "lock-held-at-suspend"
        /// A background refresh was sent (`refresh`) or ended (`refreshed`).
        case refresh, refreshed
    }

    /// When it happened.
    public var at: Instant
    /// What happened.
    public var kind: Kind
    /// The extension it concerns.
    public var extensionID: String
    /// The extension's process when it was recorded (for `exit`, `crash` and `reclaim`, the one
    /// that ended); nil when there is none.
    public var pid: Int32?
    /// The extension's public state after the event.
    public var state: LifecycleState
    /// The assertion concerned, for assertion events and `refresh`; nil otherwise.
    public var assertionID: UInt64?
    /// The request concerned, for `begin` and `end`; nil otherwise.
    public var requestID: UInt64?
    /// Assertion reason, exit reason, or a human-readable detail.
    public var detail: String?
    /// The lock a `lock-held-at-suspend` event is about.
    public var lock: LockReport?

    /// An event with these fields; the optional ones default to absent.
    public init(
        at: Instant, kind: Kind, extensionID: String, pid: Int32?, state: LifecycleState,
        assertionID: UInt64? = nil, requestID: UInt64? = nil, detail: String? = nil, lock: LockReport? = nil
    ) {
        self.at = at
        self.kind = kind
        self.extensionID = extensionID
        self.pid = pid
        self.state = state
        self.assertionID = assertionID
        self.requestID = requestID
        self.detail = detail
        self.lock = lock
    }
}
