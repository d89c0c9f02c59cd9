/// How an extension's process ended (docs/json.md, "The exit object"): `lastExit` of `list` and
/// `status`.
public struct ExitInfo: Codable, Sendable, Equatable {
    /// The exit reason (docs/json.md, "Exit reasons").
    public var reason: String
    /// When the exit was handled, wall-clock ISO 8601.
    public var time: String
    /// `exited`, `signaled` or `not-started`.
    public var status: String
    /// The exit status; written only when `status` is `exited`.
    public var code: Int32?
    /// The signal; written only when `status` is `signaled`.
    public var signal: Int32?
    /// The pid the process had; always written, `null` when `status` is `not-started`.
    public var pid: Int32?

    /// An exit with the fields given.
    public init(reason: String, time: String, status: String, code: Int32? = nil, signal: Int32? = nil, pid: Int32?) {
        self.reason = reason
        self.time = time
        self.status = status
        self.code = code
        self.signal = signal
        self.pid = pid
    }

    enum CodingKeys: String, CodingKey {
        case code, pid, reason, signal, status, time
    }

    /// Writes the members in `JSONWriter.keyOrder`: the always-written ones (`null` when empty), and the optional ones when they apply.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encodeIfPresent(code, forKey: .code)
        if let pid { try c.encode(pid, forKey: .pid) } else { try c.encodeNil(forKey: .pid) }
        try c.encode(reason, forKey: .reason)
        try c.encodeIfPresent(signal, forKey: .signal)
        try c.encode(status, forKey: .status)
        try c.encode(time, forKey: .time)
    }
}
