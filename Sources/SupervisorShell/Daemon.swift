import ExtensionProtocol
import ExtensionStatus
import ExtensionTransport
import Logging
import SupervisorCore
import SupervisorKernel

/// The imperative shell of extensiond: it owns the `Supervisor` state machine and the parts
/// that meet the kernel (the control server, the extension processes and their lock watch,
/// the service manager), all on the one event loop of its `Kernel`. It turns what those parts
/// observe into `Event`s, feeds them to the core and performs the returned `Effect`s. Never
/// blocks on a peer.
///
/// Create it and call `run()` on the thread that will own it; it is not Sendable.
public final class Daemon {
    let kernel: any Kernel
    let logger: Logger
    /// The pure state machine; changed only by `post`.
    private(set) var core: Supervisor
    /// Events waiting for the core while it handles one (it is never re-entered).
    private var pending = PendingEvents()
    let server: ControlServer
    let extensions: ExtensionProcesses
    /// sd_notify: readiness, STATUS=, reload and stop notifications.
    let serviceManager: ServiceManager
    /// Where manifests come from, and what loading them provisions (uids, shared containers).
    let sources: ManifestSources
    /// The apps the manifests declare.
    let apps = AppCatalog()
    /// The shared defaults suites.
    let defaults: DefaultsSuites
    /// The secret items.
    let secrets: SecretStore
    /// Background transfers: tasks, sessions and the worker.
    let transfers: TransferService
    /// URL hand-offs under way on their threads: a re-exec waits for them (their answers
    /// would be lost with the threads).
    var urlHandoffsInFlight = 0
    /// A re-exec under way, or the answer owed after one.
    let reexecution: Reexecution
    /// Which bus the D-Bus interface goes on (`--bus`).
    let busChoice: DaemonOptions.BusChoice
    /// The D-Bus interface, once `start` put it on its bus.
    var bus: BusInterface?
    /// The version of the program this one replaced (a re-exec), and how many extensions it
    /// handed over; nil for a program that started afresh.
    let tookOverFrom: (version: String, extensions: Int)?
    /// The configuration read at start, which the manifest sources keep.
    var config: DaemonConfig { sources.config }

    /// Loads the configuration and manifests, sets up containment, and opens (or adopts) the
    /// control socket, all through `kernel`. With `options.handoverPath`, takes over the state
    /// and descriptors a replaced daemon left instead: its extensions, connections and socket.
    /// Throws with a message naming what failed.
    public init(options given: DaemonOptions, kernel: any Kernel, logger: Logger) throws {
        var options = given
        self.logger = logger
        self.kernel = kernel
        reexecution = Reexecution(commandLine: options.commandLine, programPath: options.programPath)
        busChoice = options.bus
        defaults = DefaultsSuites(stateDirectory: options.stateDirectory, kernel: kernel, logger: logger)
        secrets = SecretStore(stateDirectory: options.stateDirectory, kernel: kernel, logger: logger)
        // A hand-over document is read first and let go at once: it is read only once. It is a
        // memory file (`/proc/self/fd/N`, whose descriptor crossed the execve and is closed
        // here), or a file elsewhere, which is removed.
        let start = kernel.now()
        let handover = try options.handoverPath.map { path in
            defer {
                if path.hasPrefix(Daemon.handoverDescriptorPrefix), let fd = Int32(path.dropFirst(Daemon.handoverDescriptorPrefix.count)) {
                    kernel.close(fd)
                } else if let e = kernel.removeFile(path), !e.isNoEntry {
                    logger.warning("cannot remove \(path): \(e)")
                }
            }
            return try Daemon.readHandover(path, kernel: kernel)
        }
        let decoded = kernel.now()
        tookOverFrom = handover.map { ($0.daemonVersion, $0.core.records.count) }
        if let handover {
            // The socket the replaced daemon served, even when the service manager had passed it.
            options.socketPath = handover.socketPath
            // The descriptors crossed the execve without close-on-exec: they get it back, so
            // that no program this daemon starts inherits them.
            for (fd, e) in kernel.setCloseOnExec(handover.descriptors) {
                logger.warning("cannot make descriptor \(fd) of the hand-over close-on-exec: \(e)")
            }
        }
        // The configuration first: a bad one stops the daemon before it creates anything.
        var config = try Daemon.configuration(options.configFile, kernel: kernel)
        config.limits.daemonUID = kernel.userID
        // Orphaned descendants of extensions become the daemon's children rather than init's:
        // they stay visible (and reapable) here, which lets stop verification skip /proc scans.
        let isSubreaper = kernel.becomeChildSubreaper()
        if !isSubreaper { logger.warning("cannot become a child subreaper; every stop verification will scan /proc") }
        let containment = try Containment(options.containment, socketPath: options.socketPath, kernel: kernel, logger: logger)
        serviceManager = ServiceManager(kernel: kernel, containmentProblem: containment.problem)
        sources = try containment.abandoningOnFailure(logger: logger) {
            try ManifestSources(options: options, config: config, kernel: kernel, freezerProblem: containment.problem, logger: logger)
        }
        // After a hand-over the records carry their manifests, as loaded and provisioned by the
        // replaced daemon (whose refusals and warnings were logged then): none is read again.
        var loaded: (manifests: [Manifest], errors: [ManifestError], apps: [AppManifest]) = ([], [], [])
        if let handover {
            sources.containers.restore(known: handover.sharedContainers, resolvedRoot: handover.containersRoot)
            apps.replace(handover.apps ?? [])
            if let suites = handover.defaults { defaults.restore(suites) }
            core = try Supervisor(restoring: handover.core, limits: config.limits, now: kernel.now())
        } else {
            loaded = sources.load()
            for e in loaded.errors { logger.error("manifest refused: \(UntrustedText.escaped(e.description))") }
            apps.replace(loaded.apps)
            core = Supervisor(manifests: loaded.manifests, limits: config.limits, now: kernel.now())
        }
        let buffers = WireBuffers()
        if let handover {
            server = ControlServer(restoring: handover, socketPath: options.socketPath, limits: config.limits, buffers: buffers, kernel: kernel, logger: logger)
        } else {
            server = try containment.abandoningOnFailure(logger: logger) {
                try ControlServer(options: options, limits: config.limits, buffers: buffers, kernel: kernel, logger: logger)
            }
        }
        // The socket is ours now: whatever a killed predecessor on it left running is ended.
        let table = ProcessTable(kernel: kernel)
        let registry = ProcessRegistry(path: ProcessRegistry.path(forSocket: options.socketPath), logger: logger, table: table)
        let sharedContainers = sources.containers
        extensions = ExtensionProcesses(
            kernel: kernel, logger: logger, containment: containment, isSubreaper: isSubreaper,
            containers: ExtensionContainers(stateDirectory: options.stateDirectory, kernel: kernel),
            sandboxing: Sandboxing(
                stateDirectory: options.stateDirectory, manifestDirectories: options.extensionDirectories, kernel: kernel, logger: logger,
                known: handover?.sandbox.probe), registry: registry,
            locks: LockWatch(kernel: kernel, logger: logger, containersRoot: { sharedContainers.resolvedRoot }), buffers: buffers,
            networkNamespacePrefix: NetworkStacks.pathPrefix(forSocket: options.socketPath), diskCheckSeconds: config.limits.diskCheckSeconds)
        if handover == nil {
            ProcessRegistry.reapLeftovers(at: registry.path, table: table, logger: logger)
            containment.endLeftovers(logger: logger)
        }
        if handover == nil {
            containment.warnUnenforcedLimits(loaded.manifests, logger: logger)
            _ = Daemon.warnHiddenPrograms(loaded.manifests, sandboxing: extensions.sandboxing, logger: logger)
            logger.info(
                "loaded \(loaded.manifests.count) extension(s) from \(options.extensionDirectories.joined(separator: ":")); \(loaded.errors.count) manifest error(s)"
            )
        }
        transfers = Daemon.makeTransfers(
            stateDirectory: options.stateDirectory, kernel: kernel, logger: logger, sources: sources, sandboxing: extensions.sandboxing)
        if let consumers = handover?.transfers { transfers.restore(consumers) }
        server.attach(self)
        extensions.outputs.deliver = { [unowned server] host, message in server.send(message, to: host) }
        extensions.attach(self)
        extensions.calls = self
        transfers.calls = self
        if let handover {
            // The stacks first: a process found gone while it is restored leaves its stack's
            // members as it ends.
            if let stacks = handover.networkStacks { extensions.restoreNetworkStacks(stacks) }
            // The kept lines before the processes, whose output pipes add to them.
            if let outputs = handover.outputs {
                extensions.outputs.restore(outputs, hosts: Set(handover.connections.map(\.host)))
                // This program's configuration (its administrators) decides who follows on.
                recheckOutputFollowers("after the re-exec")
            }
            extensions.restore(handover.processes)
            // The container checks of the processes taken over start again (none is in flight
            // across the exec: a walk is a thread of the old program's).
            for r in core.records.values {
                guard r.pid != nil, let limit = r.manifest.policy.limits.diskMaxBytes else { continue }
                // Its system-call filter as the sandbox would build it now (the process keeps the
                // one of its launch).
                let filtered = if case .success(let d) = extensions.sandboxing.decide(r.manifest) { d.enabled && d.enforced.contains(.syscalls) } else { false }
                extensions.quota.started(
                    r.manifest.id, generation: r.generation, path: extensions.containers.path(of: r.manifest.id), limit: limit,
                    owner: ContainerQuota.owner(of: r.manifest.credentials), filtered: filtered, running: r.state != .suspended)
            }
            if let requester = handover.requester { reexecution.owe(requester, previousVersion: handover.daemonVersion) }
            logger.notice(
                "took over from extensiond \(handover.daemonVersion): \(handover.processes.count) extension process(es), \(handover.connections.count) connection(s) in \(Daemon.milliseconds(start, kernel.now())) from the start of this program (the document decoded in \(Daemon.milliseconds(start, decoded)))"
            )
        }
    }

    /// The configuration in `file` (the defaults without one); throws naming what is wrong.
    static func configuration(_ file: String?, kernel: any Kernel) throws -> DaemonConfig {
        guard let file else { return DaemonConfig() }
        let bytes: [UInt8]
        switch kernel.read(file) {
        case .success(let b): bytes = b
        case .failure(let e): throw DaemonError("\(file): cannot be read: \(e)")
        }
        switch DaemonConfig.parse(bytes, file: file) {
        case .success(let c): return c
        case .failure(let e): throw DaemonError(e.description)
        }
    }

    /// Registers the loop's sources (the control socket, signals, the watchdog) and tells the
    /// service manager the daemon is ready. `run` calls it; a test driving the daemon on a
    /// recording kernel calls it instead of `run`.
    public func start() throws {
        for sig in [SignalNumber.terminate, SignalNumber.interrupt] {
            if let e = kernel.watchSignal(
                sig,
                { [unowned self] _, _ in
                    logger.info("received signal \(sig): shutting down")
                    serviceManager.stopping(status: serviceManager.statusLine(core, shuttingDown: true))
                    post(.shutdown)
                })
            {
                throw e
            }
        }
        if let e = kernel.watchSignal(SignalNumber.hangup, { [unowned self] _, _ in _ = reload() }) { throw e }
        if let e = kernel.watchSignal(SignalNumber.user2, { [unowned self] _, _ in requestReexec(from: nil) }) { throw e }
        // After the ordinary events: a burst of dismisses is handled first, then the stops it
        // caused are collected together.
        if let e = kernel.watchSignal(
            SignalNumber.child, priority: ProcessControl.childSignalPriority,
            { [unowned self] pid, code in
                server.inBatch { childrenChanged(sender: pid, code: code) }
            })
        {
            throw e
        }
        try server.start()
        // Requests whose host did not cross a re-exec (a D-Bus caller's control connection lives
        // in the replaced program) end now, as if their hosts had dismissed them.
        let connected = server.hosts
        var orphans = Set<HostID>()
        for r in core.records.values {
            for q in r.requests where !connected.contains(q.host) { orphans.insert(q.host) }
            for p in r.pending where !connected.contains(p.host) { orphans.insert(p.host) }
        }
        for host in orphans.sorted() {
            logger.info("ending the requests of host \(host), whose connection did not cross the re-exec")
            hostGone(host)
        }
        // On the bus before the service manager hears that the daemon is ready: a client started
        // after readiness finds the name owned.
        startBus()
        if let previous = tookOverFrom {
            bus?.reexecEnded(succeeded: true, previousVersion: previous.version, detail: "took over \(previous.extensions) extension(s)")
        }
        // Containers a reset set aside and did not finish removing (a stop or re-exec meanwhile).
        extensions.containers.removeLeftovers(logger: logger)
        if kernel.enableWatchdog(), let usec = kernel.watchdogInterval() {
            logger.info("watchdog: the event loop sends WATCHDOG=1 every \(usec / 2000) ms (WATCHDOG_USEC=\(usec))")
        }
        serviceManager.ready(status: statusLine())
        if let (requester, previous) = reexecution.takeAnswer() {
            server.sendJSON(
                ReexecReport(previousVersion: previous, version: daemonVersion, pid: kernel.processID, extensions: extensions.count),
                tag: requester.tag, to: requester.host)
        }
        // Tasks kept from before go on; sessions with events waiting bring their app up.
        transfers.resume()
        // The core's deadline, as the replaced daemon had armed it (one that passed meanwhile
        // fires at once).
        if let at = core.armedDeadline { armDeadline(at) }
    }

    /// Arms the loop's one deadline for the core's next `tick` (nil disarms it). A loop that
    /// cannot arm it is logged as an error: the core's deadlines (expiries, reclaims, launch
    /// timeouts) then wait for the next event.
    private func armDeadline(_ at: Instant?) {
        if let e = kernel.setDeadline(at, { [unowned self] in post(.tick) }) {
            logger.error("cannot arm the supervisor's timer\(at.map { " for \($0)" } ?? ""): \(e); its deadlines wait for the next event")
        }
    }

    /// Closes the control socket and every connection, and leaves the registry and cgroup
    /// subtrees as `ExtensionProcesses.finish` says.
    public func finish() {
        bus?.stop("the daemon is stopping")
        server.stop()
        extensions.finish()
        defaults.flush()
        transfers.finish()
    }

    /// Runs the loop until shutdown completes. Returns the exit status.
    public func run(onReady: (() -> Void)? = nil) throws -> Int32 {
        try start()
        onReady?()
        let status = kernel.runLoop()
        finish()
        return status
    }

    /// SIGCHLD: stop reports for the leaders waiting for one, and a diagnostic for a stop
    /// nobody here asked for (a coalesced one goes unnoticed).
    private func childrenChanged(sender: Int32, code: Int32) {
        extensions.childrenChanged()
        if code == childStoppedCode, let p = extensions.process(leader: sender), p.group.stop == .running,
            let state = core.records[p.extensionID]?.state, [.active, .background, .expiring].contains(state),
            extensions.processControl.table.stat(p.pid)?.isStopped == true
        {
            logger.warning("pid \(p.pid) of \(p.extensionID) was stopped by someone other than extensiond")
        }
    }

    // MARK: - Core dispatch

    /// Feeds an event to the core and performs its effects. Events raised while effects are
    /// performed are queued and handled afterwards, in order, so the core is never re-entered.
    func post(_ event: Event) {
        guard pending.add(event) else { return }
        while let next = pending.next() {
            let effects = core.handle(next, at: kernel.now())
            // SIGSTOPs go out before the rest of what the event produced: each message written
            // first (the host's reply, the extension's `ended`, monitor events) would wake a
            // thread that the group stop then has to wait for or compete with. A message to
            // the stopped extension (its `ended`) is read when it next runs.
            for effect in effects where effect.isStop { perform(effect) }
            for effect in effects where !effect.isStop { perform(effect) }
        }
        // The iteration's monitor events go out before `afterDispatch`, which may re-exec the
        // daemon (`attemptReexec`): what is still in this process at the execve is lost.
        server.dispatchEnded()
        // An extension suspended, resumed or ended may be a session's consumer.
        transfers.consumersChanged()
        afterDispatch()
    }

    private func perform(_ effect: Effect) {
        switch effect {
        case let .spawn(id, generation, manifest): extensions.spawn(id, generation, manifest)
        case let .stop(id, generation): extensions.suspend(id, generation)
        case let .resume(id, generation): extensions.resume(id, generation)
        case let .signal(id, generation, signal, thenContinue): extensions.signal(id, generation, signal, thenContinue: thenContinue)
        case let .openRequest(id, generation, requestID, host, tag, pid, channel):
            openRequest(id, generation, requestID, host, tag, pid, channel)
        case let .reply(host, message): server.send(withLastOutput(message, to: host), to: host)
        case let .send(id, generation, message): extensions.send(message, to: id, generation)
        case let .armTimer(at): armDeadline(at)
        case let .record(event): record(event)
        case let .emptyContainer(id, host, tag):
            let containers = extensions.containers
            switch containers.reset(id, logger: logger) {
            case .success:
                extensions.quota.containerReplaced(containers.path(of: id))
                logger.notice(
                    "\(id): its container \(containers.path(of: id)) was emptied (reset); the old contents are removed in the background",
                    metadata: ["EXTENSION_ID": "\(id)"])
                server.send(.ok(tag: tag), to: host)
            case .failure(let e):
                logger.error("\(id): its container could not be emptied: \(e)", metadata: ["EXTENSION_ID": "\(id)"])
                server.send(.failure(tag: tag, code: .internalError, text: "the container of '\(id)' could not be emptied: \(e)"), to: host)
            }
        case .exit:
            logger.info("every extension process is gone; exiting")
            extensions.networks?.endAll()
            kernel.exitLoop(0)
        }
    }

    /// Lines of an extension's output a failed launch's answer quotes.
    static let quotedOutputLines = 3

    /// A launch's failure with the last lines the process wrote before it ended (a Python
    /// traceback's `ModuleNotFoundError`), so that the host and `extctl open` see why, when the
    /// host may read the extension's output (`mayReadOutput`). The core's texts for these
    /// failures name the extension first, in quotes (an id has none).
    func withLastOutput(_ message: Message, to host: HostID) -> Message {
        guard case let .failure(tag, .launchFailed, text) = message, let open = text.firstIndex(of: "'"),
            let close = text[text.index(after: open)...].firstIndex(of: "'")
        else { return message }
        let id = String(text[text.index(after: open)..<close])
        guard let peer = server.connection(host)?.identity, let manifest = core.records[id]?.manifest, mayReadOutput(peer, of: manifest) else {
            return message
        }
        let lines = extensions.outputs.sinceLaunch(Self.quotedOutputLines, of: id)
        guard !lines.isEmpty else { return message }
        let quoted = lines.map(\.text).joined(separator: " | ")
        let room = WireLimits.maxText - text.utf8.count - 40
        guard room > 0 else { return message }
        // The end of the lines is what says why: a cut keeps it (and may split a character,
        // which decoding replaces).
        let kept = quoted.utf8.count <= room ? quoted : "…" + String(decoding: Array(quoted.utf8.suffix(room)), as: UTF8.self)
        return .failure(tag: tag, code: .launchFailed, text: text + "; its last output: " + kept)
    }

    /// Hands a new request to its extension (with a stream pair when it has a channel), then
    /// tells the host it has begun.
    private func openRequest(_ id: String, _ generation: UInt64, _ requestID: UInt64, _ host: HostID, _ tag: UInt32, _ pid: Int32, _ channel: Bool) {
        guard channel else {
            server.send(.begun(tag: tag, requestID: requestID, pid: pid, hasChannel: false), to: host)
            return
        }
        switch extensions.deliver(requestID, to: id, generation) {
        case nil: return
        case .failure(let failure)?:
            post(.deliveryFailed(extensionID: id, generation: generation, requestID: requestID, error: failure.reason))
        case .success(let hostEnd)?:
            server.send(.begun(tag: tag, requestID: requestID, pid: pid, hasChannel: true), to: host, descriptor: hostEnd)
        }
    }

    // MARK: - Lifecycle records

    func record(_ e: LifecycleEvent) {
        let level = Daemon.logLevel(of: e.kind)
        if level >= logger.logLevel {  // the metadata costs more than the check: build it only when logged
            var metadata: Logger.Metadata = [
                "EXTENSION_ID": .string(e.extensionID), "LIFECYCLE_STATE": .string(e.state.rawValue), "EVENT": .string(e.kind.rawValue),
            ]
            if let pid = e.pid { metadata["EXTENSION_PID"] = .string(String(pid)) }
            if let a = e.assertionID { metadata["ASSERTION_ID"] = .string(String(a)) }
            if let r = e.requestID { metadata["REQUEST_ID"] = .string(String(r)) }
            // What an extension says (reasons, details, paths) is escaped: no control character
            // reaches the journal or the console.
            if let d = e.detail {
                metadata[e.assertionID != nil ? "ASSERTION_REASON" : "DETAIL"] = .string(UntrustedText.escaped(d))
            }
            if let lock = e.lock {
                metadata["LOCK_PATH"] = .string(UntrustedText.escaped(lock.path))
                metadata["LOCK_KIND"] = .string(lock.kind.rawValue)
                metadata["LOCK_DECISION"] = .string(lock.decision.rawValue)
            }
            logger.log(level: level, "\(e.extensionID): \(e.kind.rawValue)", metadata: metadata)
        }
        server.publish(e)
        bus?.publish(e)
    }

    /// The priority of each kind of lifecycle entry (docs/operations.md). Assertion acquire,
    /// release and deny are debug: an extension may ask for thousands a second (tens of
    /// thousands of denials, when it asks without a reason), and each would be a journal write
    /// on its hot path that the journal's rate limit then answers by dropping other entries. So are the four records of every request shown and
    /// dismissed, `begin`, `end`, `suspend` and `resume`: they are on the daemon's hot path too,
    /// and under sustained use they would fill the journal until its rate limit drops entries,
    /// the ones operators need included. So is `stop-sent`: the `suspend` that confirms it
    /// follows within microseconds, and a stop that does not complete is a warning of its own.
    /// Every event stays in the extension's recent history (`extctl status`) and on `monitor`.
    static func logLevel(of kind: LifecycleEvent.Kind) -> Logger.Level {
        switch kind {
        case .crash, .launchFailed, .launchTimeout, .overrun, .expiryUnacknowledged, .lockHeldAtSuspend: .warning
        case .refuse, .throttle, .kill: .notice
        case .acquire, .release, .deny, .stopSent, .begin, .end, .suspend, .resume: .debug
        default: .info
        }
    }

    // MARK: - Reload

    /// What a reload did: the manifests read afresh, the files refused, and the extensions
    /// that kept their previous definition because their own file was refused.
    struct ReloadReport {
        var loaded: Int
        var errors: [ManifestError]
        /// Each extension whose file no longer loads, and that file: its previous definition stays in force.
        var kept: [(id: String, file: String)]
        /// What loads but will not work: a program its sandbox hides.
        var warnings: [String] = []
    }

    /// Re-reads the manifests (SIGHUP or `extctl reload`). Running extensions are not disturbed.
    /// A manifest file that no longer parses keeps its previous definition, so a typo in an
    /// edited file does not end the running extension it describes; the report lists each one.
    func reload() -> ReloadReport {
        logger.info("reloading manifests")
        serviceManager.reloading()
        var (manifests, errors, declaredApps) = sources.load()
        for e in errors { logger.error("manifest refused: \(UntrustedText.escaped(e.description))") }
        apps.replace(declaredApps)
        extensions.containment.warnUnenforcedLimits(manifests, logger: logger)
        let warnings = Daemon.warnHiddenPrograms(manifests, sandboxing: extensions.sandboxing, logger: logger)
        let broken = Set(errors.map(\.file))
        let defined = Set(manifests.map(\.id))
        let loaded = manifests.count
        var kept: [(id: String, file: String)] = []
        for r in core.records.values.sorted(by: { $0.manifest.id < $1.manifest.id })
        where broken.contains(r.manifest.source) && !defined.contains(r.manifest.id) {
            logger.warning("keeping the previous definition of \(r.manifest.id) until \(r.manifest.source) is fixed")
            manifests.append(r.manifest)
            kept.append((r.manifest.id, r.manifest.source))
        }
        let appBefore = core.records.mapValues(\.manifest.app)
        post(.reload(manifests: manifests, errors: errors, host: nil, tag: 0))
        // The lines of extensions the reload removed go (a removed one still running keeps its own
        // until the next reload after it ends), and those of an extension moved to another app:
        // that app's processes may not read what was written for the previous one's.
        extensions.outputs.retain(only: Set(core.records.keys))
        for (id, r) in core.records where appBefore[id].map({ $0 != r.manifest.app }) == true {
            logger.info("the output kept for \(id) is dropped: its app changed")
            extensions.outputs.forgetLines(of: id)
        }
        recheckOutputFollowers("after the reload")
        logger.info("reloaded: \(loaded) extension(s), \(errors.count) manifest error(s), \(kept.count) previous definition(s) kept")
        serviceManager.ready(status: statusLine())
        return ReloadReport(loaded: loaded, errors: errors, kept: kept, warnings: warnings)
    }

    /// Logs, for each manifest whose program its sandbox hides (`Sandboxing.hiddenProgram`),
    /// why, before any launch; returns those sentences.
    static func warnHiddenPrograms(_ manifests: [Manifest], sandboxing: Sandboxing, logger: Logger) -> [String] {
        manifests.compactMap { m in
            guard let why = sandboxing.hiddenProgram(m) else { return nil }
            logger.warning("\(UntrustedText.escaped(why))", metadata: ["EXTENSION_ID": "\(m.id)"])
            return why
        }
    }
}

extension Daemon: EventSink {
    func batch(_ body: () -> Void) { server.inBatch(body) }
}

extension Effect {
    /// Whether this is a SIGSTOP of an extension's group.
    var isStop: Bool {
        if case .stop = self { return true }
        return false
    }
}
