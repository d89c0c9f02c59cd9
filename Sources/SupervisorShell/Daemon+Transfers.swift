import ExtensionProtocol
import ExtensionStatus
import ExtensionTransport
import Logging
import SupervisorCore
import SupervisorKernel

/// Background transfers (docs/transfers.md) asked for on either socket: the caller's app and
/// groups decided by its identity (an extension's manifest, a connection's app at accept), the
/// limits by its point (an extension's) or the defaults (an app's own); and what the transfer
/// service asks of the daemon (`TransferCalls`).
extension Daemon {
    /// The transfer service of a daemon with these parts: its worker started on demand, under a
    /// uid of its own (a root daemon's) and the extensions' sandbox but with the host's network.
    static func makeTransfers(
        stateDirectory: String, kernel: any Kernel, logger: Logger, sources: ManifestSources, sandboxing: Sandboxing
    ) -> TransferService {
        let worker = TransferWorker(kernel: kernel, logger: logger) {
            guard let program = Daemon.transferWorkerProgram(kernel: kernel) else {
                return .failure(
                    SystemError(
                        "extensiond-transfer is not installed beside extensiond, in ../libexec/extensiond from it, or in /usr/libexec/extensiond", errno: 2))
            }
            var credentials: Credentials?
            if kernel.userID == 0 {
                guard case .success(let uid)? = sources.identities?.uid(for: Daemon.transferWorkerIdentity, in: sources.config.extensionUIDs) else {
                    return .failure(SystemError("no uid could be allocated for the transfer worker", errno: 0))
                }
                credentials = Credentials(uid: uid, gid: uid, ownUID: true)
            }
            // What it reads: its program's directory, and the CA bundle SSL_CERT_FILE names.
            var readOnly = [Sandboxing.directory(of: program)]
            var environment = ["PATH=/usr/bin:/bin"]
            for name in Daemon.transferWorkerEnvironment {
                guard let value = kernel.environment(name) else { continue }
                environment.append("\(name)=\(value)")
                if name == "SSL_CERT_FILE" { readOnly.append(Sandboxing.directory(of: value)) }
                if name == "SSL_CERT_DIR" { readOnly.append(value) }
            }
            return .success(
                TransferWorker.Launch(program: program, credentials: credentials, sandbox: sandboxing.helperPlan(readOnly: readOnly), environment: environment))
        }
        return TransferService(
            store: TransferStore(stateDirectory: stateDirectory, kernel: kernel, logger: logger), worker: worker, kernel: kernel, logger: logger)
    }

    /// The id the worker's uid is kept under in the identity store (never an extension's or
    /// an app's: those have no `@`).
    static let transferWorkerIdentity = "@extensiond-transfer"
    /// What the worker takes from the daemon's environment: proxies, the CA store, and whether
    /// it may connect to loopback and link-local addresses (`EXTENSIOND_TRANSFER_ALLOW_LOOPBACK=1`;
    /// by default it refuses, so that no extension reaches the host's own services through it).
    static let transferWorkerEnvironment = [
        "EXTENSIOND_TRANSFER_ALLOW_LOOPBACK", "http_proxy", "https_proxy", "HTTPS_PROXY", "no_proxy", "NO_PROXY", "all_proxy", "ALL_PROXY", "SSL_CERT_FILE",
        "SSL_CERT_DIR",
    ]

    /// `extensiond-transfer` beside the daemon's executable (a build directory), in
    /// `../libexec/extensiond` from it (scripts/install.sh's layout), else in
    /// /usr/libexec/extensiond (the Debian package's).
    static func transferWorkerProgram(kernel: any Kernel) -> String? {
        var candidates = ["/usr/libexec/extensiond/extensiond-transfer"]
        if let me = kernel.executablePath() {
            let bin = Sandboxing.directory(of: me)
            candidates.insert(contentsOf: [bin + "/extensiond-transfer", Sandboxing.directory(of: bin) + "/libexec/extensiond/extensiond-transfer"], at: 0)
        }
        return candidates.first { kernel.isExecutable($0) }
    }

    /// Who asks: an extension process or a connection.
    enum TransferAsker {
        case extensionProcess(SupervisedProcess)
        case connection(ControlConnection)
    }

    func transferRequest(_ message: Message, from asker: TransferAsker) {
        let caller: TransferService.Caller
        let consumer: TransferConsumer
        switch asker {
        case .extensionProcess(let p):
            let manifest = core.records[p.extensionID]?.manifest
            let app = manifest?.app
            caller = TransferService.Caller(
                app: app, groups: SecretAccess.groups(of: app, apps: apps.apps), extensionID: p.extensionID,
                tasksPerApp: manifest?.policy.transferTasksPerApp ?? 0, bytesPerDay: manifest?.policy.transferBytesPerDay ?? 0, administrator: false)
            consumer = .extensionProcess(id: p.extensionID, generation: p.generation)
        case .connection(let c):
            caller = TransferService.Caller(
                app: c.identity.app, groups: SecretAccess.groups(of: c.identity.app, apps: apps.apps), extensionID: nil,
                tasksPerApp: Policy.defaultTransferTasksPerApp, bytesPerDay: Policy.defaultTransferBytesPerDay, administrator: isAdministrator(c.identity))
            consumer = .connection(c.id)
        }
        func answer(_ tag: UInt32, _ refusal: TransferRefusal?) {
            switch asker {
            case .extensionProcess(let p):
                guard let p = extensions.process(p.extensionID, p.generation) else { return }
                extensions.send(.answer(tag: tag, failure: refusal?.code, text: refusal?.text ?? ""), to: p)
            case .connection(let c):
                server.send(refusal.map { .failure(tag: tag, code: $0.code, text: $0.text) } ?? .ok(tag: tag), to: c.id)
            }
        }
        func key(_ session: String, _ group: String) -> Result<TransferSessionKey, TransferRefusal> {
            guard let app = caller.app else {
                return .failure(TransferRefusal(.notPermitted, "the caller belongs to no app: a background session is an app's"))
            }
            guard caller.groups.contains(group) else { return .failure(TransferRefusal(.notPermitted, "'\(group)' is not a group of the app '\(app)'")) }
            return .success(TransferSessionKey(app: app, group: group, identifier: session))
        }
        switch message {
        case let .transferCreate(tag, request):
            switch transfers.create(request, caller: caller, consumer: consumer) {
            case .failure(let refusal):
                logger.info("transfer refused to \(caller.extensionID ?? caller.app ?? "a process of no app"): \(UntrustedText.escaped(refusal.text))")
                answer(tag, refusal)
            case .success(let id):
                switch asker {
                case .extensionProcess(let p):
                    if let p = extensions.process(p.extensionID, p.generation) { extensions.send(.transferCreated(tag: tag, task: id), to: p) }
                case .connection(let c): server.send(.transferCreated(tag: tag, task: id), to: c.id)
                }
            }
        case let .transferCancel(tag, task):
            answer(tag, transfers.cancel(task, caller: caller))
        case let .transferClaim(tag, session, group):
            switch key(session, group) {
            case .failure(let refusal): answer(tag, refusal)
            case .success(let k):
                if let why = transfers.store.ready() { return answer(tag, TransferRefusal(.internalError, "background transfers cannot be used: \(why)")) }
                answer(tag, nil)
                transfers.claim(k, by: consumer)
            }
        case let .transferHandled(tag, session, group, through):
            switch key(session, group) {
            case .failure(let refusal): answer(tag, refusal)
            case .success(let k): answer(tag, transfers.handled(k, through: through))
            }
        default:
            break
        }
    }

    /// `extctl transfers [ID|APP]`: every task to administrators, an app's own to its processes.
    func answerTransferList(_ c: ControlConnection, tag: UInt32, names: [String]) {
        let admin = isAdministrator(c.identity)
        guard admin || c.identity.app != nil else {
            return server.send(
                .failure(tag: tag, code: .notPermitted, text: "transfers are shown to administrators, and to an app's processes (their app's)"), to: c.id)
        }
        if transfers.store.exists, let why = transfers.store.ready() {
            return server.send(.failure(tag: tag, code: .internalError, text: "background transfers cannot be used: \(why)"), to: c.id)
        }
        let name = names.first
        let now = kernel.wallClock()
        let tasks = transfers.store.tasks.values.filter { t in
            (admin || t.session.app == c.identity.app) && (name == nil || t.session.app == name || t.creator == name || String(t.id) == name)
        }.sorted { $0.id < $1.id }
        server.sendJSON(
            TransferList(
                tasks: tasks.map { t in
                    TransferList.Task(
                        id: t.id, app: t.session.app, group: t.session.group, session: t.session.identifier, creator: t.creator,
                        kind: t.method.isUpload ? "upload" : "download", url: t.url, path: t.path, state: t.state.rawValue, bytes: t.bytes,
                        total: t.total >= 0 ? UInt64(t.total) : nil, rate: transfers.rate(of: t.id, now: now), status: t.status == 0 ? nil : Int(t.status),
                        failures: t.failures, retryAt: t.state == .waiting ? t.retryAt : nil, lastError: t.lastError, discretionary: t.discretionary,
                        created: t.createdAt)
                }), tag: tag, to: c.id)
    }
}

extension Daemon: TransferCalls {
    func transferConsumerReady(_ consumer: TransferConsumer) -> Bool {
        switch consumer {
        case .extensionProcess(let id, let generation):
            guard extensions.process(id, generation) != nil, let r = core.records[id], r.generation == generation else { return false }
            return [.active, .background, .expiring].contains(r.state)
        case .connection(let host):
            return server.connection(host) != nil
        }
    }

    func transferConsumerGone(_ consumer: TransferConsumer) -> Bool {
        switch consumer {
        case .extensionProcess(let id, let generation): extensions.process(id, generation) == nil
        case .connection(let host): server.connection(host) == nil
        }
    }

    func sendTransferEvents(_ events: [TransferEvent], of key: TransferSessionKey, to consumer: TransferConsumer) {
        let message = Message.transferEvents(session: key.identifier, group: key.group, events: events)
        switch consumer {
        case .extensionProcess(let id, let generation):
            if let p = extensions.process(id, generation) { extensions.send(message, to: p) }
        case .connection(let host):
            server.send(message, to: host)
        }
    }

    func wakeApp(for key: TransferSessionKey) {
        guard let app = apps.apps[key.app] else {
            return logger.warning("events of the background session \(key) wait for the app '\(key.app)', which is no longer declared")
        }
        let root = kernel.userID == 0
        let target: URLHandoff.Target
        switch app.launch {
        case .dbusActivatable:
            target = .applicationAction(appID: app.id, action: Daemon.transferAction, parameter: key.group + "/" + key.identifier, systemBus: root)
        case .executable(let path, let arguments):
            var command = ["/usr/bin/env", "EXTENSIOND_TRANSFER_SESSION=\(key.identifier)", "EXTENSIOND_TRANSFER_GROUP=\(key.group)", path] + arguments
            if root {
                guard let uid = app.uid else {
                    return logger.error("the app '\(app.id)' has no uid: it is not brought up for its transfers' events (never as root)")
                }
                command = ["/usr/bin/setpriv", "--reuid=\(uid)", "--regid=\(uid)", "--clear-groups", "--no-new-privs", "--"] + command
            }
            target = .service(
                unit: "app-extensiond-\(URLHandoff.unitEscaped(app.id))@\(UInt32.random(in: 1...UInt32.max)).service", command: command,
                systemManager: root, user: nil)
        }
        logger.info("bringing up the app \(app.id) for the events of the background session \(key)")
        let started = kernel.handOffInBackground(URLHandoff(url: "", hostPID: nil, target: target)) { [unowned self] outcome in
            urlHandoffsInFlight -= 1
            switch outcome {
            case .opened(let what): logger.info("the app \(app.id) was brought up for the background session \(key): \(what)")
            case .locked, .noHandler: break
            case .failed(let why):
                logger.error("the app \(app.id) could not be brought up for the background session \(key): \(why)")
                transfers.woken.remove(key)
            }
        }
        if let e = started { return logger.error("cannot bring up the app \(app.id): \(e)") }
        urlHandoffsInFlight += 1
    }

    /// The action a D-Bus activatable app is activated with for its transfers' events; its
    /// parameter is `GROUP/SESSION`.
    static let transferAction = "background-transfers"

    func transferContainer(_ group: String) -> (path: String, gid: UInt32?)? {
        guard let c = sources.containers.known[group] else { return nil }
        return (c.path, c.gid)
    }
}
