import CSystemd
import Logging

#if canImport(Glibc)
import Glibc
#endif

/// A swift-log handler sending structured entries to journald through libsystemd
/// (`sd_journal_sendv`; the variadic `sd_journal_send` cannot be called from Swift).
///
/// Each entry carries `MESSAGE`, `PRIORITY` (syslog level), `SYSLOG_IDENTIFIER`, `CODE_FILE`,
/// `CODE_LINE`, `CODE_FUNC`, and every metadata key as a field of its own (`EXTENSION_ID`,
/// `EXTENSION_PID`, `LIFECYCLE_STATE`, `EVENT`, `ASSERTION_ID`, …), so
/// `journalctl EXTENSION_ID=com.example.widget` selects one extension's entries. An entry whose
/// `EVENT` is a lifecycle event kind gets that kind's `MESSAGE_ID` (`MessageIDs`); an explicit
/// `MESSAGE_ID` metadata value wins. When sending fails the entry is written to stderr as a
/// console line instead. (When journald is not running at all, libsystemd drops entries
/// without an error: `LogTarget` does not choose this handler then.)
public struct JournalLogHandler: LogHandler {
    /// Metadata added to every entry; an entry's own value for the same key wins.
    public var metadata: Logger.Metadata = [:]
    /// The least severe level a `Logger` passes to this handler; `.info` unless set.
    public var logLevel: Logger.Level = .info
    /// `SYSLOG_IDENTIFIER` of every entry.
    public let identifier: String

    /// A handler with no metadata at level `.info` whose entries carry `identifier`; `label` is
    /// not used.
    public init(label: String, identifier: String = "extensiond") {
        self.identifier = identifier
    }

    /// The handler's metadata value for `key`, read or set.
    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    /// Sends one entry with sd_journal_sendv(3) on the calling thread; when that fails, writes
    /// the entry to stderr as a `ConsoleLogHandler` line instead. Nothing is reported to the
    /// caller.
    public func log(event: LogEvent) {
        let merged = metadata.isEmpty ? event.metadata ?? [:] : metadata.merging(event.metadata ?? [:]) { _, new in new }
        let fields = JournalLogHandler.fields(
            message: "\(event.message)", level: event.level, metadata: merged, identifier: identifier,
            file: event.file, line: event.line, function: event.function)
        if JournalLogHandler.send(fields) < 0 {
            var console = ConsoleLogHandler(label: identifier)
            console.metadata = metadata
            console.log(event: event)
        }
    }

    /// The journal fields of one entry, `NAME=value` each, in a stable order.
    static func fields(
        message: String, level: Logger.Level, metadata: Logger.Metadata, identifier: String,
        file: String, line: UInt, function: String
    ) -> [String] {
        var fields = [
            "MESSAGE=\(message)", "PRIORITY=\(priority(level))", "SYSLOG_IDENTIFIER=\(identifier)",
            "CODE_FILE=\(file)", "CODE_LINE=\(line)", "CODE_FUNC=\(function)",
        ]
        var messageID: String?
        for key in metadata.keys.sorted() {
            guard let name = fieldName(key), let value = metadata[key] else { continue }
            if name == "MESSAGE_ID" { messageID = "\(value)"; continue }
            fields.append("\(name)=\(value)")
        }
        if messageID == nil, let event = metadata["EVENT"] { messageID = MessageIDs.id(forEvent: "\(event)") }
        if let messageID { fields.append("MESSAGE_ID=\(messageID)") }
        return fields
    }

    /// The syslog priority of a swift-log level (journald's `PRIORITY`).
    static func priority(_ level: Logger.Level) -> Int {
        switch level {
        case .trace, .debug: 7
        case .info: 6
        case .notice: 5
        case .warning: 4
        case .error: 3
        case .critical: 2
        }
    }

    /// A metadata key as a journal field name: upper case letters, digits and underscores,
    /// not starting with an underscore or a digit (those are trusted fields journald sets),
    /// at most 64 characters. Nil when nothing usable remains; such keys are dropped.
    static func fieldName(_ key: String) -> String? {
        var name = ""
        for c in key.uppercased().unicodeScalars {
            switch c {
            case "A"..."Z", "0"..."9", "_": name.unicodeScalars.append(c)
            default: name.append("_")
            }
        }
        while let first = name.unicodeScalars.first, first == "_" || ("0"..."9").contains(first) { name.removeFirst() }
        guard !name.isEmpty else { return nil }
        return String(name.prefix(64))
    }

    /// Sends one entry (`NAME=value` fields) to journald. Returns 0 or -errno. Values may hold
    /// any bytes, newlines included (libsystemd picks the binary-safe encoding for those).
    static func send(_ fields: [String]) -> Int32 {
        let bytes = fields.map { Array($0.utf8) }
        let total = bytes.reduce(0) { $0 + $1.count }
        let storage = UnsafeMutableRawBufferPointer.allocate(byteCount: max(total, 1), alignment: 1)
        defer { storage.deallocate() }
        var vectors: [iovec] = []
        vectors.reserveCapacity(bytes.count)
        var offset = 0
        for field in bytes {
            let start = storage.baseAddress! + offset
            field.withUnsafeBytes { start.copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
            vectors.append(iovec(iov_base: start, iov_len: field.count))
            offset += field.count
        }
        return vectors.withUnsafeBufferPointer { sd_journal_sendv($0.baseAddress, Int32($0.count)) }
    }
}
