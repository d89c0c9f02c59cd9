/// Daemon-wide limits and tunables of the state machine (from the daemon config).
public struct SupervisorLimits: Equatable, Sendable {
    /// The daemon's own uid: hosts with this uid (and root) may open any extension.
    public var daemonUID: UInt32 = 0
    /// Most requests (open or pending) one host connection may hold.
    public var maxRequestsPerHost = 256
    /// Most control connections one uid may have open at once.
    public var maxConnectionsPerUID = 128
    /// Most live assertions one extension process may hold.
    public var maxAssertionsPerProcess = 64
    /// Most extensions launched by prewarm hints that may wait unused at once.
    public var maxPrewarmed = 16
    /// Time between a terminating SIGTERM and the SIGKILL that follows if the group lives on.
    public var terminateGraceSeconds: Double = 5
    /// The delay after the second consecutive crash; it doubles with each further crash.
    public var crashBackoffBaseSeconds: Double = 1
    /// The longest crash-loop delay.
    public var crashBackoffMaxSeconds: Double = 60
    /// A process that ran this long before crashing starts a new crash count.
    public var stableRunSeconds: Double = 30
    /// How often the container of a running extension with `limits.diskMaxBytes` is measured
    /// (it is measured at each suspension too; never while it is suspended). At least 0.1.
    public var diskCheckSeconds: Double = 30

    /// The limits used when the configuration sets none; `daemonUID` is 0 until the shell sets it.
    public init() {}

    /// The launch delay after `crashes` consecutive crashes: none after the first,
    /// then base, 2×base, 4×base… up to the maximum.
    public func backoff(afterCrashes crashes: Int) -> Double {
        guard crashes >= 2 else { return 0 }
        let exponent = min(crashes - 2, 30)
        return min(crashBackoffBaseSeconds * Double(1 << exponent), crashBackoffMaxSeconds)
    }
}
