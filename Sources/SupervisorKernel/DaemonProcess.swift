import CShims

#if canImport(Glibc)
import Glibc
#endif

/// What the daemon's process needs before anything else runs: the loop's signals blocked
/// (before any other thread exists, so that only the loop's signalfd receives them), SIGPIPE
/// ignored (a peer that hangs up is an error value of `send`, not a signal), and the
/// descriptor limit raised to its hard limit (each running extension holds several: its
/// pidfd, runtime channel, `cgroup.events` and `cgroup.procs`, and `cgroup.freeze` while
/// the freezer suspends it; a soft limit of 1,024 would stop the daemon at a few hundred).
public enum DaemonProcess {
    /// The signals the event loop handles (`Daemon.run`).
    public static let loopSignals: [Int32] = [SIGTERM, SIGINT, SIGHUP, SIGCHLD, SIGUSR2]

    /// Writes `line` and a newline to stderr (before any logger exists) in one write(2); a
    /// failed or short write is not reported.
    public static func printError(_ line: String) {
        var text = line + "\n"
        _ = text.withUTF8 { write(2, $0.baseAddress, $0.count) }
    }

    /// Prepares this process; call first thing in `main`, before any other thread starts:
    /// blocks `loopSignals` in the calling thread (threads created later inherit the mask),
    /// sets SIGPIPE to be ignored, and raises the soft RLIMIT_NOFILE to the hard limit. A
    /// failure of any step is ignored and the others still run.
    public static func prepare() {
        let owned = loopSignals + [0]
        _ = owned.withUnsafeBufferPointer { shim_block_signals($0.baseAddress!) }
        signal(SIGPIPE, SIG_IGN)
        var limit = rlimit()
        if getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 && limit.rlim_cur < limit.rlim_max {
            limit.rlim_cur = limit.rlim_max
            _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        }
    }
}
