import Logging

#if canImport(Glibc)
import Glibc
#endif

/// Where the daemon's log goes: structured journal entries (`JournalLogHandler`) or readable
/// lines on stderr (`ConsoleLogHandler`).
public enum LogTarget: String, CaseIterable, Sendable {
    /// The journal when stderr is connected to it (as systemd does for a service whose
    /// output goes to the journal), the console otherwise.
    case auto
    /// Readable lines on stderr.
    case console
    /// Structured entries sent to journald (the console when journald is not running).
    case journal

    /// The target to use in this process: `auto` decided, and `journal` replaced by `console`
    /// when journald is not running (libsystemd would drop the entries silently).
    public func resolved() -> LogTarget {
        switch self {
        case .console: .console
        case .journal: LogTarget.journalIsReachable() ? .journal : .console
        case .auto: LogTarget.stderrIsJournal() && LogTarget.journalIsReachable() ? .journal : .console
        }
    }

    /// journald's native socket, where sd_journal_sendv(3) sends entries.
    public static let journalSocket = "/run/systemd/journal/socket"

    /// Whether journald's socket exists. Without it, sd_journal_sendv(3) succeeds and drops
    /// the entry.
    public static func journalIsReachable() -> Bool {
        access(journalSocket, W_OK) == 0
    }

    /// A handler for this target (`auto` is resolved first).
    public func makeHandler(label: String) -> any LogHandler {
        switch resolved() {
        case .journal: JournalLogHandler(label: label)
        case .console, .auto: ConsoleLogHandler(label: label)
        }
    }

    /// Whether stderr is the stream systemd connected to the journal: `$JOURNAL_STREAM` holds
    /// that stream's `device:inode` and stderr's `fstat` matches it (sd_journal_stream_fd(3)).
    /// A redirected stderr (e.g. `2>file` in ExecStart) no longer matches, and the console is used.
    public static func stderrIsJournal() -> Bool {
        guard let raw = getenv("JOURNAL_STREAM") else { return false }
        let value = String(cString: raw)
        let parts = value.split(separator: ":")
        guard parts.count == 2, let device = UInt64(parts[0]), let inode = UInt64(parts[1]) else { return false }
        var st = stat()
        guard fstat(2, &st) == 0 else { return false }
        return UInt64(st.st_dev) == device && UInt64(st.st_ino) == inode
    }
}
