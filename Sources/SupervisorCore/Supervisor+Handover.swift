/// The hand-over of a daemon that re-executes itself: the supervisor's state written as one
/// document (`SupervisorSnapshot`) and a supervisor restored from it, which then behaves exactly
/// as the one that wrote it would have: the same events produce the same effects, the new
/// shell's timer armed again for `armedDeadline`.
extension Supervisor {
    /// The hand-over document of a supervisor (`SupervisorSnapshot`).
    public typealias Snapshot = SupervisorSnapshot

    /// The supervisor's whole state as a hand-over document, or why there is none to hand over.
    ///
    /// Refused (`HandoverError`) while:
    /// - shutting down (`shuttingDown`): the daemon is ending every extension to exit, and a
    ///   new program would only repeat that;
    /// - a spawn is in flight: a record is running with no pid (`launching`, or `terminating`
    ///   when it was ended before its spawn was answered). The document could not name that
    ///   process, so nothing after the exec could supervise or end it. The shell answers each
    ///   spawn in the dispatch that asked for it, so between two dispatches there is none;
    /// - a stop or resume is in flight (`stopping`, `resuming`): the shell's stop model of it
    ///   (which members were signalled, its retry timer) is not part of what the shell hands
    ///   over, so the confirmation could never come. The shell waits for stops to settle
    ///   before it hands over, and confirms a resume in the dispatch that asked for it.
    ///
    /// Every other phase crosses: what the shell has asked and not had answered (a launch's
    /// readiness, a terminating signal's exit) is answered after the exec by an event about the
    /// same process generation, which the document keeps.
    public func snapshot() -> Result<SupervisorSnapshot, HandoverError> {
        if shuttingDown { return .failure(.shuttingDown) }
        // The ids are sorted, not the records: a record is a large value to move.
        let ordered = records.keys.sorted().compactMap { records[$0] }
        for r in ordered {
            if r.isRunning && r.pid == nil { return .failure(.spawnInFlight(extensionID: r.manifest.id)) }
            switch r.phase {
            case .stopping, .resuming: return .failure(.stopInFlight(extensionID: r.manifest.id))
            default: break
            }
        }
        return .success(
            SupervisorSnapshot(
                takenAt: now, stateVersion: stateVersion, nextRequestID: nextRequestID, nextAssertionID: nextAssertionID, armed: armed,
                records: ordered,
                refreshSubscribers: refreshSubscribers.sorted { $0.key < $1.key }.map { .init(extensionID: $0.key, hosts: $0.value.sorted()) },
                finishedRequests: finishedRequests.sorted { $0.key < $1.key }.map { .init(host: $0.key, requestIDs: $0.value) }))
    }

    /// The supervisor `snapshot` was taken of, with the new daemon's `limits`, at `now` (the
    /// monotonic clock of the same boot: every instant of the document keeps its meaning). The
    /// lookups of `RecordIndex` are rebuilt from the records. The old shell's timer does not
    /// survive the exec: the new shell arms its timer for `armedDeadline`, where the old one
    /// had it, and the restored supervisor asks for another (`armTimer`) only when its next
    /// deadline moves from there.
    ///
    /// Fails with `unsupportedVersion` for a document of a version other than
    /// `SupervisorSnapshot.version` (`decode(_:)` converts the older ones it reads), with
    /// `clockBehind` when the document was written after `now`, and with `inconsistent`,
    /// naming the contradiction, for a document no supervisor could have written: two records
    /// with one id; a stop or resume in flight (which `snapshot()` refuses); a running record
    /// without a pid or generation, or one not running with a
    /// pid, open requests or assertions; a request or assertion id held twice or not below the
    /// next id; a host or extension listed twice.
    public init(restoring snapshot: SupervisorSnapshot, limits: SupervisorLimits, now: Instant) throws(HandoverError) {
        guard snapshot.version == SupervisorSnapshot.version else {
            throw .unsupportedVersion(found: snapshot.version, readable: SupervisorSnapshot.version...SupervisorSnapshot.version)
        }
        if snapshot.takenAt > now { throw .clockBehind(takenAt: snapshot.takenAt, now: now) }
        if let problem = snapshot.inconsistency() { throw .inconsistent(problem) }
        self.init(manifests: [], limits: limits, now: now)
        records.reserveCapacity(snapshot.records.count)
        // By index: each record is copied once, into the table (`for r in` would copy it twice).
        for i in snapshot.records.indices {
            let id = snapshot.records[i].manifest.id
            records[id] = snapshot.records[i]
            index.refresh(id, from: nil, to: RecordIndex.Snapshot(snapshot.records[i]))
        }
        stateVersion = snapshot.stateVersion
        nextRequestID = snapshot.nextRequestID
        nextAssertionID = snapshot.nextAssertionID
        armed = snapshot.armed
        for s in snapshot.refreshSubscribers where !s.hosts.isEmpty { refreshSubscribers[s.extensionID] = Set(s.hosts) }
        for f in snapshot.finishedRequests { finishedRequests[f.host] = f.requestIDs }
    }

    /// The deadline the latest `armTimer` effect asked for (nil: none). A shell that takes over
    /// a restored supervisor arms its timer for it.
    public var armedDeadline: Instant? { armed }
}
