import Logging
import Synchronization

/// The entries a `Logger` made, kept in memory in order, for a test to check what was logged.
final class CapturedLog: Sendable {
    struct Entry: Sendable, CustomStringConvertible {
        var level: Logger.Level
        var message: String
        var description: String { "\(level): \(message)" }
    }

    private let entries = Mutex<[Entry]>([])

    /// A logger whose every entry, at every level, lands here.
    func logger(label: String) -> Logger {
        Logger(label: label) { _ in CapturingLogHandler(log: self) }
    }

    func append(_ entry: Entry) { entries.withLock { $0.append(entry) } }

    /// The entries so far, which are forgotten.
    func take() -> [Entry] {
        entries.withLock { taken in
            defer { taken = [] }; return taken
        }
    }
}

/// A `LogHandler` that appends to a `CapturedLog`.
struct CapturingLogHandler: LogHandler {
    let log: CapturedLog
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) { log.append(CapturedLog.Entry(level: event.level, message: event.message.description)) }
}
