/// The document of `extctl list --json`, the answer to a `query` of kind 1 (docs/json.md,
/// "list"): every known extension, sorted by id.
public struct ListDocument: JSONDocument, Equatable {
    /// One extension of the list.
    public struct Extension: Codable, Sendable, Equatable {
        /// The manifest's id.
        public var id: String
        /// Its extension point.
        public var point: String
        /// Its public state (docs/json.md, "States").
        public var state: String
        /// When the public state last changed, wall-clock ISO 8601.
        public var since: String
        /// Its leader's pid; always written, `null` when it has no process.
        public var pid: Int32?
        /// Open requests.
        public var requests: Int
        /// Live assertions, as a count.
        public var assertions: Int
        /// How its previous process ended; always written, `null` when none has.
        public var lastExit: ExitInfo?

        /// An entry with the fields given.
        public init(id: String, point: String, state: String, since: String, pid: Int32?, requests: Int, assertions: Int, lastExit: ExitInfo?) {
            self.id = id
            self.point = point
            self.state = state
            self.since = since
            self.pid = pid
            self.requests = requests
            self.assertions = assertions
            self.lastExit = lastExit
        }

        enum CodingKeys: String, CodingKey {
            case assertions, id, lastExit, pid, point, requests, since, state
        }

        /// Writes the members in `JSONWriter.keyOrder`: the always-written ones (`null` when empty), and the optional ones when they apply.
        public func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(assertions, forKey: .assertions)
            try c.encode(id, forKey: .id)
            if let lastExit { try c.encode(lastExit, forKey: .lastExit) } else { try c.encodeNil(forKey: .lastExit) }
            if let pid { try c.encode(pid, forKey: .pid) } else { try c.encodeNil(forKey: .pid) }
            try c.encode(point, forKey: .point)
            try c.encode(requests, forKey: .requests)
            try c.encode(since, forKey: .since)
            try c.encode(state, forKey: .state)
        }
    }

    /// One entry per extension, sorted by id.
    public var extensions: [Extension]

    /// A list of these extensions.
    public init(extensions: [Extension]) {
        self.extensions = extensions
    }
}
