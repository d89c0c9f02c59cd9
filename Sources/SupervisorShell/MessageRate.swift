import SupervisorCore
import SupervisorKernel

/// A token bucket: a burst of `burst` messages, refilled at `perSecond`. It bounds what one
/// flooding peer can make the loop do.
struct MessageRate {
    /// Runtime-channel messages: far above what a well-behaved extension sends (an acquire and
    /// a release per piece of work).
    static let perSecond: Double = 50_000
    static let burst: Double = 10_000

    /// Notification hints one control connection may post: each post may wake the loop for
    /// every observer, so far fewer than messages in general.
    static let postsPerSecond: Double = 200
    static let postBurst: Double = 400

    /// Lines of an extension's output logged (`ExtensionOutput`): plenty for diagnostics, few
    /// enough that a chatty extension cannot flood the journal or hold the loop.
    static let outputLinesPerSecond: Double = 100
    static let outputLineBurst: Double = 1000

    private let rate: Double
    private let capacity: Double
    private var tokens: Double
    private var last: Instant?

    init(perSecond: Double = MessageRate.perSecond, burst: Double = MessageRate.burst) {
        rate = perSecond
        capacity = burst
        tokens = burst
    }

    /// Takes one token at `now`; false when the bucket is empty.
    mutating func admit(at now: Instant) -> Bool {
        if let last { tokens = min(capacity, tokens + now.seconds(since: last) * rate) }
        last = now
        guard tokens >= 1 else { return false }
        tokens -= 1
        return true
    }
}
