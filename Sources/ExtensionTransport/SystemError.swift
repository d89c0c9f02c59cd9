#if canImport(Glibc)
import Glibc
#endif

/// A failed system call: which operation, on what, and the kernel's errno.
public struct SystemError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The step that failed, with what it was on (`open /path`); empty when none is named.
    public var operation: String
    /// The errno value the system call failed with.
    public var errno: Int32

    /// An error of `operation` with `errno`, stored as given.
    public init(_ operation: String, errno: Int32) {
        self.operation = operation
        self.errno = errno
    }

    /// An error with no operation named (its description is the errno's text alone).
    public init(errno: Int32) {
        self.operation = ""
        self.errno = errno
    }

    /// `operation: text of the errno` (strerror(3)), or the text alone when no operation is
    /// named; the operation alone with errno 0 (a failure that no system call reported: a
    /// helper that exited, say).
    public var description: String {
        if errno == 0 && !operation.isEmpty { return operation }
        return operation.isEmpty ? String(cString: strerror(errno)) : "\(operation): \(String(cString: strerror(errno)))"
    }

    /// The same error, said to be of `operation` (the step that failed, with what it was on).
    public func during(_ operation: String) -> SystemError { SystemError(operation, errno: errno) }

    /// The errno's text alone, without the operation.
    public var reason: String { String(cString: strerror(errno)) }

    /// ENOENT: no such file or directory.
    public var isNoEntry: Bool { errno == ENOENT }
    /// ESRCH: no such process.
    public var isNoProcess: Bool { errno == ESRCH }
    /// ECHILD: not a child, or already reaped.
    public var isNoChild: Bool { errno == ECHILD }
    /// ENOENT, ENOMEDIUM or ENOTSUP: nothing is there (no such file; for a bus, no address or
    /// socket, or no bus support at all).
    public var isAbsent: Bool { errno == ENOENT || errno == ENOMEDIUM || errno == ENOTSUP }
    /// EEXIST: the file exists.
    public var isAlreadyExisting: Bool { errno == EEXIST }
    /// ENODEV: for a cgroup file kept open, its cgroup was removed.
    public var isNoDevice: Bool { errno == ENODEV }
    /// ENOSYS: the system call does not exist here (or a seccomp policy answers so).
    public var isNotImplemented: Bool { errno == ENOSYS }
    /// Whether it says the program or a directory on its path cannot be run or reached as it
    /// is: permission denied, no such file, not a directory, too many links, a name too long,
    /// not an executable format. What a wrong path or mode in a manifest gives at `execve`.
    public var isPathProblem: Bool { [EACCES, ENOENT, ENOTDIR, ELOOP, ENAMETOOLONG, ENOEXEC].contains(errno) }
    /// Whether it is EACCES.
    public var isPermissionDenied: Bool { errno == EACCES }
    /// ENOBUFS: a queue is full (sd-bus's of messages waiting to be written).
    public var isNoBufferSpace: Bool { errno == ENOBUFS }
    /// EPERM: the operation is not permitted (a capability is missing).
    public var isNotPermitted: Bool { errno == EPERM }
    /// EXDEV: across file systems; a spawn's file system view gives it for a kept directory
    /// that is, or lies below, the directory its plan hides (`SandboxPlan.hiddenDirectory`).
    public var isCrossDevice: Bool { errno == EXDEV }
    /// ELOOP: a link where none may be (`O_NOFOLLOW`), or too many of them.
    public var isTooManyLinks: Bool { errno == ELOOP }
    /// ENOTSUP: not supported here.
    public static let notSupported = SystemError(errno: ENOTSUP)
    /// ENOTDIR: not a directory.
    public static func notADirectory(_ operation: String) -> SystemError { SystemError(operation, errno: ENOTDIR) }
    /// EIO: a short write.
    public static let shortWrite = SystemError(errno: EIO)
}

/// Calls `body` until it does not fail with EINTR; returns its result or throws a SystemError.
@inline(__always)
func retrying(_ operation: @autoclosure () -> String, _ body: () -> Int32) throws(SystemError) -> Int32 {
    while true {
        let rc = body()
        if rc >= 0 { return rc }
        let e = Glibc.errno
        if e == EINTR { continue }
        throw SystemError(operation(), errno: e)
    }
}
