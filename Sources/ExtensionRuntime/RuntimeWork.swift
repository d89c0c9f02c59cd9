/// Work that a runtime thread does after it read a message and handed the read role on
/// (see `Followers`): user code, which may run for long or block.
enum RuntimeWork: Sendable {
    /// An activity was granted: its block with `false`.
    case granted(ExpiringActivity)
    /// An activity's assertion is about to expire: its block with `true`, concurrently with the
    /// first call.
    case expired(ExpiringActivity)
    /// An activity was denied: its block with `true` only.
    case denied(ExpiringActivity)
    /// A host began a request.
    case request(@Sendable (ExtensionRequest) -> Void, ExtensionRequest)
    /// A host ended a request.
    case ended(@Sendable (UInt64) -> Void, UInt64)
    /// The supervisor asked for a background refresh: the handler with the refresh's id.
    case refresh(@Sendable (UInt64) -> Void, UInt64)
    /// A notification hint the extension observes was posted: its handlers, in order.
    case notified([@Sendable (String) -> Void], String)
    /// Events of a background session: its handler, then the acknowledgement of what it handled.
    case transferEvents(@Sendable () -> Void)

    func perform() {
        switch self {
        case .granted(let activity): activity.runGranted()
        case .expired(let activity): activity.runExpired()
        case .denied(let activity): activity.runDenied()
        case .request(let handler, let request): handler(request)
        case .ended(let handler, let requestID): handler(requestID)
        case .notified(let handlers, let name): for h in handlers { h(name) }
        case .refresh(let handler, let refreshID): handler(refreshID)
        case .transferEvents(let run): run()
        }
    }
}

/// Who waits for the answer to an `acquire`, and is told when the assertion expires.
enum AssertionWaiter: Sendable {
    /// `performExpiringActivity`: its blocks run on runtime threads.
    case activity(ExpiringActivity)
    /// `withExpiringActivity`: a suspended task, resumed with the assertion id (nil: denied),
    /// and a latch fired on expiry. Both are cheap and run on the reading thread itself.
    case task(CheckedContinuation<UInt64?, Never>, ExpiryLatch)
}
