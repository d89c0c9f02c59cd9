/// The answer to a `query` of kind 5 (docs/json.md, "Transfers"), which `extctl transfers --json`
/// prints: each background transfer task the caller may see, sorted by id.
public struct TransferList: JSONDocument, Equatable {
    /// One task.
    public struct Task: Codable, Equatable, Sendable {
        /// Its id (what `extctl transfer cancel` takes).
        public var id: UInt64
        /// Its app.
        public var app: String
        /// The app group whose shared container holds its file.
        public var group: String
        /// Its session's identifier.
        public var session: String
        /// The extension that created it; `null` for its app.
        public var creator: String?
        /// `download` or `upload`.
        public var kind: String
        /// The URL.
        public var url: String
        /// Its file, relative to the group's shared container.
        public var path: String
        /// `waiting`, `running`, `completed`, `failed` or `cancelled`.
        public var state: String
        /// Bytes done.
        public var bytes: UInt64
        /// Bytes in all; `null` while unknown.
        public var total: UInt64?
        /// Bytes a second over the last attempt's progress; `null` unless running.
        public var rate: Double?
        /// The final answer's HTTP status; `null` until there is one.
        public var status: Int?
        /// Failed attempts in a row.
        public var failures: Int
        /// When the next attempt may start (seconds since the epoch); `null` unless waiting for a backoff.
        public var retryAt: Double?
        /// The last error; `null` if none.
        public var lastError: String?
        /// Whether it waits on a metered network or on battery.
        public var discretionary: Bool
        /// When it was created (seconds since the epoch).
        public var created: Double

        /// A task with these fields.
        public init(
            id: UInt64, app: String, group: String, session: String, creator: String?, kind: String, url: String, path: String, state: String,
            bytes: UInt64, total: UInt64?, rate: Double?, status: Int?, failures: Int, retryAt: Double?, lastError: String?, discretionary: Bool,
            created: Double
        ) {
            self.id = id
            self.app = app
            self.group = group
            self.session = session
            self.creator = creator
            self.kind = kind
            self.url = url
            self.path = path
            self.state = state
            self.bytes = bytes
            self.total = total
            self.rate = rate
            self.status = status
            self.failures = failures
            self.retryAt = retryAt
            self.lastError = lastError
            self.discretionary = discretionary
            self.created = created
        }

        enum CodingKeys: String, CodingKey {
            case id, app, group, session, creator, kind, url, path, state, bytes, total, rate, status, failures, retryAt, lastError, discretionary, created
        }

        /// Writes every member, the absent ones as `null`.
        public func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(id, forKey: .id)
            try c.encode(app, forKey: .app)
            try c.encode(group, forKey: .group)
            try c.encode(session, forKey: .session)
            if let creator { try c.encode(creator, forKey: .creator) } else { try c.encodeNil(forKey: .creator) }
            try c.encode(kind, forKey: .kind)
            try c.encode(url, forKey: .url)
            try c.encode(path, forKey: .path)
            try c.encode(state, forKey: .state)
            try c.encode(bytes, forKey: .bytes)
            if let total { try c.encode(total, forKey: .total) } else { try c.encodeNil(forKey: .total) }
            if let rate { try c.encode(rate, forKey: .rate) } else { try c.encodeNil(forKey: .rate) }
            if let status { try c.encode(status, forKey: .status) } else { try c.encodeNil(forKey: .status) }
            try c.encode(failures, forKey: .failures)
            if let retryAt { try c.encode(retryAt, forKey: .retryAt) } else { try c.encodeNil(forKey: .retryAt) }
            if let lastError { try c.encode(lastError, forKey: .lastError) } else { try c.encodeNil(forKey: .lastError) }
            try c.encode(discretionary, forKey: .discretionary)
            try c.encode(created, forKey: .created)
        }
    }

    /// The tasks.
    public var tasks: [Task]

    /// A list of these tasks.
    public init(tasks: [Task]) { self.tasks = tasks }
}
