import ExtensionProtocol

/// Background refresh (widgets' `widgetPerformUpdate`): when a scheduled refresh is due, or an
/// administrator or host forces one, the extension is resumed (or launched), sent `refresh`,
/// and given `refreshSeconds` to answer under an assertion the daemon holds for it: *expire*
/// comes `expiryGraceSeconds` before the end, an unanswered refresh counts as an overrun.
/// Afterwards it goes back to where it was (suspended, if it was) by the usual rules, because
/// the refresh's assertion was what kept it running.
extension Supervisor {
    /// The reason recorded for the assertion a refresh runs under.
    static let refreshReason = "background refresh"

    /// A scheduled refresh is due (from a tick): spend the budget and start it.
    mutating func scheduledRefresh(_ r: inout ExtensionRecord) {
        guard r.refresh?.isDue(at: now) == true else { return }
        if shuttingDown || r.retired { return r.refresh?.skip(at: now) ?? () }
        guard r.refresh?.spend(at: now) == true else { return }
        r.refresh?.wanted = true
        startWantedRefresh(&r)
    }

    /// `extctl refresh ID` (`forceRefresh`): refresh now, answer `host` when the extension does.
    mutating func forceRefresh(host: HostID, peer: PeerIdentity, tag: UInt32, id: String) {
        func refuse(_ code: FailureCode, _ text: String) { out.append(.reply(host: host, message: .failure(tag: tag, code: code, text: text))) }
        if shuttingDown { return refuse(.shuttingDown, "extensiond is shutting down") }
        guard let existing = records[id], !existing.retired else { return refuse(.unknownExtension, "no extension with id '\(id)'") }
        guard mayOpen(existing.manifest, peer) else { return refuse(.notPermitted, "uid \(peer.uid) may not open '\(id)' (see the manifest's 'hosts')") }
        guard existing.refresh != nil else {
            return refuse(.badRequest, "'\(id)' does not support refresh (its manifest has no 'refresh')")
        }
        if !existing.isRunning, let until = existing.throttledUntil, until > now {
            return refuse(.throttled, "'\(id)' is in crash-loop backoff; no launch for \(String(format_seconds: until.seconds(since: now)))")
        }
        update(id, nil) { s, r in
            r.refresh?.waiters.append(RefreshState.Waiter(host: host, tag: tag))
            guard r.refresh?.inFlight == nil else { return }  // the refresh in flight answers it too
            r.refresh?.wanted = true
            s.startWantedRefresh(&r)
        }
    }

    /// Starts the wanted refresh if the phase allows, or gets the extension there: a launch
    /// from not running, a resume from stopped or stopping. In other phases (launching,
    /// resuming, expiring, terminating) the transition that ends them calls this again.
    mutating func startWantedRefresh(_ r: inout ExtensionRecord) {
        guard r.refresh?.wanted == true else { return }
        switch r.phase {
        case .notRunning:
            if let until = r.throttledUntil, until > now { return refreshEnded(&r, answer: nil, why: "it is in crash-loop backoff") }
            launch(&r, prewarmed: true)
        case .stopping, .suspended:
            setPhase(&r, .resuming)
            out.append(.resume(extensionID: r.manifest.id, generation: r.generation))
        case .active:
            startRefresh(&r)
        case .background(let expireAt, let stopAt):
            if let expireAt, now >= expireAt { return }  // expiring next: resumed after the stop
            startRefresh(&r)
            guard let expireAt, let stopAt else { return }
            // The refresh gets its full time, as it would from suspension.
            let end = now.adding(seconds: r.policy.refreshSeconds)
            setPhase(&r, .background(expireAt: max(expireAt, end.adding(seconds: -r.policy.expiryGraceSeconds)), stopAt: max(stopAt, end)))
        case .launching, .resuming, .expiring, .terminating:
            return
        }
    }

    /// A launch became ready, or a resume was confirmed, with no request waiting: run the
    /// wanted refresh in the background. False when no refresh is wanted.
    mutating func refreshInBackground(_ r: inout ExtensionRecord) -> Bool {
        guard r.refresh?.wanted == true else { return false }
        if r.policy.suspend == .never {
            enterBackground(&r)  // never stopped: it stays in the background after the answer too
        } else {
            let end = now.adding(seconds: r.policy.refreshSeconds)
            setPhase(&r, .background(expireAt: end.adding(seconds: -r.policy.expiryGraceSeconds), stopAt: end))
        }
        startRefresh(&r)
        return true
    }

    private mutating func startRefresh(_ r: inout ExtensionRecord) {
        let id = nextAssertionID
        nextAssertionID += 1
        r.refresh?.wanted = false
        r.refresh?.inFlight = id
        r.assertions.grant(id: id, reason: Supervisor.refreshReason, at: now, maxSeconds: r.policy.refreshSeconds)
        out.append(.send(extensionID: r.manifest.id, generation: r.generation, message: .refresh(refreshID: id)))
        record(&r, .refresh, assertionID: id, detail: r.refresh?.waiters.isEmpty == false ? "forced" : "scheduled")
    }

    /// The extension answered refresh `refreshID`.
    mutating func refreshAnswered(_ r: inout ExtensionRecord, refreshID: UInt64, answer: RefreshAnswer) {
        guard r.refresh?.inFlight == refreshID else { return }
        refreshEnded(&r, answer: answer, why: nil)
        release(&r, assertionID: refreshID)
    }

    /// The refresh in flight lost its assertion without an answer (overrun, stop, exit).
    mutating func refreshLost(_ r: inout ExtensionRecord) {
        guard let id = r.refresh?.inFlight, !r.assertions.assertions.contains(where: { $0.id == id }) else { return }
        let limit = r.policy.refreshSeconds
        let text = limit == limit.rounded() && limit < 1e9 ? "\(Int(limit))s" : String(format_seconds: limit)
        refreshEnded(&r, answer: nil, why: "no answer within \(text) (refreshSeconds)")
    }

    /// Records how the refresh ended, schedules the next, answers forced waiters and tells
    /// subscribed hosts about new data.
    mutating func refreshEnded(_ r: inout ExtensionRecord, answer: RefreshAnswer?, why: String?) {
        let outcome: RefreshOutcome? =
            switch answer {
            case .newData?: .newData
            case .noData?: .noData
            case .failed?, .unsupported?: .failed
            case nil: nil
            }
        r.refresh?.wanted = false
        r.refresh?.ended(outcome, at: now, watched: !r.requests.isEmpty)
        let id = r.manifest.id
        let detail: String
        switch answer {
        case .unsupported?: detail = "unsupported: the extension registered no refresh handler"
        case let a?: detail = RefreshOutcome(answer: a)?.rawValue ?? "failed"
        case nil: detail = "no answer: \(why ?? "lost")"
        }
        record(&r, .refreshed, detail: detail)
        for w in r.refresh?.waiters ?? [] {
            switch answer {
            case .unsupported?:
                out.append(
                    .reply(
                        host: w.host,
                        message: .failure(tag: w.tag, code: .badRequest, text: "'\(id)' does not support refresh (it registered no refresh handler)")))
            case let a?:
                out.append(.reply(host: w.host, message: .refreshed(tag: w.tag, answer: a)))
            case nil:
                out.append(
                    .reply(host: w.host, message: .failure(tag: w.tag, code: .interrupted, text: "'\(id)' did not answer its refresh: \(why ?? "lost")")))
            }
        }
        r.refresh?.waiters.removeAll()
        if answer == .newData {
            for host in (refreshSubscribers[id] ?? []).sorted() {
                out.append(.reply(host: host, message: .newData(extensionID: id)))
            }
        }
    }

    /// A reload changed the manifest: refresh turned on, off, or rescheduled.
    mutating func refreshScheduleChanged(_ r: inout ExtensionRecord) {
        guard let schedule = r.manifest.policy.refresh else {
            if r.refresh != nil, r.refresh?.inFlight != nil || !(r.refresh?.waiters.isEmpty ?? true) {
                refreshEnded(&r, answer: nil, why: "refresh was turned off by a reload")
            }
            r.refresh = nil
            return
        }
        if r.refresh == nil { r.refresh = RefreshState(schedule: schedule, now: now) } else { r.refresh?.reschedule(schedule, now: now) }
    }

    /// `subscribe`: `host` is told of new data from each of `ids` (each one it may open).
    mutating func subscribe(host: HostID, peer: PeerIdentity, tag: UInt32, ids: [String]) {
        for id in ids {
            guard let r = records[id], !r.retired else {
                return out.append(.reply(host: host, message: .failure(tag: tag, code: .unknownExtension, text: "no extension with id '\(id)'")))
            }
            guard mayOpen(r.manifest, peer) else {
                return out.append(
                    .reply(
                        host: host, message: .failure(tag: tag, code: .notPermitted, text: "uid \(peer.uid) may not open '\(id)' (see the manifest's 'hosts')"))
                )
            }
        }
        for id in ids { refreshSubscribers[id, default: []].insert(host) }
        out.append(.reply(host: host, message: .ok(tag: tag)))
    }
}

extension RefreshOutcome {
    /// The outcome an answer stands for (nil for `unsupported`).
    init?(answer: RefreshAnswer) {
        switch answer {
        case .newData: self = .newData
        case .noData: self = .noData
        case .failed: self = .failed
        case .unsupported: return nil
        }
    }
}
