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

    /// posix_spawn(3) of `path` (`argv[0]`; no `$PATH` search) with the daemon's environment,
    /// an empty signal mask (signals the daemon ignores, SIGPIPE after `DaemonProcess.prepare`,
    /// stay ignored), stdin inherited and stdout and stderr on one pipe; the child also inherits
    /// any descriptor of the daemon that is not close-on-exec. Blocks the calling thread: reads
    /// the pipe until end of file or the deadline (keeping what arrives until 64 KiB is held,
    /// then reading and dropping the rest), then waits for the exit until the deadline, polling
    /// every millisecond; a child still running then gets SIGKILL and is reaped. Both pipe ends
    /// are closed before it returns, and the child is reaped unless waitpid fails. The output is
    /// decoded as UTF-8 (invalid bytes replaced). Fails naming "pipe", "spawn PATH" or
    /// "waitpid PID".
    public func runToCompletion(_ path: String, arguments: [String], seconds: Double) -> Result<(status: ExitStatus?, output: String), SystemError> {
        var pipeFDs: [Int32] = [-1, -1]
        guard pipe(&pipeFDs) == 0 else { return .failure(SystemError("pipe", errno: errno)) }
        let (readEnd, writeEnd) = (pipeFDs[0], pipeFDs[1])
        // The daemon's loop thread is the only one that starts programs: nothing can inherit
        // these two before they are close-on-exec.
        _ = fcntl(readEnd, F_SETFD, FD_CLOEXEC)
        _ = fcntl(writeEnd, F_SETFD, FD_CLOEXEC)
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        posix_spawn_file_actions_adddup2(&actions, writeEnd, 1)
        posix_spawn_file_actions_adddup2(&actions, writeEnd, 2)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        // The child starts with no blocked signal (the daemon blocks those its loop reads).
        var none = sigset_t()
        sigemptyset(&none)
        posix_spawnattr_setsigmask(&attributes, &none)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK))
        var pid: pid_t = 0
        let rc = withCStrings([path] + arguments) { argv in posix_spawn(&pid, path, &actions, &attributes, argv, environ) }
        posix_spawn_file_actions_destroy(&actions)
        posix_spawnattr_destroy(&attributes)
        Glibc.close(writeEnd)
        guard rc == 0 else {
            Glibc.close(readEnd)
            return .failure(SystemError("spawn \(path)", errno: rc))
        }
        let deadline = now().adding(seconds: seconds)
        var output: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let left = deadline.seconds(since: now())
            if left <= 0 { break }
            var pfd = pollfd(fd: readEnd, events: Int16(POLLIN), revents: 0)
            let ready = poll(&pfd, 1, Int32(left * 1000) + 1)
            if ready < 0 && errno == EINTR { continue }
            if ready <= 0 { break }
            let n = Glibc.read(readEnd, &chunk, chunk.count)
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { break }  // EOF: the child closed its output, normally by exiting
            if output.count < 65536 { output += chunk[0..<n] }
        }
        Glibc.close(readEnd)
        var status: Int32 = 0
        var reaped = waitpid(pid, &status, WNOHANG)
        if reaped == 0 {
            // Give it until the deadline to exit after closing its output, then end it.
            while reaped == 0 && deadline.seconds(since: now()) > 0 {
                usleep(1000)
                reaped = waitpid(pid, &status, WNOHANG)
            }
            if reaped == 0 {
                Glibc.kill(pid, SIGKILL)
                waitpid(pid, &status, 0)
                return .success((nil, String(decoding: output, as: UTF8.self)))
            }
        }
        guard reaped == pid else { return .failure(SystemError("waitpid \(pid)", errno: errno)) }
        // WIFEXITED / WEXITSTATUS / WTERMSIG, spelled out (macros Swift cannot import).
        let exit: ExitStatus = status & 0x7f == 0 ? .exited((status >> 8) & 0xff) : .signaled(status & 0x7f)
        return .success((exit, String(decoding: output, as: UTF8.self)))
    }

    /// Sets FD_CLOEXEC on `fd`; returns the error naming "fcntl(FD, F_SETFD)" when it cannot.
    public func setCloseOnExec(_ fd: Int32) -> SystemError? {
        fcntl(fd, F_SETFD, FD_CLOEXEC) == 0 ? nil : SystemError("fcntl(\(fd), F_SETFD)", errno: errno)
    }

    /// Clears FD_CLOEXEC on each of `keeping`, then execve(2) of `path` (`argv[0]`; no `$PATH`
    /// search) with the daemon's environment; every other descriptor keeps its flag. On failure
    /// sets FD_CLOEXEC on each of `keeping` (also on one that lacked it before) and returns the
    /// error naming "execve PATH".
    public func execute(_ path: String, arguments: [String], keeping: [Int32]) -> SystemError {
        for fd in keeping { _ = fcntl(fd, F_SETFD, 0) }
        let failure = withCStrings([path] + arguments) { argv -> SystemError in
            execve(path, argv, environ)
            return SystemError("execve \(path)", errno: errno)
        }
        for fd in keeping { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        return failure
    }
}
