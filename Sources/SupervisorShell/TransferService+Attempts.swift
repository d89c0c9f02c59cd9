import ExtensionProtocol
import ExtensionTransport
import SupervisorCore
import SupervisorKernel

/// Attempts: which waiting task starts (`schedule`), what the worker reports, and what an
/// attempt's end means (`TransferPlanner.next`).
extension TransferService {
    /// Starts what may start, fails what expired, and arms the one timer for what comes next
    /// (a retry, an expiry, a progress flush, the worker's idle stop).
    func schedule() {
        guard store.exists, store.ready() == nil else { return }
        let now = kernel.wallClock()
        for task in store.tasks.values where TransferPlanner.expired(task, now: now) {
            if attempts.removeValue(forKey: task.id) != nil { _ = worker.send(.cancel(task: task.id)) }
            finish(task, .failed(domain: "extensiond", code: TransferError.timedOut.rawValue, text: "older than 7 days (its resource timeout)"))
        }
        checkConstraintsIfDue(now: now)
        // Until the first answer, a discretionary task waits (it may be on a metered network).
        let held = constrained || constraintsCheckedAt == nil
        let waiting = store.tasks.values.filter { TransferPlanner.mayStart($0, now: now, constrained: held) }.sorted { $0.id < $1.id }
        heldByBudget = false
        for task in waiting where attempts.count < TransferPlanner.maxRunning {
            let budget = store.budget.used(app: task.session.app, now: now)
            if let limit = bytesPerDay(task), budget >= UInt64(limit) {
                heldByBudget = true
                continue
            }
            start(task)
        }
        idleSince = attempts.isEmpty ? (idleSince ?? now) : nil
        armTimer(now: now)
    }

    /// The bytes a day of `task`'s app, as its creator's limits say (nil: none known).
    private func bytesPerDay(_ task: TransferTask) -> Int64? { task.bytesPerDay }

    private func armTimer(now: Double) {
        timer?.cancel()
        timer = nil
        var next: Double?
        func consider(_ t: Double) { next = min(next ?? t, t) }
        for task in store.tasks.values where !task.state.isFinal {
            consider(task.createdAt + TransferPlanner.resourceSeconds + 1)
            if task.state == .waiting, let at = task.retryAt, at > now { consider(at) }
        }
        if attempts.values.contains(where: \.progressPending) { consider(now + TransferPlanner.progressInterval) }
        if heldByBudget {
            // Held back by a day's budget: the next day (from now: the budget's own day may be past).
            consider(((now / 86_400).rounded(.down) + 1) * 86_400)
        }
        if let idle = idleSince, worker.isRunning { consider(idle + Self.workerIdleSeconds) }
        if discretionaryWaiting, !checkingConstraints, let at = constraintsCheckedAt { consider(at + Self.constraintsSeconds) }
        guard let at = next else { return }
        let when = kernel.now().adding(seconds: max(0, at - now))
        if case .success(let t) = kernel.addTimer(at: when, { [unowned self] in timerFired() }) { timer = t }
    }

    /// Whether a discretionary task waits.
    private var discretionaryWaiting: Bool { store.tasks.values.contains { $0.discretionary && $0.state == .waiting } }

    /// Asks (off the loop) whether the network is metered or the machine on battery, when a
    /// discretionary task waits and the last answer is older than `constraintsSeconds`: no
    /// question is asked, and no timer runs, without one.
    private func checkConstraintsIfDue(now: Double) {
        guard discretionaryWaiting, !checkingConstraints else { return }
        if let at = constraintsCheckedAt, now - at < Self.constraintsSeconds { return }
        checkingConstraints = true
        let started = kernel.checkConstraintsInBackground { [unowned self] c in
            checkingConstraints = false
            constraintsCheckedAt = kernel.wallClock()
            if c.constrained != constrained {
                logger.info(
                    "discretionary transfers \(c.constrained ? "wait" : "go on"): the network is \(c.metered == true ? "" : "not ")metered, the machine \(c.onBattery == true ? "on battery" : "not on battery")"
                )
            }
            constrained = c.constrained
            schedule()
        }
        if let e = started {
            checkingConstraints = false
            constraintsCheckedAt = now
            logger.warning("cannot ask whether the network is metered: \(e); discretionary transfers go on")
        }
    }

    private func timerFired() {
        timer = nil
        let now = kernel.wallClock()
        for (id, a) in attempts where a.progressPending && now - a.progressAt >= TransferPlanner.progressInterval {
            if let task = store.tasks[id] { tellProgress(task, now: now) }
        }
        if let idle = idleSince, attempts.isEmpty, now - idle >= Self.workerIdleSeconds - 0.001 {
            worker.stop()
            idleSince = nil
        }
        schedule()
    }

    /// Starts an attempt at `task`: its file opened (a partial download resumed where the
    /// validator allows), handed to the worker with the request.
    private func start(_ task: TransferTask) {
        var task = task
        var fd: Int32
        var offset: UInt64 = 0, size: UInt64 = 0, ifRange = ""
        if task.method == .download {
            switch kernel.openPartialFile(store.partialPath(task.id)) {
            case .failure(let e): return finish(task, .failed(domain: "posix", code: e.errno, text: "cannot open the partial file: \(e)"))
            case .success(let (f, partial)):
                fd = f
                (offset, ifRange) = TransferPlanner.start(task, partialBytes: partial)
                if offset == 0 && partial > 0, let e = kernel.truncate(fd: fd) {
                    kernel.close(fd)
                    return finish(task, .failed(domain: "posix", code: e.errno, text: "cannot empty the partial file: \(e)"))
                }
            }
        } else {
            guard let container = calls?.transferContainer(task.session.group) else {
                return finish(task, .failed(domain: "extensiond", code: TransferError.groupGone.rawValue, text: "the group's shared container is gone"))
            }
            switch kernel.openBeneath(container.path, task.path) {
            case .failure(let e):
                return finish(task, .failed(domain: "extensiond", code: TransferError.cannotPerform.rawValue, text: "cannot read \(task.path): \(e)"))
            case .success(let (f, s)):
                fd = f
                size = s
            }
        }
        let message = TransferWorkerMessage.start(
            task: task.id, method: task.method.rawValue, offset: offset, uploadSize: size, stallSeconds: TransferPlanner.stallSeconds, url: task.url,
            ifRange: ifRange)
        let sent = worker.send(message, descriptor: fd)
        kernel.close(fd)
        if let e = sent {
            logger.error("cannot hand transfer \(task.id) to the worker: \(e)", metadata: ["TRANSFER_ID": "\(task.id)"])
            task.failures += 1
            task.retryAt = kernel.wallClock() + TransferPlanner.backoff(failures: task.failures)
            task.lastError = "the transfer worker cannot be started: \(e)"
            store.save(task)
            return
        }
        task.state = .running
        task.retryAt = nil
        task.bytes = offset
        store.save(task)
        attempts[task.id] = Attempt(offset: offset, startedAt: kernel.wallClock())
        logger.info(
            "transfer \(task.id) \(offset > 0 ? "resumes at byte \(offset)" : "starts")\(task.failures > 0 ? " (attempt after \(task.failures) failure(s))" : "")",
            metadata: ["TRANSFER_ID": "\(task.id)"])
    }

    // MARK: What the worker says

    func workerSent(_ message: TransferWorkerMessage) {
        switch message {
        case let .headers(id, status, restarted, total, etag, lastModified):
            guard attempts[id] != nil, var task = store.tasks[id] else { return }
            if restarted {
                task.restarts += 1
                attempts[id]?.offset = 0
                attempts[id]?.startedAt = kernel.wallClock()
                task.bytes = 0
                logger.info("transfer \(id) starts again from zero: the server sent the whole resource", metadata: ["TRANSFER_ID": "\(id)"])
            }
            task.status = UInt16(clamping: status)
            task.total = total
            if (200..<300).contains(status) { task.validator = TransferPlanner.validator(etag: etag, lastModified: lastModified) }
            store.save(task)
        case let .progress(id, done, total):
            guard attempts[id] != nil, var task = store.tasks[id] else { return }
            if done > task.bytes { store.budget.add(done - task.bytes, app: task.session.app, now: kernel.wallClock()) }
            task.bytes = done
            task.total = total
            store.keep(task)  // in memory only: the file's size is what a resume trusts
            let now = kernel.wallClock()
            if now - (attempts[id]?.progressAt ?? 0) >= TransferPlanner.progressInterval {
                tellProgress(task, now: now)
            } else if attempts[id]?.progressPending == false {
                attempts[id]?.progressPending = true
                armTimer(now: now)
            }
        case let .done(id, status, code, done, error):
            guard let attempt = attempts.removeValue(forKey: id), var task = store.tasks[id] else { return }
            if done > task.bytes { store.budget.add(done - task.bytes, app: task.session.app, now: kernel.wallClock()) }
            task.bytes = done
            // Bytes moved: the failures before it are no longer "in a row".
            if done > attempt.offset { task.failures = 0 }
            let end = TransferPlanner.AttemptEnd(status: UInt16(clamping: status), curlCode: code, text: error)
            settle(task, after: end)
            schedule()
        case .start, .cancel:
            break
        }
    }

    private func tellProgress(_ task: TransferTask, now: Double) {
        attempts[task.id]?.progressAt = now
        attempts[task.id]?.progressPending = false
        emit(TransferEvent(sequence: 0, task: task.id, kind: .progress, bytes: task.bytes, total: task.total), of: task.session)
    }

    /// What follows an attempt's end.
    private func settle(_ task: TransferTask, after end: TransferPlanner.AttemptEnd) {
        var task = task
        let now = kernel.wallClock()
        switch TransferPlanner.next(task, after: end, now: now) {
        case .completed(let status):
            finish(task, .completed(status: status))
        case .retry(let at, let why):
            task.failures += 1
            task.retryAt = at
            task.state = .waiting
            task.lastError = why
            store.save(task)
            logger.info(
                "transfer \(task.id): \(UntrustedText.escaped(why)); attempt \(task.failures + 1) in \(Int((at - now).rounded()))s",
                metadata: ["TRANSFER_ID": "\(task.id)"])
        case .restart(let why):
            task.failures += 1
            task.restarts += 1
            task.validator = nil
            task.retryAt = now + TransferPlanner.backoff(failures: task.failures)
            task.state = .waiting
            task.lastError = why
            store.save(task)
            logger.info("transfer \(task.id): \(why); it starts again from zero", metadata: ["TRANSFER_ID": "\(task.id)"])
        case .failed(let domain, let code, let text):
            finish(task, .failed(domain: domain, code: code, text: text))
        }
    }

    /// How a task ends.
    enum Ending {
        case completed(status: UInt16)
        case failed(domain: String, code: Int32, text: String)
    }

    /// Ends `task`: a complete download moved into the group's container, the task kept as
    /// ended, and its event queued for the session's consumer.
    func finish(_ task: TransferTask, _ ending: Ending) {
        var task = task
        var event: TransferEvent
        task.finishedAt = kernel.wallClock()
        task.retryAt = nil
        switch ending {
        case .completed(let status):
            task.state = .completed
            task.status = status
            event = TransferEvent(sequence: 0, task: task.id, kind: .completed, bytes: task.bytes, total: task.total, status: status)
            if task.method == .download {
                if (200..<300).contains(status) {
                    if let container = calls?.transferContainer(task.session.group) {
                        if let e = kernel.placeBeneath(container.path, task.path, from: store.partialPath(task.id), group: container.gid) {
                            return finish(
                                task,
                                .failed(domain: "extensiond", code: TransferError.cannotStore.rawValue, text: "cannot move the file into the container: \(e)"))
                        }
                        event.path = container.path + "/" + task.path
                    } else {
                        return finish(task, .failed(domain: "extensiond", code: TransferError.groupGone.rawValue, text: "the group's shared container is gone"))
                    }
                } else {
                    _ = kernel.removeFile(store.partialPath(task.id))
                }
            }
            logger.info("transfer \(task.id) completed: HTTP \(status), \(task.bytes) byte(s)", metadata: ["TRANSFER_ID": "\(task.id)"])
        case .failed(let domain, let code, let text):
            task.state = .failed
            task.lastError = text
            _ = kernel.removeFile(store.partialPath(task.id))
            event = TransferEvent(
                sequence: 0, task: task.id, kind: .failed, bytes: task.bytes, total: task.total, status: task.status, domain: domain, code: code, text: text)
            logger.notice("transfer \(task.id) failed: \(UntrustedText.escaped(text)) (\(domain) \(code))", metadata: ["TRANSFER_ID": "\(task.id)"])
        }
        store.save(task)
        store.saveBudget()
        emit(event, of: task.session)
    }

    /// Before a re-exec: every attempt is abandoned (its task waits, with no failure counted) and
    /// the worker is ended and reaped; the day's counts are kept.
    func pauseForReexec() {
        guard !attempts.isEmpty || worker.isRunning else { return }
        for id in attempts.keys {
            guard var task = store.tasks[id] else { continue }
            task.state = .waiting
            store.save(task)
        }
        attempts = [:]
        store.saveBudget()
        worker.stop()
    }

    /// The worker ended: each attempt it had is tried again after a backoff (a worker that a
    /// server's answer crashes does not crash in a loop).
    func workerGone() {
        let now = kernel.wallClock()
        for id in attempts.keys {
            guard var task = store.tasks[id] else { continue }
            task.failures += 1
            task.state = .waiting
            task.retryAt = now + TransferPlanner.backoff(failures: task.failures)
            task.lastError = "the transfer worker ended"
            store.save(task)
        }
        attempts = [:]
        schedule()
    }
}
