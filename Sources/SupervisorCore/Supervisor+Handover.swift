/// The hand-over of a daemon that re-executes itself: the supervisor's state written as one
/// document (`SupervisorSnapshot`) and a supervisor restored from it, which then behaves exactly
/// as the one that wrote it would have: the same events produce the same effects.
extension Supervisor {
    /// The supervisor's whole state as a hand-over document.
    ///
    /// Refused while:
    /// - shutting down (`shuttingDown`): the daemon is ending every extension to exit, and a
    ///   new program would only repeat that;
    /// - a spawn is in flight: a record is running with no pid (`launching`, or `terminating`
    ///   when it was ended before its spawn was answered). The document could not name that
    ///   process, so nothing after the exec could supervise or end it. The shell answers each
    ///   spawn in the dispatch that asked for it, so between two dispatches no record is there.
    ///
    /// Every other phase crosses. A stop or resume in flight (`stopping`, `resuming`) is part
    /// of the document like any phase: the processes stay as the kernel holds them, and the
    /// new shell answers `stopConfirmed` or `continueConfirmed` when it finds the stop or the
    /// resume done, as the old one would have. The same holds for every effect performed and not
    /// answered yet (a launch's readiness, a terminating signal's exit): the answer is an event
    /// about the same process generation, which the document keeps.
    public func snapshot() throws(HandoverError) -> SupervisorSnapshot {
        if shuttingDown { throw .shuttingDown }
        let ordered = records.values.sorted { $0.manifest.id < $1.manifest.id }
        if let r = ordered.first(where: { $0.isRunning && $0.pid == nil }) { throw .spawnInFlight(extensionID: r.manifest.id) }
        return SupervisorSnapshot(
            takenAt: now, stateVersion: stateVersion, nextRequestID: nextRequestID, nextAssertionID: nextAssertionID,
            armedTimer: armed, records: ordered,
            refreshSubscribers: refreshSubscribers.sorted { $0.key < $1.key }.map { .init(extensionID: $0.key, hosts: $0.value.sorted()) },
            finishedRequests: finishedRequests.sorted { $0.key < $1.key }.map { .init(host: $0.key, requestIDs: $0.value) })
    }

    /// The supervisor `snapshot` was taken of, with the new daemon's `limits`, at `now` (the
    /// monotonic clock of the same boot: every instant of the document keeps its meaning). The
    /// lookups of `RecordIndex` are rebuilt from the records.
    ///
    /// Fails with `unsupportedVersion` for a document of a version other than
    /// `SupervisorSnapshot.version` (`decode(_:)` converts the older ones it reads), with
    /// `clockBehind` when the document was written after `now`, and with `inconsistent`,
    /// naming the contradiction, for a document no supervisor could have written: two records
    /// with one id; a running record without a pid or generation, or one not running with a
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
        for r in snapshot.records {
            records[r.manifest.id] = r
            index.refresh(r.manifest.id, from: nil, to: r)
        }
        stateVersion = snapshot.stateVersion
        nextRequestID = snapshot.nextRequestID
        nextAssertionID = snapshot.nextAssertionID
        armed = snapshot.armedTimer
        for s in snapshot.refreshSubscribers where !s.hosts.isEmpty { refreshSubscribers[s.extensionID] = Set(s.hosts) }
        for f in snapshot.finishedRequests { finishedRequests[f.host] = f.requestIDs }
    }
}
