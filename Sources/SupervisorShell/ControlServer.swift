import ExtensionProtocol
import ExtensionStatus
import ExtensionTransport
import Logging
import SupervisorCore
import SupervisorKernel

/// What the control server asks of its owner.
protocol ControlServerDelegate: AnyObject {
    /// Why a new peer may not connect, if it may not.
    func admissionProblem(_ identity: PeerIdentity) -> String?
    /// Whether any app manifest is loaded (else no process is an app's, and nothing is read).
    var declaresApps: Bool { get }
    /// Whether an app manifest declares the app `id`.
    func isDeclaredApp(_ id: String) -> Bool
    /// The declared app whose processes run as `uid` (a root daemon's apps have uids of their
    /// own), or nil.
    func app(ofUID uid: UInt32) -> String?
    /// A message from `connection`, in order.
    func handle(_ message: Message, from connection: ControlConnection)
    /// `host` is gone: its requests end as if it had dismissed them.
    func hostGone(_ host: HostID)
}

/// The control socket: the listener, every accepted connection (hosts, `extctl`, monitors),
/// and the batching of what is written to them. It reads and decodes requests and hands each
/// to its delegate; it never blocks on a peer: every socket is non-blocking with a bounded
/// outbound queue, and a peer that does not read is cut off. Owned by the daemon's loop.
final class ControlServer {
    let kernel: any Kernel
    let logger: Logger
    private let listener: PacketSocket
    /// The socket file this daemon created, removed at `stop`; nil for a socket the service
    /// manager passed in (it is the service manager's).
    private let ownedPath: String?
    /// Where the socket is.
    let path: String
    private var listenerWatch: (any Watch)?
    private var connections: [HostID: ControlConnection] = [:]
    private var nextHostID: HostID = 1
    /// Nesting of `inBatch`: while above 0, messages to held connections wait.
    private var batchDepth = 0
    /// The events of the current loop iteration, until they are sent to the monitors.
    private var monitorFeed = MonitorFeed()
    private let buffers: WireBuffers
    /// Who handles the messages: the daemon, which owns this server and so outlives it.
    /// `unowned`, not `weak`: a weak reference gives its object a side table, and every
    /// retain and release of that object then takes the slow path.
    private(set) unowned var delegate: (any ControlServerDelegate)?

    /// Hands the messages to `delegate` from now on (set once the daemon is made).
    func attach(_ delegate: any ControlServerDelegate) { self.delegate = delegate }

    /// Bytes an unread peer may have queued before it is cut off.
    static let queueLimit = 1 << 20
    /// Descriptors a host's unread replies may hold (each `begun` carries one): one per request
    /// it may hold (`maxRequestsPerHost`), and at least `OutboundQueue.defaultDescriptorLimit`.
    /// A host that pipelines its begins within its limit is then never cut off for reading
    /// their answers late; past it, it is a host that does not read.
    let descriptorLimit: Int

    /// `descriptorLimit` under `limits`.
    static func descriptorLimit(_ limits: SupervisorLimits) -> Int {
        max(OutboundQueue.defaultDescriptorLimit, limits.maxRequestsPerHost)
    }
    /// Datagrams read from one socket per wake-up, so one busy peer cannot starve the others.
    static let readBudget = 64
    /// Most connections accepted per wake-up.
    static let acceptBudget = 64

    /// A server on the socket the service manager passed (`options.inheritedListener`), or
    /// on a socket it creates at `options.socketPath` (mode 0660, `options.socketGroup`).
    init(options: DaemonOptions, limits: SupervisorLimits, buffers: WireBuffers, kernel: any Kernel, logger: Logger) throws {
        path = options.socketPath
        descriptorLimit = Self.descriptorLimit(limits)
        if let fd = options.inheritedListener {
            listener = PacketSocket(fd: fd)
            ownedPath = nil
            try listener.setNonBlocking()
        } else {
            listener = try ControlServer.listen(options, kernel: kernel, logger: logger)
            ownedPath = options.socketPath
        }
        self.buffers = buffers
        self.kernel = kernel
        self.logger = logger
    }

    /// The server a previous daemon handed over: its listening socket and every connection,
    /// with the host ids they had.
    init(restoring document: HandoverDocument, socketPath: String, limits: SupervisorLimits, buffers: WireBuffers, kernel: any Kernel, logger: Logger) {
        descriptorLimit = Self.descriptorLimit(limits)
        listener = PacketSocket(fd: document.listener)
        ownedPath = document.ownedSocketPath
        path = socketPath
        self.buffers = buffers
        self.kernel = kernel
        self.logger = logger
        nextHostID = document.nextHostID
        for c in document.connections {
            let connection = ControlConnection(
                id: c.host, socket: PacketSocket(fd: c.fd), identity: PeerIdentity(pid: c.pid, uid: c.uid, gid: c.gid, groups: c.groups, app: c.app),
                queueLimit: ControlServer.queueLimit, descriptorLimit: descriptorLimit)
            if c.isMonitor { connection.startMonitoring() }
            connections[c.host] = connection
        }
    }

    /// What crosses a hand-over: the listening socket, every connection, the next host id.
    func handover() -> (listener: Int32, ownedPath: String?, nextHostID: HostID, connections: [HandoverDocument.Connection]) {
        let list = connections.values.filter { !$0.isAdopted }.sorted { $0.id < $1.id }.map { c in
            HandoverDocument.Connection(
                host: c.id, fd: c.endpoint.socket.fd, pid: c.identity.pid, uid: c.identity.uid, gid: c.identity.gid, groups: c.identity.groups,
                isMonitor: c.isMonitor, app: c.identity.app)
        }
        return (listener.fd, ownedPath, nextHostID, list)
    }

    /// Whether a connection has messages its socket did not take yet, monitor events wait to
    /// be sent or are being sent (a monitor dropped during the send dispatches, and so looks at
    /// this, before the others have theirs), or a batch is open.
    var isBusy: Bool {
        batchDepth > 0 || !monitorFeed.isEmpty || monitorFeed.isInProgress || hasLaggards
    }

    /// Starts accepting connections, and reading those there already are (handed over).
    func start() throws(SystemError) {
        listenerWatch = try kernel.watch(fd: listener.fd, events: Poll.input) { [unowned self] _ in acceptConnections() }.get()
        for c in connections.values {
            if let error = c.endpoint.watch(through: kernel, { [unowned self, unowned c] events in connectionEvent(c, events: events) }) {
                logger.error("cannot watch the control connection of pid \(c.identity.pid): \(error)")
                drop(c, reason: "cannot be watched: \(error)")
            }
        }
        if ownedPath == nil {
            logger.info("listening on inherited socket \(path) (fd \(listener.fd), passed by the service manager)")
        } else {
            logger.info("listening on \(path)")
        }
    }

    /// Closes every connection and stops accepting; the listening socket and its file go
    /// too, unless the service manager passed it in.
    func stop() {
        for c in connections.values { c.close() }
        connections.removeAll()
        listenerWatch?.cancel()
        listenerWatch = nil
        guard let ownedPath else { return }
        listener.close()
        if let e = kernel.removeFile(ownedPath), !e.isNoEntry { logger.warning("cannot remove \(ownedPath): \(e)") }
    }

    /// Creates the listening socket at `options.socketPath`, mode 0660, given to
    /// `options.socketGroup` when there is one (as is its directory when created here).
    private static func listen(_ options: DaemonOptions, kernel: any Kernel, logger: Logger) throws -> PacketSocket {
        let path = options.socketPath
        var groupID: UInt32?
        if let group = options.socketGroup {
            guard let gid = UInt32(group) ?? kernel.accounts.groupNamed(group) else { throw DaemonError("--socket-group \(group): no such group") }
            groupID = gid
        }
        try prepareSocketDirectory(path, group: groupID, kernel: kernel, logger: logger)
        let listener = try PacketSocket.listen(path: path)
        func fail(_ message: String) -> DaemonError {
            listener.close()
            guard let e = kernel.removeFile(path), !e.isNoEntry else { return DaemonError(message) }
            return DaemonError("\(message) (and \(path) could not be removed: \(e))")
        }
        if let e = kernel.changeMode(path, 0o660) { throw fail("cannot set the mode of \(path): \(e)") }
        if let group = options.socketGroup, let gid = groupID, let e = kernel.changeOwner(path, user: UInt32.max, group: gid) {
            throw fail("cannot give \(path) to group \(group) (--socket-group): \(e)")
        }
        return listener
    }

    /// Creates the socket's directory with mode 0750 if absent, given to `group` when there is
    /// one (so that its members can reach the socket); refuses a directory others can write.
    /// Warns when an existing directory keeps `group` from reaching the socket.
    static func prepareSocketDirectory(_ socketPath: String, group: UInt32? = nil, kernel: any Kernel, logger: Logger) throws {
        guard let slash = socketPath.lastIndex(of: "/"), slash != socketPath.startIndex else { return }
        let dir = String(socketPath[..<slash])
        let made = kernel.makeDirectory(dir, mode: 0o750)
        if let e = made, !e.isAlreadyExisting {
            throw DaemonError("cannot create socket directory \(dir): \(e)")
        }
        if made == nil, let group, let e = kernel.changeOwner(dir, user: UInt32.max, group: group) {
            throw DaemonError("cannot give socket directory \(dir) to group \(group) (--socket-group): \(e)")
        }
        guard case .success(let st) = kernel.status(dir, followLinks: false), st.kind == .directory else {
            throw DaemonError("socket directory \(dir) is not a directory")
        }
        if st.isWorldWritable && !st.isSticky {
            throw DaemonError("socket directory \(dir) is world-writable; refusing to use it")
        }
        if let group, st.permissions & 0o001 == 0, st.group != group || st.permissions & 0o010 == 0 {
            logger.warning(
                "socket directory \(dir) (mode \(String(st.permissions & 0o7777, radix: 8)), group \(st.group)) cannot be searched by group \(group): its members cannot reach the socket (--socket-group)"
            )
        }
    }

    /// The connection of `host`, if it is still open.
    func connection(_ host: HostID) -> ControlConnection? { connections[host] }

    /// The connections that asked for lifecycle events.
    var monitors: some Sequence<ControlConnection> { connections.values.lazy.filter(\.isMonitor) }

    /// The hosts with an open connection.
    var hosts: Set<HostID> { Set(connections.keys) }

    /// How many open connections `uid` has.
    func connectionCount(uid: UInt32) -> Int { connections.values.lazy.filter { $0.identity.uid == uid }.count }

    // MARK: - Accepting and reading

    private func acceptConnections() {
        for _ in 0..<ControlServer.acceptBudget {
            let socket: PacketSocket?
            do { socket = try listener.accept() } catch {
                logger.error("accept failed: \(error)")
                return
            }
            guard let socket else { return }
            let cred: (pid: Int32, uid: UInt32, gid: UInt32)
            do { cred = try socket.peerCredentials() } catch {
                logger.warning("refused a control connection whose credentials cannot be read (SO_PEERCRED): \(error)")
                socket.close()
                continue
            }
            let id = nextHostID
            nextHostID += 1
            let identity = identity(pid: cred.pid, uid: cred.uid, gid: cred.gid, groups: supplementaryGroups(of: cred.pid))
            if let refusal = delegate?.admissionProblem(identity) {
                logger.notice("refused control connection from pid \(identity.pid) uid \(identity.uid): \(refusal)")
                refuse(socket, .failure(tag: 0, code: .notPermitted, text: refusal), pid: identity.pid)
                socket.close()
                continue
            }
            let c = ControlConnection(id: id, socket: socket, identity: identity, queueLimit: ControlServer.queueLimit, descriptorLimit: descriptorLimit)
            if let error = c.endpoint.watch(through: kernel, { [unowned self, unowned c] events in connectionEvent(c, events: events) }) {
                logger.error("cannot watch the control connection of pid \(identity.pid): \(error)")
                c.close()
                continue
            }
            connections[id] = c
        }
    }

    /// Who a peer is: its ids, and the declared app it belongs to (by its uid, else its scope).
    private func identity(pid: Int32, uid: UInt32, gid: UInt32, groups: [UInt32]) -> PeerIdentity {
        PeerIdentity(pid: pid, uid: uid, gid: gid, groups: groups, app: delegate?.app(ofUID: uid) ?? declaredApp(of: pid))
    }

    /// Takes `socket` (one end of a socket pair the daemon made) as a connection of a peer whose
    /// credentials another party vouches for: the D-Bus front end, for a bus caller
    /// (docs/dbus.md). The same admission rules as an accepted connection apply. Such a
    /// connection is never handed over at a re-exec: its other end lives in this process.
    /// Returns its host id, or why it was refused (`socket` is then closed).
    func adopt(_ socket: PacketSocket, pid: Int32, uid: UInt32, gid: UInt32, groups: [UInt32]) -> Result<HostID, DaemonError> {
        let identity = identity(pid: pid, uid: uid, gid: gid, groups: groups)
        if let refusal = delegate?.admissionProblem(identity) {
            logger.notice("refused bus caller pid \(pid) uid \(uid): \(refusal)")
            socket.close()
            return .failure(DaemonError(refusal))
        }
        let id = nextHostID
        nextHostID += 1
        let c = ControlConnection(
            id: id, socket: socket, identity: identity, queueLimit: ControlServer.queueLimit, descriptorLimit: descriptorLimit, isAdopted: true)
        if let error = c.endpoint.watch(through: kernel, { [unowned self, unowned c] events in connectionEvent(c, events: events) }) {
            c.close()
            return .failure(DaemonError("cannot watch the connection: \(error)"))
        }
        connections[id] = c
        return .success(id)
    }

    /// Drops every adopted connection (before a re-exec: their other ends do not cross it), so
    /// that their requests end now, as if their hosts had dismissed them.
    func dropAdopted(reason: String) {
        for c in connections.values.filter(\.isAdopted).sorted(by: { $0.id < $1.id }) { drop(c, reason: reason) }
    }

    /// The declared app whose systemd scope or service process `pid` is in (`AppProcessIdentity`),
    /// from /proc/PID/cgroup, or nil.
    private func declaredApp(of pid: Int32) -> String? {
        guard delegate?.declaresApps == true, case .success(let cgroup) = kernel.read("/proc/\(pid)/cgroup"), let id = AppProcessIdentity.desktopApp(cgroup),
            delegate?.isDeclaredApp(id) == true
        else { return nil }
        return id
    }

    /// The supplementary groups of a process, from /proc/PID/status.
    private func supplementaryGroups(of pid: Int32) -> [UInt32] {
        guard case .success(let data) = kernel.read("/proc/\(pid)/status") else { return [] }
        let text = String(decoding: data, as: UTF8.self)
        guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix("Groups:") }) else { return [] }
        // "Groups:\t10 27 " (a tab, then numbers each followed by a space).
        return line.dropFirst(7).split(whereSeparator: { $0 == " " || $0 == "\t" }).compactMap { UInt32($0) }
    }

    private func connectionEvent(_ c: ControlConnection, events: UInt32) {
        if let e = c.endpoint.flush(events) { return drop(c, reason: "write failed: \(e)") }
        guard events & (Poll.input | Poll.hangup | Poll.error) != 0 else { return }
        var end: Peer.ReadEnd?
        var read = 0
        inBatch {
            end = c.endpoint.read(into: buffers.receive, budget: ControlServer.readBudget) { message in
                // A lone request is answered at once; from the second message of a burst on,
                // the answers are written together when the burst has been handled.
                read += 1
                if read == 2 { hold(c) }
                delegate?.handle(message, from: c)
                return connections[c.id] === c
            }
        }
        switch end {
        case nil: return
        case .closed: drop(c, reason: nil)
        case .failed(let reason): drop(c, reason: reason)
        case .violation(let problem): protocolViolation(c, problem)
        }
    }

    /// Answers a malformed or refused message with a failure, then closes the connection.
    func protocolViolation(_ c: ControlConnection, _ problem: String) {
        logger.notice("closing control connection of pid \(c.identity.pid) uid \(c.identity.uid): \(problem)")
        // The answers held for the messages before the bad one go first.
        if c.endpoint.isHeld, let e = c.endpoint.release() {
            logger.notice("control connection of pid \(c.identity.pid): the answers held before the bad message were not written: \(e)")
        }
        refuse(c.endpoint.socket, .failure(tag: 0, code: .badRequest, text: "protocol error: \(problem)"), pid: c.identity.pid)
        drop(c, reason: problem)
    }

    /// Sends the failure a connection gets just before it is closed, if its socket takes it
    /// now (it is closed either way).
    private func refuse(_ socket: PacketSocket, _ failure: Message, pid: Int32) {
        do {
            if try socket.send(try WireEncoder.encoded(failure)) == .wouldBlock {
                logger.debug("pid \(pid) was not told why its connection closed: its socket is full")
            }
        } catch {
            logger.debug("pid \(pid) was not told why its connection closed: \(error)")
        }
    }

    /// Closes a connection (logging why, when it did not simply hang up); its requests end
    /// exactly as if the host had dismissed them.
    func drop(_ c: ControlConnection, reason: String?) {
        guard connections[c.id] === c else { return }
        connections[c.id] = nil
        if let reason { logger.info("control connection of pid \(c.identity.pid) uid \(c.identity.uid) closed: \(reason)") }
        c.close()
        delegate?.hostGone(c.id)
    }

    /// Cuts off every connection whose messages wait in the daemon because its socket is full
    /// (a host or monitor that does not read), saying why: what a re-exec does at the end of its
    /// wait, so that no client can hold the daemon's replacement off.
    func cutOffLaggards(_ why: String) {
        for c in connections.values.filter({ $0.endpoint.hasUnsent }).sorted(by: { $0.id < $1.id }) {
            logger.notice("cutting off control connection of pid \(c.identity.pid) uid \(c.identity.uid): \(why)")
            drop(c, reason: why)
        }
    }

    /// Whether a connection has messages waiting in the daemon because its socket is full.
    var hasLaggards: Bool { connections.values.contains { $0.endpoint.hasUnsent } }

    // MARK: - Writing

    /// Sends `message` (with `descriptor`, which is always consumed) to `host`, if connected.
    /// A host that does not read its replies, or whose socket fails, is cut off.
    func send(_ message: Message, to host: HostID, descriptor: Int32? = nil) {
        guard let c = connections[host] else {
            if let descriptor { PacketSocket.closeReceived(descriptor) }
            return
        }
        switch buffers.send(message, on: c.endpoint, descriptor: descriptor) {
        case .accepted, .closed: break
        case .unencodable(let problem): logger.error("\(problem)")
        case .overflow:
            logger.notice("cutting off control connection of pid \(c.identity.pid): it does not read its replies")
            drop(c, reason: "outbound queue overflow")
        case .failed(let e):
            drop(c, reason: "write failed: \(e)")
        }
    }

    /// Most extensions in one `discovered` message: each entry is at most three 255-byte
    /// strings, so a part stays well under `WireLimits.maxMessageSize`.
    static let discoveredPerMessage = 64

    /// Sends a discovery answer in parts of at most `discoveredPerMessage` extensions.
    func sendDiscovered(_ found: [DiscoveredExtension], tag: UInt32, to host: HostID) {
        var offset = 0
        repeat {
            let end = min(offset + ControlServer.discoveredPerMessage, found.count)
            send(.discovered(tag: tag, final: end == found.count, extensions: Array(found[offset..<end])), to: host)
            offset = end
        } while offset < found.count
    }

    /// Sends a JSON document in chunks of at most `WireLimits.maxChunk` bytes.
    func sendJSON(_ document: some JSONDocument, tag: UInt32, to host: HostID) {
        let bytes = document.jsonBytes(capacity: 1024)
        var offset = 0
        repeat {
            let end = min(offset + WireLimits.maxChunk, bytes.count)
            send(.json(tag: tag, final: end == bytes.count, chunk: Array(bytes[offset..<end])), to: host)
            offset = end
        } while offset < bytes.count
    }

    // MARK: - Batches

    /// Runs `body` as one batch: the events it records go to the monitors, and messages to the
    /// connections held during it (a host sending a burst) are written, when the outermost batch
    /// ends.
    func inBatch(_ body: () -> Void) {
        batchDepth += 1
        body()
        batchDepth -= 1
        guard batchDepth == 0 else { return }
        sendMonitorEvents()
        for c in connections.values where c.endpoint.isHeld {
            if let e = c.endpoint.release() { drop(c, reason: "write failed: \(e)") }
        }
    }

    // MARK: - Monitors

    /// Holds `e` for the monitors, if any is connected, until the loop iteration's work ends
    /// (`dispatchEnded`, or the end of the batch).
    func publish(_ e: LifecycleEvent) {
        if connections.values.contains(where: \.isMonitor) { monitorFeed.append(e) }
    }

    /// The core has handled an event and performed its effects: outside a batch, that ends the
    /// loop iteration's work, and its events go to the monitors now.
    func dispatchEnded() {
        if batchDepth == 0 { sendMonitorEvents() }
    }

    /// Sends the events recorded since the last call to every monitor, in one `events` datagram
    /// each unless they exceed one (`MonitorFeed`): once per loop iteration.
    private func sendMonitorEvents() {
        guard monitorFeed.beginSending() else { return }
        repeat {
            let messages = monitorFeed.take(StatusDocument.Clock(monotonicNow: kernel.now(), wallClock: kernel.wallClock()))
            for c in Array(monitors) {
                for m in messages { send(m, to: c.id) }
            }
        } while !monitorFeed.isEmpty
        monitorFeed.endSending()
    }

    /// Holds the messages to `c` until the current batch ends.
    private func hold(_ c: ControlConnection) {
        guard batchDepth > 0, !c.endpoint.isHeld else { return }
        c.endpoint.hold()
    }
}
