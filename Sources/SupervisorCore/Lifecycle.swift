/// The public lifecycle state of an extension, as shown by `extctl` and the journal.
/// The raw values are a stable interface.
public enum LifecycleState: String, Sendable, Codable, Equatable, CaseIterable {
    /// No process.
    case notRunning = "not-running"
    /// Spawned, or about to be; not ready yet.
    case launching
    /// Running with at least one request open.
    case active
    /// No request open; running on, with assertions until its background time ends or because
    /// it is never suspended. Also shown while a stop from this state is in flight.
    case background
    /// No request open, and *expire* sent for its assertions; stopped when its background time
    /// ends or its last assertion is released. Also shown while a stop from this state is in
    /// flight.
    case expiring
    /// Every process stopped (or its cgroup frozen), as the kernel confirmed. Also shown while a
    /// resume is in flight.
    case suspended
    /// A terminating signal was sent; waiting for the process to exit.
    case terminating
}

/// Why a process ended (or was ended), recorded as its last exit.
public enum ExitReason: String, Sendable, Codable, Equatable {
    /// Exited on its own with status 0.
    case exited
    /// Exited with a non-zero status or was killed by a signal nobody in the supervisor sent.
    case crashed
    /// Killed after staying suspended for `suspendedLifetimeSeconds`.
    case reclaimed
    /// Ended by `extctl kill`.
    case killedByAdmin = "killed-by-admin"
    /// Did not become ready within `launchTimeoutSeconds`.
    case launchTimeout = "launch-timeout"
    /// Could not be executed at all.
    case launchFailed = "launch-failed"
    /// Ended because the daemon is shutting down.
    case shutdown
    /// Ended because its manifest was removed by a reload.
    case removed
    /// Ended because it closed its runtime channel while still running, or was cut off.
    case channelClosed = "channel-closed"
    /// The leader exited on its own with status 0 while other processes of the extension still
    /// ran: they were killed (an extension ends with its leader). A leader that crashed is
    /// `crashed`, and its event's detail says that the processes left behind were killed.
    case leaderExited = "leader-exited"
    /// Killed because, while suspended, it held a file lock another process waited for.
    case lockHeldWhileSuspended = "lock-held-while-suspended"
    /// Killed because, when it stopped, it held a lock that blocks others (`HeldLock.blocksOthers`)
    /// and its policy is `lockedWhileSuspended: "terminate"`, or it still held one after the
    /// grace of `"resume"`.
    case lockHeldAtSuspend = "lock-held-at-suspend"
    /// The kernel's OOM killer ended a process of it at its `limits.memoryMaxBytes` (seen in its
    /// cgroup's `memory.events`; counted as a crash by the crash-loop throttle).
    case memoryLimit = "memory-limit"
    /// Killed because its processes kept running when it was suspended: the stop was not
    /// confirmed within `GroupControl.stopDeadlineSeconds` (one of them continuing the others,
    /// say).
    case stopRefused = "stop-refused"
    /// Killed because its container held more than its `limits.diskMaxBytes` when measured
    /// (docs/policies.md, "Resource limits").
    case diskLimit = "disk-limit"
}

/// How a process ended, as the kernel reported it.
public enum ExitStatus: Equatable, Sendable, Codable {
    /// The process exited by itself with this exit status.
    case exited(Int32)
    /// The process was killed by this signal number.
    case signaled(Int32)
}

/// The last exit of an extension.
public struct ExitRecord: Equatable, Sendable, Codable {
    /// How the kernel reported the exit; nil when the process was never started (the spawn
    /// failed).
    public var status: ExitStatus?
    /// Why it ended.
    public var reason: ExitReason
    /// When the supervisor handled the exit.
    public var at: Instant
    /// The pid the process had; nil when it was never started.
    public var pid: Int32?
}

/// The internal phase of an extension: the public state plus what the supervisor waits for.
public enum Phase: Equatable, Sendable, Codable {
    /// No process.
    case notRunning
    /// Spawn requested; waiting for readiness until `deadline`.
    case launching(deadline: Instant)
    /// At least one request is open (or the extension is exempt from suspension and idle).
    case active
    /// No request; live assertions may run until `expireAt`, then expire until `stopAt`.
    /// Both are nil for an extension that is never suspended.
    case background(expireAt: Instant?, stopAt: Instant?)
    /// *expire* sent for every live assertion; stop at `stopAt` or once all are released.
    case expiring(stopAt: Instant)
    /// SIGSTOP sent to the group; waiting for the kernel to confirm it. `wasExpiring` keeps
    /// the public state honest while the stop is in flight.
    case stopping(wasExpiring: Bool)
    /// The kernel confirmed the stop; reclaimed at `reclaimAt`.
    case suspended(reclaimAt: Instant)
    /// SIGCONT sent; waiting for confirmation.
    case resuming
    /// A terminating signal was sent; SIGKILL follows at `killAt` if it is still alive.
    case terminating(reason: ExitReason, killAt: Instant?)

    /// The public state this phase shows as.
    public var state: LifecycleState {
        switch self {
        case .notRunning: .notRunning
        case .launching: .launching
        case .active: .active
        case .background: .background
        case .expiring: .expiring
        case .stopping(let wasExpiring): wasExpiring ? .expiring : .background
        case .suspended: .suspended
        case .resuming: .suspended
        case .terminating: .terminating
        }
    }

    /// Whether the kernel may have the process stopped (a SIGCONT must follow any terminating signal).
    public var mayBeStopped: Bool {
        switch self {
        case .stopping, .suspended, .resuming: true
        default: false
        }
    }
}
