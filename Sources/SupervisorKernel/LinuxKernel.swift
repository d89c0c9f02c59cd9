import CShims
import CSystemd
import ExtensionTransport
import SupervisorCore
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Numbers the temporary files of writes off the loop (`replaceFile`'s `unique`).
private let temporaryCounter = Atomic<UInt64>(0)

/// The real kernel, and the daemon's sd-event loop for timers and watches.
public final class LinuxKernel: Kernel {
    /// The loop for timers, watches and signals; without one (tools reading /proc only) they fail.
    private let loop: EventLoop?
    /// The work done on threads of their own (`inBackground`).
    private let backgroundWork = BackgroundWork()

    /// A kernel with its own sd-event loop (the daemon's), or, with `withLoop` false, one for
    /// tools that only read and signal.
    public init(withLoop: Bool = true) throws(SystemError) {
        loop = withLoop ? try EventLoop() : nil
        processID = getpid()
        userID = getuid()
        groupID = getgid()
    }

    /// clock_gettime(CLOCK_MONOTONIC) read at the call, not the loop's cached iteration time;
    /// works without a loop.
    public func now() -> Instant { EventLoop.clock() }

    /// The loop's cached time of the current iteration (sd_event_now); the clock read now when
    /// there is no loop or sd-event cannot say.
    public func iterationTime() -> Instant { loop?.now() ?? EventLoop.clock() }

    /// clock_gettime(CLOCK_REALTIME) read at the call: seconds since 1970 with the nanoseconds
    /// as the fraction.
    public func wallClock() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }

    /// getpid(2), read once when this kernel was made.
    public let processID: Int32
    /// getuid(2), read once when this kernel was made.
    public let userID: UInt32
    /// getgid(2), read once when this kernel was made.
    public let groupID: UInt32

    /// sysconf(_SC_CLK_TCK), read once when this kernel was made.
    public let clockTicksPerSecond = Double(sysconf(Int32(_SC_CLK_TCK)))
    /// sysconf(_SC_PAGESIZE), read once when this kernel was made.
    public let pageSize = Int64(sysconf(Int32(_SC_PAGESIZE)))

    /// getgroups(2) at each read; empty when it fails.
    public var supplementaryGroups: [UInt32] {
        let count = getgroups(0, nil)
        var groups = [gid_t](repeating: 0, count: Int(max(count, 0)))
        let n = getgroups(count, &groups)
        return Array(groups.prefix(Int(max(n, 0))))
    }

    /// getenv(3) at each call: nil when unset, the value as it is otherwise (possibly empty).
    public func environment(_ name: String) -> String? {
        guard let v = getenv(name) else { return nil }
        return String(cString: v)
    }

    /// `SystemAccounts.directory`: NSS answers each lookup when it is made.
    public var accounts: AccountDirectory { SystemAccounts.directory }

    /// prctl(PR_SET_CHILD_SUBREAPER, 1): true when it succeeded.
    public func becomeChildSubreaper() -> Bool { shim_set_child_subreaper() == 0 }

    /// Builds the filter with libseccomp (`shim_seccomp_filter`; on failure `filter` is nil and
    /// `filterError` names "seccomp filter"). With `known`, returns it as the probe unchanged.
    /// Otherwise probes each part by building it in a throwaway child, blocking until those
    /// children have exited; a part's error carries the errno alone, and `.syscalls` reports
    /// ENOSYS when there is no filter.
    public func prepareSandbox(known: SandboxProbe?) -> (filter: UnsafeRawPointer?, filterError: SystemError?, probe: SandboxProbe) {
        var built: UnsafeRawPointer?
        let rc = shim_seccomp_filter(&built)
        let filter = rc == 0 ? built : nil
        if let known { return (filter, rc == 0 ? nil : SystemError("seccomp filter", errno: -rc), known) }
        var errors: (Int32, Int32, Int32, Int32) = (0, 0, 0, 0)
        let bits = withUnsafeMutableBytes(of: &errors) { raw in
            shim_sandbox_probe(filter, raw.baseAddress!.assumingMemoryBound(to: Int32.self))
        }
        let found = [errors.0, errors.1, errors.2, errors.3].map { $0 == 0 ? nil : SystemError(errno: $0) }
        return (
            filter, rc == 0 ? nil : SystemError("seccomp filter", errno: -rc),
            SandboxProbe(errors: found, userNamespace: bits & Int32(SHIM_SANDBOX_USERNS) != 0)
        )
    }

    /// kill(2): nil on success, else the errno with no operation named.
    public func kill(_ pid: Int32, _ signal: Int32) -> SystemError? {
        let rc = shim_kill(pid, signal)
        return rc == 0 ? nil : SystemError(errno: -rc)
    }

    /// pidfd_open(2): a new descriptor, close-on-exec (the kernel sets it on every pidfd), that
    /// the caller owns and closes. Fails with the errno alone (ESRCH: no such process).
    public func openPidfd(_ pid: Int32) -> Result<Int32, SystemError> {
        let fd = shim_pidfd_open(pid)
        return fd >= 0 ? .success(fd) : .failure(SystemError(errno: -fd))
    }

    /// pidfd_send_signal(2) with no siginfo: nil on success, else the errno alone. The pidfd
    /// stays open.
    public func signal(pidfd: Int32, _ signal: Int32) -> SystemError? {
        let rc = shim_pidfd_send_signal(pidfd, signal)
        return rc == 0 ? nil : SystemError(errno: -rc)
    }

    /// waitid(P_PIDFD, WSTOPPED | WNOHANG), retried on EINTR; never blocks. True when a state
    /// change of code CLD_STOPPED or CLD_TRAPPED was reported (and so consumed), false when none
    /// is pending. Fails with the errno alone.
    public func stopReported(pidfd: Int32) -> Result<Bool, SystemError> {
        var code: Int32 = 0, status: Int32 = 0
        let rc = shim_waitid_pidfd(pidfd, WSTOPPED, &code, &status)
        if rc < 0 { return .failure(SystemError(errno: -rc)) }
        return .success(rc == 1 && (code == Int32(CLD_STOPPED) || code == Int32(CLD_TRAPPED)))
    }

    /// waitid(P_PIDFD, WEXITED | WNOHANG, and WNOWAIT unless `reap`), retried on EINTR; never
    /// blocks. Nil while the process runs; `.exited` for CLD_EXITED, else `.signaled` with the
    /// signal number. With `reap` the zombie is gone afterwards; the pidfd stays open either way.
    /// Fails with the errno alone (ECHILD: not a child of this process, or already reaped).
    public func exitStatus(pidfd: Int32, reap: Bool) -> Result<ExitStatus?, SystemError> {
        var code: Int32 = 0, status: Int32 = 0
        let rc = shim_waitid_pidfd(pidfd, reap ? WEXITED : WEXITED | WNOWAIT, &code, &status)
        if rc < 0 { return .failure(SystemError(errno: -rc)) }
        guard rc == 1 else { return .success(nil) }
        return .success(code == Int32(CLD_EXITED) ? .exited(status) : .signaled(status))
    }

    /// One waitid(P_ALL, WEXITED | WNOHANG | WNOWAIT); never blocks, reaps nothing.
    public func exitedChild() -> Int32? {
        var info = siginfo_t()
        guard waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) == 0 else { return nil }
        let pid = info._sifields._sigchld.si_pid
        return pid > 0 ? pid : nil
    }

    /// One waitid(P_PID, WEXITED | WNOHANG); never blocks. True only when it reaped `pid`; false
    /// while it runs, when it is no child of this process, or when waitid fails.
    public func reapIfExited(_ pid: Int32) -> Bool {
        var info = siginfo_t()
        return waitid(P_PID, id_t(pid), &info, WEXITED | WNOHANG) == 0 && info._sifields._sigchld.si_pid == pid
    }

    /// `SystemFileReads.read`.
    public func read(_ path: String) -> Result<[UInt8], SystemError> { SystemFileReads().read(path) }

    /// Reads `fd` to end of file into a buffer of `size` bytes and one more (so that the end is
    /// seen without growing it), the rest (a file that grew) a page at a time; retries EINTR.
    static func readSized(_ fd: Int32, size: Int) -> Result<[UInt8], SystemError> {
        var failure: Int32?
        // Read into the array's uninitialized storage: no pass over the buffer before the read.
        let data = [UInt8](unsafeUninitializedCapacity: size + 1) { buffer, initialized in
            while initialized < buffer.count {
                let n = Glibc.read(fd, buffer.baseAddress! + initialized, buffer.count - initialized)
                if n < 0 && errno == EINTR { continue }
                if n < 0 { failure = errno }
                if n <= 0 { return }
                initialized += n
            }
        }
        if let failure { return .failure(SystemError(errno: failure)) }
        guard data.count == size + 1 else { return .success(data) }
        // The file grew past its size: the rest as any other file.
        switch readAll(fd, offset: nil) {
        case .success(let rest): return .success(data + rest)
        case .failure(let e): return .failure(e)
        }
    }

    /// Opens `path` with O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK (a symbolic link fails
    /// with ELOOP), fstats that descriptor, and when it is a regular file whose size is at most
    /// `limit`, reads it from that descriptor to end of file. The descriptor is closed before
    /// returning. Fails naming "open" or "fstat", or with the errno alone for the read.
    public func inspectFile(_ path: String, limit: Int64) -> Result<(status: FileStatus, contents: [UInt8]?), SystemError> {
        let fd = Glibc.open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)
        guard fd >= 0 else { return .failure(SystemError("open", errno: errno)) }
        defer { Glibc.close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0 else { return .failure(SystemError("fstat", errno: errno)) }
        let status = LinuxKernel.fileStatus(st)
        guard status.kind == .regular, status.size <= limit else { return .success((status, nil)) }
        switch Self.readAll(fd, offset: nil) {
        case .success(let bytes): return .success((status, bytes))
        case .failure(let e): return .failure(e)
        }
    }

    /// access(2) with X_OK, checked with the real user and group ids.
    public func isExecutable(_ path: String) -> Bool { access(path, X_OK) == 0 }

    /// pread(2) from offset 0 in 4 KiB reads, retrying EINTR: stops at end of file, or after the
    /// first read when it returned fewer than `completeSeqRead` bytes. The descriptor stays open
    /// and its file offset unchanged. Fails with the errno alone.
    public func read(fd: Int32) -> Result<[UInt8], SystemError> { Self.readAll(fd, offset: 0, shortRecords: true) }

    /// `SystemFileReads.readToEnd`.
    public func readToEnd(fd: Int32) -> Result<[UInt8], SystemError> { SystemFileReads().readToEnd(fd: fd) }

    /// A detached thread per job (`BackgroundWork`), given `SystemFileReads`, its result posted
    /// back through an eventfd the loop watches. Fails with `.notSupported` without a loop, or
    /// naming "eventfd" or "pthread_create".
    public func inBackground<T: Sendable>(_ work: @escaping @Sendable (any FileReads) -> T, _ done: @escaping (T) -> Void) -> SystemError? {
        guard let loop else { return .notSupported }
        return backgroundWork.run({ work(SystemFileReads()) }, loop: loop, done)
    }

    /// The CPUs this process may run on (its affinity mask, which a cpuset narrows), else the
    /// CPUs online; at least 1.
    public var processorCount: Int {
        let usable = Int(shim_usable_cpus())
        return max(1, usable > 0 ? usable : Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))))
    }

    /// Runs `jobs` on threads of their own (the first on the calling thread) and returns when
    /// all are done (`Concurrently`).
    public func concurrently(_ jobs: [@Sendable () -> Void]) { Concurrently.run(jobs) }

    /// A read from offset 0 of `cgroup.procs` or `cgroup.events` (kernfs seq files) that
    /// returns fewer bytes than this holds everything: a seq file fills each read with whole
    /// records up to one page, and stops short of that only at its end or when the next record
    /// does not fit in what is left of the page, and the records of these files (a pid, a
    /// `key value` line) are far shorter than the rest of a page below this mark. So the
    /// common read of such a file is one `pread`, with no second call to see the end. Not for
    /// files with long records (`/proc/locks`: a lock and all its waiters are one record).
    static let completeSeqRead = 2048

    /// Reads `fd` to end of file, `size` bytes per call: with pread(2) from `offset`, else with
    /// read(2) from the file position; with `shortRecords`, stops after a first read shorter
    /// than `completeSeqRead`. Retries EINTR; fails with the errno alone.
    static func readAll(_ fd: Int32, offset: Int?, shortRecords: Bool = false, chunk size: Int = 4096) -> Result<[UInt8], SystemError> {
        withUnsafeTemporaryAllocation(byteCount: size, alignment: 8) { chunk in
            var data: [UInt8] = []
            var position = offset ?? 0
            while true {
                let n = offset == nil ? Glibc.read(fd, chunk.baseAddress, chunk.count) : pread(fd, chunk.baseAddress, chunk.count, off_t(position))
                if n < 0 {
                    if errno == EINTR { continue }
                    return .failure(SystemError(errno: errno))
                }
                if n == 0 { return .success(data) }
                data.append(contentsOf: UnsafeRawBufferPointer(rebasing: chunk[0..<n]))
                if shortRecords && position == 0 && n < LinuxKernel.completeSeqRead { return .success(data) }
                position += n
            }
        }
    }

    /// Opens `path` write-only and close-on-exec (never created: ENOENT when missing), writes
    /// `text` in one write(2), and closes the descriptor. A short write is EIO; EINTR is not
    /// retried. Errors carry the errno alone.
    public func write(_ path: String, _ text: String) -> SystemError? {
        let fd = Glibc.open(path, O_WRONLY | O_CLOEXEC)
        guard fd >= 0 else { return SystemError(errno: errno) }
        defer { Glibc.close(fd) }
        var bytes = Array(text.utf8)
        let n = bytes.withUnsafeMutableBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
        if n < 0 { return SystemError(errno: errno) }
        return n == bytes.count ? nil : SystemError(errno: EIO)
    }

    /// One pwrite(2) of `text` at offset 0; the descriptor stays open. A short write is EIO;
    /// EINTR is not retried. Errors carry the errno alone.
    public func write(fd: Int32, _ text: String) -> SystemError? {
        var bytes = Array(text.utf8)
        let n = bytes.withUnsafeMutableBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
        if n < 0 { return SystemError(errno: errno) }
        return n == bytes.count ? nil : SystemError(errno: EIO)
    }

    /// mkdir(2), then chmod(2) to `mode` exactly: the errno alone on failure (EEXIST when
    /// something is at `path` already).
    public func makeDirectory(_ path: String, mode: UInt32) -> SystemError? {
        guard mkdir(path, mode_t(mode)) == 0 else { return SystemError(errno: errno) }
        return chmod(path, mode_t(mode)) == 0 ? nil : SystemError(errno: errno)
    }

    /// realpath(3); nil whenever it fails (a missing component, no permission to search).
    public func resolvePath(_ path: String) -> String? {
        guard let resolved = realpath(path, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    /// unlink(2): a symbolic link is removed, not followed. The errno alone on failure.
    public func removeFile(_ path: String) -> SystemError? {
        unlink(path) == 0 ? nil : SystemError(errno: errno)
    }

    /// chown(2), following links. The errno alone on failure.
    public func changeOwner(_ path: String, user: UInt32, group: UInt32) -> SystemError? {
        chown(path, user, group) == 0 ? nil : SystemError(errno: errno)
    }

    /// chmod(2), following links. The errno alone on failure.
    public func changeMode(_ path: String, _ mode: UInt32) -> SystemError? {
        chmod(path, mode_t(mode)) == 0 ? nil : SystemError(errno: errno)
    }

    /// `SystemFileReads.status`.
    public func status(_ path: String, followLinks: Bool) -> Result<FileStatus, SystemError> {
        SystemFileReads().status(path, followLinks: followLinks)
    }

    static func fileStatus(_ st: stat) -> FileStatus {
        let kind: FileStatus.Kind
        switch st.st_mode & S_IFMT {
        case S_IFREG: kind = .regular
        case S_IFDIR: kind = .directory
        case S_IFLNK: kind = .symbolicLink
        default: kind = .other
        }
        return FileStatus(
            kind: kind, permissions: UInt32(st.st_mode & 0o7777), owner: st.st_uid, group: st.st_gid, size: Int64(st.st_size),
            identity: FileIdentity(device: UInt64(st.st_dev), inode: UInt64(st.st_ino)))
    }

    /// memfd_create(2) (`shim_memfd`, close-on-exec), then `parts` written one after another,
    /// retrying EINTR; on failure nothing is left open.
    public func memoryFile(_ name: String, withParts parts: [[UInt8]]) -> Result<Int32, SystemError> {
        let fd = shim_memfd(name)
        guard fd >= 0 else { return .failure(SystemError("memfd_create", errno: -fd)) }
        if let e = Self.write(parts, to: fd, naming: "write") {
            Glibc.close(fd)
            return .failure(e)
        }
        return .success(fd)
    }

    /// Writes `parts` one after another on `fd`, retrying EINTR; the error, naming `what`, of the
    /// write that failed (EIO for one that wrote nothing).
    static func write(_ parts: [[UInt8]], to fd: Int32, naming what: String) -> SystemError? {
        for bytes in parts {
            var written = 0
            while written < bytes.count {
                let n = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + written, $0.count - written) }
                if n < 0 && errno == EINTR { continue }
                guard n > 0 else { return SystemError(what, errno: n < 0 ? errno : EIO) }
                written += n
            }
        }
        return nil
    }

    /// Removes a leftover `path.tmp`, creates it anew (O_EXCL | O_NOFOLLOW | O_CLOEXEC, `mode`
    /// less the umask), writes `bytes` retrying EINTR, fsyncs it when `durable`, closes it and
    /// renames it over `path` (a link at `path` is replaced, not followed); when `durable`, then
    /// fsyncs the directory holding `path`, ignoring a failure of that last step. On any earlier
    /// failure `path.tmp` is removed, `path` is untouched, and the error names the step and the
    /// temporary path. No descriptor stays open.
    public func replaceFile(_ path: String, withParts parts: [[UInt8]], mode: UInt32, durable: Bool) -> SystemError? {
        Self.replaceFile(path, withParts: parts, mode: mode, durable: durable)
    }

    /// `replaceFile` on any thread; `unique`: with a temporary file of its own (a write off the
    /// loop, which a write of the same file on the loop may cross).
    static func replaceFile(_ path: String, withParts parts: [[UInt8]], mode: UInt32, durable: Bool, unique: Bool = false) -> SystemError? {
        // A name of its own per write: two writes of one file (one on the loop, one on a
        // thread) never share, and so never tear, a temporary file; the last rename wins whole.
        let temporary = path + ".tmp" + (unique ? ".\(getpid()).\(temporaryCounter.add(1, ordering: .relaxed).newValue)" : "")
        unlink(temporary)  // a leftover of an interrupted write
        let fd = Glibc.open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode_t(mode))
        guard fd >= 0 else { return SystemError("open \(temporary)", errno: errno) }
        if let e = Self.write(parts, to: fd, naming: "write \(temporary)") {
            Glibc.close(fd)
            unlink(temporary)
            return e
        }
        if durable && fsync(fd) != 0 {
            let e = SystemError("fsync \(temporary)", errno: errno)
            Glibc.close(fd)
            unlink(temporary)
            return e
        }
        Glibc.close(fd)
        if Glibc.rename(temporary, path) != 0 {
            let e = SystemError("rename \(temporary)", errno: errno)
            unlink(temporary)
            return e
        }
        if durable, let slash = path.lastIndex(of: "/") {
            // The rename itself, made durable: an fsync of the directory holding the file.
            let directory = Glibc.open(slash == path.startIndex ? "/" : String(path[..<slash]), O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            if directory >= 0 {
                fsync(directory)
                Glibc.close(directory)
            }
        }
        return nil
    }

    /// `TreeRemoval.remove` on a detached thread (`BackgroundWork`), its outcome posted back
    /// through the eventfd the loop watches. Fails with `.notSupported` without a loop.
    public func removeTreeInBackground(_ path: String, owner: FileOwner?, _ done: @escaping (SystemError?) -> Void) -> SystemError? {
        guard let loop else { return .notSupported }
        return backgroundWork.run({ TreeRemoval.remove(path, owner: owner) }, loop: loop, done)
    }

    /// `Kernel.measureTreeInBackground`.
    public func measureTreeInBackground(
        _ path: String, owner: FileOwner?, limit: UInt64, _ done: @escaping (Result<UInt64, SystemError>) -> Void
    ) -> SystemError? {
        guard let loop else { return .notSupported }
        return backgroundWork.run({ TreeUsage.measure(path, owner: owner, limit: limit) }, loop: loop, done)
    }

    /// `Kernel.limitTreeInBackground`.
    public func limitTreeInBackground(
        _ path: String, owner: FileOwner, limit: UInt64, _ done: @escaping (Result<ProjectQuotaOutcome, SystemError>) -> Void
    ) -> SystemError? {
        guard let loop else { return .notSupported }
        return backgroundWork.run({ ProjectQuota.apply(path, owner: owner, limit: limit) }, loop: loop, done)
    }

    /// `Kernel.replaceFileInBackground`.
    public func replaceFileInBackground(_ path: String, with bytes: [UInt8], mode: UInt32, _ done: @escaping (SystemError?) -> Void) -> SystemError? {
        guard let loop else { return .notSupported }
        return backgroundWork.run({ LinuxKernel.replaceFile(path, withParts: [bytes], mode: mode, durable: true, unique: true) }, loop: loop, done)
    }

    /// `Kernel.handOffInBackground`.
    public func handOffInBackground(_ handoff: URLHandoff, _ done: @escaping (URLHandoff.Outcome) -> Void) -> SystemError? {
        guard let loop else { return .notSupported }
        return backgroundWork.run({ handoff.perform() }, loop: loop, done)
    }

    /// `Kernel.checkConstraintsInBackground`.
    public func checkConstraintsInBackground(_ done: @escaping (Constraints) -> Void) -> SystemError? {
        guard let loop else { return .notSupported }
        return backgroundWork.run({ Constraints.check() }, loop: loop, done)
    }

    /// `Kernel.openBus`: the service attached to this kernel's loop.
    public func openBus(system: Bool, handler: any BusServiceHandler) -> Result<BusService, SystemError> {
        guard let loop else { return .failure(.notSupported) }
        do { return .success(try BusService(system: system, event: loop.eventPointer, handler: handler)) } catch { return .failure(error) }
    }

    /// `Kernel.makeSuiteMemory`.
    public func makeSuiteMemory() -> Result<SuiteMemory, SystemError> { SuiteMemory.make() }

    /// `Kernel.adoptSuiteMemory`.
    public func adoptSuiteMemory(fd: Int32) -> Result<SuiteMemory, SystemError> { SuiteMemory.adopt(fd: fd) }

    /// pipe2(2) with O_CLOEXEC, then O_NONBLOCK on the read end. Fails naming "pipe2".
    public func outputPipe() -> Result<(read: Int32, write: Int32), SystemError> {
        var fds: [Int32] = [-1, -1]
        let rc = shim_pipe_cloexec(&fds)
        guard rc == 0 else { return .failure(SystemError("pipe2", errno: -rc)) }
        let nb = shim_set_nonblocking(fds[0])
        guard nb == 0 else {
            Glibc.close(fds[0])
            Glibc.close(fds[1])
            return .failure(SystemError("fcntl O_NONBLOCK", errno: -nb))
        }
        return .success((fds[0], fds[1]))
    }

    /// read(2) retrying EINTR: the errno alone on failure.
    public func readSome(fd: Int32, limit: Int) -> Result<[UInt8]?, SystemError> {
        var buffer = [UInt8](repeating: 0, count: limit)
        while true {
            let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, limit) }
            if n > 0 { return .success(Array(buffer[0..<n])) }
            if n == 0 { return .success(nil) }
            if errno == EINTR { continue }
            if errno == EAGAIN || errno == EWOULDBLOCK { return .success([]) }
            return .failure(SystemError(errno: errno))
        }
    }

    /// rename(2). The errno alone on failure.
    public func rename(_ path: String, to newPath: String) -> SystemError? {
        Glibc.rename(path, newPath) == 0 ? nil : SystemError(errno: errno)
    }

    /// `shim_set_group_default_acl`. The errno alone on failure.
    public func setGroupDefaultACL(_ path: String, group: UInt32) -> SystemError? {
        let rc = shim_set_group_default_acl(path, group)
        return rc == 0 ? nil : SystemError(errno: -rc)
    }

    /// One poll(2) of up to `seconds` (rounded down to milliseconds, plus one), blocking the
    /// calling thread. True when poll reported the descriptor: one of `events`, or POLLERR,
    /// POLLHUP or POLLNVAL; false on timeout, on EINTR (not retried) and on failure.
    public func waitFor(fd: Int32, events: UInt32, seconds: Double) -> Bool {
        var pfd = pollfd(fd: fd, events: Int16(truncatingIfNeeded: events), revents: 0)
        let rc = poll(&pfd, 1, Int32(max(seconds, 0) * 1000) + 1)
        return rc > 0
    }

    /// rmdir(2): the errno alone on failure (ENOTEMPTY when it still has entries).
    public func removeDirectory(_ path: String) -> SystemError? {
        rmdir(path) == 0 ? nil : SystemError(errno: errno)
    }

    /// `SystemFileReads.listDirectory`.
    public func listDirectory(_ path: String) -> [String]? { SystemFileReads().listDirectory(path) }

    /// `SystemFileReads.cachedIdentity`.
    public func cachedIdentity(_ path: String) -> Result<FileIdentity, SystemError> { SystemFileReads().cachedIdentity(path) }

    /// `SystemFileReads.readLink`.
    public func readLink(_ path: String) -> Result<String, SystemError> { SystemFileReads().readLink(path) }

    /// open(2) with O_RDONLY | O_CLOEXEC (and O_DIRECTORY for `directory`), links followed, in
    /// blocking mode: a new descriptor the caller owns. The errno alone on failure.
    public func open(_ path: String, directory: Bool) -> Result<Int32, SystemError> {
        let fd = Glibc.open(path, directory ? O_RDONLY | O_DIRECTORY | O_CLOEXEC : O_RDONLY | O_CLOEXEC)
        return fd >= 0 ? .success(fd) : .failure(SystemError(errno: errno))
    }

    /// open(2) with O_WRONLY | O_CLOEXEC, never creating the file, links followed: a new
    /// descriptor the caller owns. The errno alone on failure.
    public func openForWriting(_ path: String) -> Result<Int32, SystemError> {
        let fd = Glibc.open(path, O_WRONLY | O_CLOEXEC)
        return fd >= 0 ? .success(fd) : .failure(SystemError(errno: errno))
    }

    /// close(2), once (never retried); its result is ignored.
    public func close(_ fd: Int32) { Glibc.close(fd) }

    /// Asks the kernel at each read: a clone3(2) call with no arguments, which only an absent or
    /// filtered clone3 answers with ENOSYS.
    public var canSpawnIntoCgroup: Bool { shim_clone3_available() == 1 }

    /// `shim_spawn`: clone3 into `cgroupFD` when given (fork or posix_spawn, then pidfd_open,
    /// where clone3 is unavailable and there is no cgroup). The child runs in a new session with
    /// default signal dispositions and an empty mask, stdin on /dev/null, stdout and stderr
    /// `outputFD` when given, else the daemon's (`childOutputs`: write-only where the daemon's is
    /// a terminal), `channelFD`
    /// at fd 3 and every other descriptor closed; what `shim_spawn`
    /// lists after that (limits, sandbox, credentials, working directory) is applied before the
    /// exec. Blocks until the child has exec'd or failed.
    /// Returns its pid and a close-on-exec pidfd, both the caller's to reap and close. On failure
    /// no child and no pidfd remain (a failed child is reaped); the error names the child's step
    /// that failed, or nothing when no step was reported. The request's descriptors stay open in

    /// `Kernel.landlockABI`.
    public var landlockABI: Int { Int(shim_landlock_abi()) }

    /// `Kernel.networkNamespace`: fails naming "network namespace".
    public func networkNamespace() -> Result<Int32, SystemError> {
        var fd: Int32 = -1
        let rc = shim_network_namespace(&fd)
        return rc == 0 ? .success(fd) : .failure(SystemError("network namespace", errno: -rc))
    }

    /// `Kernel.sandboxTemplateInBackground`: fails naming "sandbox template".
    public func sandboxTemplateInBackground(masks: [String], _ done: @escaping (Result<Int32, SystemError>) -> Void) -> SystemError? {
        guard let loop else { return .notSupported }
        return backgroundWork.run({ Self.sandboxTemplate(masks: masks) }, loop: loop, done)
    }

    private static func sandboxTemplate(masks: [String]) -> Result<Int32, SystemError> {
        withCStrings(masks) { paths in
            let mounts = (0..<masks.count).map { shim_sandbox_mount(path: UnsafePointer(paths[$0]), kind: Int32(SHIM_MOUNT_MASK)) }
            var fd: Int32 = -1
            let rc = mounts.withUnsafeBufferPointer { shim_sandbox_template($0.baseAddress, Int32(masks.count), &fd) }
            return rc == 0 ? .success(fd) : .failure(SystemError("sandbox template", errno: -rc))
        }
    }

    /// `Kernel.bindNamespace`: fails naming "bind".
    public func bindNamespace(_ fd: Int32, at path: String) -> SystemError? {
        let rc = shim_bind_namespace(fd, path)
        return rc == 0 ? nil : SystemError("bind \(path)", errno: -rc)
    }

    /// `Kernel.unbindNamespace`: fails naming "umount".
    public func unbindNamespace(at path: String) -> SystemError? {
        let rc = shim_unbind_namespace(path)
        return rc == 0 ? nil : SystemError("umount \(path)", errno: -rc)
    }

    /// `Kernel.hasPriorityEvent`.
    public func hasPriorityEvent(fd: Int32) -> Bool {
        var p = pollfd(fd: fd, events: Int16(POLLPRI), revents: 0)
        return poll(&p, 1, 0) > 0 && p.revents & Int16(POLLPRI | POLLERR) != 0
    }

    /// `Kernel.waitReadable`: retries EINTR with the time left; fails naming "poll".
    public func waitReadable(fd: Int32, seconds: Double) -> Result<Bool, SystemError> {
        let deadline = now().adding(seconds: seconds)
        while true {
            let left = max(0, deadline.seconds(since: now()))
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let n = poll(&p, 1, Int32((left * 1000).rounded(.up)))
            if n < 0 && errno == EINTR { continue }
            if n < 0 { return .failure(SystemError("poll", errno: errno)) }
            return .success(n > 0)
        }
    }
    /// the daemon.
    public func spawn(_ request: SpawnRequest) -> Result<(pid: Int32, pidfd: Int32), SystemError> {
        var pidfd: Int32 = -1
        var step: Int32 = -1
        let groups: [gid_t] = request.credentials?.groups ?? []
        let limits = request.resourceLimits.map { shim_rlimit(resource: LinuxKernel.rlimit($0.resource), value: $0.value) }
        // The template's masks and the protected directories after the plan's mounts, in one
        // list of C strings.
        let mountPaths =
            (request.sandbox?.mounts.map(\.path) ?? []) + (request.sandbox?.template?.masks ?? [])
            + (request.sandbox?.protectedDirectories.map(\.path) ?? [])
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
                                                channel_fd: request.channelFD ?? -1, extra_fd: request.extraFD ?? -1,
                                                keep_privilege: request.keptCapabilities.isEmpty ? 0 : 1,
                                                kept_capabilities: request.keptCapabilities.reduce(UInt64(0)) { $0 | (UInt64(1) << UInt64($1)) },
                                                stdout_fd: request.outputFD ?? LinuxKernel.childOutputs.stdout,
                                                stderr_fd: request.outputFD ?? LinuxKernel.childOutputs.stderr, cgroup_fd: request.cgroupFD ?? -1,
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
        return pid < 0 ? .failure(SystemError(LinuxKernel.spawnSteps[Int(step)] ?? "", errno: -pid)) : .success((pid, pidfd))
    }

    /// What a spawned child gets at fds 1 and 2, each -1 to inherit the daemon's. Where the
    /// daemon's is a terminal (a daemon started from a shell, not under systemd), the child
    /// gets a write-only open of that terminal of its own instead: the daemon's is open for
    /// reading too, and would let every extension read what is typed there. Where that open
    /// fails, /dev/null. Opened once per program, close-on-exec.
    static let childOutputs: (stdout: Int32, stderr: Int32) = {
        func output(_ fd: Int32) -> Int32 {
            guard isatty(fd) == 1 else { return -1 }
            let own = Glibc.open("/proc/self/fd/\(fd)", O_WRONLY | O_NOCTTY | O_CLOEXEC)
            return own >= 0 ? own : Glibc.open("/dev/null", O_WRONLY | O_CLOEXEC)
        }
        let stdout = output(1)
        return (stdout, stdout >= 0 && sameFile(1, 2) ? stdout : output(2))
    }()

    /// Whether descriptors `a` and `b` are the same file (device and inode).
    private static func sameFile(_ a: Int32, _ b: Int32) -> Bool {
        var first = stat()
        var second = stat()
        return fstat(a, &first) == 0 && fstat(b, &second) == 0 && first.st_dev == second.st_dev && first.st_ino == second.st_ino
    }

    /// The RLIMIT_ constant of `resource`.
    static func rlimit(_ resource: ResourceLimit.Resource) -> Int32 {
        switch resource {
        case .data: Int32(RLIMIT_DATA.rawValue)
        case .processes: Int32(__RLIMIT_NPROC.rawValue)
        case .openFiles: Int32(RLIMIT_NOFILE.rawValue)
        }
    }

    /// The names of the child's steps (`SHIM_STEP_*`), for error messages.
    static let spawnSteps: [Int: String] = [
        0: "setting up descriptors and signals", 1: "setrlimit", 2: "dropping the capability bounding set",
        3: "setgroups", 4: "setresgid", 5: "setresuid", 6: "PR_SET_NO_NEW_PRIVS", 7: "capset", 8: "chdir", 9: "execve",
        10: "joining the cgroup v1 memory cgroup",
        11: "sandbox: the user namespace", 12: "sandbox: the file system view (filesystem)", 13: "sandbox: the private /proc (proc)",
        14: "sandbox: the network namespace (network)", 15: "sandbox: the system-call filter (syscalls)",
        16: "sandbox: the Landlock scope of abstract unix sockets and signals",
        17: "sandbox: entering the template of the file system view",
    ]

    /// Calls `body` with the C form of `plan` (nil without one); `paths` are the C strings of
    /// its mounts' paths, alive for the call.
    private func withSandbox<R>(_ plan: SandboxPlan?, paths: UnsafePointer<UnsafeMutablePointer<CChar>?>, _ body: (UnsafePointer<shim_sandbox>?) -> R) -> R {
        guard let plan else { return body(nil) }
        let mounts = plan.mounts.enumerated().map { i, m in shim_sandbox_mount(path: UnsafePointer(paths[i]), kind: m.kind.rawValue) }
        return mounts.withUnsafeBufferPointer { list in
            var bits: Int32 = plan.userNamespace ? Int32(SHIM_SANDBOX_USERNS) : 0
            if plan.landlockScope { bits |= Int32(SHIM_SANDBOX_SCOPE) }
            for part in plan.parts {
                switch part {
                case .filesystem: bits |= Int32(SHIM_SANDBOX_FILESYSTEM)
                case .proc: bits |= Int32(SHIM_SANDBOX_PROC)
                case .network: bits |= Int32(SHIM_SANDBOX_NETWORK)
                case .syscalls: bits |= Int32(SHIM_SANDBOX_SYSCALLS)
                }
            }
            // Formatted here: the child between clone and exec calls nothing that may allocate.
            let scratch = "mode=1777" + (plan.scratchBytes.map { ",size=\($0)" } ?? "")
            let protectedAt = plan.mounts.count + (plan.template?.masks.count ?? 0)
            let protected = plan.protectedDirectories.enumerated().map { k, d in
                shim_protected_dir(dev: dev_t(d.identity.device), ino: ino_t(d.identity.inode), path: UnsafePointer(paths[protectedAt + k]))
            }
            return scratch.withCString { options in
                protected.withUnsafeBufferPointer { protectedList in
                    let masks = plan.template.map { _ in UnsafeRawPointer(paths + plan.mounts.count).assumingMemoryBound(to: UnsafePointer<CChar>?.self) }
                    var c = shim_sandbox(
                        parts: bits, mounts: list.baseAddress, nmounts: Int32(list.count), filter: plan.filter, uid: plan.uid, gid: plan.gid,
                        scratch_options: options, netns_fd: plan.networkNamespaceFD ?? -1, template_fd: plan.template?.fd ?? -1,
                        template_masks: masks, ntemplate_masks: Int32(plan.template?.masks.count ?? 0),
                        hidden_dev: dev_t(plan.hiddenDirectory?.device ?? 0), hidden_ino: ino_t(plan.hiddenDirectory?.inode ?? 0),
                        protected_dirs: protectedList.baseAddress, nprotected_dirs: Int32(protectedList.count))
                    return withUnsafePointer(to: &c) { body($0) }
                }
            }
        }
    }

    /// A one-shot sd-event timer on CLOCK_MONOTONIC with 1 ms accuracy; `handler` runs on the
    /// loop's thread. Releasing the returned value cancels the timer, so the caller keeps it.
    /// Fails with `.notSupported` without a loop, or naming "sd_event_add_time".
    public func addTimer(at: Instant, priority: Int64, _ handler: @escaping () -> Void) -> Result<any Cancellable, SystemError> {
        guard let loop else { return .failure(.notSupported) }
        do {
            return .success(try loop.addTimer(at: at, priority: priority, handler: handler))
        } catch {
            return .failure(error)
        }
    }

    /// `SystemFileReads.watchOpens`.
    public func watchOpens(_ paths: [String]) -> Result<(fd: Int32, watches: [Int32?]), SystemError> { SystemFileReads().watchOpens(paths) }

    /// Reads `fd` until it would block (or fails or ends), retrying EINTR; never blocks on the
    /// non-blocking descriptor of `watchOpens`. One watch descriptor per event, in order,
    /// duplicates kept.
    public func readOpenEvents(fd: Int32) -> [Int32] {
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

    /// An sd-event I/O source: `handler` gets the returned epoll events, on the loop's thread.
    /// The descriptor stays the caller's: cancel the watch before closing it. Releasing the
    /// returned value cancels the watch, so the caller keeps it. Fails with `.notSupported`
    /// without a loop, or naming "sd_event_add_io".
    public func watch(fd: Int32, events: UInt32, _ handler: @escaping (UInt32) -> Void) -> Result<any Watch, SystemError> {
        guard let loop else { return .failure(.notSupported) }
        do {
            return .success(try loop.addIO(fd: fd, events: events, handler: handler))
        } catch {
            return .failure(error)
        }
    }

    /// An sd-event signal source, which needs `signal` blocked already (`DaemonProcess.prepare`);
    /// handed to the loop, so it cannot be cancelled. A standard signal coalesces: instances
    /// raised while one is pending reach `handler` once. Fails with `.notSupported` without a
    /// loop, or naming "sd_event_add_signal".
    public func watchSignal(_ signal: Int32, priority: Int64, _ handler: @escaping (Int32, Int32) -> Void) -> SystemError? {
        guard let loop else { return .notSupported }
        do {
            try loop.addSignal(signal, priority: priority, handler: handler).float()
            return nil
        } catch {
            return error
        }
    }

    /// Replaces the deadline's handler and arms its one timer (1 ms accuracy) or, for nil,
    /// disables it. Nothing without a loop; a failure to create the timer is not reported.
    public func setDeadline(_ at: Instant?, _ handler: @escaping () -> Void) -> SystemError? {
        guard let loop else { return SystemError("there is no event loop", errno: ENOTSUP) }
        return loop.setDeadline(at, handler: handler)
    }

    /// sd_event_loop: blocks the calling thread, dispatching events, until `exitLoop`; returns
    /// that code, a negative errno when sd-event fails, and -1 at once without a loop.
    public func runLoop() -> Int32 { loop?.run() ?? -1 }

    /// sd_event_exit; nothing without a loop.
    public func exitLoop(_ code: Int32) { loop?.exit(code) }

    /// sd_notify(0, state): `$NOTIFY_SOCKET` stays set for later calls, and the result is
    /// ignored.
    public func notifyServiceManager(_ state: String) { _ = sd_notify(0, state) }

    /// sd_watchdog_enabled(0): `$WATCHDOG_USEC` when it is set for this process, else nil (also
    /// when it cannot be parsed).
    public func watchdogInterval() -> UInt64? {
        var usec: UInt64 = 0
        return sd_watchdog_enabled(0, &usec) > 0 ? usec : nil
    }

    /// sd_event_set_watchdog: true when the loop will send WATCHDOG=1; false without a loop,
    /// when the service manager did not ask for a watchdog, or when sd-event fails.
    public func enableWatchdog() -> Bool { loop?.enableWatchdog() ?? false }
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
