import Logging

#if canImport(Glibc)
import Glibc
#endif

/// A swift-log handler writing one readable line per entry to stderr:
/// `<level> message key=value …`. Used on a terminal; journald gets structured entries instead.
public struct ConsoleLogHandler: LogHandler {
    /// Metadata added to every entry; an entry's own value for the same key wins.
    public var metadata: Logger.Metadata = [:]
    /// The least severe level a `Logger` passes to this handler; `.info` unless set.
    public var logLevel: Logger.Level = .info
    let label: String

    /// A handler with no metadata at level `.info`; `label` is kept but not written.
    public init(label: String) { self.label = label }

    /// The handler's metadata value for `key`, read or set.
    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    /// Writes the level in upper case, the message and the merged metadata sorted by key
    /// (`MESSAGE_ID` left out) as one line in one write(2) to fd 2, blocking as stderr does. A
    /// failed or short write is not reported.
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
        // A log line that stderr refuses has nowhere else to go: it is dropped.
        _ = line.withUTF8 { write(2, $0.baseAddress, $0.count) }
    }
}
