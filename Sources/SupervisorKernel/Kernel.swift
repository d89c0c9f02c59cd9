import ExtensionTransport
import SupervisorCore

/// Every kernel interaction of the daemon goes through this one interface: the event loop
/// (descriptor watches, timers, signals), signals and `waitid` on pidfds, spawning, files
/// (`/proc`, cgroups, the state directory), identity, the clock and the service manager. The
/// daemon uses `LinuxKernel`; tests use a recording fake that answers from a script and keeps
/// the sequence of calls. Socket I/O goes through `PacketSocket` (ExtensionTransport).
///
/// Failures come back as values (`SystemError`, `Result`): callers handle or log each one.
public protocol Kernel: AnyObject, FileReads {
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
    /// The Landlock ABI the kernel offers (0: none, or refused by a system-call filter).
    var landlockABI: Int { get }
    /// A new network namespace with its loopback up (`shim_network_namespace`): a descriptor
    /// of it, close-on-exec, which keeps it alive. The daemon's own namespaces are untouched.
    func networkNamespace() -> Result<Int32, SystemError>
    /// The part of the sandbox's file system view every extension shares, made once in a mount
    /// namespace of its own (`shim_sandbox_template`): the system read-only, the private `/dev`,
    /// `masks` (absolute, in a plan's order) empty and read-only. A descriptor of it,
    /// close-on-exec, which keeps it alive; a spawn whose plan names it (`SandboxPlan.template`)
    /// starts from a copy. The daemon's own namespaces are untouched. Made on a thread of its
    /// own (1–2 ms): `done` runs on the loop's thread with the outcome, in a later iteration.
    /// Returns why it could not start (then `done` does not run).
    func sandboxTemplateInBackground(masks: [String], _ done: @escaping (Result<Int32, SystemError>) -> Void) -> SystemError?
    /// Makes the namespace `fd` reachable at `path`, a new file bound over with it (as `ip
    /// netns add` does), for a helper that takes a namespace by path.
    func bindNamespace(_ fd: Int32, at path: String) -> SystemError?
    /// Detaches what `bindNamespace` bound at `path` and removes the file (none there: no error).
    func unbindNamespace(at path: String) -> SystemError?
    /// poll(2) of `fd` for input for at most `seconds`: whether it became readable (or hung
    /// up) in time. The loop does not run meanwhile.
    func waitReadable(fd: Int32, seconds: Double) -> Result<Bool, SystemError>
    /// poll(2) of `fd` for POLLPRI without waiting: whether a priority event is pending (a
    /// change of the mount table on `/proc/self/mountinfo`, which this takes).
    func hasPriorityEvent(fd: Int32) -> Bool
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
    // `read(_:)`, `readToEnd(fd:)`, `status`, `listDirectory` and `readLink` come from
    // `FileReads`.
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
    /// Runs `work` on a thread of its own, given the only kernel access it may make there (the
    /// reads of `FileReads`), and hands its result to `done` on the loop's thread, in a later
    /// iteration: for work whose length a third party decides (the lock survey of an
    /// extension's descriptors), so that the loop goes on meanwhile. Returns why the work
    /// could not start; neither `work` nor `done` then runs.
    func inBackground<T: Sendable>(_ work: @escaping @Sendable (any FileReads) -> T, _ done: @escaping (T) -> Void) -> SystemError?
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
    /// mkdir(2) of a directory with `mode` exactly: the umask (0077 under the system unit)
    /// does not narrow it. Fails with EEXIST when something is at `path` already.
    func makeDirectory(_ path: String, mode: UInt32) -> SystemError?
    /// A file in memory (memfd_create(2), close-on-exec) holding `parts` one after another, its
    /// descriptor readable by path as `/proc/self/fd/N` from offset 0; nothing on disk. Fails
    /// naming "memfd_create" or "write".
    func memoryFile(_ name: String, withParts parts: [[UInt8]]) -> Result<Int32, SystemError>
    /// rmdir(2): removes the directory at `path`, which must be empty.
    func removeDirectory(_ path: String) -> SystemError?
    /// unlink(2).
    func removeFile(_ path: String) -> SystemError?
    /// Removes the directory at `path` (never a link) and everything in it, on a thread of its
    /// own, with bounded descriptors and memory whatever its depth (`TreeRemoval`), walking it
    /// with `owner`'s file system ids (nil: the daemon's own); then hands the outcome to `done`
    /// on the loop's thread, in a later iteration. Returns why it could not start; `done` then
    /// never runs.
    func removeTreeInBackground(_ path: String, owner: FileOwner?, _ done: @escaping (SystemError?) -> Void) -> SystemError?
    /// Measures the space the directory tree at `path` takes (`TreeUsage`: bounded memory and
    /// descriptors, with `owner`'s file system ids), on a thread of its own, stopping once
    /// past `limit` (> 0); hands the bytes to `done` on the loop's thread, in a later
    /// iteration. Returns why it could not start; `done` then never runs.
    func measureTreeInBackground(_ path: String, owner: FileOwner?, limit: UInt64, _ done: @escaping (Result<UInt64, SystemError>) -> Void) -> SystemError?
    /// Puts the directory tree at `path`, which `owner` owns, under the project quota of the
    /// owner's uid with a hard limit of `limit` bytes (`ProjectQuota`: the tree walked as
    /// `TreeUsage` walks it, with the owner's file system ids, each directory and regular file
    /// given the project id), on a thread of its own; hands the
    /// outcome to `done` on the loop's thread, in a later iteration (`.unavailable` where the
    /// file system enforces no project quota). Returns why it could not start; `done` then
    /// never runs.
    func limitTreeInBackground(
        _ path: String, owner: FileOwner, limit: UInt64, _ done: @escaping (Result<ProjectQuotaOutcome, SystemError>) -> Void
    ) -> SystemError?
    /// Replaces the file at `path` with `bytes` as `replaceFile` does, durably (fsync of the data
    /// before the rename, and of the directory after), on a thread of its own; hands the outcome
    /// to `done` on the loop's thread, in a later iteration. Returns why it could not start;
    /// `done` then never runs.
    func replaceFileInBackground(_ path: String, with bytes: [UInt8], mode: UInt32, _ done: @escaping (SystemError?) -> Void) -> SystemError?
    /// Hands a URL over (`URLHandoff.perform`) on a thread of its own; `done` gets the outcome
    /// on the loop's thread, in a later iteration. Returns why it could not start.
    func handOffInBackground(_ handoff: URLHandoff, _ done: @escaping (URLHandoff.Outcome) -> Void) -> SystemError?
    /// Asks, off the loop, whether the network is metered or the machine on battery; `done` gets
    /// the answer on the loop.
    func checkConstraintsInBackground(_ done: @escaping (Constraints) -> Void) -> SystemError?
    /// Connects to the system bus (`system`) or the session bus, serves the D-Bus interface's
    /// objects on the loop with `handler`, and owns the name `org.extensiond1`
    /// (docs/dbus.md). Fails when there is no bus, no loop, or the name is taken.
    func openBus(system: Bool, handler: any BusServiceHandler) -> Result<BusService, SystemError>
    /// A new, empty shared defaults suite (`SuiteMemory.make`).
    func makeSuiteMemory() -> Result<SuiteMemory, SystemError>
    /// The suite memory open at `fd`, handed over by the daemon this one replaced, mapped again.
    func adoptSuiteMemory(fd: Int32) -> Result<SuiteMemory, SystemError>
    /// A pipe for one extension's stdout and stderr: its read end non-blocking, both ends
    /// close-on-exec (the spawn places the write end at the child's fds 1 and 2).
    func outputPipe() -> Result<(read: Int32, write: Int32), SystemError>
    /// One read(2) of at most `limit` bytes from a non-blocking descriptor: the bytes, empty
    /// when nothing is waiting (EAGAIN), nil at end of file. EINTR is retried.
    func readSome(fd: Int32, limit: Int) -> Result<[UInt8]?, SystemError>
    /// rename(2): moves `path` to `newPath` (both in one file system; a link is moved, not followed).
    func rename(_ path: String, to newPath: String) -> SystemError?
    /// Gives the directory at `path` a default ACL granting group `group` read, write and
    /// search on everything created inside it afterwards (libacl; the directory's mode stays).
    func setGroupDefaultACL(_ path: String, group: UInt32) -> SystemError?
    /// chown(2) (following links; pass `UInt32.max` to leave one unchanged).
    func changeOwner(_ path: String, user: UInt32, group: UInt32) -> SystemError?
    /// chmod(2).
    func changeMode(_ path: String, _ mode: UInt32) -> SystemError?
    /// realpath(3): `path` with every symbolic link and `.`/`..` resolved; nil when it does not exist.
    func resolvePath(_ path: String) -> String?
    /// Opens a file or directory read-only, close-on-exec (`directory`: O_DIRECTORY).
    func open(_ path: String, directory: Bool) -> Result<Int32, SystemError>
    /// Opens a file that exists write-only, close-on-exec (a cgroup control file kept open).
    func openForWriting(_ path: String) -> Result<Int32, SystemError>
    /// Opens `path` for reading and writing, creating it (mode 0600) if it is absent, never
    /// truncating it and never through a link: the new descriptor and the file's size.
    func openPartialFile(_ path: String) -> Result<(fd: Int32, size: UInt64), SystemError>
    /// Empties the file open at `fd`.
    func truncate(fd: Int32) -> SystemError?
    /// Opens the regular file `relative` beneath the directory `root` for reading, through no
    /// link and no `..` out of it: the new descriptor and the file's size.
    func openBeneath(_ root: String, _ relative: String) -> Result<(fd: Int32, size: UInt64), SystemError>
    /// Moves the file `path` to `relative` beneath the directory `root` (replacing a file there),
    /// through no link: missing directories are made (mode 0770 and `group`, or 0700 without
    /// one), and the file gets `group` and mode 0660 (0600) first. The move is durable.
    func placeBeneath(_ root: String, _ relative: String, from path: String, group: UInt32?) -> SystemError?
    /// close(2) of a descriptor the caller owns. No error is reported: the descriptor is
    /// released whatever close says.
    func close(_ fd: Int32)
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

    /// `mkdir -p`: creates `path` and each missing ancestor, each created one with `mode`
    /// (exactly, as `makeDirectory` makes it). Fails naming the directory when one cannot be
    /// created, or when `path` exists and is not a directory.
    public func makeDirectories(_ path: String, mode: UInt32) -> SystemError? {
        var prefix = ""
        for part in path.split(separator: "/") {
            prefix += "/" + part
            if let e = makeDirectory(prefix, mode: mode), !e.isAlreadyExisting { return SystemError("mkdir \(prefix)", errno: e.errno) }
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

/// `si_code` of a SIGCHLD that reports a stop (`CLD_STOPPED`).
public let childStoppedCode: Int32 = 5

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
