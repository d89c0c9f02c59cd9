import CShims
import ExtensionTransport
import SupervisorCore

#if canImport(Glibc)
import Glibc
#endif

/// Replacing the daemon's program: finding it on disk, running its check as a child, and the
/// execve that keeps an explicit list of descriptors.
extension LinuxKernel {
    /// readlink(2) of `/proc/self/exe`, with a trailing ` (deleted)` removed; nil when the link
    /// cannot be read.
    public func executablePath() -> String? {
        guard case .success(var path) = readLink("/proc/self/exe") else { return nil }
        if path.hasSuffix(" (deleted)") { path.removeLast(" (deleted)".count) }
        return path
    }

    /// The program a daemon started as `argv0` runs, as a path that names whatever file is
    /// there when it is used (so that a re-exec runs the file a package upgrade or a moved
    /// symbolic link put there): `argv0` itself when absolute; made absolute against the
    /// working directory when it has a `/`; else the first executable file of that name on
    /// `$PATH`. Nil when none is found.
    public static func programPath(invokedAs argv0: String) -> String? {
        if argv0.hasPrefix("/") { return argv0 }
        func absolute(_ path: String) -> String? {
            if path.hasPrefix("/") { return path }
            guard let cwd = getcwd(nil, 0) else { return nil }
            defer { free(cwd) }
            return String(cString: cwd) + "/" + path
        }
        if argv0.contains("/") { return absolute(argv0) }
        guard !argv0.isEmpty, let search = getenv("PATH") else { return nil }
        for directory in String(cString: search).split(separator: ":", omittingEmptySubsequences: false) {
            let candidate = (directory.isEmpty ? "." : String(directory)) + "/" + argv0
            var st = stat()
            if access(candidate, X_OK) == 0 && stat(candidate, &st) == 0 && st.st_mode & S_IFMT == S_IFREG { return absolute(candidate) }
        }
        return nil
    }

    /// F_SETPIPE_SZ (F_LINUX_SPECIFIC_BASE + 7), which Glibc exports only with _GNU_SOURCE.
    static let setPipeSize: Int32 = 1031

    /// posix_spawn(3) of `path` (`argv[0]`; no `$PATH` search) with the daemon's environment,
    /// an empty signal mask (signals the daemon ignores, SIGPIPE after `DaemonProcess.prepare`,
    /// stay ignored), stdin the read end of one pipe (raised to 1 MiB when the kernel allows)
    /// and stdout and stderr the write end of another; the child also inherits any descriptor
    /// of the daemon that is not close-on-exec. Both pipes are made close-on-exec (pipe2), the
    /// daemon's ends non-blocking; the child's pidfd is opened at once. Its deadline is `seconds` from
    /// now. On failure nothing is left open or running. Fails naming "pipe", "fcntl O_NONBLOCK",
    /// "spawn PATH" or "pidfd_open PID".
    public func startChild(_ path: String, arguments: [String], seconds: Double) -> Result<ChildProgram, SystemError> {
        var inputFDs: [Int32] = [-1, -1]
        var outputFDs: [Int32] = [-1, -1]
        // Close-on-exec from the start: no program another thread starts meanwhile inherits
        // an end (which would hold the child's stdin or output open past its exit).
        let inputRC = shim_pipe_cloexec(&inputFDs)
        guard inputRC == 0 else { return .failure(SystemError("pipe", errno: -inputRC)) }
        let outputRC = shim_pipe_cloexec(&outputFDs)
        guard outputRC == 0 else {
            inputFDs.forEach { _ = Glibc.close($0) }
            return .failure(SystemError("pipe", errno: -outputRC))
        }
        let (childInput, input) = (inputFDs[0], inputFDs[1])
        let (output, childOutput) = (outputFDs[0], outputFDs[1])
        // A larger pipe takes the document in fewer rounds; the default (64 KiB) works too.
        _ = fcntl(input, LinuxKernel.setPipeSize, 1 << 20)
        // Only the daemon's ends: the child's stdin and output block as usual.
        for fd in [input, output] {
            let flags = fcntl(fd, F_GETFL)
            guard flags >= 0, fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0 else {
                let failure = SystemError("fcntl O_NONBLOCK", errno: errno)
                (inputFDs + outputFDs).forEach { _ = Glibc.close($0) }
                return .failure(failure)
            }
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        posix_spawn_file_actions_adddup2(&actions, childInput, 0)
        posix_spawn_file_actions_adddup2(&actions, childOutput, 1)
        posix_spawn_file_actions_adddup2(&actions, childOutput, 2)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        // The child starts with no blocked signal (the daemon blocks those its loop reads).
        var none = sigset_t()
        sigemptyset(&none)
        posix_spawnattr_setsigmask(&attributes, &none)
        // A process group of its own, ended with it (`finish`, `abandon`): nothing it starts
        // outlives the check.
        posix_spawnattr_setpgroup(&attributes, 0)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETPGROUP))
        var pid: pid_t = 0
        let rc = withCStrings([path] + arguments) { argv in posix_spawn(&pid, path, &actions, &attributes, argv, environ) }
        posix_spawn_file_actions_destroy(&actions)
        posix_spawnattr_destroy(&attributes)
        Glibc.close(childInput)
        Glibc.close(childOutput)
        guard rc == 0 else {
            Glibc.close(input)
            Glibc.close(output)
            return .failure(SystemError("spawn \(path)", errno: rc))
        }
        let pidfd = shim_pidfd_open(pid)
        guard pidfd >= 0 else {
            Glibc.kill(pid, SIGKILL)
            var status: Int32 = 0
            waitpid(pid, &status, 0)
            Glibc.close(input)
            Glibc.close(output)
            return .failure(SystemError("pidfd_open \(pid)", errno: -pidfd))
        }
        return .success(ChildProgram(pid: pid, pidfd: pidfd, input: input, output: output, deadline: now().adding(seconds: seconds)))
    }

    /// Blocks the calling thread until `child`'s deadline at most: writes `input` on the
    /// child's stdin while reading its output (so that neither side waits on the other), closes
    /// its stdin once all is written (or at once when the child stops reading: EPIPE), then
    /// calls `whileItRuns` (also when the deadline came first, or the output ended), reads its
    /// output until its end of file or the child's exit, whichever comes first (keeping what
    /// arrives until 64 KiB is held, then reading and dropping the rest), then waits for its
    /// exit on its pidfd. Its process group then gets SIGKILL, so that nothing it started
    /// outlives it; a child still running at the deadline goes with it, and its status is nil. Every descriptor of `child` is
    /// closed before it returns. The output is decoded as UTF-8 (invalid bytes replaced).
    /// SIGPIPE is blocked on the calling thread meanwhile, and one its writes raised is taken
    /// before it is unblocked: a child that stops reading is an EPIPE, whether or not the
    /// process ignores SIGPIPE. Fails naming "waitpid PID".
    public func finish(_ child: ChildProgram, input parts: [[UInt8]], whileItRuns: () -> Void) -> Result<(status: ExitStatus?, output: String), SystemError> {
        var brokenPipe = sigset_t()
        sigemptyset(&brokenPipe)
        sigaddset(&brokenPipe, SIGPIPE)
        var mask = sigset_t()
        pthread_sigmask(SIG_BLOCK, &brokenPipe, &mask)
        defer {
            var now = timespec()
            while sigtimedwait(&brokenPipe, nil, &now) == SIGPIPE {}
            pthread_sigmask(SIG_SETMASK, &mask, nil)
        }
        var stdin = child.input
        // The part being written, and how much of it is.
        var part = 0
        var written = 0
        var ran = false
        func closeInput() {
            if stdin >= 0 { Glibc.close(stdin) }
            stdin = -1
            if !ran {
                ran = true
                whileItRuns()
            }
        }
        /// Moves past the parts written whole (and the empty ones); closes the input after the last.
        func advance() {
            while part < parts.count && written == parts[part].count {
                part += 1
                written = 0
            }
            if part == parts.count { closeInput() }
        }
        let total = parts.reduce(0) { $0 + $1.count }
        advance()
        // A pipe that holds the whole input takes it in one write: the child then reads it
        // without waking this thread between its reads. Only as large as the kernel allows
        // (past /proc/sys/fs/pipe-max-size only with CAP_SYS_RESOURCE); else as it is.
        if stdin >= 0 && total > 1 << 20 { _ = fcntl(stdin, LinuxKernel.setPipeSize, Int32(clamping: total)) }
        var output: [UInt8] = []
        withUnsafeTemporaryAllocation(byteCount: 4096, alignment: 8) { chunk in
            /// Reads what the output holds now; false at its end of file.
            func drain() -> Bool {
                while true {
                    let n = Glibc.read(child.output, chunk.baseAddress, chunk.count)
                    if n < 0 && errno == EINTR { continue }
                    if n < 0 { return true }  // EAGAIN: nothing more for now
                    if n == 0 { return false }
                    if output.count < 65536 { output.append(contentsOf: UnsafeRawBufferPointer(rebasing: chunk[0..<n])) }
                }
            }
            while true {
                let left = child.deadline.seconds(since: now())
                if left <= 0 { break }
                var fds = [
                    pollfd(fd: child.output, events: Int16(POLLIN), revents: 0), pollfd(fd: child.pidfd, events: Int16(POLLIN), revents: 0),
                    pollfd(fd: stdin, events: Int16(POLLOUT), revents: 0),
                ]
                let ready = poll(&fds, stdin >= 0 ? 3 : 2, Int32(left * 1000) + 1)
                if ready < 0 && errno == EINTR { continue }
                if ready <= 0 { break }
                if stdin >= 0 && fds[2].revents != 0 {
                    let n = parts[part].withUnsafeBytes { Glibc.write(stdin, $0.baseAddress! + written, $0.count - written) }
                    if n > 0 {
                        written += n
                        advance()
                    } else if n < 0 && errno != EAGAIN && errno != EINTR {
                        closeInput()
                    }
                }
                // The end of the output, or the child's exit (with what it wrote before).
                if fds[0].revents != 0 && !drain() { break }
                if fds[1].revents != 0 {
                    _ = drain()
                    break
                }
            }
        }
        closeInput()
        Glibc.close(child.output)
        defer { Glibc.close(child.pidfd) }
        // Give it until the deadline to exit after closing its output, then end it.
        while true {
            let left = child.deadline.seconds(since: now())
            guard left > 0 else { break }
            var pfd = pollfd(fd: child.pidfd, events: Int16(POLLIN), revents: 0)
            let ready = poll(&pfd, 1, Int32(left * 1000) + 1)
            if ready < 0 && errno == EINTR { continue }
            break
        }
        // Whether it exited, left unreaped, so that its pid (its group's id) stays taken while
        // the group gets SIGKILL: whatever the check started ends with it.
        var info = siginfo_t()
        let exited = waitid(P_PID, id_t(child.pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info._sifields._sigchld.si_pid == child.pid
        // The child itself too: it may have left its group.
        Glibc.kill(-child.pid, SIGKILL)
        if !exited { Glibc.kill(child.pid, SIGKILL) }
        var status: Int32 = 0
        var reaped: pid_t
        repeat { reaped = waitpid(child.pid, &status, 0) } while reaped < 0 && errno == EINTR
        if !exited && reaped == child.pid { return .success((nil, String(decoding: output, as: UTF8.self))) }
        guard reaped == child.pid else { return .failure(SystemError("waitpid \(child.pid)", errno: errno)) }
        // WIFEXITED / WEXITSTATUS / WTERMSIG, spelled out (macros Swift cannot import).
        let exit: ExitStatus = status & 0x7f == 0 ? .exited((status >> 8) & 0xff) : .signaled(status & 0x7f)
        return .success((exit, String(decoding: output, as: UTF8.self)))
    }

    /// SIGKILL to `child` and its process group, then `child` is reaped; every descriptor of
    /// `child` is closed.
    public func abandon(_ child: ChildProgram) {
        Glibc.kill(-child.pid, SIGKILL)
        Glibc.kill(child.pid, SIGKILL)  // it may have left its group
        var status: Int32 = 0
        while waitpid(child.pid, &status, 0) < 0 && errno == EINTR {}
        for fd in [child.input, child.output, child.pidfd] { Glibc.close(fd) }
    }

    /// Sets FD_CLOEXEC on each of `fds` (negative numbers are ignored): each run of
    /// consecutive numbers in one close_range(2) with CLOSE_RANGE_CLOEXEC, a number alone, or
    /// every number where close_range cannot (a kernel before 5.11), with fcntl(2). Returns
    /// each descriptor fcntl could not set with its error, naming "fcntl(FD, F_SETFD)"; a
    /// number that is not open is named there, but passed over inside a run (close_range has
    /// nothing to set on it).
    public func setCloseOnExec(_ fds: [Int32]) -> [(fd: Int32, error: SystemError)] {
        var failed: [(fd: Int32, error: SystemError)] = []
        func oneByOne(_ run: ClosedRange<Int32>) {
            for fd in run where fcntl(fd, F_SETFD, FD_CLOEXEC) != 0 { failed.append((fd, SystemError("fcntl(\(fd), F_SETFD)", errno: errno))) }
        }
        var rangesWork = true
        let sorted = Set(fds.filter { $0 >= 0 }).sorted()
        var i = 0
        while i < sorted.count {
            var j = i
            while j + 1 < sorted.count && sorted[j + 1] == sorted[j] + 1 { j += 1 }
            let run = sorted[i]...sorted[j]
            if rangesWork && run.count > 1 {
                rangesWork = shim_close_range_cloexec(UInt32(run.lowerBound), UInt32(run.upperBound)) == 0
            }
            if !rangesWork || run.count == 1 { oneByOne(run) }
            i = j + 1
        }
        return failed
    }

    /// sigtimedwait(2) for `signal` with a zero timeout.
    public func takePendingSignal(_ signal: Int32) -> Bool {
        var set = sigset_t()
        sigemptyset(&set)
        sigaddset(&set, signal)
        var now = timespec()
        return sigtimedwait(&set, nil, &now) == signal
    }

    /// Clears FD_CLOEXEC on each of `keeping`, then execve(2) of `path` (`argv[0]`; no `$PATH`
    /// search) with the daemon's environment; every other descriptor keeps its flag. On failure
    /// sets FD_CLOEXEC on each of `keeping` (also on one that lacked it before) and returns the
    /// error naming "execve PATH", or "fcntl FD_CLOEXEC N" when a descriptor's flag could not
    /// be cleared (then nothing is executed: the new program would miss it).
    public func execute(_ path: String, arguments: [String], keeping: [Int32]) -> SystemError {
        // Setting FD_CLOEXEC back cannot fail on a descriptor whose flag could be read or
        // cleared a moment ago; there is nothing more to do if it did.
        defer { for fd in keeping { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) } }
        for fd in keeping where fcntl(fd, F_SETFD, 0) != 0 {
            return SystemError("fcntl FD_CLOEXEC \(fd)", errno: errno)
        }
        return withCStrings([path] + arguments) { argv -> SystemError in
            execve(path, argv, environ)
            return SystemError("execve \(path)", errno: errno)
        }
    }
}
