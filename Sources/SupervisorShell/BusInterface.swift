import ExtensionProtocol
import ExtensionStatus
import ExtensionTransport
import Logging
import SupervisorCore
import SupervisorKernel

/// What the D-Bus front end reads from the daemon directly (lists and properties: no message
/// round trip, no access rule beyond the control socket's, which lets anyone list).
protocol BusInterfaceDelegate: AnyObject {
    /// Every extension and app, as `extctl list --json` has them.
    func busList() -> ListDocument
    /// One extension's status, as `extctl status --json ID` has it; nil when it is unknown.
    func busStatus(_ id: String) -> StatusReport.Extension?
    /// Whether extension `id` is loaded.
    func busHasExtension(_ id: String) -> Bool
    /// The loaded extensions' ids.
    func busExtensionIDs() -> [String]
    /// When extension `id` last changed state (docs/json.md `since`), and its open requests and
    /// held assertions.
    func busSummary(_ id: String) -> (since: String, requests: Int, assertions: Int)?
    /// Whether `peer` is an administrator (root, the daemon's uid, the admin group).
    func isAdministrator(_ peer: PeerIdentity) -> Bool
}

/// The daemon's D-Bus interface (docs/dbus.md): the name `org.extensiond1` on the system bus
/// (a root daemon) or the session bus, its manager, extension and request objects. Each bus
/// connection that calls becomes a `BusClient`: a control connection of its own inside the
/// daemon. Owned by the daemon's loop.
final class BusInterface: BusServiceHandler {
    /// A request begun over the bus: whose it is.
    struct Request {
        var owner: String
        var extensionID: String
        var pid: Int32
    }

    static let errorPrefix = "org.extensiond1.Error."
    static let requestPrefix = "/org/extensiond1/request/"

    let kernel: any Kernel
    let logger: Logger
    let systemBus: Bool
    /// Whether a bus that is not there at all is waited for (`--bus=system` or `session`).
    let waitsForAbsentBus: Bool
    let version: String
    private unowned let server: ControlServer
    private unowned let delegate: any BusInterfaceDelegate
    private var service: BusService?
    private var clients: [String: BusClient] = [:]
    private var requests: [UInt64: Request] = [:]
    /// The timer that connects again after the bus was lost, and the wait before the next try
    /// (seconds).
    private var reconnect: (any Cancellable)?
    private var reconnectDelay = BusInterface.firstReconnectDelay
    /// The first wait before connecting again after the bus was lost; it doubles up to
    /// `lastReconnectDelay` while the bus cannot be reached.
    static let firstReconnectDelay = 1.0
    static let lastReconnectDelay = 60.0
    /// Whose question goes to polkit next, across callers.
    private var polkitTurns = PolkitTurns<String>(limit: BusInterface.polkitLimit, perUser: BusInterface.polkitPerUser)
    /// Questions to polkit in flight at once, at most: well under dbus-daemon's default cap of
    /// replies one connection may wait for (`max_replies_per_connection`, 128 on the system bus).
    static let polkitLimit = 32
    /// Questions in flight at once for the callers of one uid, at most.
    static let polkitPerUser = 4
    /// How the last re-exec ended, for the `Reexecuted` signal: sent once on the bus.
    private var reexecOutcome: (succeeded: Bool, previousVersion: String, detail: String)?
    /// Set while `stop` closes the callers: no question is asked meanwhile.
    private var stopping = false
    private let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: WireLimits.maxMessageSize, alignment: 8)

    init(
        systemBus: Bool, waitsForAbsentBus: Bool, version: String, server: ControlServer, delegate: any BusInterfaceDelegate, kernel: any Kernel, logger: Logger
    ) {
        self.systemBus = systemBus
        self.waitsForAbsentBus = waitsForAbsentBus
        self.version = version
        self.server = server
        self.delegate = delegate
        self.kernel = kernel
        self.logger = logger
    }

    deinit { buffer.deallocate() }

    /// Connects and takes the name; logs why not when it cannot, and the daemon goes on without
    /// D-Bus. A failed try is tried again after 1, 2, 4 … 60 s (the bus is restarting, the name
    /// is still another's), except, when `waitsForAbsentBus` is false (`--bus=auto`), for a bus
    /// that is not there at all (no socket, no address): that machine has none. Returns whether
    /// it is on the bus.
    @discardableResult
    func start() -> Bool {
        let bus = systemBus ? "system" : "session"
        switch kernel.openBus(system: systemBus, handler: self) {
        case .success(let s):
            service = s
            reconnectDelay = Self.firstReconnectDelay
            logger.info("on the \(bus) bus as org.extensiond1")
            announceReexecOutcome()
            return true
        case .failure(let e):
            let retry = waitsForAbsentBus || !e.isAbsent
            let later = retry ? "; trying again in \(Self.seconds(reconnectDelay))" : ""
            if e.isAlreadyExisting {
                logger.warning("not on the \(bus) bus: \(e.operation) (is another extensiond running?)\(later)")
            } else {
                logger.info("not on the \(bus) bus: \(e.operation.isEmpty ? "\(e)" : e.operation)\(later)")
            }
            if retry { scheduleReconnect() }
            return false
        }
    }

    /// `2 s`.
    private static func seconds(_ s: Double) -> String { "\(Int(s)) s" }

    /// Closes every bus caller's client and the connection (the name is released, the reply
    /// waited for): at exit and when the bus was lost, their control connections close too, so
    /// their requests end as if dismissed. Before a re-exec (`reexecuting`) those connections
    /// are left as they are: the snapshot has been written, this program does nothing more to
    /// their requests, and the new program ends them at its start (their hosts did not cross);
    /// a waiting `Reexec` is answered. Nothing connects again after this but `start`.
    func stop(_ why: String, reexecuting: Bool = false) {
        reconnect?.cancel()
        reconnect = nil
        stopping = true
        defer { stopping = false }
        for c in clients.values { close(c, why, reexecuting: reexecuting) }
        clients.removeAll()
        polkitTurns = PolkitTurns(limit: Self.polkitLimit, perUser: Self.polkitPerUser)
        requests.removeAll()
        if !reexecuting { server.dropAdopted(reason: why) }
        service?.close()
        service = nil
    }

    /// Tries `start` after `reconnectDelay`, doubling the wait up to `lastReconnectDelay` each
    /// time it is scheduled (`start` resets it once on the bus, and schedules the next try when
    /// it fails).
    private func scheduleReconnect() {
        guard reconnect == nil else { return }
        let delay = reconnectDelay
        reconnectDelay = min(reconnectDelay * 2, Self.lastReconnectDelay)
        let timer = kernel.addTimer(at: kernel.now().adding(seconds: delay)) { [unowned self] in
            reconnect = nil
            start()
        }
        switch timer {
        case .success(let t): reconnect = t
        case .failure(let e): logger.warning("cannot connect to the bus again later: \(e)")
        }
    }

    /// A re-exec ended: `succeeded` in the new program (`previousVersion` the replaced one's), or
    /// not, in the old one going on (`detail` why). The `Reexecuted` signal says so once this
    /// program is on the bus: a `Reexec` caller, answered when the re-exec began, learns here
    /// how it ended.
    func reexecEnded(succeeded: Bool, previousVersion: String, detail: String) {
        reexecOutcome = (succeeded, previousVersion, detail)
        if service != nil { announceReexecOutcome() }
    }

    private func announceReexecOutcome() {
        guard let service, let o = reexecOutcome else { return }
        reexecOutcome = nil
        if let e = service.reexecuted(succeeded: o.succeeded, version: version, previousVersion: o.previousVersion, detail: o.detail) {
            logger.notice("cannot emit Reexecuted: \(e)")
        }
    }

    // MARK: - Lifecycle events

    /// PropertiesChanged on the extension of `e`, carrying the event (docs/dbus.md).
    func publish(_ e: LifecycleEvent) {
        guard let service, let summary = delegate.busSummary(e.extensionID) else { return }
        if let error = service.extensionChanged(
            e.extensionID, state: e.state.rawValue, pid: UInt32(max(0, e.pid ?? 0)), since: summary.since,
            requests: UInt32(summary.requests), assertions: UInt32(summary.assertions), event: e.kind.rawValue,
            detail: e.detail.map(UntrustedText.escaped) ?? "")
        {
            logger.debug("cannot emit PropertiesChanged: \(error)")
        }
    }

    // MARK: - BusServiceHandler

    func busObjectExists(_ object: BusObject, key: String) -> Bool {
        switch object {
        case .manager: true
        case .extensionObject: delegate.busHasExtension(key)
        case .request: UInt64(key).map { requests[$0] != nil } ?? false
        }
    }

    func busChildren(_ object: BusObject) -> [String] {
        switch object {
        case .manager: []
        case .extensionObject: delegate.busExtensionIDs()
        case .request: requests.keys.sorted().map(String.init)
        }
    }

    func busProperty(_ object: BusObject, key: String, property: String, into w: BusWriter) -> Bool {
        switch object {
        case .manager:
            switch property {
            case "Version": return w.string(version)
            case "Bus": return w.string(systemBus ? "system" : "session")
            default: return false
            }
        case .request:
            guard let id = UInt64(key), let r = requests[id] else { return false }
            switch property {
            case "ExtensionId": return w.string(r.extensionID)
            case "Pid": return w.uint32(UInt32(max(0, r.pid)))
            default: return false
            }
        case .extensionObject:
            guard let s = delegate.busStatus(key) else { return false }
            switch property {
            case "Id": return w.string(s.id)
            case "Point": return w.string(s.point)
            case "App": return w.string(s.app ?? "")
            case "State": return w.string(s.state)
            case "Pid": return w.uint32(UInt32(max(0, s.pid ?? 0)))
            case "Since": return w.string(s.since)
            case "Requests": return w.uint32(UInt32(s.requests))
            case "Assertions": return w.uint32(UInt32(s.assertions.count))
            case "Sandbox": return w.string(s.sandbox?.summary ?? "")
            case "Container": return w.string(s.container ?? "")
            case "Limits":
                guard w.open("a", "{st}") else { return false }
                for (name, limit) in s.limits.sorted(by: { $0.key < $1.key }) {
                    guard w.open("e", "st"), w.string(name), w.uint64(limit.value), w.close() else { return false }
                }
                return w.close()
            case "LastEvent": return w.string(s.recentEvents.last?.event ?? "")
            case "LastEventDetail": return w.string(s.recentEvents.last?.detail.map(UntrustedText.escaped) ?? "")
            default: return false
            }
        }
    }

    func busNameGone(_ name: String, why: String?) {
        guard let c = clients[name] else { return service?.unwatch(name) ?? () }
        if let why { logger.notice("closing bus caller \(name): \(why)") }
        close(c, why ?? "the caller left the bus")
    }

    func busLost() {
        // Called by sd-bus while it dispatches on the connection: the service is closed from
        // the next loop iteration, not inside its own callback.
        guard service != nil, reconnect == nil else { return }
        logger.warning("lost the connection to the \(systemBus ? "system" : "session") bus; connecting again")
        let later = kernel.addTimer(at: kernel.now()) { [unowned self] in
            reconnect = nil
            stop("the daemon lost the bus")
            scheduleReconnect()
        }
        if case .success(let t) = later { reconnect = t }
    }

    func busCall(_ call: BusCall, object: BusObject, key: String, member: String, sender: String) {
        // Every caller is admitted as a control connection is, whatever it calls (an extension
        // without hostAccess is refused even a list).
        guard let client = client(for: sender, call) else { return }
        switch (object, member) {
        case (.manager, "ListExtensions"): listExtensions(call)
        case (.manager, "ListApps"): listApps(call)
        case (.manager, "GetExtension"):
            guard let id = call.readString() else { return invalid(call, "GetExtension takes an extension id (s)") }
            guard delegate.busHasExtension(id) else { return call.reply(error: Self.errorPrefix + "UnknownExtension", "no extension with id '\(id)'") }
            call.reply(path: BusService.extensionPath(id))
        case (.manager, "Status"):
            guard let ids = call.readStrings() else { return invalid(call, "Status takes a list of extension ids (as)") }
            client.send({ .query(tag: $0, kind: .status, extensionIDs: ids) }, waiting: .json(call, []))
        case (.manager, "Begin"):
            guard let id = call.readString(), let options = call.readOptionKeys() else {
                return invalid(call, "Begin takes an extension id and options (sa{sv})")
            }
            if let unknown = options.first {
                return invalid(call, "unknown option '\(UntrustedText.escaped(unknown))' (Begin defines no options yet)")
            }
            client.send({ .begin(tag: $0, extensionID: id) }, waiting: .begin(call, extensionID: id))
        case (.manager, "Prewarm"):
            guard let ids = call.readStrings() else { return invalid(call, "Prewarm takes a list of extension ids (as)") }
            client.send({ .prewarm(tag: $0, extensionIDs: ids) }, waiting: .empty(call))
        case (.manager, "PostHint"):
            guard let name = call.readString() else { return invalid(call, "PostHint takes a hint name (s)") }
            client.send({ .post(tag: $0, name: name) }, waiting: .empty(call))
        case (.manager, "Kill"):
            guard let id = call.readString(), let signal = call.readInt32() else { return invalid(call, "Kill takes an extension id and a signal (si)") }
            administer(client, .init(make: { .kill(tag: $0, extensionID: id, signal: signal) }, waiting: .empty(call)))
        case (.manager, "Reset"):
            guard let id = call.readString() else { return invalid(call, "Reset takes an extension id (s)") }
            administer(client, .init(make: { .reset(tag: $0, extensionID: id) }, waiting: .empty(call)))
        case (.manager, "Reload"):
            administer(client, .init(make: { .reload(tag: $0) }, waiting: .json(call, [])))
        case (.manager, "Reexec"):
            // The bus connection does not cross the exec: the caller is answered when the
            // re-exec begins, and sees the name's new owner (NameOwnerChanged) when it is done.
            administer(client, .init(make: { .reexec(tag: $0) }, waiting: .reexec(call)))
        case (.request, "Dismiss"):
            guard let id = UInt64(key), let r = requests[id], r.owner == sender else {
                return call.reply(error: Self.errorPrefix + "UnknownRequest", "no request \(key) of this bus connection")
            }
            // The object stays while the dismissal could not be sent: the caller may try again.
            if client.send({ .end(tag: $0, requestID: id) }, waiting: .empty(call)) { requests[id] = nil }
        default:
            call.reply(error: "org.freedesktop.DBus.Error.UnknownMethod", "no method \(member) here")
        }
    }

    // MARK: - Calls answered here

    private func listExtensions(_ call: BusCall) {
        let list = delegate.busList()
        call.reply { w in
            guard w.open("a", "(ssssuo)") else { return false }
            for e in list.extensions {
                guard w.open("r", "ssssuo"), w.string(e.id), w.string(e.point), w.string(e.state), w.string(e.app ?? ""),
                    w.uint32(UInt32(max(0, e.pid ?? 0))), w.path(BusService.extensionPath(e.id)), w.close()
                else { return false }
            }
            return w.close()
        }
    }

    private func listApps(_ call: BusCall) {
        let list = delegate.busList()
        call.reply { w in
            guard w.open("a", "(sssas)") else { return false }
            for a in list.apps {
                guard w.open("r", "sssas"), w.string(a.id), w.string(a.displayName ?? ""), w.string(a.launch), w.strings(a.extensions), w.close()
                else { return false }
            }
            return w.close()
        }
    }

    private func invalid(_ call: BusCall, _ text: String) {
        call.reply(error: "org.freedesktop.DBus.Error.InvalidArgs", text)
    }

    // MARK: - Callers

    /// The caller `sender`'s client, made at its first call: the bus is asked for its
    /// credentials, and the control server admits it as it admits a connection. Nil when it is
    /// refused (the call is answered).
    private func client(for sender: String, _ call: BusCall) -> BusClient? {
        if let c = clients[sender] { return c }
        guard let service else {
            call.reply(error: Self.errorPrefix + "ShuttingDown", "the daemon is leaving the bus")
            return nil
        }
        // Watched before the credentials are asked for: a caller gone by then has no
        // credentials, and one that leaves after is seen leaving.
        if let e = service.watch(sender) {
            call.reply(error: Self.errorPrefix + "InternalError", "\(e)")
            return nil
        }
        let credentials: BusCredentials
        switch call.credentials() {
        case .success(let c): credentials = c
        case .failure(let e):
            service.unwatch(sender)
            call.reply(error: Self.errorPrefix + "NotPermitted", "the bus did not give the caller's credentials: \(e.operation)")
            return nil
        }
        let daemonEnd: PacketSocket, ourEnd: PacketSocket
        do { (daemonEnd, ourEnd) = try PacketSocket.pair(nonBlocking: true) } catch {
            service.unwatch(sender)
            call.reply(error: Self.errorPrefix + "InternalError", "cannot make a socket pair: \(error)")
            return nil
        }
        switch server.adopt(daemonEnd, pid: credentials.pid, uid: credentials.uid, gid: credentials.gid, groups: credentials.groups) {
        case .failure(let refusal):
            ourEnd.close()
            service.unwatch(sender)
            call.reply(error: Self.errorPrefix + "NotPermitted", refusal.description)
            return nil
        case .success(let host):
            let c = BusClient(name: sender, host: host, uid: credentials.uid, socket: ourEnd)
            if let e = c.start(kernel, { [unowned self, unowned c] in answers(c) }) {
                c.close("cannot be watched: \(e)")
                service.unwatch(sender)
                call.reply(error: Self.errorPrefix + "InternalError", "cannot watch the connection: \(e)")
                return nil
            }
            clients[sender] = c
            return c
        }
    }

    /// Sends an administrative call: at once for an administrator (or on the session bus, where
    /// the daemon's own uid is the administrator, and the daemon's own check decides); on the
    /// system bus, for anyone else, after asking polkit, one question at a time per caller in
    /// the order of its calls, the callers taking turns (`PolkitTurns`). A call polkit allowed
    /// is granted to the daemon's check by its tag (`ControlConnection.grantAdministration`);
    /// any other is refused by that check.
    private func administer(_ c: BusClient, _ call: BusClient.Administrative) {
        guard systemBus, let identity = server.connection(c.host)?.identity, !delegate.isAdministrator(identity) else {
            c.send(call.make, waiting: call.waiting)
            return
        }
        guard c.queueAdministrative(call) else { return }
        polkitTurns.wait(c.name, uid: c.uid)
        askPolkitInTurn()
    }

    /// Asks polkit about each caller whose turn it is now (`PolkitTurns.next`).
    private func askPolkitInTurn() {
        while !stopping, let name = polkitTurns.next() {
            guard let c = clients[name], !c.isClosed, c.polkit == nil, c.nextAdministrative != nil else {
                polkitTurns.answered(name)
                continue
            }
            let asked = service.map {
                $0.checkPolkit(sender: c.name, action: "org.extensiond1.manage") { [unowned self, unowned c] answer in
                    polkitAnswered(c, answer)
                    askPolkitInTurn()
                }
            }
            switch asked {
            case .success(let query): c.polkit = query
            case .failure(let e) where e.isNoBufferSpace: polkitAnswered(c, .limited("\(e)"))
            case .failure(let e): polkitAnswered(c, .failed("\(e)"))
            case nil: polkitAnswered(c, .failed("the daemon is leaving the bus"))
            }
        }
    }

    /// Polkit answered about `c`'s oldest waiting call (`c` is open: closing it cancels the
    /// question): it is sent, granted when allowed, refused with `LimitReached` when the bus
    /// refused the question for its limit, and `c` waits for its next turn if it has more.
    private func polkitAnswered(_ c: BusClient, _ answer: PolkitAnswer) {
        c.polkit = nil
        polkitTurns.answered(c.name)
        guard let call = c.takeAdministrative() else { return }
        switch answer {
        case .allowed: c.send(call.make, waiting: call.waiting, granting: server.connection(c.host))
        case .refused, .absent: c.send(call.make, waiting: call.waiting)
        case .limited(let why):
            logger.notice("polkit could not be asked about \(c.name): \(why)")
            BusClient.fail(call.waiting, Self.errorPrefix + "LimitReached", "too many questions to polkit wait on the bus; try again later")
        case .failed(let why):
            logger.notice("polkit could not be asked about \(c.name): \(why)")
            c.send(call.make, waiting: call.waiting)
        }
        if c.nextAdministrative != nil { polkitTurns.wait(c.name, uid: c.uid) }
    }

    private func close(_ c: BusClient, _ why: String, reexecuting: Bool = false) {
        c.close(why, reexecuting: reexecuting)
        service?.unwatch(c.name)
        if clients[c.name] === c {
            clients[c.name] = nil
            polkitTurns.leave(c.name)
        }
        requests = requests.filter { $0.value.owner != c.name }
        askPolkitInTurn()
    }

    // MARK: - Answers

    /// Reads what the daemon answered `c`'s control connection and turns it into replies and signals.
    private func answers(_ c: BusClient) {
        let open = c.receive(into: buffer) { message, descriptor in answer(message, descriptor, c) }
        if !open { close(c, "its control connection closed") }
    }

    private func answer(_ message: Message, _ descriptor: Int32?, _ c: BusClient) {
        var descriptor = descriptor
        defer { if let descriptor { kernel.close(descriptor) } }
        switch message {
        case let .begun(tag, requestID, pid, hasChannel):
            guard case .begin(let call, let id)? = c.take(tag) else { return }
            var channel = hasChannel ? descriptor : nil
            if channel == nil, let pair = try? PacketSocket.streamPair() {
                // An extension with no channel: a descriptor that reads end-of-file at once.
                kernel.close(pair.1)
                channel = pair.0
                descriptor = pair.0
            }
            guard let channel else {
                // The request was begun: it ends now, as if dismissed, since its caller cannot use it.
                c.send({ .end(tag: $0, requestID: requestID) }, waiting: .none)
                return call.reply(error: Self.errorPrefix + "InternalError", "no descriptor came with the request")
            }
            if let e = call.reply(path: Self.requestPrefix + String(requestID), descriptor: channel) {
                // The caller never gets the request: it ends now, as if dismissed.
                logger.notice("request \(requestID) of \(c.name) ended: \(e)")
                c.send({ .end(tag: $0, requestID: requestID) }, waiting: .none)
                return
            }
            requests[requestID] = Request(owner: c.name, extensionID: id, pid: pid)
        case let .ok(tag):
            guard let waiting = c.take(tag) else { return }
            switch waiting {
            case .empty(let call), .reexec(let call): call.reply()
            default: BusClient.fail(waiting, Self.errorPrefix + "InternalError", "an unexpected answer")
            }
        case let .failure(tag, code, text):
            guard tag != 0, let waiting = c.take(tag) else {
                if tag == 0 { logger.notice("bus caller \(c.name) refused: \(text)") }
                return
            }
            BusClient.fail(waiting, Self.errorPrefix + Self.errorName(code), text)
        case let .json(tag, final, chunk):
            c.append(chunk, to: tag)
            guard final, case .json(let call, let bytes)? = c.take(tag) else { return }
            call.reply(string: String(decoding: bytes, as: UTF8.self))
        case let .completed(requestID, payload):
            end(requestID, of: c, "Completed", payload: payload)
        case let .cancelled(requestID, reason):
            end(requestID, of: c, "Cancelled", reason: reason)
        case let .interrupted(requestID, reason):
            end(requestID, of: c, "Interrupted", reason: reason)
        default:
            break
        }
    }

    /// The request is over: its signal goes to its owner, and its object goes away.
    private func end(_ requestID: UInt64, of c: BusClient, _ signal: String, payload: [UInt8] = [], reason: String = "") {
        guard let r = requests[requestID], r.owner == c.name else { return }
        requests[requestID] = nil
        if let e = service?.requestSignal(requestID, to: c.name, signal, payload: payload, reason: reason) {
            logger.notice("cannot send \(signal) of request \(requestID) to \(c.name): \(e)")
        }
    }

    /// The D-Bus error name of a failure code (docs/dbus.md, "Errors").
    static func errorName(_ code: FailureCode) -> String {
        switch code {
        case .unknownExtension: "UnknownExtension"
        case .launchFailed: "LaunchFailed"
        case .launchTimeout: "LaunchTimeout"
        case .throttled: "Throttled"
        case .notPermitted: "NotPermitted"
        case .badRequest: "BadRequest"
        case .unknownRequest: "UnknownRequest"
        case .limitReached: "LimitReached"
        case .shuttingDown: "ShuttingDown"
        case .notRunning: "NotRunning"
        case .internalError: "InternalError"
        case .interrupted: "Interrupted"
        case .duplicateItem: "DuplicateItem"
        case .itemNotFound: "ItemNotFound"
        }
    }
}
