/// One recorded lifecycle event: logged to the journal, kept in the extension's recent
/// history, and streamed to `extctl monitor`.
public struct LifecycleEvent: Equatable, Sendable {
    /// What happened. The raw values are stable (they appear in JSON and the journal).
    public enum Kind: String, Sendable, Equatable, CaseIterable {
        case launch, ready, launchFailed = "launch-failed", launchTimeout = "launch-timeout"
        case begin, end, refuse
        case suspend, resume, stopSent = "stop-sent"
        case acquire, release, expire, deny, overrun = "assertion-overrun"
        case expiryUnacknowledged = "expiry-unacknowledged"
        case exit, crash, reclaim, kill, throttle
        case reload, manifestError = "manifest-error", prewarm
        case lockHeldWhileSuspended = "lock-held-while-suspended"
        case lockHeldAtSuspend = "lock-held-at-suspend"
        case refresh, refreshed
    }

    public var at: Instant
    public var kind: Kind
    public var extensionID: String
    public var pid: Int32?
    /// The extension's public state after the event.
    public var state: LifecycleState
    public var assertionID: UInt64?
    public var requestID: UInt64?
    /// Assertion reason, exit reason, or a human-readable detail.
    public var detail: String?
    /// The lock a `lock-held-at-suspend` event is about.
    public var lock: LockReport?

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
