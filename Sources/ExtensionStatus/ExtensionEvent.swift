/// One lifecycle event (docs/json.md, "Events"): what `extctl monitor --json` prints, one per
/// line, what a monitor connection receives in `events` messages (docs/protocol.md), and what
/// `recentEvents` of `status` holds.
public struct ExtensionEvent: JSONDocument, Equatable {
    /// The lock a `lock-held-at-suspend` event is about.
    public struct Lock: Codable, Sendable, Equatable {
        /// What followed: `terminate` or `resume`.
        public var decision: String
        /// `posix`, `ofd` or `flock`.
        public var kind: String
        /// The locked file, as the holder's descriptor names it.
        public var path: String

        /// A lock as it is written.
        public init(decision: String, kind: String, path: String) {
            self.decision = decision
            self.kind = kind
            self.path = path
        }

        enum CodingKeys: String, CodingKey {
            case decision, kind, path
        }

        public func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(decision, forKey: .decision)
            try c.encode(kind, forKey: .kind)
            try c.encode(path, forKey: .path)
        }
    }

    /// When it happened, wall-clock ISO 8601 (`WallClock`).
    public var time: String
    /// The same instant in seconds of the daemon's `CLOCK_MONOTONIC`: exact, and comparable
    /// between events.
    public var monotonic: Double
    /// The kind (docs/json.md, "Event kinds").
    public var event: String
    /// The extension's id.
    public var id: String
    /// The extension's public state when the event was recorded.
    public var state: String
    /// The process concerned; always written, `null` when there is none.
    public var pid: Int32?
    /// The assertion of an assertion event; left out otherwise.
    public var assertion: UInt64?
    /// The request of `begin` and `end`; left out otherwise.
    public var request: UInt64?
    /// The assertion's reason, or a human-readable detail; left out when there is none.
    public var detail: String?
    /// The lock of `lock-held-at-suspend`; left out otherwise.
    public var lock: Lock?

    /// An event with the fields given.
    public init(
        time: String, monotonic: Double, event: String, id: String, state: String, pid: Int32?,
        assertion: UInt64? = nil, request: UInt64? = nil, detail: String? = nil, lock: Lock? = nil
    ) {
        self.time = time
        self.monotonic = monotonic
        self.event = event
        self.id = id
        self.state = state
        self.pid = pid
        self.assertion = assertion
        self.request = request
        self.detail = detail
        self.lock = lock
    }

    enum CodingKeys: String, CodingKey {
        case assertion, detail, event, id, lock, monotonic, pid, request, state, time
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encodeIfPresent(assertion, forKey: .assertion)
        try c.encodeIfPresent(detail, forKey: .detail)
        try c.encode(event, forKey: .event)
        try c.encode(id, forKey: .id)
        try c.encodeIfPresent(lock, forKey: .lock)
        try c.encode(monotonic, forKey: .monotonic)
        if let pid { try c.encode(pid, forKey: .pid) } else { try c.encodeNil(forKey: .pid) }
        try c.encodeIfPresent(request, forKey: .request)
        try c.encode(state, forKey: .state)
        try c.encode(time, forKey: .time)
    }
}
