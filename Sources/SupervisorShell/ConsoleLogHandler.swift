import Logging
#if canImport(Glibc)
import Glibc
#endif

/// A swift-log handler writing one readable line per entry to stderr:
/// `<level> message key=value …`. Used on a terminal; journald gets structured entries instead.
public struct ConsoleLogHandler: LogHandler {
    public var metadata: Logger.Metadata = [:]
    public var logLevel: Logger.Level = .info
    let label: String

    public init(label: String) { self.label = label }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var line = "\(event.level.rawValue.uppercased()) \(event.message)"
        let merged = metadata.merging(event.metadata ?? [:]) { _, new in new }
        // MESSAGE_ID is for the journal's indexing, not for people reading a terminal.
        for key in merged.keys.sorted() where key != "MESSAGE_ID" { line += " \(key)=\(merged[key]!)" }
        line += "\n"
        _ = line.withCString { write(2, $0, strlen($0)) }
    }
}
