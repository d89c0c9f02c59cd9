import SupervisorCore

/// A token bucket for one runtime channel: a burst of `burst` messages, refilled at
/// `perSecond`. Far above what a well-behaved extension sends (an acquire and a release per
/// piece of work), it bounds what one flooding extension can make the loop do.
struct MessageRate {
    static let perSecond: Double = 50_000
    static let burst: Double = 10_000

    private var tokens = MessageRate.burst
    private var last: Instant?

    /// Takes one token at `now`; false when the bucket is empty.
    mutating func admit(at now: Instant) -> Bool {
        if let last { tokens = min(MessageRate.burst, tokens + now.seconds(since: last) * MessageRate.perSecond) }
        last = now
        guard tokens >= 1 else { return false }
        tokens -= 1
        return true
    }
}
