import CShims
import Foundation

/// A child started with posix_spawn and reaped with waitpid, for programs Foundation's
/// `Process` misjudges or mistreats:
///
/// * `Process` learns of an exit when a descriptor the child inherited closes, so a program
///   that closes its inherited descriptors before exec'ing another (systemd-socket-activate)
///   looks exited while it runs, and `Process` then blocks in waitpid, stalling every other
///   `Process` of the test runner; a program that leaves daemons behind (the systemd session
///   script) looks alive until they all exit;
/// * its children inherit the spawning thread's signal mask (every signal blocked, on the test
///   runner's threads), so SIGTERM never reaches them.
///
/// Here the child gets an empty signal mask, default dispositions, and only the descriptors
/// given: stdin and stdout/stderr connected to this process (`input`, `output`) or a log file.
final class RawProcess {
    let pid: pid_t
    /// Our end of the child's stdin, when `pipes` was asked for; closing it is end of file.
    private(set) var input: Int32 = -1
    /// Our end of the child's stdout and stderr, when `pipes` was asked for.
    private(set) var output: Int32 = -1
    private var status: Int32?

    /// Starts `path` with `arguments`. With `pipes`, stdin and stdout/stderr are connected to
    /// this process; otherwise stdin is /dev/null and stdout/stderr are appended to `log`.
    init(_ path: String, _ arguments: [String], log: String = "/dev/null", pipes: Bool = false) throws {
        // Socket pairs rather than pipes: created close-on-exec atomically (Glibc does not
        // export pipe2), so no other child spawned meanwhile can hold the child's stdin open.
        var stdin: [Int32] = [-1, -1], stdout: [Int32] = [-1, -1]
        let type = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
        if pipes {
            guard socketpair(AF_UNIX, type, 0, &stdin) == 0 else { throw HarnessError("socketpair failed: errno \(errno)") }
            guard socketpair(AF_UNIX, type, 0, &stdout) == 0 else {
                Glibc.close(stdin[0]); Glibc.close(stdin[1])
                throw HarnessError("socketpair failed: errno \(errno)")
            }
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        if pipes {
            posix_spawn_file_actions_adddup2(&actions, stdin[0], 0)
            posix_spawn_file_actions_adddup2(&actions, stdout[1], 1)
        } else {
            posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
            posix_spawn_file_actions_addopen(&actions, 1, log, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        }
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var empty = sigset_t(), all = sigset_t()
        sigemptyset(&empty)
        sigfillset(&all)
        posix_spawnattr_setsigmask(&attributes, &empty)
        posix_spawnattr_setsigdefault(&attributes, &all)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        let argv: [UnsafeMutablePointer<CChar>?] = ([path] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var child: pid_t = 0
        let rc = posix_spawn(&child, path, &actions, &attributes, argv, environ)
        if pipes {
            Glibc.close(stdin[0])
            Glibc.close(stdout[1])
        }
        guard rc == 0 else {
            if pipes { Glibc.close(stdin[1]); Glibc.close(stdout[0]) }
            throw HarnessError("posix_spawn \(path): errno \(rc)")
        }
        pid = child
        input = stdin[1]
        output = stdout[0]
    }

    /// Closes the child's stdin (it reads end of file).
    func closeInput() {
        if input >= 0 { Glibc.close(input) }
        input = -1
    }

    /// Whether it still runs (reaps it when it has exited).
    var isRunning: Bool {
        guard status == nil else { return false }
        var raw: Int32 = 0
        let reaped = waitpid(pid, &raw, WNOHANG)
        if reaped == pid {
            status = raw
        } else if reaped < 0 && errno == ECHILD {
            status = 0  // reaped elsewhere (or never ours): it is gone either way
        }
        return status == nil
    }

    /// The exit code, or 128 + the signal that ended it; nil while it runs.
    var exitCode: Int32? {
        guard !isRunning, let s = status else { return nil }
        return s & 0x7f == 0 ? (s >> 8) & 0xff : 128 + (s & 0x7f)
    }

    /// Waits at most `timeout` seconds for it to exit; returns whether it has.
    func wait(timeout: Double) -> Bool {
        guard isRunning else { return true }
        // A pidfd becomes readable when the process exits: wait for that, not on a timer.
        let pidfd = shim_pidfd_open(pid)
        if pidfd >= 0 {
            var pfd = pollfd(fd: pidfd, events: Int16(POLLIN), revents: 0)
            let deadline = Date().addingTimeInterval(timeout)
            while poll(&pfd, 1, Int32(max(0, deadline.timeIntervalSinceNow) * 1000) + 1) < 0 && errno == EINTR {}
            Glibc.close(pidfd)
        }
        return !isRunning
    }

    /// Sends `signal` and waits (at most `timeout` seconds, then SIGKILL) until it has exited.
    @discardableResult
    func stop(_ signal: Int32 = SIGTERM, timeout: Double = 20) -> Int32? {
        if isRunning { kill(pid, signal) }
        if !wait(timeout: timeout) {
            kill(pid, SIGKILL)
            _ = wait(timeout: 3600)
        }
        return exitCode
    }

    deinit {
        stop(SIGKILL)
        closeInput()
        if output >= 0 { Glibc.close(output) }
    }
}
