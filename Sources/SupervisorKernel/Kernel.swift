import ExtensionTransport
import SupervisorCore

/// Which file an open descriptor refers to: `st_dev` and `st_ino` of stat(2).
public struct FileIdentity: Hashable, Sendable {
    /// The device the file is on (`st_dev`).
    public var device: UInt64
    /// The file's inode number on that device (`st_ino`).
    public var inode: UInt64
    /// The identity of the given device and inode numbers, stored as given.
    public init(device: UInt64, inode: UInt64) {
        self.device = device
        self.inode = inode
    }
}

/// What stat(2) says about a file: enough for the daemon's ownership and type checks.
public struct FileStatus: Equatable, Sendable {
    /// The file type bits of `st_mode` (`S_IFMT`).
    public enum Kind: Equatable, Sendable {
        /// `S_IFREG`: a regular file.
        case regular
        /// `S_IFDIR`: a directory.
        case directory
        /// `S_IFLNK`: a symbolic link (only seen when links are not followed: lstat, `O_NOFOLLOW`).
        case symbolicLink
        /// Any other type: a FIFO, a socket, a character or block device.
        case other
    }
    /// The file's type.
    public var kind: Kind
    /// The permission bits (`st_mode & 07777`).
    public var permissions: UInt32
    /// The owning user id (`st_uid`).
    public var owner: UInt32
    /// The owning group id (`st_gid`).
    public var group: UInt32
    /// The size in bytes (`st_size`).
    public var size: Int64
    /// Which file it is (`st_dev`, `st_ino`).
    public var identity: FileIdentity
    /// A status of these values, stored as given.
    public init(kind: Kind, permissions: UInt32, owner: UInt32, group: UInt32, size: Int64, identity: FileIdentity) {
        self.kind = kind
        self.permissions = permissions
        self.owner = owner
        self.group = group
        self.size = size
        self.identity = identity
    }
    /// Whether others may write it (`S_IWOTH`).
    public var isWorldWritable: Bool { permissions & 0o002 != 0 }
    /// Whether the sticky bit is set (`S_ISVTX`).
    public var isSticky: Bool { permissions & 0o1000 != 0 }
}

/// A watch or timer registered with the event loop; `cancel()` ends it (twice is harmless).
public protocol Cancellable: AnyObject {
    /// Ends the watch or timer: its handler is not called after this returns. Calling it
    /// again does nothing.
    func cancel()
}

/// A descriptor watch of the event loop, whose epoll events can be changed while it lives.
public protocol Watch: Cancellable {
    /// Replaces the events watched (EPOLLIN, EPOLLOUT…); the error when the loop refused the
    /// change, which then watches what it did before.
    func setEvents(_ events: UInt32) -> SystemError?
}

/// What the spawn of one extension process needs.
public struct SpawnRequest: Equatable {
    /// The executable, run as it is named (no `$PATH` search); also the child's `argv[0]`.
    public var path: String
    /// The arguments after `argv[0]`.
    public var arguments: [String]
    /// The child's whole environment, `NAME=value` each (nothing of the daemon's is added).
    public var environment: [String]
    /// The child's working directory; nil keeps the daemon's.
    public var directory: String?
    /// The descriptor to place at fd 3 in the child, or nil.
    public var channelFD: Int32?
    /// An O_DIRECTORY descriptor of the cgroup the child starts in, or nil.
    public var cgroupFD: Int32?
    /// The credentials the child switches to before exec; nil keeps the daemon's.
    public var credentials: Credentials?
    /// Resource limits set in the child before exec (soft and hard).
    public var resourceLimits: [ResourceLimit] = []
    /// The sandbox the child builds before it switches credentials, or nil.
    public var sandbox: SandboxPlan?
    /// `cgroup.procs` of the cgroup v1 memory cgroup the child joins first, open for writing, or nil.
    public var memoryCgroupProcsFD: Int32? = nil

    /// A request of these values, stored as given. The descriptors stay the caller's: the
    /// spawn neither closes them nor takes them over.
    public init(
        path: String, arguments: [String], environment: [String], directory: String?, channelFD: Int32?, cgroupFD: Int32?,
        credentials: Credentials?, resourceLimits: [ResourceLimit] = [], sandbox: SandboxPlan? = nil, memoryCgroupProcsFD: Int32? = nil
    ) {
        self.path = path
        self.arguments = arguments
        self.environment = environment
        self.directory = directory
        self.channelFD = channelFD
        self.cgroupFD = cgroupFD
        self.credentials = credentials
        self.resourceLimits = resourceLimits
        self.sandbox = sandbox
        self.memoryCgroupProcsFD = memoryCgroupProcsFD
    }
}

/// A child program `Kernel.startChild` started, until `Kernel.finish` or `Kernel.abandon`
/// ends it: its pid, its pidfd, the daemon's ends of its stdin and output pipes, and the
/// instant by which it must have exited.
public struct ChildProgram: Equatable, Sendable {
    /// The child's process id.
    public let pid: Int32
    /// A pidfd of the child, which the daemon owns.
    public let pidfd: Int32
    /// The write end of the child's stdin.
    public let input: Int32
    /// The read end of the child's stdout and stderr.
    public let output: Int32
    /// When the child is killed if it has not exited.
    public let deadline: Instant

    /// A child with these descriptors, which the caller hands over.
    public init(pid: Int32, pidfd: Int32, input: Int32, output: Int32, deadline: Instant) {
        self.pid = pid
        self.pidfd = pidfd
        self.input = input
        self.output = output
        self.deadline = deadline
    }
}

/// What the child of one launch builds (sandbox.h) before it switches credentials.
public struct SandboxPlan: Equatable {
    /// The parts built.
    public var parts: Set<SandboxPart>
    /// Whether the child first enters a user namespace of its own (a daemon without root).
    public var userNamespace: Bool
    /// The mounts of the child's file system view (`.filesystem`), applied in this order.
    public var mounts: [SandboxView.Mount]
    /// The system-call filter (from `Kernel.prepareSandbox`), installed with `.syscalls`.
    public var filter: UnsafeRawPointer?
    /// The daemon's user id, mapped to itself in the user namespace.
    public var uid: UInt32
    /// The daemon's group id, mapped to itself in the user namespace.
    public var gid: UInt32
    /// A plan of these values, stored as given. `filter` is not copied: it must stay valid
    /// until the spawn that uses it returns.
    public init(parts: Set<SandboxPart>, userNamespace: Bool, mounts: [SandboxView.Mount], filter: UnsafeRawPointer?, uid: UInt32, gid: UInt32) {
        self.parts = parts
        self.userNamespace = userNamespace
        self.mounts = mounts
        self.filter = filter
        self.uid = uid
        self.gid = gid
    }
}

/// One rlimit for a spawned child.
public struct ResourceLimit: Equatable, Sendable {
    /// The limited resource.
    public enum Resource: Equatable, Sendable {
        /// `RLIMIT_DATA`: the size of the child's data (data segment, heap, private writable
        /// mappings), in bytes.
        case data
        /// `RLIMIT_NOFILE`: one more than the highest descriptor number the child may open.
        case openFiles
        /// `RLIMIT_NPROC`: the number of processes (threads included) of the child's real user id.
        case processes
    }
    /// Which resource is limited.
    public var resource: Resource
    /// The limit, set as both the soft and the hard limit.
    public var value: UInt64
    /// A limit of `value` on `resource`.
    public init(resource: Resource, value: UInt64) {
        self.resource = resource
        self.value = value
    }
}

/// What the sandbox probe found: for each part of `SandboxPart.allCases`, nil when it can be
/// built, else the error of the step that failed; and whether a user namespace was needed.
public struct SandboxProbe: Equatable, Sendable {
    /// One entry per part, in the order of `SandboxPart.allCases`: nil when the part was
    /// built, else the errno of the failure.
    public var errors: [SystemError?]
    /// Whether the parts' namespaces are built inside a new user namespace: the file system
    /// part failed with the daemon's own privilege and worked inside one.
    public var userNamespace: Bool
    /// A probe result of these values, stored as given.
    public init(errors: [SystemError?], userNamespace: Bool) {
        self.errors = errors
        self.userNamespace = userNamespace
    }
}

/// Every kernel interaction of the daemon goes through this one interface: the event loop
/// (descriptor watches, timers, signals), signals and `waitid` on pidfds, spawning, files
/// (`/proc`, cgroups, the state directory), identity, the clock and the service manager. The
/// daemon uses `LinuxKernel`; tests use a recording fake that answers from a script and keeps
/// the sequence of calls. Socket I/O goes through `PacketSocket` (ExtensionTransport).
///
/// Failures come back as values (`SystemError`, `Result`): callers handle or log each one.
public protocol Kernel: AnyObject {
    // MARK: Clock and identity
    /// CLOCK_MONOTONIC now.
    func now() -> Instant
    /// The monotonic time the current loop iteration started (the same for every event of it).
    func iterationTime() -> Instant
    /// CLOCK_REALTIME now, in seconds since 1970.
    func wallClock() -> Double
    /// getpid(2).
    var processID: Int32 { get }
    /// getuid(2): the daemon's real user id.
    var userID: UInt32 { get }
    /// getgid(2): the daemon's real group id.
    var groupID: UInt32 { get }
    /// getgroups(2): the daemon's supplementary group ids.
    var supplementaryGroups: [UInt32] { get }
    /// sysconf(_SC_CLK_TCK): the unit of /proc CPU times.
    var clockTicksPerSecond: Double { get }
    /// sysconf(_SC_PAGESIZE): the unit of /proc RSS.
    var pageSize: Int64 { get }
    /// An environment variable of the daemon.
    func environment(_ name: String) -> String?
    /// The account database (NSS).
    var accounts: AccountDirectory { get }

    // MARK: Processes
    /// kill(2): `pid` < 0 signals the process group `-pid`.
    func kill(_ pid: Int32, _ signal: Int32) -> SystemError?
    /// pidfd_open(2): a descriptor that refers to exactly the process `pid` is now.
    func openPidfd(_ pid: Int32) -> Result<Int32, SystemError>
    /// pidfd_send_signal(2): signals exactly the process the pidfd refers to.
    func signal(pidfd: Int32, _ signal: Int32) -> SystemError?
    /// `waitid(P_PIDFD, WSTOPPED | WNOHANG)`: whether a stop (or trap) was reported.
    func stopReported(pidfd: Int32) -> Result<Bool, SystemError>
    /// `waitid(P_PIDFD, WEXITED | WNOHANG)`: the exit status if the process exited; with
    /// `reap` false the zombie is left in place (`WNOWAIT`).
    func exitStatus(pidfd: Int32, reap: Bool) -> Result<ExitStatus?, SystemError>
    /// Reaps the exited child `pid` if it is a zombie (`waitid(P_PID, WEXITED | WNOHANG)`);
    /// returns whether it did.
    func reapIfExited(_ pid: Int32) -> Bool
    /// A child that has exited and is not reaped yet, left so (`waitid(P_ALL, WEXITED |
    /// WNOHANG | WNOWAIT)`), or nil when none has.
    func exitedChild() -> Int32?
    /// `PR_SET_CHILD_SUBREAPER`: orphaned descendants become this process's children. Whether it worked.
    func becomeChildSubreaper() -> Bool
    /// Whether clone3 can be called (needed to start a process inside its cgroup).
    var canSpawnIntoCgroup: Bool { get }
    /// Spawns a process (clone3; see `shim_spawn`): its pid and pidfd.
    func spawn(_ request: SpawnRequest) -> Result<(pid: Int32, pidfd: Int32), SystemError>
    /// Builds the extensions' system-call filter once (an opaque program kept for the
    /// daemon's life), and probes which sandbox parts a child can build with it, unless
    /// `known` is given: what the daemon this one replaced probed, on the same kernel.
    func prepareSandbox(known: SandboxProbe?) -> (filter: UnsafeRawPointer?, filterError: SystemError?, probe: SandboxProbe)

    // MARK: Replacing the daemon
    /// The daemon's executable as a path on disk (`/proc/self/exe`, without the ` (deleted)`
    /// the kernel appends once a package upgrade has replaced the file), or nil.
    func executablePath() -> String?
    /// Starts `path` with `arguments` as a child whose stdin is a pipe `finish` writes and whose
    /// stdout and stderr are collected, in a process group of its own; it has `seconds` from
    /// now to exit. Every child started is ended by exactly one `finish` or `abandon`, which end
    /// its process group with it.
    func startChild(_ path: String, arguments: [String], seconds: Double) -> Result<ChildProgram, SystemError>
    /// Writes `input` (its parts one after another, as one stream) on `child`'s stdin and
    /// closes it, calls `whileItRuns` (once, whatever happens), then waits until its deadline at
    /// most for it to exit: its exit status and what it wrote on stdout and stderr (a child
    /// still running at the deadline is killed, and its status is nil); whatever else is left
    /// in its process group is killed. The daemon's loop does not run meanwhile.
    func finish(_ child: ChildProgram, input: [[UInt8]], whileItRuns: () -> Void) -> Result<(status: ExitStatus?, output: String), SystemError>
    /// Kills `child` and its process group, and reaps `child`.
    func abandon(_ child: ChildProgram)
    /// execve(2) of `path` in place of this process, with this environment, the descriptors
    /// `keeping` inherited (every other one stays close-on-exec). Returns only on failure,
    /// with `keeping` close-on-exec again.
    func execute(_ path: String, arguments: [String], keeping: [Int32]) -> SystemError
    /// Makes each of `fds` close-on-exec again: a descriptor inherited across `execute` is not,
    /// and a program this daemon starts later must not inherit it. Returns those it found it
    /// could not set, each with its error.
    func setCloseOnExec(_ fds: [Int32]) -> [(fd: Int32, error: SystemError)]

    // MARK: Files
    /// The whole contents of a file (`/proc`, cgroup files, configuration).
    func read(_ path: String) -> Result<[UInt8], SystemError>
    /// Opens `path` without following a link or blocking (a FIFO), and says what it is
    /// (fstat of that descriptor); its contents only when it is a regular file of at most
    /// `limit` bytes. What is checked is what is read: there is no window between the two.
    func inspectFile(_ path: String, limit: Int64) -> Result<(status: FileStatus, contents: [UInt8]?), SystemError>
    /// access(2) with X_OK: whether the daemon may execute `path`.
    func isExecutable(_ path: String) -> Bool
    /// Reads an open cgroup file of short records from offset 0 (a watched `cgroup.events`:
    /// the read also re-arms its notification; `cgroup.procs` lists the members anew). A read
    /// of less than half a page is taken as the whole file (`LinuxKernel.completeSeqRead`).
    func read(fd: Int32) -> Result<[UInt8], SystemError>
    /// Reads an open file from offset 0 to its end, whatever its records (`/proc/locks`, where
    /// one record is a lock and every waiter on it).
    func readToEnd(fd: Int32) -> Result<[UInt8], SystemError>
    /// Reads an open file from offset 0 to its end on another thread, as `readToEnd` does, and
    /// hands the result to `done` on the loop's thread, in a later iteration: for a file whose
    /// read can wait in the kernel (`/proc/locks`), so that the loop goes on meanwhile.
    /// Returns why the read could not start; `done` then never runs.
    func readInBackground(fd: Int32, _ done: @escaping (Result<[UInt8], SystemError>) -> Void) -> SystemError?
    /// How many CPUs this process may run on (at least 1).
    var processorCount: Int { get }
    /// Runs every one of `jobs`, several at once on threads of their own (CPU work that shares
    /// nothing: the hand-over's record parts), and returns when all are done.
    func concurrently(_ jobs: [@Sendable () -> Void])
    /// Writes `text` to a file that exists (cgroup control files).
    func write(_ path: String, _ text: String) -> SystemError?
    /// Writes `text` at offset 0 of a control file kept open (`cgroup.freeze`).
    func write(fd: Int32, _ text: String) -> SystemError?
    /// Replaces the file at `path` with `parts`, one after another, atomically (a new temporary
    /// file `path.tmp`, then rename; a link is never followed): a reader sees the old contents
    /// or the new, never a mix. `durable` fsyncs the data before the rename (files that must
    /// survive a power loss, not those on a tmpfs).
    func replaceFile(_ path: String, withParts parts: [[UInt8]], mode: UInt32, durable: Bool) -> SystemError?
    /// mkdir(2) with `mode` (the umask applies).
    func makeDirectory(_ path: String, mode: UInt32) -> SystemError?
    /// A file in memory (memfd_create(2), close-on-exec) holding `parts` one after another, its
    /// descriptor readable by path as `/proc/self/fd/N` from offset 0; nothing on disk. Fails
    /// naming "memfd_create" or "write".
    func memoryFile(_ name: String, withParts parts: [[UInt8]]) -> Result<Int32, SystemError>
    /// rmdir(2): removes the directory at `path`, which must be empty.
    func removeDirectory(_ path: String) -> SystemError?
    /// unlink(2).
    func removeFile(_ path: String) -> SystemError?
    /// Removes everything inside the directory at `path`, through descriptors, never
    /// following a symbolic link; the directory itself stays.
    func removeContents(ofDirectory path: String) -> SystemError?
    /// chown(2) (following links; pass `UInt32.max` to leave one unchanged).
    func changeOwner(_ path: String, user: UInt32, group: UInt32) -> SystemError?
    /// chmod(2).
    func changeMode(_ path: String, _ mode: UInt32) -> SystemError?
    /// stat(2) (`followLinks`) or lstat(2).
    func status(_ path: String, followLinks: Bool) -> Result<FileStatus, SystemError>
    /// realpath(3): `path` with every symbolic link and `.`/`..` resolved; nil when it does not exist.
    func resolvePath(_ path: String) -> String?
    /// The entry names of a directory (without "." and ".."), or nil if it cannot be read.
    func listDirectory(_ path: String) -> [String]?
    /// readlink(2): where a symbolic link (a `/proc/PID/fd/N` entry) points.
    func readLink(_ path: String) -> Result<String, SystemError>
    /// Opens a file or directory read-only, close-on-exec (`directory`: O_DIRECTORY).
    func open(_ path: String, directory: Bool) -> Result<Int32, SystemError>
    /// Opens a file that exists write-only, close-on-exec (a cgroup control file kept open).
    func openForWriting(_ path: String) -> Result<Int32, SystemError>
    /// close(2) of a descriptor the caller owns. No error is reported: the descriptor is
    /// released whatever close says.
    func close(_ fd: Int32)
    /// inotify(7): a non-blocking, close-on-exec descriptor that reports each open (`IN_OPEN`)
    /// of the files at `paths` (symbolic links followed, so `/proc/PID/fd/N` names the open
    /// file itself), and the watch descriptor of each path (nil for one that cannot be
    /// watched). Fails only when no path can be watched.
    func watchOpens(_ paths: [String]) -> Result<(fd: Int32, watches: [Int32?]), SystemError>
    /// Reads every queued inotify event from `fd` (non-blocking): the watch descriptors they
    /// are for. Afterwards `fd` is no longer readable until the next event.
    func readOpenEvents(fd: Int32) -> [Int32]
    /// Blocks up to `seconds` until `fd` reports one of `events` (poll(2)); whether it did.
    /// Only for shutdown and start-up paths, never from a loop callback.
    func waitFor(fd: Int32, events: UInt32, seconds: Double) -> Bool

    // MARK: The event loop
    /// Calls `handler` on the loop at `at` (once), after pending events of a smaller
    /// `priority` (0 for ordinary timers; larger runs later).
    func addTimer(at: Instant, priority: Int64, _ handler: @escaping () -> Void) -> Result<any Cancellable, SystemError>
    /// Calls `handler` on the loop whenever `fd` is ready for `events` (epoll bits).
    func watch(fd: Int32, events: UInt32, _ handler: @escaping (UInt32) -> Void) -> Result<any Watch, SystemError>
    /// Calls `handler(senderPID, code)` on the loop for each delivery of `signal` (blocked
    /// for the process and read through a signalfd), after events of a smaller `priority`,
    /// for as long as the loop lives (the loop owns the watch).
    func watchSignal(_ signal: Int32, priority: Int64, _ handler: @escaping (Int32, Int32) -> Void) -> SystemError?
    /// Takes one pending delivery of `signal`, a signal the process blocks (as it does the
    /// loop's), without waiting (sigtimedwait(2), zero timeout): true when one was pending.
    func takePendingSignal(_ signal: Int32) -> Bool
    /// Arms the loop's one supervisor deadline for `at` (nil disarms it); the error when the
    /// loop could not, in which case it is not armed.
    func setDeadline(_ at: Instant?, _ handler: @escaping () -> Void) -> SystemError?
    /// Calls `handler` once at the end of every loop iteration that handled an event.
    func atEndOfIteration(_ handler: @escaping () -> Void) -> Result<any Cancellable, SystemError>
    /// Runs the loop until `exitLoop` is called; returns the exit code.
    func runLoop() -> Int32
    /// Makes `runLoop` return `code` after the current iteration.
    func exitLoop(_ code: Int32)

    // MARK: The service manager
    /// sd_notify(3) with `state`; nothing without a service manager listening.
    func notifyServiceManager(_ state: String)
    /// The watchdog interval the service manager asked for, in microseconds, or nil.
    func watchdogInterval() -> UInt64?
    /// Lets the loop send WATCHDOG=1 when the service manager asked for it; whether it will.
    func enableWatchdog() -> Bool
}

extension Kernel {
    /// An ordinary timer (priority 0).
    public func addTimer(at: Instant, _ handler: @escaping () -> Void) -> Result<any Cancellable, SystemError> {
        addTimer(at: at, priority: 0, handler)
    }

    /// A signal watch of priority 0.
    public func watchSignal(_ signal: Int32, _ handler: @escaping (Int32, Int32) -> Void) -> SystemError? {
        watchSignal(signal, priority: 0, handler)
    }

    /// A directory with mode 0755.
    public func makeDirectory(_ path: String) -> SystemError? { makeDirectory(path, mode: 0o755) }

    /// `mkdir -p`: creates `path` and each missing ancestor, each created one given `mode`
    /// explicitly (the umask, 0077 under the system unit, would narrow it). Fails naming the
    /// directory when one cannot be created, or when `path` exists and is not a directory.
    public func makeDirectories(_ path: String, mode: UInt32) -> SystemError? {
        var prefix = ""
        for part in path.split(separator: "/") {
            prefix += "/" + part
            if let e = makeDirectory(prefix, mode: mode) {
                guard e.isAlreadyExisting else { return SystemError("mkdir \(prefix)", errno: e.errno) }
            } else if let e = changeMode(prefix, mode) {
                return SystemError("chmod \(prefix)", errno: e.errno)
            }
        }
        switch status(path, followLinks: true) {
        case .success(let st) where st.kind == .directory: return nil
        case .success: return .notADirectory(path)
        case .failure(let e): return SystemError("stat \(path)", errno: e.errno)
        }
    }

    /// Whether systemd started this process as a unit (`$INVOCATION_ID` is set): its cgroup is
    /// then the unit's own.
    public var underServiceManager: Bool { environment("INVOCATION_ID") != nil }
}

/// epoll event bits (Glibc does not export the EPOLL* constants to Swift).
public enum Poll {
    /// EPOLLIN: there is data to read (or a connection to accept).
    public static let input: UInt32 = 0x001
    /// EPOLLPRI: a kernfs file such as `cgroup.events` changed.
    public static let priority: UInt32 = 0x002
    /// EPOLLOUT: a write would not block.
    public static let output: UInt32 = 0x004
    /// EPOLLERR: an error is pending; epoll reports it whether or not it was asked for.
    public static let error: UInt32 = 0x008
    /// EPOLLHUP: the peer hung up; epoll reports it whether or not it was asked for.
    public static let hangup: UInt32 = 0x010
}

/// `si_code` of a SIGCHLD that reports a stop (`CLD_STOPPED`).
public let childStoppedCode: Int32 = 5

/// A startup failure with a message for the administrator.
public struct DaemonError: Error, CustomStringConvertible {
    /// The message, as given: a sentence naming what is wrong.
    public var description: String
    /// An error with the message `description`.
    public init(_ description: String) { self.description = description }
}

extension Result {
    /// The error of a failure, nil for a success.
    public var failure: Failure? {
        if case .failure(let e) = self { return e }
        return nil
    }

    /// Whether this is a success.
    public var isSuccess: Bool {
        if case .success = self { return true }
        return false
    }
}

extension Kernel {
    /// An environment variable, nil when unset or empty.
    public func nonEmptyEnvironment(_ name: String) -> String? {
        guard let value = environment(name), !value.isEmpty else { return nil }
        return value
    }
}

extension Kernel {
    /// Replaces the file at `path` with `bytes`, as `replaceFile(_:withParts:mode:durable:)` does.
    public func replaceFile(_ path: String, with bytes: [UInt8], mode: UInt32, durable: Bool) -> SystemError? {
        replaceFile(path, withParts: [bytes], mode: mode, durable: durable)
    }
}
