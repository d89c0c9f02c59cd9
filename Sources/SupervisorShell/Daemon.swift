import ExtensionProtocol
import ExtensionTransport
import Logging
import SupervisorCore
import SupervisorKernel

/// The imperative shell of extensiond: one sd-event loop owning the control socket, every
/// extension process and the `Supervisor` state machine. It turns system events into
/// `Event`s, feeds them to the core and performs the returned `Effect`s. Never blocks on a
/// peer: every socket is non-blocking with a bounded outbound queue.
///
/// Create it and call `run()` on the thread that will own it; it is not Sendable.
public final class Daemon {
    var core: Supervisor
    let options: DaemonOptions
    var config: DaemonConfig
    /// The extensions' own uids (`<state>/ids.json`); only a root daemon allocates them.
    var identities: IdentityStore?
    /// The shared containers' directories.
    var containers: SharedContainers
    /// Each extension's own container.
    let extensionContainers: ExtensionContainers
    /// What the extensions' sandbox can be here, and each launch's plan.
    let sandboxing: Sandboxing
    let logger: Logger
    let listener: PacketSocket
    var listenerSource: (any Watch)?
    var connections: [HostID: ControlConnection] = [:]
    /// The connections of `connections` that asked for lifecycle events (`monitor`).
    var monitors: [ControlConnection] = []
    /// The events of the current loop iteration, until they are sent to the monitors.
    var monitorFeed = MonitorFeed()
    /// Nesting of `inBatch`, and the connections whose messages it holds.
    var batchDepth = 0
    var heldConnections: [ControlConnection] = []
    var processes: [String: SupervisedProcess] = [:]
    /// The same processes by pid, for the kernel's stop reports (which name a pid).
    var processesByPID: [Int32: SupervisedProcess] = [:]
    var signalSources: [any Cancellable] = []
    /// Every kernel call of the process handling goes through it.
    let kernel: any Kernel
    /// The cgroup v2 subtree with one cgroup per extension; nil on the process-group fallback.
    let cgroups: CgroupTree?
    /// Why there is no cgroup per extension (nil when there is one).
    let containmentProblem: String?
    /// One cgroup v1 memory cgroup per extension, where the v2 cgroups have no memory
    /// controller and the v1 memory hierarchy can be used; nil otherwise (RLIMIT_DATA then).
    let memoryCgroupsV1: MemoryCgroupV1Tree?
    /// Stops, resumes, signals and exits of extension processes.
    let control: ProcessControl
    /// /proc/locks as read and parsed during the current loop iteration (a burst of stops reads
    /// and parses it once).
    var locksSnapshot: (at: Instant, entries: [FileLocks.Entry])?
    /// /proc/locks, kept open and read from offset 0 at each stop confirmation (no path lookup
    /// per read); nil when it could not be opened, and it is then read by path.
    let procLocks: Int32?
    var nextHostID: HostID = 1
    var encoder = WireEncoder()
    let receiveBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: WireLimits.maxMessageSize, alignment: 8)
    private var queuedEvents: [Event] = []
    private var dispatching = false
    /// sd_notify: readiness, STATUS=, reload and stop notifications.
    let serviceManager: ServiceManager
    /// The live extension processes, on disk for the next instance should this one be killed.
    let registry: ProcessRegistry

    /// Bytes an unread peer may have queued before it is cut off.
    static let connectionQueueLimit = 1 << 20
    /// Datagrams read from one socket per wake-up, so one busy peer cannot starve the others.
    static let readBudget = 64
    /// How long a process may live after closing its runtime channel before it is ended.
    static let channelCloseGraceSeconds = 0.5

    /// Loads the configuration and manifests and opens (or adopts) the control socket.
    /// Throws with a message naming what failed.
    public init(options: DaemonOptions, kernel: any Kernel, logger: Logger) throws {
        self.options = options
        self.logger = logger
        self.kernel = kernel
        serviceManager = ServiceManager(kernel: kernel)
        // The configuration first: a bad one stops the daemon before it creates anything.
        config = DaemonConfig()
        if let file = options.configFile {
            let bytes: [UInt8]
            switch kernel.read(file) {
            case .success(let b): bytes = b
            case .failure(let e): throw DaemonError("\(file): cannot be read: \(e)")
            }
            switch DaemonConfig.parse(bytes, file: file) {
            case .success(let c): config = c
            case .failure(let e): throw DaemonError(e.description)
            }
        }
        // Orphaned descendants of extensions become the daemon's children rather than init's:
        // they stay visible (and reapable) here, which lets stop verification skip /proc scans.
        let isSubreaper = kernel.becomeChildSubreaper()
        if !isSubreaper { logger.warning("cannot become a child subreaper; every stop verification will scan /proc") }
        switch options.containment == .processGroup
            ? .failure(CgroupTree.Unavailable(description: "process-group containment was asked for (--containment process-group)"))
            : CgroupTree.setUp(kernel: kernel, underSystemd: kernel.underServiceManager, socketPath: options.socketPath, logger: logger) {
        case .success(let tree):
            cgroups = tree
            containmentProblem = nil
        case .failure(let why):
            if options.containment == .cgroup { throw DaemonError("no cgroup per extension (--containment cgroup): \(why)") }
            cgroups = nil
            containmentProblem = why.description
        }
        if cgroups?.controllers.contains("memory") == true {
            memoryCgroupsV1 = nil
        } else {
            switch MemoryCgroupV1Tree.setUp(kernel: kernel, underSystemd: kernel.underServiceManager, socketPath: options.socketPath) {
            case .success(let tree):
                memoryCgroupsV1 = tree
                logger.info("memory limits: one cgroup v1 memory cgroup per extension under \(tree.basePath) (memory.limit_in_bytes)")
            case .failure(let why):
                memoryCgroupsV1 = nil
                logger.info("memory limits: RLIMIT_DATA of each process, because \(why)")
            }
        }
        control = ProcessControl(kernel: kernel, cgroups: cgroups, isSubreaper: isSubreaper, logger: logger)
        serviceManager.suffix = ServiceManager.suffix(containmentProblem)
        config.limits.daemonUID = kernel.userID
        containers = SharedContainers(stateDirectory: options.stateDirectory, kernel: kernel)
        extensionContainers = ExtensionContainers(stateDirectory: options.stateDirectory, kernel: kernel)
        sandboxing = Sandboxing(stateDirectory: options.stateDirectory, kernel: kernel, logger: logger)
        if kernel.userID == 0 {
            do {
                identities = try IdentityStore(directory: options.stateDirectory, kernel: kernel)
            } catch {
                throw DaemonError(error.description)
            }
        }
        let (manifests, errors) = Daemon.loader(options, config, kernel: kernel, freezerProblem: containmentProblem, identities: identities, containers: containers).load()
        for e in errors { logger.error("manifest refused: \(UntrustedText.escaped(e.description))") }
        core = Supervisor(manifests: manifests, limits: config.limits, now: kernel.now())
        if let fd = options.inheritedListener {
            listener = PacketSocket(fd: fd)
            try listener.setNonBlocking()
        } else {
            try Daemon.prepareSocketDirectory(options.socketPath, kernel: kernel)
            listener = try PacketSocket.listen(path: options.socketPath)
            if let e = kernel.changeMode(options.socketPath, 0o660) {
                _ = kernel.removeFile(options.socketPath)
                throw DaemonError("cannot set the mode of \(options.socketPath): \(e)")
            }
            if let group = options.socketGroup {
                let gid: UInt32
                if let n = UInt32(group) {
                    gid = n
                } else if let found = kernel.accounts.groupNamed(group) {
                    gid = found
                } else {
                    _ = kernel.removeFile(options.socketPath)
                    throw DaemonError("--socket-group \(group): no such group")
                }
                if let e = kernel.changeOwner(options.socketPath, user: UInt32.max, group: gid) {
                    _ = kernel.removeFile(options.socketPath)
                    throw DaemonError("cannot give \(options.socketPath) to group \(group) (--socket-group): \(e)")
                }
            }
        }
        // The socket is ours now: whatever a killed predecessor on it left running is ended.
        registry = ProcessRegistry(path: ProcessRegistry.path(forSocket: options.socketPath), logger: logger, table: control.table)
        // Opened last: nothing after this point throws, so the descriptor cannot leak.
        switch kernel.open("/proc/locks", directory: false) {
        case .success(let fd): procLocks = fd
        case .failure(let e):
            procLocks = nil
            logger.notice("cannot keep /proc/locks open (\(e)): it is opened at each stop confirmation instead")
        }
        ProcessRegistry.reapLeftovers(at: registry.path, table: control.table, logger: logger)
        if let tree = cgroups {
            tree.endLeftovers(logger: logger)
            logger.info("containment: one cgroup per extension under \(tree.extensionsPath)\(tree.controllers.isEmpty ? " (no controllers)" : " (controllers: \(tree.controllers.joined(separator: ", ")))")")
        } else {
            logger.warning("containment: process groups only, because \(containmentProblem ?? "?"); a process of an extension that leaves its process group (setsid) escapes suspension and termination")
        }
        memoryCgroupsV1?.removeLeftovers(logger: logger)
        warnUnenforcedLimits(manifests)
        logger.info("loaded \(manifests.count) extension(s) from \(options.extensionDirectories.joined(separator: ":")); \(errors.count) manifest error(s)")
    }

    deinit {
        receiveBuffer.deallocate()
        if let procLocks { kernel.close(procLocks) }
    }

    static func loader(
        _ options: DaemonOptions, _ config: DaemonConfig, kernel: any Kernel, freezerProblem: String?, identities: IdentityStore?,
        containers: SharedContainers
    ) -> ManifestLoader {
        ManifestLoader(
            kernel: kernel, directories: options.extensionDirectories, explicit: options.explicitDirectories, points: config.points, trustedUID: kernel.userID,
            freezerProblem: freezerProblem, credentialRules: Daemon.credentialRules(config, kernel: kernel), identities: identities,
            extensionUIDs: config.extensionUIDs, containers: containers, containerGroups: config.containerGroups,
            allowUnsandboxed: config.allowUnsandboxedExtensions)
    }

    /// How each limit of `manifest` is enforced here (`enforcedBy` of `status --json`).
    func limitEnforcement(_ manifest: Manifest) -> [LimitEnforcement] {
        manifest.policy.limits.enforcement(
            controllers: Set(cgroups?.controllers ?? []), memoryCgroupV1: memoryCgroupsV1 != nil, ownUID: manifest.credentials?.ownUID ?? false)
    }

    /// A limit that nothing here can enforce is a warning at load, never dropped silently.
    func warnUnenforcedLimits(_ manifests: [Manifest]) {
        for m in manifests {
            for e in limitEnforcement(m) {
                if let why = e.unenforcedReason { logger.warning("\(m.source): \(m.id): \(why)", metadata: ["EXTENSION_ID": "\(m.id)"]) }
            }
        }
    }

    /// The credential rules for a daemon with `kernel`'s credentials and `config`.
    static func credentialRules(_ config: DaemonConfig, kernel: any Kernel) -> CredentialRules {
        CredentialRules(
            daemonUID: kernel.userID, daemonGID: kernel.groupID, daemonGroups: kernel.supplementaryGroups,
            allowRootExtensions: config.allowRootExtensions, accounts: kernel.accounts)
    }

    /// Creates the socket's directory with mode 0750 if absent; refuses a directory others can write.
    static func prepareSocketDirectory(_ socketPath: String, kernel: any Kernel) throws {
        guard let slash = socketPath.lastIndex(of: "/"), slash != socketPath.startIndex else { return }
        let dir = String(socketPath[..<slash])
        if let e = kernel.makeDirectory(dir, mode: 0o750), !e.isAlreadyExisting {
            throw DaemonError("cannot create socket directory \(dir): \(e)")
        }
        guard case .success(let st) = kernel.status(dir, followLinks: false), st.kind == .directory else {
            throw DaemonError("socket directory \(dir) is not a directory")
        }
        if st.isWorldWritable && !st.isSticky {
            throw DaemonError("socket directory \(dir) is world-writable; refusing to use it")
        }
    }

    /// Runs the loop until shutdown completes. Returns the exit status.
    public func run(onReady: (() -> Void)? = nil) throws -> Int32 {
        control.delegate = self
        listenerSource = try kernel.watch(fd: listener.fd, events: Poll.input) { [unowned self] _ in acceptConnections() }.get()
        for sig in [SignalNumber.terminate, SignalNumber.interrupt] {
            signalSources.append(try kernel.watchSignal(sig) { [unowned self] _, _ in
                logger.info("received signal \(sig): shutting down")
                serviceManager.stopping(status: ServiceManager.statusLine(core, shuttingDown: true, containmentProblem: containmentProblem))
                post(.shutdown)
            }.get())
        }
        signalSources.append(try kernel.watchSignal(SignalNumber.hangup) { [unowned self] _, _ in _ = reload() }.get())
        // After the ordinary events: a burst of dismisses is handled first, then the stops it
        // caused are collected together.
        signalSources.append(try kernel.watchSignal(SignalNumber.child, priority: ProcessControl.childSignalPriority) { [unowned self] pid, code in
            inBatch { childrenChanged(sender: pid, code: code) }
        }.get())
        if kernel.enableWatchdog(), let usec = kernel.watchdogInterval() {
            logger.info("watchdog: the event loop sends WATCHDOG=1 every \(usec / 2000) ms (WATCHDOG_USEC=\(usec))")
        }
        serviceManager.ready(status: statusLine())
        onReady?()
        if let fd = options.inheritedListener {
            logger.info("listening on inherited socket \(options.socketPath) (fd \(fd), passed by the service manager)")
        } else {
            logger.info("listening on \(options.socketPath)")
        }
        let status = kernel.runLoop()
        for c in connections.values { c.close() }
        connections.removeAll()
        monitors.removeAll()
        listenerSource?.cancel()
        if options.inheritedListener == nil {
            listener.close()
            if let e = kernel.removeFile(options.socketPath), !e.isNoEntry { logger.warning("cannot remove \(options.socketPath): \(e)") }
        }
        if processes.isEmpty {
            registry.removeFile()
            cgroups?.removeSubtree()
            memoryCgroupsV1?.removeSubtree()
        } else {
            registry.flush()
        }
        return status
    }

    // MARK: - Core dispatch

    /// Feeds an event to the core and performs its effects. Events raised while effects are
    /// performed are queued and handled afterwards, in order, so the core is never re-entered.
    func post(_ event: Event) {
        queuedEvents.append(event)
        guard !dispatching else { return }
        dispatching = true
        var i = 0
        while i < queuedEvents.count {
            let effects = core.handle(queuedEvents[i], at: kernel.now())
            // SIGSTOPs go out before the rest of what the event produced: each message written
            // first (the host's reply, the extension's `ended`, monitor events) would wake a
            // thread that the group stop then has to wait for or compete with. A message to
            // the stopped extension (its `ended`) is read when it next runs.
            for effect in effects where effect.isStop { perform(effect) }
            for effect in effects where !effect.isStop { perform(effect) }
            i += 1
        }
        queuedEvents.removeAll(keepingCapacity: true)
        dispatching = false
        afterDispatch()
        if batchDepth == 0 { sendMonitorEvents() }
    }

    func perform(_ effect: Effect) {
        switch effect {
        case let .spawn(id, generation, manifest): spawn(id, generation, manifest)
        case let .stop(id, generation): if let p = process(id, generation) { control.suspend(p) }
        case let .resume(id, generation):
            if let p = process(id, generation) {
                p.stopLockWatch()
                control.resume(p)
                post(.continueConfirmed(extensionID: id, generation: generation))
            }
        case let .signal(id, generation, signal, thenContinue):
            if let p = process(id, generation) {
                p.stopLockWatch()
                control.signal(p, signal, thenContinue: thenContinue)
            }
        case let .openRequest(id, generation, requestID, host, tag, pid, channel):
            openRequest(id, generation, requestID, host, tag, pid, channel)
        case let .reply(host, message): send(message, to: host)
        case let .send(id, generation, message):
            guard let p = process(id, generation) else { break }
            // A request ended before its channel was even handed over (the extension has not
            // read its queue, typically because it is stopped): drop both instead of queueing.
            if case .ended(let requestID) = message, p.channel?.cancel(key: requestID) == true { break }
            send(message, to: p)
        case let .armTimer(at): kernel.setDeadline(at) { [unowned self] in post(.tick) }
        case let .record(event): record(event)
        case let .emptyContainer(id, host, tag):
            switch extensionContainers.reset(id) {
            case .success:
                logger.notice("\(id): its container \(extensionContainers.path(of: id)) was emptied (reset)", metadata: ["EXTENSION_ID": "\(id)"])
                send(.ok(tag: tag), to: host)
            case .failure(let e):
                logger.error("\(id): its container could not be emptied: \(e)", metadata: ["EXTENSION_ID": "\(id)"])
                send(.failure(tag: tag, code: .internalError, text: "the container of '\(id)' could not be emptied: \(e)"), to: host)
            }
        case .exit:
            logger.info("every extension process is gone; exiting")
            kernel.exitLoop(0)
        }
    }

    func process(_ id: String, _ generation: UInt64) -> SupervisedProcess? {
        guard let p = processes[id], p.generation == generation else { return nil }
        return p
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
        if !monitors.isEmpty { monitorFeed.append(e) }
    }

    /// The priority of each kind of lifecycle entry (docs/operations.md). Assertion acquire and
    /// release are debug: an extension may take thousands a second, and each would be a
    /// journal write on its hot path. So are the four records of every request shown and
    /// dismissed, `begin`, `end`, `suspend` and `resume`: they are on the daemon's hot path too,
    /// and under sustained use they would fill the journal until its rate limit drops entries,
    /// the ones operators need included. So is `stop-sent`: the `suspend` that confirms it
    /// follows within microseconds, and a stop that does not complete is a warning of its own.
    /// Every event stays in the extension's recent history (`extctl status`) and on `monitor`.
    static func logLevel(of kind: LifecycleEvent.Kind) -> Logger.Level {
        switch kind {
        case .crash, .launchFailed, .launchTimeout, .overrun, .expiryUnacknowledged, .lockHeldAtSuspend: .warning
        case .refuse, .throttle, .deny, .kill: .notice
        case .acquire, .release, .stopSent, .begin, .end, .suspend, .resume: .debug
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
    }

    /// Re-reads the manifests (SIGHUP or `extctl reload`). Running extensions are not disturbed.
    /// A manifest file that no longer parses keeps its previous definition, so a typo in an
    /// edited file does not end the running extension it describes; the report lists each one.
    func reload() -> ReloadReport {
        logger.info("reloading manifests")
        serviceManager.reloading()
        var (manifests, errors) = Daemon.loader(options, config, kernel: kernel, freezerProblem: containmentProblem, identities: identities, containers: containers).load()
        for e in errors { logger.error("manifest refused: \(UntrustedText.escaped(e.description))") }
        warnUnenforcedLimits(manifests)
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
        post(.reload(manifests: manifests, errors: errors, host: nil, tag: 0))
        logger.info("reloaded: \(loaded) extension(s), \(errors.count) manifest error(s), \(kept.count) previous definition(s) kept")
        serviceManager.ready(status: statusLine())
        return ReloadReport(loaded: loaded, errors: errors, kept: kept)
    }
}

extension Effect {
    /// Whether this is a SIGSTOP of an extension's group.
    var isStop: Bool {
        if case .stop = self { return true }
        return false
    }
}
