import CShims
import SupervisorCore
#if canImport(Glibc)
import Glibc
#endif

/// An errno value returned by a failed kernel call.
struct Errno: Error, Equatable, CustomStringConvertible {
    var code: Int32
    /// What failed, when a call has several steps (a spawn's child: "setresuid", "execve"…).
    var step: String?
    init(_ code: Int32, step: String? = nil) {
        self.code = code
        self.step = step
    }
    var description: String { (step.map { "\($0): " } ?? "") + String(cString: strerror(code)) }
    static let noEntry = Errno(ENOENT)
    static let noProcess = Errno(ESRCH)
}

/// Which file an open descriptor refers to: `st_dev` and `st_ino` of stat(2).
struct FileIdentity: Hashable {
    var device: UInt64
    var inode: UInt64
}

/// A watch or timer registered with the event loop; `cancel()` ends it (twice is harmless).
protocol Cancellable: AnyObject {
    func cancel()
}

extension EventSource: Cancellable {}

/// What the spawn of one extension process needs.
struct SpawnRequest: Equatable {
    var path: String
    var arguments: [String]
    var environment: [String]
    var directory: String?
    /// The descriptor to place at fd 3 in the child, or nil.
    var channelFD: Int32?
    /// An O_DIRECTORY descriptor of the cgroup the child starts in, or nil.
    var cgroupFD: Int32?
    /// The credentials the child switches to before exec; nil keeps the daemon's.
    var credentials: Credentials?
    /// Resource limits set in the child before exec (soft and hard).
    var resourceLimits: [ResourceLimit] = []
    /// The sandbox the child builds before it switches credentials, or nil.
    var sandbox: SandboxPlan?
    /// `cgroup.procs` of the cgroup v1 memory cgroup the child joins first, open for writing, or nil.
    var memoryCgroupProcsFD: Int32? = nil
}

/// One rlimit for a spawned child.
struct ResourceLimit: Equatable {
    /// RLIMIT_DATA, RLIMIT_NOFILE, RLIMIT_NPROC.
    var resource: Int32
    var value: UInt64
}

/// Every kernel interaction of the supervisor's process handling goes through this one
/// interface: signals, `waitid` on pidfds, spawning, cgroup and `/proc` files, the clock, and
/// the event loop's timers and descriptor watches. The daemon uses `LinuxKernel`; tests use a
/// recording fake that answers from a script and keeps the sequence of calls.
///
/// Failures come back as values (`Errno`, `Result`): callers handle or log each one.
/// (Socket I/O goes through `PacketSocket`, and the service manager through libsystemd.)
protocol Kernel: AnyObject {
    /// CLOCK_MONOTONIC now.
    func now() -> Instant
    /// kill(2): `pid` < 0 signals the process group `-pid`.
    func kill(_ pid: Int32, _ signal: Int32) -> Errno?
    /// pidfd_open(2): a descriptor that refers to exactly the process `pid` is now.
    func openPidfd(_ pid: Int32) -> Result<Int32, Errno>
    /// pidfd_send_signal(2): signals exactly the process the pidfd refers to.
    func signal(pidfd: Int32, _ signal: Int32) -> Errno?
    /// `waitid(P_PIDFD, WSTOPPED | WNOHANG)`: whether a stop (or trap) was reported.
    func stopReported(pidfd: Int32) -> Result<Bool, Errno>
    /// `waitid(P_PIDFD, WEXITED | WNOHANG)`: the exit status if the process exited; with
    /// `reap` false the zombie is left in place (`WNOWAIT`).
    func exitStatus(pidfd: Int32, reap: Bool) -> Result<ExitStatus?, Errno>
    /// Reaps the exited child `pid` if it is a zombie (`waitid(P_PID, WEXITED | WNOHANG)`);
    /// returns whether it did.
    func reapIfExited(_ pid: Int32) -> Bool
    /// The whole contents of a file (`/proc`, cgroup files, configuration).
    func read(_ path: String) -> Result<[UInt8], Errno>
    /// Reads an open cgroup file of short records from offset 0 (a watched `cgroup.events`:
    /// the read also re-arms its notification; `cgroup.procs` lists the members anew). A read
    /// of less than half a page is taken as the whole file (`LinuxKernel.completeSeqRead`).
    func read(fd: Int32) -> Result<[UInt8], Errno>
    /// Reads an open file from offset 0 to its end, whatever its records (`/proc/locks`, where
    /// one record is a lock and every waiter on it).
    func readToEnd(fd: Int32) -> Result<[UInt8], Errno>
    /// Writes `text` to a file that exists (cgroup control files).
    func write(_ path: String, _ text: String) -> Errno?
    /// Writes `text` at offset 0 of a control file kept open (`cgroup.freeze`).
    func write(fd: Int32, _ text: String) -> Errno?
    func makeDirectory(_ path: String) -> Errno?
    func removeDirectory(_ path: String) -> Errno?
    /// The entry names of a directory (without "." and ".."), or nil if it cannot be read.
    func listDirectory(_ path: String) -> [String]?
    /// readlink(2): where a symbolic link (a `/proc/PID/fd/N` entry) points.
    func readLink(_ path: String) -> Result<String, Errno>
    /// stat(2), following links: the file a `/proc/PID/fd/N` entry refers to.
    func fileIdentity(_ path: String) -> Result<FileIdentity, Errno>
    /// Opens a file or directory read-only, close-on-exec (`directory`: O_DIRECTORY|O_PATH).
    func open(_ path: String, directory: Bool) -> Result<Int32, Errno>
    /// Opens a file that exists write-only, close-on-exec (a cgroup control file kept open).
    func openForWriting(_ path: String) -> Result<Int32, Errno>
    func close(_ fd: Int32)
    /// Whether clone3 can be called (needed to start a process inside its cgroup).
    var canSpawnIntoCgroup: Bool { get }
    /// Spawns a process (clone3; see `shim_spawn`): its pid and pidfd.
    func spawn(_ request: SpawnRequest) -> Result<(pid: Int32, pidfd: Int32), Errno>
    /// Calls `handler` on the loop at `at` (once), after pending events of a smaller
    /// `priority` (0 for ordinary timers; see `ProcessControl.checkPriority`).
    func addTimer(at: Instant, priority: Int64, _ handler: @escaping () -> Void) -> Result<any Cancellable, Errno>
    /// Calls `handler` on the loop whenever `fd` is ready for `events` (epoll bits).
    func watch(fd: Int32, events: UInt32, _ handler: @escaping (UInt32) -> Void) -> Result<any Cancellable, Errno>
    /// inotify(7): a non-blocking, close-on-exec descriptor that reports each open (`IN_OPEN`)
    /// of the files at `paths` (symbolic links followed, so `/proc/PID/fd/N` names the open
    /// file itself), and the watch descriptor of each path (nil for one that cannot be
    /// watched). Fails only when no path can be watched.
    func watchOpens(_ paths: [String]) -> Result<(fd: Int32, watches: [Int32?]), Errno>
    /// Reads every queued inotify event from `fd` (non-blocking): the watch descriptors they
    /// are for. Afterwards `fd` is no longer readable until the next event.
    func readOpenEvents(fd: Int32) -> [Int32]
}

/// The real kernel, and the daemon's sd-event loop for timers and watches.
final class LinuxKernel: Kernel {
    /// The loop for timers and watches; without one (tools reading /proc only) they fail.
    private weak var loop: EventLoop?

    init(loop: EventLoop?) { self.loop = loop }

    func now() -> Instant { EventLoop.clock() }

    func kill(_ pid: Int32, _ signal: Int32) -> Errno? {
        let rc = shim_kill(pid, signal)
        return rc == 0 ? nil : Errno(-rc)
    }

    func openPidfd(_ pid: Int32) -> Result<Int32, Errno> {
        let fd = shim_pidfd_open(pid)
        return fd >= 0 ? .success(fd) : .failure(Errno(-fd))
    }

    func signal(pidfd: Int32, _ signal: Int32) -> Errno? {
        let rc = shim_pidfd_send_signal(pidfd, signal)
        return rc == 0 ? nil : Errno(-rc)
    }

    func stopReported(pidfd: Int32) -> Result<Bool, Errno> {
        var code: Int32 = 0, status: Int32 = 0
        let rc = shim_waitid_pidfd(pidfd, WSTOPPED, &code, &status)
        if rc < 0 { return .failure(Errno(-rc)) }
        return .success(rc == 1 && (code == Int32(CLD_STOPPED) || code == Int32(CLD_TRAPPED)))
    }

    func exitStatus(pidfd: Int32, reap: Bool) -> Result<ExitStatus?, Errno> {
        var code: Int32 = 0, status: Int32 = 0
        let rc = shim_waitid_pidfd(pidfd, reap ? WEXITED : WEXITED | WNOWAIT, &code, &status)
        if rc < 0 { return .failure(Errno(-rc)) }
        guard rc == 1 else { return .success(nil) }
        return .success(code == Int32(CLD_EXITED) ? .exited(status) : .signaled(status))
    }

    func reapIfExited(_ pid: Int32) -> Bool {
        var info = siginfo_t()
        return waitid(P_PID, id_t(pid), &info, WEXITED | WNOHANG) == 0 && info._sifields._sigchld.si_pid == pid
    }

    func read(_ path: String) -> Result<[UInt8], Errno> {
        let fd = Glibc.open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return .failure(Errno(errno)) }
        defer { Glibc.close(fd) }
        return readAll(fd, offset: nil)
    }

    func read(fd: Int32) -> Result<[UInt8], Errno> { readAll(fd, offset: 0, shortRecords: true) }

    func readToEnd(fd: Int32) -> Result<[UInt8], Errno> { readAll(fd, offset: 0) }

    /// A read from offset 0 of `cgroup.procs` or `cgroup.events` (kernfs seq files) that
    /// returns fewer bytes than this holds everything: a seq file fills each read with whole
    /// records up to one page, and stops short of that only at its end or when the next record
    /// does not fit in what is left of the page, and the records of these files (a pid, a
    /// `key value` line) are far shorter than the rest of a page below this mark. So the
    /// common read of such a file is one `pread`, with no second call to see the end. Not for
    /// files with long records (`/proc/locks`: a lock and all its waiters are one record).
    static let completeSeqRead = 2048

    private func readAll(_ fd: Int32, offset: Int?, shortRecords: Bool = false) -> Result<[UInt8], Errno> {
        withUnsafeTemporaryAllocation(byteCount: 4096, alignment: 8) { chunk in
            var data: [UInt8] = []
            var position = offset ?? 0
            while true {
                let n = offset == nil ? Glibc.read(fd, chunk.baseAddress, chunk.count) : pread(fd, chunk.baseAddress, chunk.count, off_t(position))
                if n < 0 {
                    if errno == EINTR { continue }
                    return .failure(Errno(errno))
                }
                if n == 0 { return .success(data) }
                data.append(contentsOf: UnsafeRawBufferPointer(rebasing: chunk[0..<n]))
                if shortRecords && position == 0 && n < LinuxKernel.completeSeqRead { return .success(data) }
                position += n
            }
        }
    }

    func write(_ path: String, _ text: String) -> Errno? {
        let fd = Glibc.open(path, O_WRONLY | O_CLOEXEC)
        guard fd >= 0 else { return Errno(errno) }
        defer { Glibc.close(fd) }
        var bytes = Array(text.utf8)
        let n = bytes.withUnsafeMutableBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
        if n < 0 { return Errno(errno) }
        return n == bytes.count ? nil : Errno(EIO)
    }

    func write(fd: Int32, _ text: String) -> Errno? {
        var bytes = Array(text.utf8)
        let n = bytes.withUnsafeMutableBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
        if n < 0 { return Errno(errno) }
        return n == bytes.count ? nil : Errno(EIO)
    }

    func makeDirectory(_ path: String) -> Errno? {
        mkdir(path, 0o755) == 0 ? nil : Errno(errno)
    }

    func removeDirectory(_ path: String) -> Errno? {
        rmdir(path) == 0 ? nil : Errno(errno)
    }

    func listDirectory(_ path: String) -> [String]? { directoryEntries(path) }

    func readLink(_ path: String) -> Result<String, Errno> {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let n = Glibc.readlink(path, &buffer, buffer.count - 1)
        guard n >= 0 else { return .failure(Errno(errno)) }
        return .success(String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self))
    }

    func fileIdentity(_ path: String) -> Result<FileIdentity, Errno> {
        var info = stat()
        guard fstatat(AT_FDCWD, path, &info, 0) == 0 else { return .failure(Errno(errno)) }
        return .success(FileIdentity(device: UInt64(info.st_dev), inode: UInt64(info.st_ino)))
    }

    func open(_ path: String, directory: Bool) -> Result<Int32, Errno> {
        let fd = Glibc.open(path, directory ? O_RDONLY | O_DIRECTORY | O_CLOEXEC : O_RDONLY | O_CLOEXEC)
        return fd >= 0 ? .success(fd) : .failure(Errno(errno))
    }

    func openForWriting(_ path: String) -> Result<Int32, Errno> {
        let fd = Glibc.open(path, O_WRONLY | O_CLOEXEC)
        return fd >= 0 ? .success(fd) : .failure(Errno(errno))
    }

    func close(_ fd: Int32) { Glibc.close(fd) }

    var canSpawnIntoCgroup: Bool { shim_clone3_available() == 1 }

    func spawn(_ request: SpawnRequest) -> Result<(pid: Int32, pidfd: Int32), Errno> {
        var pidfd: Int32 = -1
        var step: Int32 = -1
        let groups: [gid_t] = request.credentials?.groups ?? []
        let limits = request.resourceLimits.map { shim_rlimit(resource: $0.resource, value: $0.value) }
        let mountPaths = request.sandbox?.mounts.map(\.path) ?? []
        let pid: pid_t = withCStrings(mountPaths) { paths in
            withSandbox(request.sandbox, paths: paths) { sandbox in
            withCStrings([request.path] + request.arguments) { argv in
            withCStrings(request.environment) { envp in
                request.path.withCString { path in
                    withOptionalCString(request.directory) { cwd in
                        groups.withUnsafeBufferPointer { groupList in
                            limits.withUnsafeBufferPointer { limitList in
                                withUnsafeMutablePointer(to: &step) { failedStep in
                                    var options = shim_spawn_options(
                                        path: path, argv: argv, envp: envp, cwd: cwd,
                                        channel_fd: request.channelFD ?? -1, stdout_fd: -1, cgroup_fd: request.cgroupFD ?? -1,
                                        set_credentials: request.credentials == nil ? 0 : 1,
                                        uid: request.credentials?.uid ?? 0, gid: request.credentials?.gid ?? 0,
                                        groups: groupList.baseAddress, ngroups: Int32(groupList.count),
                                        rlimits: limitList.baseAddress, nrlimits: Int32(limitList.count), sandbox: sandbox,
                                        failed_step: failedStep, memory_cgroup_procs_fd: request.memoryCgroupProcsFD ?? -1)
                                    return shim_spawn(&options, &pidfd)
                                }
                            }
                        }
                    }
                }
            }
            }
            }
        }
        return pid < 0 ? .failure(Errno(-pid, step: LinuxKernel.spawnSteps[Int(step)])) : .success((pid, pidfd))
    }

    /// The names of the child's steps (`SHIM_STEP_*`), for error messages.
    static let spawnSteps: [Int: String] = [
        0: "setting up descriptors and signals", 1: "setrlimit", 2: "dropping the capability bounding set",
        3: "setgroups", 4: "setresgid", 5: "setresuid", 6: "PR_SET_NO_NEW_PRIVS", 7: "capset", 8: "chdir", 9: "execve",
        10: "joining the cgroup v1 memory cgroup",
        11: "sandbox: the user namespace", 12: "sandbox: the file system view (filesystem)", 13: "sandbox: the private /proc (proc)",
        14: "sandbox: the network namespace (network)", 15: "sandbox: the system-call filter (syscalls)",
    ]

    /// Calls `body` with the C form of `plan` (nil without one); `paths` are the C strings of
    /// its mounts' paths, alive for the call.
    private func withSandbox<R>(_ plan: SandboxPlan?, paths: UnsafePointer<UnsafeMutablePointer<CChar>?>, _ body: (UnsafePointer<shim_sandbox>?) -> R) -> R {
        guard let plan else { return body(nil) }
        let mounts = plan.mounts.enumerated().map { i, m in shim_sandbox_mount(path: UnsafePointer(paths[i]), kind: m.kind.rawValue) }
        return mounts.withUnsafeBufferPointer { list in
            var c = shim_sandbox(
                parts: plan.parts, mounts: list.baseAddress, nmounts: Int32(list.count), filter: plan.filter, uid: plan.uid, gid: plan.gid)
            return withUnsafePointer(to: &c) { body($0) }
        }
    }

    func addTimer(at: Instant, priority: Int64, _ handler: @escaping () -> Void) -> Result<any Cancellable, Errno> {
        guard let loop else { return .failure(Errno(ENOTSUP)) }
        do {
            return .success(try loop.addTimer(at: at, priority: priority, handler: handler))
        } catch {
            return .failure(Errno(error.errno))
        }
    }

    func watchOpens(_ paths: [String]) -> Result<(fd: Int32, watches: [Int32?]), Errno> {
        let fd = inotify_init1(Int32(IN_NONBLOCK) | Int32(IN_CLOEXEC))
        guard fd >= 0 else { return .failure(Errno(errno)) }
        var lastError: Int32 = 0
        let watches: [Int32?] = paths.map { path in
            let wd = inotify_add_watch(fd, path, UInt32(IN_OPEN))
            if wd < 0 { lastError = errno; return nil }
            return wd
        }
        guard watches.contains(where: { $0 != nil }) else {
            Glibc.close(fd)
            return .failure(Errno(lastError))
        }
        return .success((fd, watches))
    }

    func readOpenEvents(fd: Int32) -> [Int32] {
        var found: [Int32] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return found }
            // struct inotify_event: wd, mask, cookie, len (4 bytes each), then `len` bytes of name.
            var offset = 0
            while offset + 16 <= n {
                let field = { (at: Int) in buffer.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: offset + at, as: UInt32.self) } }
                found.append(Int32(bitPattern: field(0)))
                offset += 16 + Int(field(12))
            }
        }
    }

    func watch(fd: Int32, events: UInt32, _ handler: @escaping (UInt32) -> Void) -> Result<any Cancellable, Errno> {
        guard let loop else { return .failure(Errno(ENOTSUP)) }
        do {
            return .success(try loop.addIO(fd: fd, events: events, handler: handler))
        } catch {
            return .failure(Errno(error.errno))
        }
    }
}

/// Calls `body` with a NULL-terminated C array of the strings.
func withCStrings<R>(_ strings: [String], _ body: (UnsafePointer<UnsafeMutablePointer<CChar>?>) -> R) -> R {
    var pointers: [UnsafeMutablePointer<CChar>?] = strings.map { strdup($0) }
    pointers.append(nil)
    defer { for p in pointers { free(p) } }
    return pointers.withUnsafeBufferPointer { body($0.baseAddress!) }
}

/// Calls `body` with a C string, or NULL for nil.
func withOptionalCString<R>(_ string: String?, _ body: (UnsafePointer<CChar>?) -> R) -> R {
    guard let string else { return body(nil) }
    return string.withCString { body($0) }
}

extension Kernel {
    /// An ordinary timer (priority 0).
    func addTimer(at: Instant, _ handler: @escaping () -> Void) -> Result<any Cancellable, Errno> {
        addTimer(at: at, priority: 0, handler)
    }
}
