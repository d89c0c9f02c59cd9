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
        var line = event.level.rawValue.uppercased()
        line.reserveCapacity(192)
        line += " \(event.message)"
        let merged = metadata.isEmpty ? event.metadata ?? [:] : metadata.merging(event.metadata ?? [:]) { _, new in new }
        // MESSAGE_ID is for the journal's indexing, not for people reading a terminal.
        for (key, value) in merged.sorted(by: { $0.key < $1.key }) where key != "MESSAGE_ID" {
            line += " "
            line += key
            line += "="
            line += value.description
        }
        line += "\n"
        _ = line.withUTF8 { write(2, $0.baseAddress, $0.count) }
    }
}
