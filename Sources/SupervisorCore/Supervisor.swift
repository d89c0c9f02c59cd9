import ExtensionProtocol

/// The lifecycle, assertion and policy state machine of extensiond.
///
/// Pure: it performs no system calls and reads no clock. The shell feeds it `Event`s with the
/// current monotonic instant and performs the `Effect`s it returns, in order. Every decision
/// the daemon makes about an extension is made here, so it can be tested with simulated time.
///
/// Guarantees (tested in SupervisorCoreTests):
/// - an extension is never stopped while it holds an assertion whose *expire* was not sent at
///   least `expiryGraceSeconds` earlier;
/// - every terminating signal sent to a possibly stopped group is followed by SIGCONT;
/// - events for a previous process generation are ignored.
public struct Supervisor: Sendable {
    /// Every extension it knows, by id: those of the current manifests, and those a reload
    /// removed until their process is gone.
    public internal(set) var records: [String: ExtensionRecord] {
        get {
            assert(!lending, "a transition of one record read the whole table, which `update` has lent out")
            return table
        }
        _modify {
            assert(!lending, "a transition of one record changed the whole table, which `update` has lent out")
            yield &table
        }
    }
    /// The storage of `records`. `update` takes it out of `self` while a transition changes
    /// one record in place (`lending`), so that the transition may change the rest of `self`.
    private var table: [String: ExtensionRecord] = [:]
    /// Whether `update` has taken `table` out (it is empty meanwhile); only for the assertions.
    private var lending = false
    /// The daemon-wide limits every decision uses.
    public var limits: SupervisorLimits
    /// Whether a `shutdown` event arrived; from then on begins, prewarms and forced refreshes
    /// are refused.
    public private(set) var shuttingDown = false
    /// Changes whenever an extension's public state changes or an extension is added or
    /// removed, so observers (the STATUS= summary) recompute only when something moved.
    public internal(set) var stateVersion: UInt64 = 0
    /// Lookups that would otherwise visit every record (deadlines, request owners, hosts,
    /// retired records, state counts), refreshed by `update` after every change to a record.
    var index = RecordIndex()
    /// Per host, the requests its extensions completed or cancelled lately (at most
    /// `finishedRemembered`, oldest first), so that the host's `end` of one of them, which may
    /// cross the completion, is answered `ok`.
    var finishedRequests: [HostID: [UInt64]] = [:]
    /// How many finished requests are remembered per host.
    public static let finishedRemembered = 64
    /// For each extension, the hosts told when a refresh of it brings new data (`subscribe`).
    var refreshSubscribers: [String: Set<HostID>] = [:]
    /// For each extension whose dismissal stopped it, the requests that dismissal closed: their
    /// `ended` goes to the extension once it has left `stopping` (the stop confirmed, or ended
    /// otherwise), when the message no longer wakes a thread the stop waits for or competes
    /// with. Held only while its record is `stopping`, so no snapshot carries it (no stop in
    /// flight crosses a hand-over).
    var endedAfterStop: [String: [UInt64]] = [:]
    var nextRequestID: UInt64 = 1
    var nextAssertionID: UInt64 = 1
    var armed: Instant?
    var out: [Effect] = []
    var now: Instant

    /// Creates a supervisor knowing `manifests` (duplicate ids must have been refused already).
    public init(manifests: [Manifest], limits: SupervisorLimits = SupervisorLimits(), now: Instant) {
        self.limits = limits
        self.now = now
        for m in manifests { add(ExtensionRecord(manifest: m, since: now)) }
    }

    /// How many extensions are in each public state (states with none may be absent or 0).
    public var stateCounts: [LifecycleState: Int] { index.stateCounts }

    /// Processes one event at `now` and returns the effects to perform, in order.
    public mutating func handle(_ event: Event, at now: Instant) -> [Effect] {
        self.now = now
        out.removeAll(keepingCapacity: true)
        switch event {
        case let .begin(host, peer, tag, id): begin(host: host, peer: peer, tag: tag, id: id)
        case let .end(host, tag, requestID): end(host: host, tag: tag, requestID: requestID)
        case let .hostGone(host): hostGone(host)
        case let .spawned(id, generation, pid):
            update(id, generation) { s, r in s.spawned(&r, pid: pid) }
        case let .spawnFailed(id, generation, error, configuration):
            update(id, generation) { s, r in s.spawnFailed(&r, error: error, configuration: configuration) }
        case let .ready(id, generation):
            update(id, generation) { s, r in s.ready(&r) }
        case let .stopConfirmed(id, generation, locks):
            update(id, generation) { s, r in s.stopConfirmed(&r, locks: locks) }
        case let .continueConfirmed(id, generation):
            update(id, generation) { s, r in s.continueConfirmed(&r) }
        case let .exited(id, generation, status, outlivedLeader, memoryLimit):
            update(id, generation) { s, r in s.exited(&r, status: status, outlivedLeader: outlivedLeader, memoryLimit: memoryLimit) }
        case let .acquire(id, generation, tag, reason):
            update(id, generation) { s, r in s.acquire(&r, tag: tag, reason: reason) }
        case let .observe(id, generation, name):
            update(id, generation) { _, r in
                if NotificationHints.nameProblem(name) == nil { _ = r.hints.observe(name) }
            }
        case let .post(host, peer, tag, name): post(host: host, peer: peer, tag: tag, name: name)
        case let .suiteOpened(id, generation, suite):
            update(id, generation) { _, r in _ = r.hints.observe(NotificationHints.suiteHint(suite)) }
        case let .suiteChanged(suite, writer, writerGeneration): suiteChanged(suite, writer: writer, writerGeneration: writerGeneration)
        case let .forceRefresh(host, peer, tag, id): forceRefresh(host: host, peer: peer, tag: tag, id: id)
        case let .subscribe(host, peer, tag, ids): subscribe(host: host, peer: peer, tag: tag, ids: ids)
        case let .refreshDone(id, generation, refreshID, answer):
            update(id, generation) { s, r in s.refreshAnswered(&r, refreshID: refreshID, answer: answer) }
        case let .requestFinished(id, generation, requestID, outcome):
            update(id, generation) { s, r in s.finishRequest(&r, requestID: requestID, outcome: outcome) }
        case let .release(id, generation, assertionID):
            update(id, generation) { s, r in s.release(&r, assertionID: assertionID) }
        case let .expireReceived(id, generation, assertionID):
            update(id, generation) { _, r in r.assertions.acknowledgeExpire(assertionID) }
        case let .channelClosed(id, generation, reason):
            update(id, generation) { s, r in s.channelClosed(&r, reason: reason) }
        case let .deliveryFailed(id, generation, requestID, error):
            update(id, generation) { s, r in s.deliveryFailed(&r, requestID: requestID, error: error) }
        case let .lockContention(id, generation, detail):
            update(id, generation) { s, r in s.lockContention(&r, detail: detail) }
        case let .stopRefused(id, generation, seconds):
            update(id, generation) { s, r in s.stopRefused(&r, seconds: seconds) }
        case let .diskLimitExceeded(id, generation, bytes):
            update(id, generation) { s, r in s.diskLimitExceeded(&r, bytes: bytes) }
        case .tick:
            for id in index.takeDue(at: now) {
                update(id, nil) { s, r in
                    s.processDeadlines(&r)
                    s.refreshLost(&r)
                    s.scheduledRefresh(&r)
                }
            }
        case let .kill(host, tag, id, signal): kill(host: host, tag: tag, id: id, signal: signal)
        case let .reset(host, tag, id): reset(host: host, tag: tag, id: id)
        case let .reload(manifests, errors, _, _): reload(manifests, errors)
        case let .prewarm(host, peer, tag, ids): prewarm(host: host, peer: peer, tag: tag, ids: ids)
        case .shutdown: shutdown()
        }
        removeRetired()
        if shuttingDown && index.stateCounts[.notRunning, default: 0] == records.count && !out.contains(.exit) {
            out.append(.exit)
        }
        rearm()
        return out
    }

    /// The instant of the earliest pending deadline, if any.
    public func nextDeadline() -> Instant? { index.nextDeadline }

    /// Differences between the supervisor's internal indexes and a pass over every record;
    /// empty unless there is a bug. For tests.
    public func indexDiscrepancies() -> [String] { index.discrepancies(records) }

    // MARK: - Record access

    /// Runs `body` on the record `id` if it exists and (when `generation` is given) its
    /// current process has that generation; events for stale generations are dropped.
    ///
    /// The record is changed in place: the table is taken out of `self` for the call (no copy
    /// of the record, no removal and re-insertion), so `body` sees only the record it is given
    /// and must not read `records` (asserted in debug builds).
    mutating func update(_ id: String, _ generation: UInt64?, _ body: (inout Supervisor, inout ExtensionRecord) -> Void) {
        assert(!lending, "a transition of one record started another, which would find the table lent out")
        guard let i = table.index(forKey: id) else { return }
        var lent = table
        table = [:]
        lending = true
        change(&lent.values[i], generation, body)
        lending = false
        table = lent
    }

    /// `update`'s work on the record, which it lends in place (`Dictionary.Values`' getter
    /// would copy it: reading through `inout` does not).
    private mutating func change(_ r: inout ExtensionRecord, _ generation: UInt64?, _ body: (inout Supervisor, inout ExtensionRecord) -> Void) {
        if let generation, r.generation != generation || !r.isRunning { return }
        let before = RecordIndex.Snapshot(r)
        body(&self, &r)
        index.refresh(r.manifest.id, from: before, to: RecordIndex.Snapshot(r))
    }

    /// Reads the record at `i` in place (`Dictionary.Values`' getter would copy it, retaining
    /// each of its fields).
    private mutating func peek<T>(_ i: [String: ExtensionRecord].Index, _ read: (inout ExtensionRecord) -> T) -> T {
        read(&table.values[i])
    }

    private mutating func add(_ r: ExtensionRecord) {
        records[r.manifest.id] = r
        index.refresh(r.manifest.id, from: nil, to: RecordIndex.Snapshot(r))
    }

    mutating func setPhase(_ r: inout ExtensionRecord, _ phase: Phase) {
        if phase.state != r.phase.state {
            r.since = now
            stateVersion &+= 1
        }
        if case .stopping = r.phase, !endedAfterStop.isEmpty { sendEndedAfterStop(&r, leavingFor: phase) }
        r.phase = phase
    }

    /// Sends the `ended` held for `r` while it was stopping, now that it leaves `stopping` for
    /// `phase`; drops them when its process is gone.
    private mutating func sendEndedAfterStop(_ r: inout ExtensionRecord, leavingFor phase: Phase) {
        if case .stopping = phase { return }
        guard let held = endedAfterStop.removeValue(forKey: r.manifest.id), phase != .notRunning else { return }
        for requestID in held {
            out.append(.send(extensionID: r.manifest.id, generation: r.generation, message: .ended(requestID: requestID)))
        }
    }

    mutating func record(
        _ r: inout ExtensionRecord, _ kind: LifecycleEvent.Kind, assertionID: UInt64? = nil,
        requestID: UInt64? = nil, detail: String? = nil, lock: LockReport? = nil
    ) {
        let e = LifecycleEvent(
            at: now, kind: kind, extensionID: r.manifest.id, pid: r.pid, state: r.state,
            assertionID: assertionID, requestID: requestID, detail: detail, lock: lock)
        if r.recentEvents.count >= ExtensionRecord.historyLimit {
            r.recentEvents.removeFirst()
        } else if r.recentEvents.count == r.recentEvents.capacity {
            // Grown by doubling, but never past the limit: a record's history (about 220
            // bytes an event) would otherwise settle in a buffer of 32.
            r.recentEvents.reserveCapacity(min(ExtensionRecord.historyLimit, max(4, 2 * r.recentEvents.count)))
        }
        r.recentEvents.append(e)
        out.append(.record(e))
    }

    private mutating func rearm() {
        index.dropStale()
        let next = nextDeadline()
        if next != armed {
            armed = next
            out.append(.armTimer(next))
        }
    }

    private mutating func removeRetired() {
        for id in index.retired {
            guard let r = records[id], !r.isRunning, r.pending.isEmpty else { continue }
            records[id] = nil
            index.refresh(id, from: RecordIndex.Snapshot(r), to: nil)
            stateVersion &+= 1
        }
    }

    // MARK: - Host requests

    func mayOpen(_ m: Manifest, _ peer: PeerIdentity) -> Bool { Self.mayOpen(m, peer, daemonUID: limits.daemonUID) }

    /// Whether `peer` may open an extension of manifest `m` when the daemon runs as `daemonUID`.
    static func mayOpen(_ m: Manifest, _ peer: PeerIdentity, daemonUID: UInt32) -> Bool {
        peer.uid == 0 || peer.uid == daemonUID || m.hosts.uids.contains(peer.uid) || m.hosts.gids.contains(where: peer.isMember)
    }

    private mutating func begin(host: HostID, peer: PeerIdentity, tag: UInt32, id: String) {
        func refuse(_ code: FailureCode, _ text: String) { out.append(.reply(host: host, message: .failure(tag: tag, code: code, text: text))) }
        if shuttingDown { return refuse(.shuttingDown, "extensiond is shutting down") }
        guard let i = table.index(forKey: id), !peek(i, { $0.retired }) else { return refuse(.unknownExtension, "no extension with id '\(id)'") }
        guard peek(i, { [daemonUID = limits.daemonUID] in Self.mayOpen($0.manifest, peer, daemonUID: daemonUID) }) else {
            update(id, nil) { s, r in s.record(&r, .refuse, detail: "host uid \(peer.uid) pid \(peer.pid) is not allowed to open it") }
            return refuse(.notPermitted, "uid \(peer.uid) may not open '\(id)' (see the manifest's 'hosts')")
        }
        if index.requestCount(of: host) >= limits.maxRequestsPerHost {
            return refuse(.limitReached, "this connection already holds \(limits.maxRequestsPerHost) requests")
        }
        if let (until, crashes) = peek(i, { r in r.isRunning ? nil : r.throttledUntil.map { ($0, r.consecutiveCrashes) } }), until > now {
            let wait = String(format_seconds: until.seconds(since: now))
            update(id, nil) { s, r in s.record(&r, .throttle, detail: "launch refused: crash loop backoff, \(wait) left") }
            return refuse(.throttled, "'\(id)' crashed \(crashes) times in a row; next launch allowed in \(wait)")
        }
        let requestID = nextRequestID
        nextRequestID += 1
        let pending = PendingBegin(host: host, peer: peer, tag: tag, requestID: requestID)
        update(id, nil) { s, r in
            switch r.phase {
            case .notRunning:
                r.pending.append(pending)
                s.launch(&r)
            case .launching, .resuming, .terminating:
                r.pending.append(pending)
            case .active:
                s.open(&r, pending)
            case .background, .expiring:
                // A new request cancels the pending suspension; expired assertions stay expired.
                s.setPhase(&r, .active)
                s.open(&r, pending)
            case .stopping, .suspended:
                r.pending.append(pending)
                s.setPhase(&r, .resuming)
                s.out.append(.resume(extensionID: r.manifest.id, generation: r.generation))
            }
        }
    }

    private mutating func open(_ r: inout ExtensionRecord, _ p: PendingBegin) {
        guard let pid = r.pid else { return }
        r.prewarmed = false  // in use: no longer a prewarmed extension waiting unused
        r.lockGrace = .none  // in use again: its next stop gets the policy afresh
        r.refresh?.seen = true  // a host will see what the last refresh brought
        r.requests.append(OpenRequest(id: p.requestID, host: p.host, tag: p.tag, peer: p.peer, begunAt: now))
        out.append(
            .openRequest(
                extensionID: r.manifest.id, generation: r.generation, requestID: p.requestID, host: p.host,
                tag: p.tag, pid: pid, channel: r.manifest.readiness == .runtime))
        record(&r, .begin, requestID: p.requestID, detail: "host pid \(p.peer.pid) uid \(p.peer.uid)")
    }

    private mutating func openPending(_ r: inout ExtensionRecord) {
        let pending = r.pending
        r.pending.removeAll()
        for p in pending { open(&r, p) }
    }

    private mutating func failPending(_ r: inout ExtensionRecord, _ code: FailureCode, _ text: String) {
        for p in r.pending { out.append(.reply(host: p.host, message: .failure(tag: p.tag, code: code, text: text))) }
        r.pending.removeAll()
    }

    private mutating func end(host: HostID, tag: UInt32, requestID: UInt64) {
        guard let id = index.requestOwner[requestID], let i = table.index(forKey: id),
            peek(i, { $0.requests.contains(where: { $0.id == requestID && $0.host == host }) })
        else {
            if let i = finishedRequests[host]?.firstIndex(of: requestID) {
                finishedRequests[host]?.remove(at: i)
                out.append(.reply(host: host, message: .ok(tag: tag)))
                return
            }
            out.append(.reply(host: host, message: .failure(tag: tag, code: .unknownRequest, text: "no open request \(requestID) on this connection")))
            return
        }
        update(id, nil) { s, r in
            s.out.append(.reply(host: host, message: .ok(tag: tag)))
            s.closeRequests(&r) { $0.id == requestID }
        }
    }

    private mutating func hostGone(_ host: HostID) {
        finishedRequests[host] = nil
        for id in refreshSubscribers.keys where refreshSubscribers[id]?.remove(host) != nil {
            if refreshSubscribers[id]?.isEmpty == true { refreshSubscribers[id] = nil }
        }
        for id in (index.hostRecords[host] ?? [:]).keys.sorted() {
            update(id, nil) { s, r in
                r.pending.removeAll { $0.host == host }
                s.closeRequests(&r) { $0.host == host }
            }
        }
    }

    /// The extension completed or cancelled request `requestID`: its host gets the result, and
    /// the request closes as a dismissed one does (with no request left, the usual background,
    /// assertion and suspension rules follow). A request its host already ended is ignored.
    private mutating func finishRequest(_ r: inout ExtensionRecord, requestID: UInt64, outcome: RequestOutcome) {
        guard let q = r.requests.first(where: { $0.id == requestID }) else { return }
        let detail: String
        switch outcome {
        case .completed(let payload):
            out.append(.reply(host: q.host, message: .completed(requestID: requestID, payload: payload)))
            detail = "completed by the extension (\(payload.count) bytes returned)"
        case .cancelled(let reason):
            out.append(.reply(host: q.host, message: .cancelled(requestID: requestID, reason: reason)))
            detail = "cancelled by the extension: \(reason)"
        }
        var remembered = finishedRequests[q.host] ?? []
        if remembered.count >= Supervisor.finishedRemembered { remembered.removeFirst() }
        remembered.append(requestID)
        finishedRequests[q.host] = remembered
        closeRequests(&r, detail: detail) { $0.id == requestID }
    }

    /// Ends the matching requests and backgrounds the extension when none is left. The extension
    /// is told (`ended`) at once, or, when that backgrounding stops it, once it has left
    /// `stopping` (`endedAfterStop`).
    private mutating func closeRequests(_ r: inout ExtensionRecord, detail: String? = nil, where match: (OpenRequest) -> Bool) {
        let closing = r.requests.filter(match)
        guard !closing.isEmpty else { return }
        r.requests.removeAll(where: match)
        for q in closing { record(&r, .end, requestID: q.id, detail: detail) }
        if r.requests.isEmpty && r.phase == .active { enterBackground(&r) }
        guard r.manifest.readiness == .runtime else { return }
        if case .stopping = r.phase {
            endedAfterStop[r.manifest.id, default: []].append(contentsOf: closing.map(\.id))
            return
        }
        for q in closing {
            out.append(.send(extensionID: r.manifest.id, generation: r.generation, message: .ended(requestID: q.id)))
        }
    }

    private mutating func deliveryFailed(_ r: inout ExtensionRecord, requestID: UInt64, error: String) {
        guard let q = r.requests.first(where: { $0.id == requestID }) else { return }
        // The host is still waiting for its `begun`: answer the begin itself.
        out.append(.reply(host: q.host, message: .failure(tag: q.tag, code: .interrupted, text: "could not hand the channel to '\(r.manifest.id)': \(error)")))
        closeRequests(&r) { $0.id == requestID }
    }

    // MARK: - Process lifecycle

    mutating func launch(_ r: inout ExtensionRecord, prewarmed: Bool = false) {
        r.generation += 1
        r.pid = nil
        r.startedAt = nil
        r.adminSignaled = false
        r.prewarmed = prewarmed
        r.lockGrace = .none
        r.assertions = AssertionLedger()
        r.hints = NotificationHints()
        setPhase(&r, .launching(deadline: now.adding(seconds: r.policy.launchTimeoutSeconds)))
        out.append(.spawn(extensionID: r.manifest.id, generation: r.generation, manifest: r.manifest))
    }

    private mutating func spawned(_ r: inout ExtensionRecord, pid: Int32) {
        r.pid = pid
        r.startedAt = now
        record(&r, .launch, detail: r.manifest.executable)
        if case .terminating = r.phase {
            // Shutdown arrived between the spawn effect and its answer: end it at once.
            out.append(.signal(extensionID: r.manifest.id, generation: r.generation, signal: SignalNumber.kill, thenContinue: true))
        }
    }

    private mutating func spawnFailed(_ r: inout ExtensionRecord, error: String, configuration: Bool) {
        switch r.phase {
        case .launching: break
        case .terminating where r.pid == nil: break  // ended (shutdown, timeout, removal) before the spawn was answered
        default: return
        }
        setPhase(&r, .notRunning)
        r.hints = NotificationHints()
        r.lastExit = ExitRecord(status: nil, reason: .launchFailed, at: now, pid: nil)
        // A program that cannot be reached or run as installed is the manifest's or the
        // installation's problem: the next request tries again at once, and says why again.
        if !configuration { countCrash(&r, stable: false) }
        if shuttingDown || r.retired {
            failPending(&r, .shuttingDown, "'\(r.manifest.id)' is going away")
        } else {
            failPending(&r, .launchFailed, "could not launch '\(r.manifest.id)': \(error)")
        }
        record(&r, .launchFailed, detail: error)
    }

    private mutating func ready(_ r: inout ExtensionRecord) {
        guard case .launching = r.phase else { return }
        setPhase(&r, .active)
        record(&r, .ready)
        if r.pending.isEmpty {
            if !refreshInBackground(&r) { enterBackground(&r) }
        } else {
            openPending(&r)
            startWantedRefresh(&r)
        }
    }

    /// The last request ended (or a prewarmed launch became ready): suspend at once, or give
    /// live assertions their background time first.
    mutating func enterBackground(_ r: inout ExtensionRecord) {
        if r.retired { return terminate(&r, reason: .removed, signal: SignalNumber.terminate) }
        if r.policy.suspend == .never {
            setPhase(&r, .background(expireAt: nil, stopAt: nil))
            return
        }
        if r.assertions.isEmpty { return stopNow(&r) }
        let stopAt = now.adding(seconds: r.policy.backgroundSeconds)
        setPhase(&r, .background(expireAt: stopAt.adding(seconds: -r.policy.expiryGraceSeconds), stopAt: stopAt))
        processDeadlines(&r)
    }

    private mutating func stopNow(_ r: inout ExtensionRecord) {
        r.reprieveUntil = nil
        let wasExpiring = r.state == .expiring
        for a in r.assertions.revokeAll() {
            // Only reached at the hard stop deadline: *expire* went out `expiryGraceSeconds` ago.
            if !a.expireAcknowledged {
                r.unacknowledgedExpiries += 1
                record(&r, .expiryUnacknowledged, assertionID: a.id, detail: a.reason)
            }
            r.overruns += 1
            record(&r, .overrun, assertionID: a.id, detail: a.reason)
        }
        refreshLost(&r)
        setPhase(&r, .stopping(wasExpiring: wasExpiring))
        out.append(.stop(extensionID: r.manifest.id, generation: r.generation))
        record(&r, .stopSent)
    }

    private mutating func stopConfirmed(_ r: inout ExtensionRecord, locks: [HeldLock]) {
        guard case .stopping = r.phase else { return }
        let blocking = locks.filter(\.blocksOthers)
        if !blocking.isEmpty { return lockedAtStop(&r, blocking) }
        r.lockGrace = .none
        setPhase(&r, .suspended(reclaimAt: now.adding(seconds: r.policy.suspendedLifetimeSeconds)))
        record(&r, .suspend)
        startWantedRefresh(&r)  // a refresh fell due during the stop: resumed for it
    }

    private mutating func continueConfirmed(_ r: inout ExtensionRecord) {
        guard r.phase == .resuming else { return }
        setPhase(&r, .active)
        record(&r, .resume)
        for name in r.hints.takeHeld() {
            out.append(.send(extensionID: r.manifest.id, generation: r.generation, message: NotificationHints.message(for: name)))
        }
        if !r.pending.isEmpty {
            r.reprieveUntil = nil
            openPending(&r)
            startWantedRefresh(&r)
        } else if refreshInBackground(&r) {
            r.reprieveUntil = nil
            r.lockGrace = .none
        } else if r.lockGrace == .resuming {
            // Continued to release a lock that blocks others: `expiryGraceSeconds` to let go, no
            // new assertion; a lock still held at the next stop ends it.
            r.lockGrace = .spent
            let stopAt = now.adding(seconds: r.policy.expiryGraceSeconds)
            r.reprieveUntil = stopAt
            setPhase(&r, .expiring(stopAt: stopAt))
        } else if r.reprieveUntil != nil {
            // Resumed to let go of a contended lock: background time even without assertions.
            let stopAt = now.adding(seconds: r.policy.backgroundSeconds)
            let expireAt = stopAt.adding(seconds: -r.policy.expiryGraceSeconds)
            r.reprieveUntil = expireAt
            setPhase(&r, .background(expireAt: expireAt, stopAt: stopAt))
        } else {
            enterBackground(&r)
        }
    }

    /// Whether a lock reprieve still keeps an assertion-less extension running.
    private func inReprieve(_ r: ExtensionRecord) -> Bool {
        guard let until = r.reprieveUntil else { return false }
        return now < until
    }

    private mutating func terminate(_ r: inout ExtensionRecord, reason: ExitReason, signal: Int32) {
        if case .terminating = r.phase, signal != SignalNumber.kill { return }
        let mayBeStopped = r.phase.mayBeStopped
        let killAt = signal == SignalNumber.kill ? nil : now.adding(seconds: limits.terminateGraceSeconds)
        setPhase(&r, .terminating(reason: reason, killAt: killAt))
        out.append(.signal(extensionID: r.manifest.id, generation: r.generation, signal: signal, thenContinue: mayBeStopped))
    }

    private mutating func exited(_ r: inout ExtensionRecord, status: ExitStatus, outlivedLeader: Bool, memoryLimit: Bool = false) {
        let reason: ExitReason
        if case .terminating(let why, _) = r.phase {
            reason = why
        } else if memoryLimit {
            reason = .memoryLimit
        } else if r.adminSignaled {
            reason = .killedByAdmin
        } else if status != .exited(0) {
            reason = .crashed
        } else if outlivedLeader {
            reason = .leaderExited
        } else {
            reason = .exited
        }
        let wasLaunching = r.state == .launching
        let describe: String
        switch status {
        case .exited(let code): describe = "exit status \(code)"
        case .signaled(let sig): describe = "signal \(sig)"
        }
        for w in r.resetWaiters { out.append(.emptyContainer(extensionID: r.manifest.id, host: w.host, tag: w.tag)) }
        r.resetWaiters.removeAll()
        for q in r.requests {
            out.append(.reply(host: q.host, message: .interrupted(requestID: q.id, reason: "'\(r.manifest.id)' ended: \(reason.rawValue) (\(describe))")))
        }
        r.requests.removeAll()
        let dropped = r.assertions.revokeAll().count
        if r.refresh?.inFlight != nil || r.refresh?.wanted == true {
            refreshEnded(&r, answer: nil, why: "the extension ended (\(reason.rawValue))")
        }
        let ranFor = r.startedAt.map { now.seconds(since: $0) } ?? 0
        r.lastExit = ExitRecord(status: status, reason: reason, at: now, pid: r.pid)
        setPhase(&r, .notRunning)
        r.hints = NotificationHints()
        let detail =
            "\(reason.rawValue), \(describe)" + (dropped > 0 ? ", \(dropped) assertion(s) dropped" : "")
            + (outlivedLeader ? ", processes that outlived the leader were killed" : "")
        record(&r, reason == .crashed || reason == .memoryLimit ? .crash : reason == .reclaimed ? .reclaim : .exit, detail: detail)
        r.pid = nil
        r.startedAt = nil
        switch reason {
        case .crashed, .launchFailed, .memoryLimit: countCrash(&r, stable: ranFor >= limits.stableRunSeconds)
        case .exited, .reclaimed, .leaderExited: r.consecutiveCrashes = 0; r.throttledUntil = nil
        default: break
        }
        if r.pending.isEmpty { return }
        if shuttingDown || r.retired {
            failPending(&r, .shuttingDown, "'\(r.manifest.id)' is going away")
        } else if wasLaunching {
            failPending(&r, .launchFailed, "'\(r.manifest.id)' exited before it was ready (\(describe))")
        } else if let until = r.throttledUntil, until > now {
            failPending(&r, .throttled, "'\(r.manifest.id)' is crash-looping; next launch in \(String(format_seconds: until.seconds(since: now)))")
        } else {
            launch(&r)  // requests queued while it was terminating get a fresh process
        }
    }

    private mutating func countCrash(_ r: inout ExtensionRecord, stable: Bool) {
        r.consecutiveCrashes = stable ? 1 : r.consecutiveCrashes + 1
        let delay = limits.backoff(afterCrashes: r.consecutiveCrashes)
        r.throttledUntil = delay > 0 ? now.adding(seconds: delay) : nil
        if delay > 0 { record(&r, .throttle, detail: "crash \(r.consecutiveCrashes) in a row: next launch in \(String(format_seconds: delay))") }
    }

    /// 0xdead10cc caught at the stop: a process of the extension holds a lock that blocks others
    /// (`blocking` is not empty). It never counts as suspended: it is ended at once, or, with
    /// `lockedWhileSuspended: "resume"`, continued for `expiryGraceSeconds` (its assertions were
    /// told to expire before the stop) and ended if it still holds such a lock at the next stop.
    private mutating func lockedAtStop(_ r: inout ExtensionRecord, _ blocking: [HeldLock]) {
        r.locksHeldAtSuspend += 1
        let decision: LockDecision = r.policy.lockedWhileSuspended == .resume && r.lockGrace != .spent ? .resume : .terminate
        let reported = blocking.prefix(Supervisor.locksReportedPerStop)
        for lock in reported {
            var detail = lock.summary + ": " + decision.rawValue
            if decision == .terminate && r.lockGrace == .spent { detail += " (still held after the grace)" }
            if lock == reported.last && blocking.count > reported.count { detail += "; \(blocking.count - reported.count) more" }
            record(&r, .lockHeldAtSuspend, detail: detail, lock: LockReport(path: lock.path, kind: lock.kind, decision: decision))
        }
        switch decision {
        case .terminate:
            r.lockGrace = .none
            terminate(&r, reason: .lockHeldAtSuspend, signal: SignalNumber.kill)
        case .resume:
            r.lockGrace = .resuming
            setPhase(&r, .resuming)
            out.append(.resume(extensionID: r.manifest.id, generation: r.generation))
        }
    }

    /// At most this many `lock-held-at-suspend` events per stop (the last one counts the rest).
    public static let locksReportedPerStop = 4

    /// 0xdead10cc: a suspended extension blocks another process on a file lock.
    private mutating func lockContention(_ r: inout ExtensionRecord, detail: String) {
        guard case .suspended = r.phase else { return }
        record(&r, .lockHeldWhileSuspended, detail: detail)
        switch r.policy.lockedWhileSuspended {
        case .terminate:
            terminate(&r, reason: .lockHeldWhileSuspended, signal: SignalNumber.kill)
        case .resume:
            // Run again for its background time so it can release the lock, then stop again.
            r.reprieveUntil = now
            setPhase(&r, .resuming)
            out.append(.resume(extensionID: r.manifest.id, generation: r.generation))
        }
    }

    /// A suspension its processes did not let happen: it is ended, never left running in the
    /// background it was dismissed from.
    private mutating func stopRefused(_ r: inout ExtensionRecord, seconds: Double) {
        guard case .stopping = r.phase else { return }
        record(&r, .kill, detail: "its processes kept running \(Int(seconds)) s into its suspension: killed")
        terminate(&r, reason: .stopRefused, signal: SignalNumber.kill)
    }

    /// Its container grew past its limit: it is ended at once, as the kernel ends one over its
    /// memory limit; its files stay (it may delete some at its next launch, or `extctl reset`).
    private mutating func diskLimitExceeded(_ r: inout ExtensionRecord, bytes: UInt64) {
        if case .terminating = r.phase { return }
        guard r.pid != nil, let limit = r.manifest.policy.limits.diskMaxBytes else { return }
        record(&r, .kill, detail: "its container holds \(bytes) bytes, over its limits.diskMaxBytes (\(limit)): killed")
        terminate(&r, reason: .diskLimit, signal: SignalNumber.kill)
    }

    private mutating func channelClosed(_ r: inout ExtensionRecord, reason: String) {
        if case .terminating = r.phase { return }
        record(&r, .kill, detail: "runtime channel closed: \(reason)")
        terminate(&r, reason: .channelClosed, signal: SignalNumber.terminate)
    }

    // MARK: - Assertions

    private mutating func acquire(_ r: inout ExtensionRecord, tag: UInt32, reason: String) {
        func deny(_ why: String) {
            out.append(.send(extensionID: r.manifest.id, generation: r.generation, message: .denied(tag: tag, reason: why)))
            record(&r, .deny, detail: "\(reason): \(why)")
        }
        if reason.isEmpty { return deny("a reason is required") }
        switch r.phase {
        case .launching, .active:
            break
        case .background(let expireAt, _):
            if let expireAt, now >= expireAt { return deny("background time is spent") }
        case .expiring:
            return deny("the extension is expiring")
        case .stopping, .suspended, .resuming:
            return deny("the extension is being suspended")
        case .terminating, .notRunning:
            return deny("the extension is terminating")
        }
        if r.assertions.count >= limits.maxAssertionsPerProcess {
            return deny("too many assertions (limit \(limits.maxAssertionsPerProcess))")
        }
        let id = nextAssertionID
        nextAssertionID += 1
        r.assertions.grant(id: id, reason: reason, at: now, maxSeconds: r.policy.assertionMaxSeconds)
        out.append(.send(extensionID: r.manifest.id, generation: r.generation, message: .granted(tag: tag, assertionID: id)))
        record(&r, .acquire, assertionID: id, detail: reason)
        processDeadlines(&r)
    }

    mutating func release(_ r: inout ExtensionRecord, assertionID: UInt64) {
        guard let a = r.assertions.release(assertionID) else { return }  // double release: harmless
        record(&r, .release, assertionID: a.id, detail: a.reason)
        if r.assertions.isEmpty && !inReprieve(r) {
            switch r.phase {
            case .background(let expireAt, _) where expireAt != nil: stopNow(&r)
            case .expiring: stopNow(&r)
            default: break
            }
        }
    }

    private mutating func sendExpire(_ r: inout ExtensionRecord, _ a: Assertion) {
        guard r.assertions.markExpireSent(a.id, at: now, grace: r.policy.expiryGraceSeconds) else { return }
        out.append(.send(extensionID: r.manifest.id, generation: r.generation, message: .expire(assertionID: a.id)))
        record(&r, .expire, assertionID: a.id, detail: a.reason)
    }

    // MARK: - Deadlines

    private mutating func processDeadlines(_ r: inout ExtensionRecord) {
        let grace = r.policy.expiryGraceSeconds
        switch r.phase {
        case .launching, .active, .background, .expiring:
            for a in r.assertions.assertions {
                if a.expireSentAt == nil && now >= a.hardDeadline.adding(seconds: -grace) { sendExpire(&r, a) }
                // Re-read: a late expire moved the hard deadline to give the full grace.
                if let current = r.assertions.assertions.first(where: { $0.id == a.id }), now >= current.hardDeadline {
                    // Leak guard: the assertion outlived assertionMaxSeconds.
                    r.assertions.release(a.id)
                    r.overruns += 1
                    record(&r, .overrun, assertionID: a.id, detail: a.reason)
                }
            }
        default: break
        }
        switch r.phase {
        case .launching(let deadline) where now >= deadline:
            failPending(&r, .launchTimeout, "'\(r.manifest.id)' did not become ready within \(r.policy.launchTimeoutSeconds)s")
            record(&r, .launchTimeout)
            terminate(&r, reason: .launchTimeout, signal: SignalNumber.kill)
        case .background(let expireAt?, let stopAt?):
            if r.assertions.isEmpty && !inReprieve(r) { return stopNow(&r) }
            if now >= expireAt {
                // The expire events are recorded before the move to `expiring`, so they show the
                // state they end (`background`), as `end` shows `active` (docs/json.md, Events).
                for a in r.assertions.unexpired { sendExpire(&r, a) }
                // A late tick must not shorten the grace the extension gets after its expire.
                setPhase(&r, .expiring(stopAt: max(stopAt, now.adding(seconds: r.policy.expiryGraceSeconds))))
                processDeadlines(&r)
            }
        case .expiring(let stopAt):
            if (r.assertions.isEmpty && !inReprieve(r)) || now >= stopAt { stopNow(&r) }
        case .suspended(let reclaimAt) where now >= reclaimAt:
            terminate(&r, reason: .reclaimed, signal: SignalNumber.kill)
        case .terminating(let reason, let killAt?) where now >= killAt:
            setPhase(&r, .terminating(reason: reason, killAt: nil))
            out.append(.signal(extensionID: r.manifest.id, generation: r.generation, signal: SignalNumber.kill, thenContinue: true))
        default: break
        }
    }

    // MARK: - Administration

    private mutating func kill(host: HostID, tag: UInt32, id: String, signal: Int32) {
        func refuse(_ code: FailureCode, _ text: String) { out.append(.reply(host: host, message: .failure(tag: tag, code: code, text: text))) }
        guard records[id] != nil else { return refuse(.unknownExtension, "no extension with id '\(id)'") }
        guard signal > 0 && signal < 65 else { return refuse(.badRequest, "signal \(signal) is not a valid signal number") }
        if SignalNumber.reserved.contains(signal) {
            return refuse(.badRequest, "signal \(signal) is reserved: extensiond alone stops and continues extensions")
        }
        guard let r = records[id], r.isRunning, r.pid != nil else { return refuse(.notRunning, "'\(id)' is not running") }
        update(id, nil) { s, r in
            r.adminSignaled = true
            s.record(&r, .kill, detail: "signal \(signal) from an administrator")
            if r.phase.mayBeStopped {
                // A stopped group must be continued for the signal to act; it must then not run unsupervised.
                s.setPhase(&r, .terminating(reason: .killedByAdmin, killAt: s.now.adding(seconds: s.limits.terminateGraceSeconds)))
                s.out.append(.signal(extensionID: id, generation: r.generation, signal: signal, thenContinue: true))
            } else {
                s.out.append(.signal(extensionID: id, generation: r.generation, signal: signal, thenContinue: false))
            }
        }
        out.append(.reply(host: host, message: .ok(tag: tag)))
    }

    /// Ends the extension (SIGKILL, continued if stopped) and empties its container once its
    /// processes are gone; at once when none runs, or when no manifest declares it any more.
    private mutating func reset(host: HostID, tag: UInt32, id: String) {
        guard let r = records[id], r.isRunning, r.pid != nil else {
            return out.append(.emptyContainer(extensionID: id, host: host, tag: tag))
        }
        update(id, nil) { s, r in
            r.adminSignaled = true
            r.resetWaiters.append(ResetWaiter(host: host, tag: tag))
            s.record(&r, .kill, detail: "reset by an administrator: ended, then its container emptied")
            let stopped = r.phase.mayBeStopped
            if case .terminating = r.phase {
            } else {
                s.setPhase(&r, .terminating(reason: .killedByAdmin, killAt: s.now.adding(seconds: s.limits.terminateGraceSeconds)))
            }
            s.out.append(.signal(extensionID: id, generation: r.generation, signal: SignalNumber.kill, thenContinue: stopped))
        }
    }

    private mutating func reload(_ manifests: [Manifest], _ errors: [ManifestError]) {
        let incoming = Dictionary(manifests.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
        for (id, m) in incoming {
            if records[id] == nil {
                stateVersion &+= 1
                add(ExtensionRecord(manifest: m, since: now))
            } else {
                update(id, nil) { s, r in
                    r.manifest = m  // a running process keeps its executable; the policy applies at once
                    r.retired = false
                    s.refreshScheduleChanged(&r)
                }
            }
        }
        for id in records.keys.sorted() where incoming[id] == nil {
            update(id, nil) { s, r in
                guard !r.retired else { return }
                r.retired = true
                s.failPending(&r, .unknownExtension, "'\(id)' was removed by a reload")
                switch r.phase {
                case .notRunning, .terminating: break
                case .active where !r.requests.isEmpty: break  // goes when its last request ends
                default: s.terminate(&r, reason: .removed, signal: SignalNumber.terminate)
                }
            }
        }
        _ = errors  // reported by the shell, which read the files
    }

    private mutating func prewarm(host: HostID, peer: PeerIdentity, tag: UInt32, ids: [String]) {
        for id in ids where records[id] == nil || records[id]!.retired {
            out.append(.reply(host: host, message: .failure(tag: tag, code: .unknownExtension, text: "no extension with id '\(id)'")))
            return
        }
        for id in ids where !mayOpen(records[id]!.manifest, peer) {
            out.append(
                .reply(host: host, message: .failure(tag: tag, code: .notPermitted, text: "uid \(peer.uid) may not open '\(id)' (see the manifest's 'hosts')")))
            return
        }
        if shuttingDown {
            out.append(.reply(host: host, message: .failure(tag: tag, code: .shuttingDown, text: "extensiond is shutting down")))
            return
        }
        var warming = records.values.filter { $0.prewarmed && $0.isRunning && $0.requests.isEmpty }.count
        for id in ids {
            update(id, nil) { s, r in
                guard !r.isRunning, warming < s.limits.maxPrewarmed else { return }
                if let until = r.throttledUntil, until > s.now { return }
                warming += 1
                s.launch(&r, prewarmed: true)
                s.record(&r, .prewarm)
            }
        }
        out.append(.reply(host: host, message: .ok(tag: tag)))
    }

    private mutating func shutdown() {
        shuttingDown = true
        stateVersion &+= 1
        for id in records.keys.sorted() {
            update(id, nil) { s, r in
                s.failPending(&r, .shuttingDown, "extensiond is shutting down")
                switch r.phase {
                case .notRunning: break
                case .terminating(let reason, _) where reason != .shutdown: break
                case .launching where r.pid == nil:
                    // Not spawned yet: the spawn effect will be answered; kill what appears.
                    s.setPhase(&r, .terminating(reason: .shutdown, killAt: nil))
                default: s.terminate(&r, reason: .shutdown, signal: SignalNumber.terminate)
                }
            }
        }
    }
}
