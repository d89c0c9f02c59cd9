/// Everything a `Supervisor`'s behaviour depends on, as one versioned document: what a daemon
/// that re-executes itself hands to the new program (docs/architecture.md, "The hand-over
/// document"). Written by `Supervisor.snapshot()`, turned into a supervisor again by
/// `Supervisor(restoring:limits:now:)`, and carried as bytes in the compact binary form of
/// `BinaryFormat` by `encode()` and `decode(_:)`.
///
/// Kept: every record whole (the manifest as loaded; phase, generation and pid; open requests
/// and pending begins with their hosts, tags and peers; assertions with their grant time, hard
/// deadline, expiry sent and acknowledged; the launch, background, expiry, reclaim and kill
/// deadlines in the phase; crash counters and backoff; prewarm, lock and reset bookkeeping;
/// the refresh schedule, budget and waiters; observed and held notification hints; the recent
/// events `extctl status` shows; the retired flag), the refresh subscribers, the requests each
/// host may still `end`, the next request and assertion ids, the state version, and the
/// deadline the shell's timer was armed for, which the new shell arms again. Not kept: the
/// lookups of `RecordIndex`, which `restore` rebuilds from the records, and the limits, which
/// are the new daemon's (from its configuration).
///
/// Instants are kept as they are, in nanoseconds of `CLOCK_MONOTONIC`: the new program runs in
/// the same process on the same boot, so the clock goes on and every deadline keeps its
/// original instant. `restore` refuses a document written at an instant later than its `now`,
/// which no document of this boot can be.
///
/// Compatibility: the document's top-level `version` says how to read it. A daemon reads every
/// version from 1 to `SupervisorSnapshot.version` (converting an older one as it reads it), and
/// refuses any other, naming both the document's version and the ones it reads.
public struct SupervisorSnapshot: Equatable, Sendable, Codable {
    /// The version this daemon writes.
    public static let version = 1
    /// The versions this daemon reads.
    public static let readableVersions: ClosedRange<Int> = 1...version

    /// The document's version (`SupervisorSnapshot.version` when written by this daemon).
    public var version: Int
    /// The instant of the last event the supervisor handled before the snapshot.
    public var takenAt: Instant
    /// The supervisor's `stateVersion`.
    public var stateVersion: UInt64
    /// The id the next request gets.
    public var nextRequestID: UInt64
    /// The id the next assertion (or refresh) gets.
    public var nextAssertionID: UInt64
    /// The deadline the shell's timer was last armed for (the last `armTimer`; nil: none).
    /// The new shell arms its timer for it again (`Supervisor.armedDeadline`), one that
    /// passed meanwhile firing at once.
    public var armed: Instant?
    /// Every record, in id order.
    public var records: [ExtensionRecord]
    /// The hosts subscribed to each extension's new data (`subscribe`), in extension id order.
    public var refreshSubscribers: [Subscription]
    /// The requests each host's extensions completed or cancelled lately, which the host's
    /// `end` still answers `ok`, in host order.
    public var finishedRequests: [FinishedRequests]

    /// The hosts told when a refresh of one extension brings new data.
    public struct Subscription: Equatable, Sendable, Codable {
        /// The extension's id (it may no longer have a record: a reload removed it).
        public var extensionID: String
        /// The subscribed host connections, in ascending order.
        public var hosts: [HostID]

        /// A subscription of `hosts` to `extensionID`.
        public init(extensionID: String, hosts: [HostID]) {
            self.extensionID = extensionID
            self.hosts = hosts
        }
    }

    /// The requests finished lately on one host's connection.
    public struct FinishedRequests: Equatable, Sendable, Codable {
        /// The host connection.
        public var host: HostID
        /// The request ids, oldest first.
        public var requestIDs: [UInt64]

        /// The finished `requestIDs` of `host`.
        public init(host: HostID, requestIDs: [UInt64]) {
            self.host = host
            self.requestIDs = requestIDs
        }
    }

    /// A document with these contents (`Supervisor.snapshot()` makes them).
    public init(
        version: Int = SupervisorSnapshot.version, takenAt: Instant, stateVersion: UInt64, nextRequestID: UInt64, nextAssertionID: UInt64,
        armed: Instant?, records: [ExtensionRecord], refreshSubscribers: [Subscription], finishedRequests: [FinishedRequests]
    ) {
        self.version = version
        self.takenAt = takenAt
        self.stateVersion = stateVersion
        self.nextRequestID = nextRequestID
        self.nextAssertionID = nextAssertionID
        self.armed = armed
        self.records = records
        self.refreshSubscribers = refreshSubscribers
        self.finishedRequests = finishedRequests
    }

    private enum CodingKeys: String, CodingKey {
        case version, takenAt, stateVersion, nextRequestID, nextAssertionID, armed, records, refreshSubscribers, finishedRequests
    }

    /// Reads `version` first and refuses one outside `readableVersions` with
    /// `HandoverError.unsupportedVersion` before reading anything else.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        version = try c.decode(Int.self, forKey: .version)
        guard Self.readableVersions.contains(version) else {
            throw HandoverError.unsupportedVersion(found: version, readable: Self.readableVersions)
        }
        takenAt = try c.decode(Instant.self, forKey: .takenAt)
        stateVersion = try c.decode(UInt64.self, forKey: .stateVersion)
        nextRequestID = try c.decode(UInt64.self, forKey: .nextRequestID)
        nextAssertionID = try c.decode(UInt64.self, forKey: .nextAssertionID)
        armed = try c.decodeIfPresent(Instant.self, forKey: .armed)
        records = try c.decode([ExtensionRecord].self, forKey: .records)
        refreshSubscribers = try c.decode([Subscription].self, forKey: .refreshSubscribers)
        finishedRequests = try c.decode([FinishedRequests].self, forKey: .finishedRequests)
    }

    // MARK: - Bytes

    /// The signature the document's bytes start with.
    public static let signature = Array("extensiond supervisor snapshot\n".utf8)

    /// The document in the compact binary form (`BinaryFormat`), after `signature`, `version`
    /// among its top-level members. Fails only for a value the form cannot hold.
    public func encode() throws(HandoverError) -> [UInt8] {
        do {
            return try BinaryEncoder().encode(self, signature: Self.signature)
        } catch {
            throw .unencodable("\(error)")
        }
    }

    /// Reads a document written by `encode()` of this version or an older one. Fails with
    /// `unsupportedVersion` for a version this daemon does not read, and with `corrupt`, naming
    /// the member at fault by its path, for anything that is not such a document. The result
    /// is not checked for consistency: `Supervisor(restoring:limits:now:)` does that.
    public static func decode(_ bytes: [UInt8]) throws(HandoverError) -> SupervisorSnapshot {
        do {
            return try BinaryDecoder().decode(SupervisorSnapshot.self, from: bytes, signature: signature)
        } catch {
            throw corrupt(error)
        }
    }

    /// A decoding failure as a `HandoverError`: an unsupported version as it is, anything else
    /// as `corrupt`, naming the member at fault.
    public static func corrupt(_ error: any Error) -> HandoverError {
        switch error {
        case let e as HandoverError: e
        case let e as BinaryDecodingError: .corrupt(e.description)
        case let e as DecodingError: .corrupt(BinaryDecodingError(path: e.pathNames, problem: e.problem).description)
        case let e as ManifestFieldError: .corrupt("\(e.field): \(e.problem)")
        default: .corrupt("\(error)")
        }
    }

    // MARK: - Consistency

    /// The first contradiction in the document that would leave a restored supervisor unable to
    /// keep its guarantees, or nil: two records with one id; a stop or resume in flight (which
    /// `snapshot()` refuses); a running record without a pid (or a generation), or one not
    /// running that has a pid, open requests or assertions; a request or assertion id held
    /// twice, or not below the next id; a host or extension listed twice.
    func inconsistency() -> String? {
        var ids = Set<String>(minimumCapacity: records.count)
        var requestIDs = Set<UInt64>()
        var assertionIDs = Set<UInt64>()
        // By index, each record borrowed in place: `for r in records` would copy each one,
        // retaining every field, on the hand-over's critical path.
        for i in records.indices {
            if let problem = inconsistency(of: records[i], &ids, &requestIDs, &assertionIDs) { return problem }
        }
        var subscribed = Set<String>()
        for s in refreshSubscribers where !subscribed.insert(s.extensionID).inserted {
            return "the subscribers of '\(s.extensionID)' are listed twice"
        }
        var hosts = Set<HostID>()
        for f in finishedRequests where !hosts.insert(f.host).inserted {
            return "the finished requests of host \(f.host) are listed twice"
        }
        return nil
    }

    /// What contradicts the rest in record `r`, given the ids the records before it hold
    /// (which it adds its own to).
    private func inconsistency(
        of r: borrowing ExtensionRecord, _ ids: inout Set<String>, _ requestIDs: inout Set<UInt64>, _ assertionIDs: inout Set<UInt64>
    ) -> String? {
        let id = r.manifest.id
        guard ids.insert(id).inserted else { return "two records have the id '\(id)'" }
        switch r.phase {
        case .stopping, .resuming: return "'\(id)' has a stop or resume in flight, which no hand-over carries"
        default: break
        }
        if r.isRunning {
            if r.pid == nil { return "'\(id)' is \(r.state.rawValue) but has no pid" }
            if r.generation == 0 { return "'\(id)' is \(r.state.rawValue) but has no process generation" }
        } else {
            if let pid = r.pid { return "'\(id)' is not running but has pid \(pid)" }
            if !r.requests.isEmpty { return "'\(id)' is not running but has \(r.requests.count) open request(s)" }
            if !r.assertions.isEmpty { return "'\(id)' is not running but holds \(r.assertions.count) assertion(s)" }
        }
        func held(_ rid: UInt64) -> String? {
            guard requestIDs.insert(rid).inserted else { return "request \(rid) is held twice (again by '\(id)')" }
            if rid >= nextRequestID { return "request \(rid) of '\(id)' is not below the next request id \(nextRequestID)" }
            return nil
        }
        for q in r.requests { if let problem = held(q.id) { return problem } }
        for p in r.pending { if let problem = held(p.requestID) { return problem } }
        for a in r.assertions.assertions {
            guard assertionIDs.insert(a.id).inserted else { return "assertion \(a.id) is held twice (again by '\(id)')" }
            if a.id >= nextAssertionID { return "assertion \(a.id) of '\(id)' is not below the next assertion id \(nextAssertionID)" }
        }
        if let refresh = r.refresh?.inFlight, refresh >= nextAssertionID {
            return "the refresh \(refresh) of '\(id)' is not below the next assertion id \(nextAssertionID)"
        }
        return nil
    }
}
