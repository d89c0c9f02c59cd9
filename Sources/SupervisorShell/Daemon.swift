import CShims
import ExtensionProtocol
import ExtensionTransport
import Logging
import SupervisorCore
#if canImport(Glibc)
import Glibc
#endif

/// The imperative shell of extensiond: one sd-event loop owning the control socket, every
/// extension process and the `Supervisor` state machine. It turns system events into
/// `Event`s, feeds them to the core and performs the returned `Effect`s. Never blocks on a
/// peer: every socket is non-blocking with a bounded outbound queue.
///
/// Create it and call `run()` on the thread that will own it; it is not Sendable.
public final class Daemon {
    let loop: EventLoop
    var core: Supervisor
    let options: DaemonOptions
    var config: DaemonConfig
    let logger: Logger
    let listener: PacketSocket
    var listenerSource: EventSource?
    var connections: [HostID: ControlConnection] = [:]
    var processes: [String: SupervisedProcess] = [:]
    var signalSources: [EventSource] = []
    /// Stop verifications waiting for the next verification pass, and that pass.
    var pendingVerifications: [ObjectIdentifier: SupervisedProcess] = [:]
    var verificationPass: EventSource?
    var nextHostID: HostID = 1
    var encoder = WireEncoder()
    let receiveBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: WireLimits.maxMessageSize, alignment: 8)
    private var queuedEvents: [Event] = []
    private var dispatching = false
    let daemonUID = getuid()
    /// sd_notify: readiness, STATUS=, reload and stop notifications.
    let serviceManager = ServiceManager()
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
    public init(options: DaemonOptions, logger: Logger) throws {
        self.options = options
        self.logger = logger
        loop = try EventLoop()
        config = DaemonConfig()
        if let file = options.configFile {
            switch DaemonConfig.parse(try Daemon.readFile(file), file: file) {
            case .success(let c): config = c
            case .failure(let e): throw DaemonError(e.description)
            }
        }
        config.limits.daemonUID = getuid()
        let (manifests, errors) = Daemon.loader(options, config).load()
        for e in errors { logger.error("manifest refused: \(e)") }
        core = Supervisor(manifests: manifests, limits: config.limits, now: loop.now())
        if let fd = options.inheritedListener {
            listener = PacketSocket(fd: fd)
            _ = shim_set_nonblocking(fd)
        } else {
            try Daemon.prepareSocketDirectory(options.socketPath)
            listener = try PacketSocket.listen(path: options.socketPath)
            chmod(options.socketPath, 0o660)
        }
        // The socket is ours now: whatever a killed predecessor on it left running is ended.
        registry = ProcessRegistry(path: ProcessRegistry.path(forSocket: options.socketPath), logger: logger)
        ProcessRegistry.reapLeftovers(at: registry.path, logger: logger)
        logger.info("loaded \(manifests.count) extension(s) from \(options.extensionDirectories.joined(separator: ":")); \(errors.count) manifest error(s)")
    }

    deinit { receiveBuffer.deallocate() }

    static func loader(_ options: DaemonOptions, _ config: DaemonConfig) -> ManifestLoader {
        ManifestLoader(directories: options.extensionDirectories, explicit: options.explicitDirectories, points: config.points, trustedUID: getuid())
    }

    static func readFile(_ path: String) throws -> [UInt8] {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw DaemonError("\(path): cannot be opened: \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var data: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while data.count <= ManifestParser.maxFileSize {
            let n = read(fd, &chunk, chunk.count)
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { break }
            data.append(contentsOf: chunk[0..<n])
        }
        return data
    }

    /// Creates the socket's directory with mode 0750 if absent; refuses a directory others can write.
    static func prepareSocketDirectory(_ socketPath: String) throws {
        guard let slash = socketPath.lastIndex(of: "/"), slash != socketPath.startIndex else { return }
        let dir = String(socketPath[..<slash])
        if mkdir(dir, 0o750) != 0 && errno != EEXIST {
            throw DaemonError("cannot create socket directory \(dir): \(String(cString: strerror(errno)))")
        }
        var st = stat()
        guard lstat(dir, &st) == 0, (st.st_mode & S_IFMT) == S_IFDIR else {
            throw DaemonError("socket directory \(dir) is not a directory")
        }
        if st.st_mode & S_IWOTH != 0 && st.st_mode & S_ISVTX == 0 {
            throw DaemonError("socket directory \(dir) is world-writable; refusing to use it")
        }
    }

    /// Runs the loop until shutdown completes. Returns the exit status.
    public func run(onReady: (() -> Void)? = nil) throws -> Int32 {
        listenerSource = try loop.addIO(fd: listener.fd, events: Poll.input) { [unowned self] _ in acceptConnections() }
        for sig in [SIGTERM, SIGINT] {
            signalSources.append(try loop.addSignal(sig) { [unowned self] in
                logger.info("received signal \(sig): shutting down")
                serviceManager.stopping(status: ServiceManager.statusLine(core.records.values, shuttingDown: true))
                post(.shutdown)
            })
        }
        signalSources.append(try loop.addSignal(SIGHUP) { [unowned self] in _ = reload() })
        if loop.enableWatchdog(), let usec = ServiceManager.watchdogInterval() {
            logger.info("watchdog: the event loop sends WATCHDOG=1 every \(usec / 2000) ms (WATCHDOG_USEC=\(usec))")
        }
        serviceManager.ready(status: statusLine())
        onReady?()
        if let fd = options.inheritedListener {
            logger.info("listening on inherited socket \(options.socketPath) (fd \(fd), passed by the service manager)")
        } else {
            logger.info("listening on \(options.socketPath)")
        }
        let status = loop.run()
        for c in connections.values { c.close() }
        connections.removeAll()
        listenerSource?.cancel()
        if options.inheritedListener == nil {
            listener.close()
            unlink(options.socketPath)
        }
        if processes.isEmpty { registry.removeFile() } else { registry.flush() }
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
            let effects = core.handle(queuedEvents[i], at: loop.now())
            for effect in effects { perform(effect) }
            i += 1
        }
        queuedEvents.removeAll(keepingCapacity: true)
        dispatching = false
        afterDispatch()
    }

    func perform(_ effect: Effect) {
        switch effect {
        case let .spawn(id, generation, manifest): spawn(id, generation, manifest)
        case let .stop(id, generation): if let p = process(id, generation) { requestStop(p) }
        case let .resume(id, generation): if let p = process(id, generation) { resume(p) }
        case let .signal(id, generation, signal, thenContinue):
            if let p = process(id, generation) {
                p.stopPending = false
                p.stopLockWatch()
                _ = shim_kill(-p.processGroup, signal)
                if thenContinue { _ = shim_kill(-p.processGroup, SIGCONT) }
            }
        case let .openRequest(id, generation, requestID, host, tag, pid, channel):
            openRequest(id, generation, requestID, host, tag, pid, channel)
        case let .reply(host, message): send(message, to: host)
        case let .send(id, generation, message):
            guard let p = process(id, generation) else { break }
            // A request ended before its channel was even handed over (the extension has not
            // read its queue, typically because it is stopped): drop both instead of queueing.
            if case .ended(let requestID) = message, p.outbound.cancel(key: requestID) { break }
            send(message, to: p)
        case let .armTimer(at): loop.setDeadline(at) { [unowned self] in post(.tick) }
        case let .record(event): record(event)
        case .exit:
            logger.info("every extension process is gone; exiting")
            loop.exit(0)
        }
    }

    func process(_ id: String, _ generation: UInt64) -> SupervisedProcess? {
        guard let p = processes[id], p.generation == generation else { return nil }
        return p
    }

    // MARK: - Processes

    func spawn(_ id: String, _ generation: UInt64, _ manifest: Manifest) {
        let spawned: SpawnedProcess
        do {
            spawned = try Spawner.spawn(manifest)
        } catch {
            post(.spawnFailed(extensionID: id, generation: generation, error: error.description))
            return
        }
        let p = SupervisedProcess(
            extensionID: id, generation: generation, pid: spawned.pid, pidfd: spawned.pidfd, channel: spawned.channel,
            queueLimit: Daemon.connectionQueueLimit)
        processes[id]?.tearDown()
        processes[id] = p
        registry.add(extensionID: id, pid: spawned.pid, processGroup: p.processGroup)
        do {
            // A pidfd becomes readable when the process exits: that wake-up cannot be lost.
            p.exitSource = try loop.addIO(fd: spawned.pidfd, events: Poll.input) { [unowned self, unowned p] _ in
                childMayHaveExited(p)
            }
            p.childSource = try loop.addChildStops(pidfd: fcntl(spawned.pidfd, F_DUPFD_CLOEXEC, 3)) { [unowned self, unowned p] code, status in
                childChanged(p, code: code, status: status)
            }
            if let channel = spawned.channel {
                p.channelSource = try loop.addIO(fd: channel.fd, events: Poll.input) { [unowned self, unowned p] events in
                    channelReadable(p, events: events)
                }
            }
        } catch {
            logger.error("cannot watch pid \(spawned.pid) of \(id): \(error); killing it")
            _ = shim_kill(-spawned.pid, SIGKILL)
        }
        post(.spawned(extensionID: id, generation: generation, pid: spawned.pid))
        if manifest.readiness == .exec { post(.ready(extensionID: id, generation: generation)) }
    }

    func childChanged(_ p: SupervisedProcess, code: Int32, status: Int32) {
        switch code {
        case Int32(CLD_STOPPED), Int32(CLD_TRAPPED):
            if p.stopPending {
                p.leaderStopReported = true
                queueStopVerification(p)
            } else if let state = core.records[p.extensionID]?.state, [.active, .background, .expiring].contains(state),
                      ProcessTable.stat(p.pid)?.isStopped == true {
                // Not a late report of our own stop: the process is stopped while it should run.
                logger.warning("pid \(p.pid) of \(p.extensionID) was stopped by someone other than extensiond")
            }
        case Int32(CLD_EXITED), Int32(CLD_KILLED), Int32(CLD_DUMPED):
            processExited(p, code: code, status: status, reap: false)  // sd-event reaps after this
        default:
            break
        }
    }

    /// The pidfd became readable: the process exited (this wake-up cannot be lost, unlike
    /// SIGCHLD). The child source is cancelled before reaping, so sd-event never waits for it.
    func childMayHaveExited(_ p: SupervisedProcess) {
        var code: Int32 = 0, status: Int32 = 0
        guard shim_waitid_pidfd(p.pidfd, WEXITED | WNOWAIT, &code, &status) == 1 else { return }
        processExited(p, code: code, status: status, reap: true)
    }

    /// While the exited leader is an unreaped zombie its group id cannot be reused, so
    /// whatever is left of the group is killed first (continued, so SIGKILL acts at once on
    /// stopped members); then the leader is reaped (here, or by sd-event), and the core told.
    func processExited(_ p: SupervisedProcess, code: Int32, status: Int32, reap: Bool) {
        guard processes[p.extensionID] === p else { return }
        _ = shim_kill(-p.processGroup, SIGKILL)
        _ = shim_kill(-p.processGroup, SIGCONT)
        p.childSource?.cancel()
        p.childSource = nil
        if reap {
            var c: Int32 = 0, s: Int32 = 0
            _ = shim_waitid_pidfd(p.pidfd, WEXITED, &c, &s)
        }
        registry.remove(pid: p.pid)
        p.tearDown()
        processes[p.extensionID] = nil
        let exit: ExitStatus = code == Int32(CLD_EXITED) ? .exited(status) : .signaled(status)
        post(.exited(extensionID: p.extensionID, generation: p.generation, status: exit))
    }

    /// How long after SIGSTOP the stop is verified from /proc even without a notification.
    static let stopCheckDelay = 0.02

    /// SIGSTOP to the whole group. Confirmation comes from CLD_STOPPED for the leader plus a
    /// /proc check of the other members; a fallback check from /proc alone runs shortly after,
    /// in case a notification was coalesced away.
    func requestStop(_ p: SupervisedProcess) {
        p.stopPending = true
        p.leaderStopReported = false
        p.lastMembers = []
        p.stopRequestedAt = loop.now()
        p.stopRetryDelay = Daemon.stopCheckDelay
        _ = shim_kill(-p.processGroup, SIGSTOP)
        scheduleStopCheck(p)
    }

    func scheduleStopCheck(_ p: SupervisedProcess) {
        let delay = p.stopRetryDelay
        p.stopRetryDelay = min(p.stopRetryDelay * 2, 0.1)
        p.stopRetry?.cancel()
        p.stopRetry = try? loop.addTimer(at: loop.now().adding(seconds: delay)) { [unowned self, unowned p] in queueStopVerification(p) }
    }

    /// Queues a stop verification. Verifications queued by a burst of events (a host
    /// dismissing many extensions at once) are done together, after the burst, with one scan
    /// of /proc and one read of /proc/locks.
    func queueStopVerification(_ p: SupervisedProcess) {
        pendingVerifications[ObjectIdentifier(p)] = p
        guard verificationPass == nil else { return }
        verificationPass = try? loop.addIdleOnce { [unowned self] in
            verificationPass = nil
            let batch = pendingVerifications.values.filter(\.stopPending)
            pendingVerifications.removeAll()
            let groups = ProcessTable.members(ofGroups: Set(batch.map(\.processGroup)))
            var locks: [FileLocks.Lock]?
            for p in batch {
                verifyStop(p, members: groups[p.processGroup] ?? []) { locks = locks ?? FileLocks.current(); return locks! }
            }
        }
    }

    /// Confirms the stop when every member of the group is stopped (every thread, unless the
    /// kernel reported the leader's group stop) and the membership did not change since the
    /// previous scan (a fork racing the stop is caught by the re-scan).
    func verifyStop(_ p: SupervisedProcess, members: [ProcessStat], locks: () -> [FileLocks.Lock]) {
        guard p.stopPending else { return }
        let ids = Set(members.map(\.pid))
        // A thread in uninterruptible sleep (D) cannot stop until it returns to user space,
        // where the pending stop takes it: it runs no user code meanwhile. The classic case is
        // a vfork parent whose child was stopped before it could exec: it never leaves D.
        // Such a member counts as stopped once two scans in a row found it so.
        var uninterruptible: Set<Int32> = []
        let allStopped = members.allSatisfy { m in
            if m.isStopped && m.pid == p.pid && p.leaderStopReported { return true }
            switch ProcessTable.threadsStopped(m.pid) {
            case .stopped: return true
            case .running: return false
            case .blockedInKernel:
                uninterruptible.insert(m.pid)
                return p.lastUninterruptible.contains(m.pid)
            }
        }
        p.lastUninterruptible = uninterruptible
        let settled = ids == [p.pid] || ids == p.lastMembers
        if allStopped && settled {
            p.stopPending = false
            p.stopRetry?.cancel()
            p.stopRetry = nil
            watchLocks(p, members: ids, locks: locks())
            post(.stopConfirmed(extensionID: p.extensionID, generation: p.generation))
            return
        }
        if !allStopped || ids != p.lastMembers { _ = shim_kill(-p.processGroup, SIGSTOP) }
        p.lastMembers = ids
        if let since = p.stopRequestedAt, loop.now().seconds(since: since) > 5 {
            logger.warning("group \(p.processGroup) of \(p.extensionID) has not stopped after 5s; still waiting")
            p.stopRequestedAt = nil
        }
        scheduleStopCheck(p)
    }

    /// SIGCONT to the whole group. The kernel wakes stopped tasks inside kill(2), so the
    /// leader's /proc state confirms the resume at once.
    func resume(_ p: SupervisedProcess) {
        p.stopLockWatch()
        p.stopPending = false
        p.stopRetry?.cancel()
        p.stopRetry = nil
        _ = shim_kill(-p.processGroup, SIGCONT)
        if let s = ProcessTable.stat(p.pid), s.isStopped {
            logger.warning("pid \(p.pid) of \(p.extensionID) still reports stopped after SIGCONT")
        }
        post(.continueConfirmed(extensionID: p.extensionID, generation: p.generation))
    }

    // MARK: - Locks held while suspended

    /// How often a suspended group that holds a file lock is checked for waiters. Groups that
    /// hold no lock when they stop are never checked: a stopped process cannot take one.
    static let lockCheckSeconds = 1.0

    func watchLocks(_ p: SupervisedProcess, members: Set<Int32>, locks: [FileLocks.Lock]) {
        p.stopLockWatch()
        let held = Set(locks.map(\.holder)).intersection(members)
        guard !held.isEmpty else { return }
        p.lockHolders = held
        armLockWatch(p)
    }

    func armLockWatch(_ p: SupervisedProcess) {
        p.lockWatch = try? loop.addTimer(at: loop.now().adding(seconds: Daemon.lockCheckSeconds)) { [unowned self, unowned p] in
            p.lockWatch = nil
            let contended = FileLocks.current().filter { p.lockHolders.contains($0.holder) && $0.waiters > 0 }
            guard let first = contended.first else { return armLockWatch(p) }
            let detail = "pid \(first.holder) holds a \(first.kind) lock on \(first.file) that \(first.waiters) process(es) wait for"
            p.lockHolders = []
            post(.lockContention(extensionID: p.extensionID, generation: p.generation, detail: detail))
        }
    }

    // MARK: - Runtime channel

    func channelReadable(_ p: SupervisedProcess, events: UInt32) {
        if events & Poll.output != 0, let channel = p.channel {
            if !p.outbound.flush(on: channel) { return cutOff(p, reason: "channel write failed") }
            if p.outbound.isEmpty { p.channelSource?.setIOEvents(Poll.input) }
        }
        guard events & Poll.input | Poll.hangup | Poll.error != 0 else { return }
        for _ in 0..<Daemon.readBudget {
            guard let channel = p.channel else { return }
            let result: PacketSocket.ReceiveResult
            do { result = try channel.receive(into: receiveBuffer) } catch { return cutOff(p, reason: "\(error)") }
            switch result {
            case .wouldBlock: return
            case .closed: return channelEnded(p)
            case .datagram(let count, let descriptor, let truncated):
                if let descriptor { close(descriptor) }  // extensions never send descriptors
                if truncated || descriptor != nil { return cutOff(p, reason: "sent an oversized message or a descriptor") }
                let message: Message
                do {
                    message = try WireDecoder.decode(UnsafeRawBufferPointer(rebasing: receiveBuffer[0..<count]))
                } catch {
                    return cutOff(p, reason: "malformed message: \(error)")
                }
                guard p.admission.admit(at: loop.now()) else {
                    return cutOff(p, reason: "flooding its channel (over \(MessageRate.perSecond) messages per second)")
                }
                let (id, g) = (p.extensionID, p.generation)
                switch message {
                case .ready: post(.ready(extensionID: id, generation: g))
                case .acquire(let tag, let reason): post(.acquire(extensionID: id, generation: g, tag: tag, reason: reason))
                case .release(let a): post(.release(extensionID: id, generation: g, assertionID: a))
                case .expireReceived(let a): post(.expireReceived(extensionID: id, generation: g, assertionID: a))
                default: return cutOff(p, reason: "sent \(message.kind), which extensions may not send")
                }
            }
        }
    }

    /// The runtime closed its channel. If the process does not exit within a short grace
    /// (it usually is exiting), it is ended: it can no longer receive requests.
    func channelEnded(_ p: SupervisedProcess) {
        p.closeChannel()
        p.channelGrace = try? loop.addTimer(at: loop.now().adding(seconds: Daemon.channelCloseGraceSeconds)) { [unowned self, unowned p] in
            p.channelGrace = nil
            post(.channelClosed(extensionID: p.extensionID, generation: p.generation, reason: "closed by the extension"))
        }
    }

    /// Ends the channel of a misbehaving extension, recording why.
    func cutOff(_ p: SupervisedProcess, reason: String) {
        logger.warning("cutting off runtime channel of \(p.extensionID) (pid \(p.pid)): \(reason)")
        p.closeChannel()
        post(.channelClosed(extensionID: p.extensionID, generation: p.generation, reason: reason))
    }

    func send(_ message: Message, to p: SupervisedProcess, descriptor: Int32? = nil, key: UInt64? = nil) -> Bool {
        guard let channel = p.channel else {
            if let descriptor { close(descriptor) }
            return false
        }
        do { try encoder.encode(message) } catch {
            if let descriptor { close(descriptor) }
            logger.error("cannot encode \(message.kind): \(error)")
            return false
        }
        switch p.outbound.send(encoder.bytes, descriptor: descriptor, key: key, on: channel) {
        case .sent: return true
        case .queued:
            p.channelSource?.setIOEvents(Poll.input | Poll.output)
            return true
        case .overflow:
            cutOff(p, reason: "does not read its channel (over \(Daemon.connectionQueueLimit) bytes queued)")
            return false
        }
    }

    @discardableResult
    func send(_ message: Message, to p: SupervisedProcess) -> Bool {
        send(message, to: p, descriptor: nil)
    }

    func openRequest(_ id: String, _ generation: UInt64, _ requestID: UInt64, _ host: HostID, _ tag: UInt32, _ pid: Int32, _ channel: Bool) {
        guard channel else {
            send(.begun(tag: tag, requestID: requestID, pid: pid, hasChannel: false), to: host)
            return
        }
        guard let p = process(id, generation) else { return }
        let hostEnd: Int32, extensionEnd: Int32
        do {
            (hostEnd, extensionEnd) = try PacketSocket.streamPair()
        } catch {
            post(.deliveryFailed(extensionID: id, generation: generation, requestID: requestID, error: error.description))
            return
        }
        guard send(.deliver(requestID: requestID), to: p, descriptor: extensionEnd, key: requestID) else {
            close(hostEnd)
            post(.deliveryFailed(extensionID: id, generation: generation, requestID: requestID, error: "the runtime channel is closed"))
            return
        }
        send(.begun(tag: tag, requestID: requestID, pid: pid, hasChannel: true), to: host, descriptor: hostEnd)
    }

    // MARK: - Lifecycle records

    func record(_ e: LifecycleEvent) {
        var metadata: Logger.Metadata = [
            "EXTENSION_ID": "\(e.extensionID)", "LIFECYCLE_STATE": "\(e.state.rawValue)", "EVENT": "\(e.kind.rawValue)",
        ]
        if let pid = e.pid { metadata["EXTENSION_PID"] = "\(pid)" }
        if let a = e.assertionID { metadata["ASSERTION_ID"] = "\(a)" }
        if let r = e.requestID { metadata["REQUEST_ID"] = "\(r)" }
        if let d = e.detail {
            metadata[e.assertionID != nil ? "ASSERTION_REASON" : "DETAIL"] = "\(d)"
        }
        let level: Logger.Level
        switch e.kind {
        case .crash, .launchFailed, .launchTimeout, .overrun, .expiryUnacknowledged: level = .warning
        case .refuse, .throttle, .deny, .kill: level = .notice
        default: level = .info
        }
        logger.log(level: level, "\(e.extensionID): \(e.kind.rawValue)", metadata: metadata)
        let monitors = connections.values.filter(\.isMonitor)
        guard !monitors.isEmpty else { return }
        let json = StatusDocument.encode(StatusDocument.event(e, StatusDocument.Clock(monotonicNow: loop.now())))
        for c in monitors { send(.event(json: json), to: c.id) }
    }

    // MARK: - Reload

    /// Re-reads the manifests (SIGHUP or `extctl reload`). Running extensions are not disturbed.
    /// A manifest file that no longer parses keeps its previous definition, so a typo in an
    /// edited file does not end the running extension it describes.
    func reload() -> (loaded: Int, errors: [ManifestError]) {
        logger.info("reloading manifests")
        serviceManager.reloading()
        var (manifests, errors) = Daemon.loader(options, config).load()
        for e in errors { logger.error("manifest refused: \(e)") }
        let broken = Set(errors.map(\.file))
        let defined = Set(manifests.map(\.id))
        for r in core.records.values.sorted(by: { $0.manifest.id < $1.manifest.id })
        where broken.contains(r.manifest.source) && !defined.contains(r.manifest.id) {
            logger.warning("keeping the previous definition of \(r.manifest.id) until \(r.manifest.source) is fixed")
            manifests.append(r.manifest)
        }
        post(.reload(manifests: manifests, errors: errors, host: nil, tag: 0))
        logger.info("reloaded: \(manifests.count) extension(s), \(errors.count) manifest error(s)")
        serviceManager.ready(status: statusLine())
        return (manifests.count, errors)
    }
}

/// epoll event bits (Glibc does not export the EPOLL* constants to Swift).
enum Poll {
    static let input: UInt32 = 0x001
    static let output: UInt32 = 0x004
    static let error: UInt32 = 0x008
    static let hangup: UInt32 = 0x010
}

/// A startup failure with a message for the administrator.
public struct DaemonError: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}
