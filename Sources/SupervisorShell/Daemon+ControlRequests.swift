import ExtensionProtocol
import ExtensionStatus
import ExtensionTransport
import SupervisorCore
import SupervisorKernel

/// What hosts and `extctl` ask on the control socket: requests become core events; queries
/// are answered from the core's records and the running processes.
extension Daemon: ControlServerDelegate {
    /// Why a new peer may not connect, if it may not: too many connections from its uid, or it is
    /// an extension process whose manifest does not grant `hostAccess`.
    func admissionProblem(_ peer: PeerIdentity) -> String? {
        let limit = config.limits.maxConnectionsPerUID
        if server.connectionCount(uid: peer.uid) >= limit {
            return "too many control connections from uid \(peer.uid) (limit \(limit))"
        }
        switch extensions.controlPeer(peer.pid) {
        case .gone:
            return "the connecting process (pid \(peer.pid)) is gone"
        case .extensionProcess(let owner) where core.records[owner]?.manifest.hostAccess != true:
            return "extension '\(owner)' may not use the control socket (its manifest does not set hostAccess)"
        case .extensionProcess, .other:
            return nil
        }
    }

    /// Whether any app manifest is loaded.
    var declaresApps: Bool { !apps.apps.isEmpty }

    /// Whether an app manifest declares the app `id`.
    func isDeclaredApp(_ id: String) -> Bool { apps.app(id) != nil }

    /// The declared app whose uid is `uid` (a root daemon's), or nil.
    func app(ofUID uid: UInt32) -> String? { apps.app(ofUID: uid) }

    /// Whether `c` may make the administrative request tagged `tag`: its peer is an
    /// administrator, or polkit allowed this very request (a bus caller's, docs/dbus.md).
    func isAdministrator(_ c: ControlConnection, tag: UInt32) -> Bool { isAdministrator(c.identity) || c.takeAdministrationGrant(tag: tag) }

    func isAdministrator(_ peer: PeerIdentity) -> Bool {
        if peer.uid == 0 || peer.uid == kernel.userID { return true }
        guard let group = config.adminGroup else { return false }
        return peer.isMember(of: group)
    }

    func handle(_ message: Message, from c: ControlConnection) {
        switch message {
        case let .begin(tag, id):
            post(.begin(host: c.id, peer: c.identity, tag: tag, extensionID: id))
        case let .end(tag, requestID):
            post(.end(host: c.id, tag: tag, requestID: requestID))
        case let .query(tag, kind, ids):
            answerQuery(c, tag: tag, kind: kind, ids: ids)
        case let .kill(tag, id, signal):
            guard isAdministrator(c, tag: tag) else { return refuseAdmin(c, tag, "kill") }
            post(.kill(host: c.id, tag: tag, extensionID: id, signal: signal))
        case let .reset(tag, id):
            guard isAdministrator(c, tag: tag) else { return refuseAdmin(c, tag, "reset") }
            if let problem = Identifier.problem(id) {
                return server.send(.failure(tag: tag, code: .badRequest, text: "'\(id)' is not an extension id: \(problem)"), to: c.id)
            }
            // An extension whose manifest was removed keeps its container until it is reset: an id
            // with neither a record nor a container is one that never was.
            if core.records[id] == nil, case .failure(let e) = kernel.status(extensions.containers.path(of: id), followLinks: false), e.isNoEntry {
                return server.send(
                    .failure(tag: tag, code: .unknownExtension, text: "no extension with id '\(id)', and no container of that name to empty"), to: c.id)
            }
            logger.notice("reset of \(id) asked by pid \(c.identity.pid) uid \(c.identity.uid)", metadata: ["EXTENSION_ID": "\(id)"])
            post(.reset(host: c.id, tag: tag, extensionID: id))
        case let .reexec(tag):
            guard isAdministrator(c, tag: tag) else { return refuseAdmin(c, tag, "reexec") }
            logger.notice("re-exec asked by pid \(c.identity.pid) uid \(c.identity.uid)")
            requestReexec(from: HandoverDocument.Requester(host: c.id, tag: tag))
        case let .reload(tag):
            guard isAdministrator(c, tag: tag) else { return refuseAdmin(c, tag, "reload") }
            let report = reload()
            server.sendJSON(
                ExtensionStatus.ReloadReport(
                    loaded: report.loaded, errors: report.errors.map(\.description),
                    kept: report.kept.map { ExtensionStatus.ReloadReport.Kept(id: $0.id, file: $0.file) }, warnings: report.warnings),
                tag: tag, to: c.id)
        case let .monitor(tag):
            c.startMonitoring()
            server.send(.ok(tag: tag), to: c.id)
        case let .prewarm(tag, ids):
            post(.prewarm(host: c.id, peer: c.identity, tag: tag, extensionIDs: ids))
        case let .post(tag, name):
            guard c.admitPost(at: kernel.iterationTime()) else {
                return server.send(
                    .failure(tag: tag, code: .limitReached, text: "over \(Int(MessageRate.postsPerSecond)) posts per second on this connection"), to: c.id)
            }
            post(.post(host: c.id, peer: c.identity, tag: tag, name: name))
        case let .forceRefresh(tag, id):
            post(.forceRefresh(host: c.id, peer: c.identity, tag: tag, extensionID: id))
        case let .follow(tag, ids):
            guard ids.count == 1, let id = ids.first else {
                return server.send(.failure(tag: tag, code: .badRequest, text: "follow names exactly one extension"), to: c.id)
            }
            guard let r = core.records[id] else {
                return server.send(.failure(tag: tag, code: .unknownExtension, text: "no extension with id '\(id)'"), to: c.id)
            }
            guard mayReadOutput(c.identity, of: r.manifest) else { return refuseOutput(c, tag, id) }
            // The lines kept so far, and from now on every new one: in one step of the loop, so
            // that no line falls between them or comes twice.
            extensions.outputs.follow(c.id, ids)
            server.sendJSON(extensions.outputs.log(id), tag: tag, to: c.id)
        case let .subscribe(tag, ids):
            post(.subscribe(host: c.id, peer: c.identity, tag: tag, extensionIDs: ids))
        case let .discover(tag, point, content):
            if !point.isEmpty, config.points.policies[point] == nil {
                let known = config.points.policies.keys.sorted().joined(separator: ", ")
                return server.send(.failure(tag: tag, code: .badRequest, text: "unknown extension point '\(point)' (known: \(known))"), to: c.id)
            }
            let found = core.discover(point: point, content: content, peer: c.identity)
                .map { DiscoveredExtension(id: $0.id, point: $0.point, displayName: $0.displayName) }
            server.sendDiscovered(found, tag: tag, to: c.id)
        case .secretAdd, .secretCopy, .secretUpdate, .secretDelete:
            secretRequest(message, from: .connection(c))
        case .transferCreate, .transferCancel, .transferClaim, .transferHandled:
            transferRequest(message, from: .connection(c))
        case let .defaultsOpen(tag, suite):
            openSuite(suite, tag: tag, from: c)
        case let .defaultsWrite(tag, suite, key, value):
            writeSuite(suite, key: key, value: value, tag: tag, from: c)
        default:
            server.protocolViolation(c, "\(message.kind) is not accepted on the control socket")
        }
    }

    /// The path of a shared container, to root, the daemon's uid, the administrator group, and
    /// members of the container's group (an app admitted to it).
    func answerContainer(_ c: ControlConnection, tag: UInt32, names: [String]) {
        guard names.count == 1, let name = names.first else {
            return server.send(.failure(tag: tag, code: .badRequest, text: "a container query names exactly one container"), to: c.id)
        }
        guard let container = sources.containers.known[name] else {
            return server.send(.failure(tag: tag, code: .unknownExtension, text: "no loaded manifest names the shared container '\(name)'"), to: c.id)
        }
        let member = container.gid.map { c.identity.isMember(of: $0) } ?? false
        guard isAdministrator(c.identity) || member else {
            logger.notice("refused the path of shared container \(name) to pid \(c.identity.pid) uid \(c.identity.uid): not in its group")
            return server.send(
                .failure(
                    tag: tag, code: .notPermitted,
                    text:
                        "the shared container '\(name)' is shown only to root, the daemon's uid \(kernel.userID), the administrator group and members of its group\(container.gid.map { " \($0)" } ?? "")"
                ), to: c.id)
        }
        server.sendJSON(SharedContainerInfo(name: name, path: container.path, gid: container.gid), tag: tag, to: c.id)
    }

    func refuseAdmin(_ c: ControlConnection, _ tag: UInt32, _ operation: String) {
        logger.notice("refused \(operation) from pid \(c.identity.pid) uid \(c.identity.uid): not an administrator")
        server.send(
            .failure(
                tag: tag, code: .notPermitted,
                text: "\(operation) needs root, the daemon's uid \(kernel.userID)\(config.adminGroup.map { " or group \($0)" } ?? "")"), to: c.id)
    }

    func answerQuery(_ c: ControlConnection, tag: UInt32, kind: QueryKind, ids: [String]) {
        if kind == .container { return answerContainer(c, tag: tag, names: ids) }
        if kind == .secrets { return answerSecretList(c, tag: tag, groups: ids) }
        if kind == .transfers { return answerTransferList(c, tag: tag, names: ids) }
        if kind == .logs {
            guard ids.count == 1, let id = ids.first else {
                return server.send(.failure(tag: tag, code: .badRequest, text: "a logs query names exactly one extension"), to: c.id)
            }
            guard let r = core.records[id] else {
                return server.send(.failure(tag: tag, code: .unknownExtension, text: "no extension with id '\(id)'"), to: c.id)
            }
            guard mayReadOutput(c.identity, of: r.manifest) else { return refuseOutput(c, tag, id) }
            return server.sendJSON(extensions.outputs.log(id), tag: tag, to: c.id)
        }
        var selected: [ExtensionRecord] = []
        if ids.isEmpty {
            selected = sortedRecords()
        } else {
            for id in ids {
                guard let r = core.records[id] else {
                    return server.send(.failure(tag: tag, code: .unknownExtension, text: "no extension with id '\(id)'"), to: c.id)
                }
                selected.append(r)
            }
        }
        if kind == .list {
            // The apps with every extension (a list of some ids still names all of each app's).
            return server.sendJSON(StatusDocument.list(selected, clock, apps: apps.sorted, members: appMembers()), tag: tag, to: c.id)
        }
        let document = statusDocument(selected)
        server.sendJSON(document, tag: tag, to: c.id)
    }

    /// Every record, by id. The ids are sorted, not the records: a record is a large value,
    /// which a sort would move about many times (a query of a daemon with a thousand extensions).
    func sortedRecords() -> [ExtensionRecord] { core.records.keys.sorted().compactMap { core.records[$0] } }

    /// The ids of the extensions of each declared app, by app id (none when no app is declared).
    func appMembers() -> [String: [String]] {
        guard !apps.sorted.isEmpty else { return [:] }
        var members: [String: [String]] = [:]
        for (id, r) in core.records { if let app = r.manifest.app { members[app, default: []].append(id) } }
        return members.mapValues { $0.sorted() }
    }

    /// The status document of `records` (`extctl status --json`).
    func statusDocument(_ records: [ExtensionRecord]) -> StatusReport {
        StatusDocument.status(
            records, now: kernel.iterationTime(), clock,
            containment: .init(mode: extensions.containment.mode, reason: extensions.containment.problem),
            processes: extensions.processEntries, limits: extensions.containment.enforcement,
            container: { [containers = extensions.containers] in containers.path(of: $0.id) }, sandbox: extensions.sandboxing.decide)
    }
}

extension Daemon {
    /// Whether `peer` may read an extension's output (`extctl logs`, the lines a failed launch
    /// quotes): administrators, and the processes of the app the extension belongs to. Output
    /// may carry what the extension never meant to share; the journal shows it only to its
    /// readers too.
    func mayReadOutput(_ peer: PeerIdentity, of manifest: Manifest) -> Bool {
        isAdministrator(peer) || (peer.app != nil && peer.app == manifest.app)
    }

    /// Stops each `extctl logs -f` following that `mayReadOutput` no longer allows, and logs it
    /// (`when`: after the reload, after the re-exec).
    func recheckOutputFollowers(_ when: String) {
        let stopped = extensions.outputs.recheckFollowers { [unowned self] host, id in
            guard let peer = server.connection(host)?.identity, let manifest = core.records[id]?.manifest else { return false }
            return mayReadOutput(peer, of: manifest)
        }
        for (host, ids) in stopped {
            logger.notice("host \(host) no longer follows the output of \(ids.joined(separator: ", ")) \(when): it may not read it now")
        }
    }

    private func refuseOutput(_ c: ControlConnection, _ tag: UInt32, _ id: String) {
        server.send(
            .failure(
                tag: tag, code: .notPermitted,
                text:
                    "the output of \(id) is shown to root, the daemon's uid \(kernel.userID)\(config.adminGroup.map { ", group \($0)" } ?? "") and its app's processes"
            ), to: c.id)
    }

    /// A host's connection closed: its requests end as if it had dismissed them.
    func hostGone(_ host: HostID) {
        extensions.outputs.forget(host)
        defaults.hostGone(host)
        transfers.forget(.connection(host))
        post(.hostGone(host: host))
    }
}
