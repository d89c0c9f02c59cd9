/// One task assertion held by an extension process.
public struct Assertion: Equatable, Sendable, Codable {
    /// Unique for the daemon's lifetime.
    public var id: UInt64
    /// Why the extension asked (shown in `extctl status` and the journal).
    public var reason: String
    /// When it was granted.
    public var grantedAt: Instant
    /// The leak-guard deadline: no assertion outlives `assertionMaxSeconds`.
    public var hardDeadline: Instant
    /// When *expire* was sent for it, if it was.
    public var expireSentAt: Instant?
    /// Whether the runtime confirmed it read the *expire* message off its channel.
    public var expireAcknowledged: Bool
}

/// The live assertions of one extension process. Owned by that process's record: when the
/// process exits, the ledger is discarded with it.
public struct AssertionLedger: Equatable, Sendable, Codable {
    /// The live assertions, oldest grant first.
    public private(set) var assertions: [Assertion] = []

    /// An empty ledger.
    public init() {}

    /// Whether no assertion is live.
    public var isEmpty: Bool { assertions.isEmpty }
    /// How many assertions are live.
    public var count: Int { assertions.count }

    /// Records a newly granted assertion.
    public mutating func grant(id: UInt64, reason: String, at now: Instant, maxSeconds: Double) {
        assertions.append(
            Assertion(
                id: id, reason: reason, grantedAt: now, hardDeadline: now.adding(seconds: maxSeconds),
                expireSentAt: nil, expireAcknowledged: false))
    }

    /// Removes an assertion; returns it, or nil when it was unknown (already released or revoked).
    @discardableResult
    public mutating func release(_ id: UInt64) -> Assertion? {
        guard let i = assertions.firstIndex(where: { $0.id == id }) else { return nil }
        return assertions.remove(at: i)
    }

    /// Marks *expire* sent for an assertion; returns false if it was already sent.
    /// The hard deadline moves to at least `now + grace`, so a late *expire* still gets its grace.
    public mutating func markExpireSent(_ id: UInt64, at now: Instant, grace: Double = 0) -> Bool {
        guard let i = assertions.firstIndex(where: { $0.id == id }), assertions[i].expireSentAt == nil else { return false }
        assertions[i].expireSentAt = now
        assertions[i].hardDeadline = max(assertions[i].hardDeadline, now.adding(seconds: grace))
        return true
    }

    /// Records that the runtime read the *expire* for an assertion.
    public mutating func acknowledgeExpire(_ id: UInt64) {
        guard let i = assertions.firstIndex(where: { $0.id == id }) else { return }
        assertions[i].expireAcknowledged = true
    }

    /// Removes and returns every assertion.
    public mutating func revokeAll() -> [Assertion] {
        defer { assertions.removeAll() }
        return assertions
    }

    /// Assertions whose *expire* has not been sent yet.
    public var unexpired: [Assertion] { assertions.filter { $0.expireSentAt == nil } }

    /// The earliest leak-guard instant at which something must happen: an *expire* to send
    /// (`hardDeadline − grace`) or a deadline passed.
    public func nextDeadline(grace: Double) -> Instant? {
        var next: Instant?
        for a in assertions {
            let t = a.expireSentAt == nil ? a.hardDeadline.adding(seconds: -grace) : a.hardDeadline
            if next == nil || t < next! { next = t }
        }
        return next
    }
}

/// Written and read directly in a hand-over document (`BinaryDirectCodable`, see
/// RecordDirectCoding.swift): the members its synthesized `Codable` conformance gives.
extension AssertionLedger: BinaryDirectCodable {
    package func write(to output: BinaryOutput, level: Int) throws {
        let w = BinaryFieldWriter(output, level: level)
        try w.directList(assertions, "assertions")
    }

    package init(binary input: BinaryInput, at offset: Int, within end: Int) throws {
        var r = try BinaryFields(input, at: offset, within: end)
        assertions = try r.directList(Assertion.self, "assertions")
    }
}
