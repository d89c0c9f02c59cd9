/// A file lock that a process of an extension held when the extension stopped, with the facts
/// the shell gathered about who else may need the file. The supervisor decides from these facts
/// alone (`blocksOthers`); docs/reliability.md argues the rule.
public struct HeldLock: Equatable, Sendable, Codable {
    /// The kind of lock, as /proc/locks names it.
    public enum Kind: String, Sendable, Equatable, Codable {
        /// A process-associated `fcntl` record lock (`F_SETLK`), as SQLite takes.
        case posix
        /// An open-file-description lock (`F_OFD_SETLK`).
        case ofd
        /// A whole-file `flock` lock.
        case flock
    }

    /// The kind of lock.
    public var kind: Kind
    /// A write (exclusive) lock; false for a read (shared) lock.
    public var exclusive: Bool
    /// The locked file, as the holder's descriptor names it.
    public var path: String
    /// The process of the extension whose descriptor holds the lock.
    public var pid: Int32
    /// A process outside the extension had the file open when the extension stopped.
    public var openElsewhere: Bool
    /// The shared container (`sharedContainers`: a directory the extension shares with its
    /// app) the file lies in, if any.
    public var sharedContainer: String?

    /// A lock with these facts; by default the file lies in no shared container.
    public init(kind: Kind, exclusive: Bool, path: String, pid: Int32, openElsewhere: Bool, sharedContainer: String? = nil) {
        self.kind = kind
        self.exclusive = exclusive
        self.path = path
        self.pid = pid
        self.openElsewhere = openElsewhere
        self.sharedContainer = sharedContainer
    }

    /// Whether a stopped holder of this lock can make another process wait: an exclusive lock on
    /// a file that another process has open or that lies in a shared container. Shared locks
    /// (every SQLite connection in WAL mode holds some, even idle) and exclusive locks on files
    /// nobody else has open (single-instance lock files) are not.
    public var blocksOthers: Bool { exclusive && (openElsewhere || sharedContainer != nil) }

    /// One line for the lifecycle event and the journal.
    public var summary: String {
        var why: [String] = []
        if openElsewhere { why.append("open in another process") }
        if let sharedContainer { why.append("in the shared container \(sharedContainer)") }
        return "\(exclusive ? "exclusive" : "shared") \(kind.rawValue) lock on \(path) held by pid \(pid)"
            + (why.isEmpty ? "" : " (" + why.joined(separator: ", ") + ")")
    }
}

/// What the supervisor did about a lock that blocks others, found when the extension stopped.
public enum LockDecision: String, Sendable, Equatable, Codable {
    /// Ended with SIGKILL at once (`lockedWhileSuspended: "terminate"`, or the lock outlived the
    /// grace of `"resume"`).
    case terminate
    /// Continued for `expiryGraceSeconds` to release it (`lockedWhileSuspended: "resume"`).
    case resume
}

/// The lock a `lock-held-at-suspend` event is about.
public struct LockReport: Equatable, Sendable, Codable {
    /// The locked file, as the holder's descriptor names it.
    public var path: String
    /// The kind of lock.
    public var kind: HeldLock.Kind
    /// What the supervisor did about it.
    public var decision: LockDecision

    /// A report of a lock at `path` and the decision taken.
    public init(path: String, kind: HeldLock.Kind, decision: LockDecision) {
        self.path = path
        self.kind = kind
        self.decision = decision
    }
}

/// Where an extension is on the `lockedWhileSuspended: "resume"` path.
public enum LockGrace: Equatable, Sendable, Codable {
    /// Not on it.
    case none
    /// Being continued because it held a lock that blocks others when it stopped.
    case resuming
    /// It ran its grace: a lock that blocks others at the next stop ends it.
    case spent
}
