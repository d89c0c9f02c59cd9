import ExtensionProtocol
import ExtensionStatus
import ExtensionTransport
import SupervisorCore
import SupervisorKernel

/// The control socket: hosts and `extctl` connect here.
extension Daemon {
    /// Most connections accepted per wake-up.
    static let acceptBudget = 64

    func acceptConnections() {
        for _ in 0..<Daemon.acceptBudget {
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
            let peer = PeerIdentity(pid: cred.pid, uid: cred.uid, gid: cred.gid, groups: supplementaryGroups(of: cred.pid))
            if let refusal = admissionProblem(peer) {
                logger.notice("refused control connection from pid \(peer.pid) uid \(peer.uid): \(refusal)")
                if let bytes = try? WireEncoder.encoded(.failure(tag: 0, code: .notPermitted, text: refusal)) {
                    _ = try? socket.send(bytes)
                }
                socket.close()
                continue
            }
            let c = ControlConnection(id: id, socket: socket, peer: peer, queueLimit: Daemon.connectionQueueLimit)
            if let error = c.channel.watch(through: kernel, { [unowned self, unowned c] events in connectionEvent(c, events: events) }) {
                logger.error("cannot watch the control connection of pid \(peer.pid): \(error)")
                c.close()
                continue
            }
            connections[id] = c
        }
    }

    /// Why a new peer may not connect, if it may not: too many connections from its uid, or it is
    /// an extension process whose manifest does not grant `hostAccess`.
    func admissionProblem(_ peer: PeerIdentity) -> String? {
        let limit = config.limits.maxConnectionsPerUID
        if connections.values.lazy.filter({ $0.peer.uid == peer.uid }).count >= limit {
            return "too many control connections from uid \(peer.uid) (limit \(limit))"
        }
        if let owner = owningExtension(of: peer.pid), core.records[owner]?.manifest.hostAccess != true {
            return "extension '\(owner)' may not use the control socket (its manifest does not set hostAccess)"
        }
        return nil
    }

    /// The extension a process belongs to: by its cgroup (which it cannot leave), or by its
    /// process group on the fallback.
    func owningExtension(of pid: Int32) -> String? {
        if let tree = cgroups {
            guard let path = control.table.cgroup(pid) else { return nil }
            let full = tree.mountRelative(path)
            guard full.hasPrefix(tree.extensionsPath + "/") else { return nil }
            let id = String(full.dropFirst(tree.extensionsPath.count + 1).prefix(while: { $0 != "/" }))
            return processes[id] != nil ? id : nil
        }
        guard let group = control.table.stat(pid)?.processGroup else { return nil }
        return processes.values.first(where: { $0.processGroup == group })?.extensionID
    }

    func connectionEvent(_ c: ControlConnection, events: UInt32) {
        if let e = c.channel.flush(events) { return drop(c, reason: "write failed: \(e)") }
        guard events & (Poll.input | Poll.hangup | Poll.error) != 0 else { return }
        var end: Peer.ReadEnd?
        var read = 0
        inBatch {
            end = c.channel.read(into: receiveBuffer, budget: Daemon.readBudget) { message in
                // A lone request is answered at once; from the second message of a burst on,
                // the answers are written together when the burst has been handled.
                read += 1
                if read == 2 { hold(c) }
                handle(message, from: c)
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

    /// Answers a malformed message with a failure, then closes the connection.
    func protocolViolation(_ c: ControlConnection, _ problem: String) {
        logger.notice("closing control connection of pid \(c.peer.pid) uid \(c.peer.uid): \(problem)")
        // The answers held for the messages before the bad one go first.
        if c.channel.isHeld, let e = c.channel.release() {
            logger.notice("control connection of pid \(c.peer.pid): the answers held before the bad message were not written: \(e)")
        }
        if let bytes = try? WireEncoder.encoded(.failure(tag: 0, code: .badRequest, text: "protocol error: \(problem)")) {
            _ = try? c.channel.socket.send(bytes)
        }
        drop(c, reason: problem)
    }

    /// Closes a connection; its requests end exactly as if the host had dismissed them.
    func drop(_ c: ControlConnection, reason: String?) {
        guard connections[c.id] === c else { return }
        if let reason { logger.info("control connection of pid \(c.peer.pid) uid \(c.peer.uid) closed: \(reason)") }
        connections[c.id] = nil
        if c.isMonitor { monitors.removeAll { $0 === c } }
        c.close()
        post(.hostGone(host: c.id))
    }

    func isAdministrator(_ peer: PeerIdentity) -> Bool {
        if peer.uid == 0 || peer.uid == kernel.userID { return true }
        guard let group = config.adminGroup else { return false }
        return peer.isMember(of: group)
    }

    /// The supplementary groups of a process, from /proc/PID/status.
    func supplementaryGroups(of pid: Int32) -> [UInt32] {
        guard case .success(let data) = kernel.read("/proc/\(pid)/status") else { return [] }
        let text = String(decoding: data, as: UTF8.self)
        guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix("Groups:") }) else { return [] }
        // "Groups:\t10 27 " (a tab, then numbers each followed by a space).
        return line.dropFirst(7).split(whereSeparator: { $0 == " " || $0 == "\t" }).compactMap { UInt32($0) }
    }

    func handle(_ message: Message, from c: ControlConnection) {
        switch message {
        case let .begin(tag, id):
            post(.begin(host: c.id, peer: c.peer, tag: tag, extensionID: id))
        case let .end(tag, requestID):
            post(.end(host: c.id, tag: tag, requestID: requestID))
        case let .query(tag, kind, ids):
            answerQuery(c, tag: tag, kind: kind, ids: ids)
        case let .kill(tag, id, signal):
            guard isAdministrator(c.peer) else { return refuseAdmin(c, tag, "kill") }
            post(.kill(host: c.id, tag: tag, extensionID: id, signal: signal))
        case let .reset(tag, id):
            guard isAdministrator(c.peer) else { return refuseAdmin(c, tag, "reset") }
            if let problem = Identifier.problem(id) {
                return send(.failure(tag: tag, code: .badRequest, text: "'\(id)' is not an extension id: \(problem)"), to: c.id)
            }
            logger.notice("reset of \(id) asked by pid \(c.peer.pid) uid \(c.peer.uid)", metadata: ["EXTENSION_ID": "\(id)"])
            post(.reset(host: c.id, tag: tag, extensionID: id))
        case let .reload(tag):
            guard isAdministrator(c.peer) else { return refuseAdmin(c, tag, "reload") }
            let report = reload()
            sendJSON(
                ExtensionStatus.ReloadReport(
                    loaded: report.loaded, errors: report.errors.map(\.description),
                    kept: report.kept.map { ExtensionStatus.ReloadReport.Kept(id: $0.id, file: $0.file) }),
                tag: tag, to: c.id)
        case let .monitor(tag):
            if !c.isMonitor {
                c.isMonitor = true
                monitors.append(c)
            }
            send(.ok(tag: tag), to: c.id)
        case let .prewarm(tag, ids):
            post(.prewarm(host: c.id, peer: c.peer, tag: tag, extensionIDs: ids))
        case let .post(tag, name):
            guard c.posts.admit(at: kernel.iterationTime()) else {
                return send(.failure(tag: tag, code: .limitReached, text: "over \(Int(MessageRate.postsPerSecond)) posts per second on this connection"), to: c.id)
            }
            post(.post(host: c.id, peer: c.peer, tag: tag, name: name))
        case let .forceRefresh(tag, id):
            post(.forceRefresh(host: c.id, peer: c.peer, tag: tag, extensionID: id))
        case let .subscribe(tag, ids):
            post(.subscribe(host: c.id, peer: c.peer, tag: tag, extensionIDs: ids))
        case let .discover(tag, point, content):
            if !point.isEmpty, config.points.policies[point] == nil {
                let known = config.points.policies.keys.sorted().joined(separator: ", ")
                return send(.failure(tag: tag, code: .badRequest, text: "unknown extension point '\(point)' (known: \(known))"), to: c.id)
            }
            let found = core.discover(point: point, content: content, peer: c.peer)
                .map { DiscoveredExtension(id: $0.id, point: $0.point, displayName: $0.displayName) }
            sendDiscovered(found, tag: tag, to: c.id)
        default:
            protocolViolation(c, "\(message.kind) is not accepted on the control socket")
        }
    }

    /// The path of a shared container, to root, the daemon's uid, the administrator group, and
    /// members of the container's group (an app admitted to it).
    func answerContainer(_ c: ControlConnection, tag: UInt32, names: [String]) {
        guard names.count == 1, let name = names.first else {
            return send(.failure(tag: tag, code: .badRequest, text: "a container query names exactly one container"), to: c.id)
        }
        guard let container = containers.known[name] else {
            return send(.failure(tag: tag, code: .unknownExtension, text: "no loaded manifest names the shared container '\(name)'"), to: c.id)
        }
        let member = container.gid.map { c.peer.isMember(of: $0) } ?? false
        guard isAdministrator(c.peer) || member else {
            logger.notice("refused the path of shared container \(name) to pid \(c.peer.pid) uid \(c.peer.uid): not in its group")
            return send(.failure(tag: tag, code: .notPermitted, text: "the shared container '\(name)' is shown only to root, the daemon's uid \(kernel.userID), the administrator group and members of its group\(container.gid.map { " \($0)" } ?? "")"), to: c.id)
        }
        sendJSON(SharedContainerInfo(name: name, path: container.path, gid: container.gid), tag: tag, to: c.id)
    }

    func refuseAdmin(_ c: ControlConnection, _ tag: UInt32, _ operation: String) {
        logger.notice("refused \(operation) from pid \(c.peer.pid) uid \(c.peer.uid): not an administrator")
        send(.failure(tag: tag, code: .notPermitted, text: "\(operation) needs root, the daemon's uid \(kernel.userID)\(config.adminGroup.map { " or group \($0)" } ?? "")"), to: c.id)
    }

    func answerQuery(_ c: ControlConnection, tag: UInt32, kind: QueryKind, ids: [String]) {
        if kind == .container { return answerContainer(c, tag: tag, names: ids) }
        var selected: [ExtensionRecord] = []
        if ids.isEmpty {
            selected = core.records.values.sorted { $0.manifest.id < $1.manifest.id }
        } else {
            for id in ids {
                guard let r = core.records[id] else {
                    return send(.failure(tag: tag, code: .unknownExtension, text: "no extension with id '\(id)'"), to: c.id)
                }
                selected.append(r)
            }
        }
        let now = kernel.iterationTime()
        let clock = StatusDocument.Clock(monotonicNow: kernel.now(), wallClock: kernel.wallClock())
        if kind == .list { return sendJSON(StatusDocument.list(selected, clock), tag: tag, to: c.id) }
        let document = StatusDocument.status(
            selected, now: now, clock,
            containment: .init(mode: cgroups == nil ? "process-group" : "cgroup", reason: containmentProblem),
            processes: processEntries, limits: limitEnforcement,
            container: { [extensionContainers] in extensionContainers.path(of: $0.id) }, sandbox: sandboxing.decide)
        sendJSON(document, tag: tag, to: c.id)
    }

    /// The processes of a running extension for `status`: the members of its cgroup (or
    /// process group), with their command names and /proc figures, and the cgroup's path and
    /// counters: `memory.current` where the memory controller is enabled, `cpu.stat` (present
    /// in every v2 cgroup). Where a counter is missing, status sums the members' /proc figures.
    func processEntries(_ r: ExtensionRecord) -> StatusDocument.ProcessesOfExtension {
        guard let p = processes[r.manifest.id] else { return .init() }
        let table = control.table
        let pids = p.cgroup.map { cgroups?.processes(of: $0) ?? [] } ?? table.groupMembers(p.processGroup).map(\.pid)
        let entries = pids.sorted().compactMap { pid -> StatusDocument.ProcessEntry? in
            guard let s = table.stat(pid), !s.isGone else { return nil }
            return StatusDocument.ProcessEntry(
                pid: pid, state: s.state, command: table.command(pid) ?? "?", rssBytes: s.rssPages * table.pageSize,
                cpuSeconds: Double(s.cpuTicks) / table.ticksPerSecond)
        }
        var found = StatusDocument.ProcessesOfExtension(entries: entries, cgroup: p.cgroup?.path)
        if let path = p.cgroup?.path {
            if cgroups?.controllers.contains("memory") == true, case .success(let bytes) = kernel.read(path + "/memory.current") {
                found.cgroupMemoryBytes = Int64(String(decoding: bytes.prefix(while: { $0 != UInt8(ascii: "\n") }), as: UTF8.self))
            }
            if case .success(let bytes) = kernel.read(path + "/cpu.stat"),
               let line = bytes.split(separator: UInt8(ascii: "\n")).first(where: { $0.starts(with: Array("usage_usec ".utf8)) }),
               let usec = Double(String(decoding: line.dropFirst(11), as: UTF8.self)) {
                found.cgroupCPUSeconds = usec / 1e6
            }
        }
        return found
    }

    /// Most extensions in one `discovered` message: each entry is at most three 255-byte
    /// strings, so a part stays well under `WireLimits.maxMessageSize`.
    static let discoveredPerMessage = 64

    /// Sends a discovery answer in parts of at most `discoveredPerMessage` extensions.
    func sendDiscovered(_ found: [DiscoveredExtension], tag: UInt32, to host: HostID) {
        var offset = 0
        repeat {
            let end = min(offset + Daemon.discoveredPerMessage, found.count)
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

    func send(_ message: Message, to host: HostID, descriptor: Int32? = nil) {
        guard let c = connections[host] else {
            if let descriptor { PacketSocket.closeReceived(descriptor) }
            return
        }
        switch c.channel.send(message, encoder: &encoder, descriptor: descriptor) {
        case .accepted, .closed: break
        case .unencodable(let problem): logger.error("\(problem)")
        case .overflow:
            logger.notice("cutting off control connection of pid \(c.peer.pid): it does not read its replies")
            drop(c, reason: "outbound queue overflow")
        case .failed(let e):
            drop(c, reason: "write failed: \(e)")
        }
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
        guard !heldConnections.isEmpty else { return }
        let held = heldConnections
        heldConnections.removeAll(keepingCapacity: true)
        for c in held where connections[c.id] === c {
            if let e = c.channel.release() { drop(c, reason: "write failed: \(e)") }
        }
    }

    /// Sends the events recorded since the last call to every monitor, in one `events` datagram
    /// each unless they exceed one (`MonitorFeed`). Called when a batch ends, and when a dispatch
    /// outside any batch ends: once per loop iteration.
    func sendMonitorEvents() {
        guard monitorFeed.beginSending() else { return }
        repeat {
            let messages = monitorFeed.take(StatusDocument.Clock(monotonicNow: kernel.now(), wallClock: kernel.wallClock()))
            for c in monitors {
                for m in messages { send(m, to: c.id) }
            }
        } while !monitorFeed.isEmpty
        monitorFeed.endSending()
    }

    /// Holds the messages to `c` until the current batch ends.
    func hold(_ c: ControlConnection) {
        guard batchDepth > 0, !c.channel.isHeld else { return }
        c.channel.hold()
        heldConnections.append(c)
    }
}
