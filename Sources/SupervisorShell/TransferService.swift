import ExtensionProtocol
import ExtensionTransport
import Logging
import SupervisorCore
import SupervisorKernel

/// Who consumes a background session's events: the extension process that created a task in
/// it (or claimed it), or the connection of its app that claimed it.
enum TransferConsumer: Equatable {
    case extensionProcess(id: String, generation: UInt64)
    case connection(HostID)
}

/// What the transfer service asks of the daemon.
protocol TransferCalls: AnyObject {
    /// Whether `consumer` takes events now: an extension process that runs and is not
    /// suspended, or a connection still open.
    func transferConsumerReady(_ consumer: TransferConsumer) -> Bool
    /// Whether `consumer` is gone for good (an extension process that ended, a closed connection).
    func transferConsumerGone(_ consumer: TransferConsumer) -> Bool
    /// Sends `events` of `key` to `consumer`.
    func sendTransferEvents(_ events: [TransferEvent], of key: TransferSessionKey, to consumer: TransferConsumer)
    /// Brings the app `key.app` up in the background to claim the session `key`.
    func wakeApp(for key: TransferSessionKey)
    /// The shared container of `group`: its path and group id; nil if there is none.
    func transferContainer(_ group: String) -> (path: String, gid: UInt32?)?
}

/// Background transfers (docs/transfers.md): the tasks and sessions (`TransferStore`), the
/// worker that performs them (`TransferWorker`), when each attempt starts and what its end
/// means (`TransferPlanner`), and who is told of each event. Owned by the daemon's loop thread.
final class TransferService {
    let store: TransferStore
    let worker: TransferWorker
    let kernel: any Kernel
    let logger: Logger
    weak var calls: (any TransferCalls)?

    /// A running attempt: where it started, and the last progress told.
    struct Attempt {
        var offset: UInt64
        var startedAt: Double
        var progressAt: Double = 0
        var progressPending = false
    }
    var attempts: [UInt64: Attempt] = [:]
    /// Each session's consumer, and the last queued event sent to it.
    var consumers: [TransferSessionKey: (consumer: TransferConsumer, sentThrough: UInt64)] = [:]
    /// Sessions whose app was brought up since they were last claimed.
    var woken: Set<TransferSessionKey> = []
    /// The one timer: the next retry, expiry, progress flush or idle stop of the worker.
    var timer: (any Cancellable)?
    /// Whether discretionary tasks wait (a metered network, or on battery), as last checked.
    var constrained = false
    /// When that was last asked (wall clock), and whether an answer is awaited.
    var constraintsCheckedAt: Double?
    var checkingConstraints = false
    /// Whether the last `schedule` held a task back for its app's bytes a day.
    var heldByBudget = false
    /// How often the constraints are asked again while discretionary tasks wait.
    static let constraintsSeconds: Double = 60
    /// When the worker became idle (no attempt), for its idle stop.
    var idleSince: Double?
    /// How long an idle worker is kept.
    static let workerIdleSeconds: Double = 30

    init(store: TransferStore, worker: TransferWorker, kernel: any Kernel, logger: Logger) {
        self.store = store
        self.worker = worker
        self.kernel = kernel
        self.logger = logger
        worker.onMessage = { [unowned self] in workerSent($0) }
        worker.onGone = { [unowned self] in workerGone() }
    }

    /// At start: tasks kept from before (a restart, a re-exec, a reboot) go on, and sessions
    /// with events queued and no consumer have their app brought up.
    func resume() {
        guard store.exists else { return }
        if let why = store.ready() { return logger.error("background transfers cannot be used: \(why)") }
        for var task in store.tasks.values where task.state == .running {
            task.state = .waiting
            store.save(task)
        }
        for (key, session) in store.sessions where !session.queued.isEmpty { flush(key) }
        schedule()
    }

    // MARK: Requests

    /// Who asks, for the checks of `create` and `cancel`.
    struct Caller {
        /// The caller's app (an extension's manifest's, a connection's), nil if none.
        var app: String?
        /// The groups of that app.
        var groups: [String]
        /// The extension that asks, if it is one.
        var extensionID: String?
        /// The limits that apply: its point's, or the defaults for an app.
        var tasksPerApp: Int
        var bytesPerDay: Int64
        /// Whether it may see and cancel every task (`extctl`).
        var administrator: Bool
    }

    /// Creates a task for `caller` (who becomes the session's consumer as `consumer`).
    func create(_ request: TransferRequest, caller: Caller, consumer: TransferConsumer) -> Result<UInt64, TransferRefusal> {
        guard caller.tasksPerApp > 0 else {
            return .failure(TransferRefusal(.notPermitted, "its extension point does not allow background transfers (transferTasksPerApp is 0)"))
        }
        guard let app = caller.app else {
            return .failure(TransferRefusal(.notPermitted, "the caller belongs to no app: a background session is an app's"))
        }
        if let problem = TransferPlanner.problem(request) { return .failure(TransferRefusal(.badRequest, problem)) }
        guard caller.groups.contains(request.group) else {
            return .failure(TransferRefusal(.notPermitted, "'\(request.group)' is not a group of the app '\(app)'"))
        }
        guard let container = calls?.transferContainer(request.group) else {
            return .failure(TransferRefusal(.badRequest, "the group '\(request.group)' has no shared container (no extension names it in sharedContainers)"))
        }
        if let why = store.ready() { return .failure(TransferRefusal(.internalError, "background transfers cannot be used: \(why)")) }
        let unfinished = store.tasks.values.filter { $0.session.app == app && !$0.state.isFinal }.count
        guard unfinished < caller.tasksPerApp else {
            return .failure(TransferRefusal(.limitReached, "the app '\(app)' has \(unfinished) unfinished task(s), its limit (transferTasksPerApp)"))
        }
        if request.method.isUpload {
            // The source must be there now: a typo is answered at once, not after the backoffs.
            switch kernel.openBeneath(container.path, request.path) {
            case .success(let (fd, _)): kernel.close(fd)
            case .failure(let e):
                return .failure(TransferRefusal(.badRequest, "the upload's file '\(request.path)' cannot be read in the group's container: \(e)"))
            }
        }
        let id: UInt64
        switch store.takeID() {
        case .success(let i): id = i
        case .failure(let e): return .failure(TransferRefusal(.internalError, "cannot keep the task: \(e)"))
        }
        let key = TransferSessionKey(app: app, group: request.group, identifier: request.session)
        let path = request.path.isEmpty ? TransferPlanner.defaultPath(session: request.session, task: id) : request.path
        var task = TransferTask(
            id: id, session: key, creator: caller.extensionID, method: request.method, url: request.url, path: path,
            discretionary: request.discretionary, createdAt: kernel.wallClock())
        task.bytesPerDay = caller.bytesPerDay
        if let e = store.save(task) {
            store.remove(id)
            return .failure(TransferRefusal(.internalError, "cannot keep the task: \(e)"))
        }
        if let e = store.save(store.session(key)) {
            store.remove(id)
            return .failure(TransferRefusal(.internalError, "cannot keep the session: \(e)"))
        }
        logger.info(
            "transfer \(id) created in \(key) by \(caller.extensionID ?? "the app " + app): \(request.method.isUpload ? "upload of" : "download to") \(path)",
            metadata: ["TRANSFER_ID": "\(id)", "EXTENSION_ID": "\(caller.extensionID ?? "")"])
        claim(key, by: consumer, replay: false)
        schedule()
        return .success(id)
    }

    /// Cancels task `id`, if `caller` may (its app's task, or an administrator).
    func cancel(_ id: UInt64, caller: Caller) -> TransferRefusal? {
        if let why = store.ready() { return TransferRefusal(.internalError, "background transfers cannot be used: \(why)") }
        guard var task = store.tasks[id], caller.administrator || task.session.app == caller.app else {
            return TransferRefusal(.unknownRequest, "no transfer task \(id) of the caller's app")
        }
        guard !task.state.isFinal else { return TransferRefusal(.badRequest, "transfer task \(id) is over (\(task.state.rawValue))") }
        if attempts.removeValue(forKey: id) != nil { _ = worker.send(.cancel(task: id)) }
        task.state = .cancelled
        task.finishedAt = kernel.wallClock()
        store.save(task)
        _ = kernel.removeFile(store.partialPath(id))
        logger.info("transfer \(id) cancelled", metadata: ["TRANSFER_ID": "\(id)"])
        emit(
            TransferEvent(
                sequence: 0, task: id, kind: .failed, bytes: task.bytes, total: task.total, domain: "extensiond", code: TransferError.cancelled.rawValue,
                text: "cancelled"), of: task.session)
        schedule()
        return nil
    }

    /// `consumer` claims the session `key`: it gets every queued event (`replay`), and the
    /// session's events from now on.
    func claim(_ key: TransferSessionKey, by consumer: TransferConsumer, replay: Bool = true) {
        if let current = consumers[key], current.consumer == consumer, !replay { return }
        consumers[key] = (consumer, 0)
        woken.remove(key)
        flush(key)
    }

    /// `consumer` handled the session's events up to `through`: they are forgotten, and the
    /// tasks they ended with them.
    func handled(_ key: TransferSessionKey, through: UInt64) -> TransferRefusal? {
        if let why = store.ready() { return TransferRefusal(.internalError, "background transfers cannot be used: \(why)") }
        var session = store.session(key)
        let ended = Set(session.queued.filter { $0.sequence <= through && $0.kind != .progress }.map(\.task))
        guard session.handled(through: through) else { return nil }
        for id in ended where store.tasks[id]?.state.isFinal == true { store.remove(id) }
        if let e = store.save(session) { return TransferRefusal(.internalError, "cannot keep the session: \(e)") }
        return nil
    }

    /// A consumer may have changed (an extension suspended, resumed or ended; a connection
    /// closed): queued events go to a ready one, and an absent one's app is brought up.
    func consumersChanged() {
        guard !consumers.isEmpty else { return }
        for (key, entry) in consumers {
            if calls?.transferConsumerGone(entry.consumer) ?? true {
                consumers[key] = nil
                if !(store.sessions[key]?.queued.isEmpty ?? true) { wake(key) }
            } else {
                flush(key)
            }
        }
    }

    /// Sends the queued events `key`'s consumer has not had, if it is ready; brings the app up
    /// when it is not and events wait.
    func flush(_ key: TransferSessionKey) {
        guard let session = store.sessions[key], !session.queued.isEmpty else { return }
        guard let entry = consumers[key], calls?.transferConsumerReady(entry.consumer) == true else {
            wake(key)
            return
        }
        let unsent = session.queued.filter { $0.sequence > entry.sentThrough }
        guard !unsent.isEmpty else { return }
        var start = 0
        while start < unsent.count {
            let batch = Array(unsent[start..<min(start + WireLimits.maxTransferEvents, unsent.count)])
            calls?.sendTransferEvents(batch, of: key, to: entry.consumer)
            start += batch.count
        }
        consumers[key]?.sentThrough = unsent.last!.sequence
    }

    /// Brings `key`'s app up, once until the session is claimed again.
    func wake(_ key: TransferSessionKey) {
        guard !woken.contains(key) else { return }
        if let entry = consumers[key], calls?.transferConsumerGone(entry.consumer) == false,
            case .connection = entry.consumer
        {
            return  // the app is connected: it gets the events when it reads them
        }
        woken.insert(key)
        calls?.wakeApp(for: key)
    }

    /// Tells the session's consumer of `event` (queued durably first when it is a completion or
    /// failure), or queues it for the app.
    func emit(_ event: TransferEvent, of key: TransferSessionKey) {
        if event.kind == .progress {
            if let entry = consumers[key], calls?.transferConsumerReady(entry.consumer) == true {
                calls?.sendTransferEvents([event], of: key, to: entry.consumer)
            }
            return
        }
        var session = store.session(key)
        _ = session.enqueue(event)
        if let e = store.save(session) { logger.error("cannot keep an event of \(key): \(e)") }
        flush(key)
    }

    /// A consumer's connection closed or its process ended.
    func forget(_ consumer: TransferConsumer) {
        for (key, entry) in consumers where entry.consumer == consumer {
            consumers[key] = nil
            if !(store.sessions[key]?.queued.isEmpty ?? true) { wake(key) }
        }
    }

    /// Bytes a second of task `id`'s running attempt, nil unless it runs.
    func rate(of id: UInt64, now: Double) -> Double? {
        guard let a = attempts[id], let task = store.tasks[id], now > a.startedAt else { return nil }
        return Double(task.bytes &- a.offset) / (now - a.startedAt)
    }

    /// What crosses a re-exec: who consumes each session (with what it was sent), and the
    /// sessions whose app was brought up. The tasks and queued events are on disk already.
    struct Handover: Codable, Equatable {
        struct Consumer: Codable, Equatable {
            var session: TransferSessionKey
            var extensionID: String?
            var generation: UInt64?
            var host: HostID?
            var sentThrough: UInt64
        }
        var consumers: [Consumer]
        var woken: [TransferSessionKey]
    }

    /// This service's part of a hand-over document.
    var handover: Handover {
        Handover(
            consumers: consumers.map { key, entry in
                switch entry.consumer {
                case .extensionProcess(let id, let generation):
                    Handover.Consumer(session: key, extensionID: id, generation: generation, host: nil, sentThrough: entry.sentThrough)
                case .connection(let host):
                    Handover.Consumer(session: key, extensionID: nil, generation: nil, host: host, sentThrough: entry.sentThrough)
                }
            }, woken: Array(woken))
    }

    /// Takes over what a replaced daemon's service knew (before `resume`).
    func restore(_ h: Handover) {
        for c in h.consumers {
            if let id = c.extensionID, let generation = c.generation {
                consumers[c.session] = (.extensionProcess(id: id, generation: generation), c.sentThrough)
            } else if let host = c.host {
                consumers[c.session] = (.connection(host), c.sentThrough)
            }
        }
        woken = Set(h.woken)
    }

    /// At shutdown: the day's counts kept, the worker ended.
    func finish() {
        if store.exists { store.saveBudget() }
        worker.stop()
    }
}

/// Why a transfer request was refused.
struct TransferRefusal: Error, Equatable {
    var code: FailureCode
    var text: String
    init(_ code: FailureCode, _ text: String) {
        self.code = code
        self.text = text
    }
}
