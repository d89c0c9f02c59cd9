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

        /// Writes the members in `JSONWriter.keyOrder`: the always-written ones (`null` when empty), and the optional ones when they apply.
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

    /// Written by `write(into:)` for `JSONWriter`, member by member with a keyed container for
    /// any other encoder: the same members, in the same order (`DocumentTests` compares them).
    public func encode(to encoder: any Encoder) throws {
        if let stream = encoder as? JSONStreamEncoder {
            return stream.writeValue { write(into: &$0) }
        }
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

    /// The event's JSON, as the daemon sends it to every monitor: written member by member,
    /// without an `Encoder`, since it runs for every event while a monitor is attached.
    public func jsonBytes(capacity: Int = 256) -> [UInt8] {
        var out = JSONWriter(capacity: capacity)
        write(into: &out)
        return out.bytes
    }

    /// Appends the event's object to `out`: its members in `JSONWriter.keyOrder`, `pid` always,
    /// the optional ones when they apply.
    public func write(into out: inout JSONWriter) {
        out.beginObject()
        if let assertion { out.member("assertion"); out.integer(assertion) }
        if let detail { out.member("detail"); out.string(detail) }
        out.member("event"); out.string(event)
        out.member("id"); out.string(id)
        if let lock {
            out.member("lock")
            out.beginObject()
            out.member("decision"); out.string(lock.decision)
            out.member("kind"); out.string(lock.kind)
            out.member("path"); out.string(lock.path)
            out.endObject()
        }
        out.member("monotonic"); out.number(monotonic)
        out.member("pid")
        if let pid { out.integer(pid) } else { out.null() }
        if let request { out.member("request"); out.integer(request) }
        out.member("state"); out.string(state)
        out.member("time"); out.string(time)
        out.endObject()
    }
}
