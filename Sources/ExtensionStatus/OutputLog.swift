/// The answer to a `query` of kind 6 (docs/protocol.md): the output lines an extension wrote
/// lately, oldest first, which `extctl logs --json` prints. Also the shape of each line of an
/// `output` message (`OutputLog.Line` with its `id`).
public struct OutputLog: JSONDocument, Equatable {
    /// One line of its stdout or stderr.
    public struct Line: JSONDocument, Equatable {
        /// The extension's id (in `output` messages; left out in the document's lines).
        public var id: String?
        /// When the daemon read it, wall-clock ISO 8601 (`WallClock`).
        public var time: String
        /// The line, without its newline, control characters escaped (`UntrustedText`).
        public var text: String

        /// A line with the fields given.
        public init(id: String? = nil, time: String, text: String) {
            self.id = id
            self.time = time
            self.text = text
        }

        enum CodingKeys: String, CodingKey {
            case id, text, time
        }

        /// Writes the members in `JSONWriter.keyOrder`; `id` only when there is one.
        public func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            if let id { try c.encode(id, forKey: .id) }
            try c.encode(text, forKey: .text)
            try c.encode(time, forKey: .time)
        }
    }

    /// The extension's id.
    public var id: String
    /// Its last lines, oldest first (at most `OutputLog.kept`).
    public var lines: [Line]

    /// How many lines the daemon keeps per extension, across its launches.
    public static let kept = 200

    /// A document with the fields given.
    public init(id: String, lines: [Line]) {
        self.id = id
        self.lines = lines
    }

    enum CodingKeys: String, CodingKey {
        case id, lines
    }

    /// Writes the members in `JSONWriter.keyOrder`.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(id, forKey: .id)
        try c.encode(lines, forKey: .lines)
    }
}
