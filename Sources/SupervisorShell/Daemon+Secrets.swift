import ExtensionProtocol
import ExtensionStatus
import SupervisorCore
import SupervisorKernel

/// Secret items (docs/secrets.md) asked for on either socket: the caller's groups are its app's,
/// decided by its identity (an extension's manifest, a connection's app at accept); an item of
/// another group is never found. Answers carry the data only to a member of its group.
extension Daemon {
    /// Who asked, and how to answer it.
    enum SecretCaller {
        case extensionProcess(SupervisedProcess)
        case connection(ControlConnection)
    }

    func secretRequest(_ message: Message, from caller: SecretCaller) {
        let groups: [String]
        let who: String
        switch caller {
        case .extensionProcess(let p):
            groups = SecretAccess.groups(of: core.records[p.extensionID]?.manifest.app, apps: apps.apps)
            who = p.extensionID
        case .connection(let c):
            groups = SecretAccess.groups(of: c.identity.app, apps: apps.apps)
            who = "pid \(c.identity.pid) uid \(c.identity.uid)\(c.identity.app.map { " (app \($0))" } ?? "")"
        }
        func done(_ tag: UInt32, _ operation: String, _ refusal: SecretRefusal?) {
            if let refusal {
                logger.info("secret \(operation) by \(who): \(refusal.code) (\(refusal.text))")
            } else {
                logger.info("secret \(operation) by \(who): done")
            }
            switch caller {
            case .extensionProcess(let p):
                guard let p = extensions.process(p.extensionID, p.generation) else { return }
                extensions.send(.answer(tag: tag, failure: refusal?.code, text: refusal?.text ?? ""), to: p)
            case .connection(let c):
                server.send(refusal.map { .failure(tag: tag, code: $0.code, text: $0.text) } ?? .ok(tag: tag), to: c.id)
            }
        }
        switch message {
        case let .secretAdd(tag, attributes, data):
            secrets.add(attributes, data: data, groups: groups) { done(tag, "add", $0) }
        case let .secretCopy(tag, query, returnData, all):
            switch secrets.copy(query, returnData: returnData, all: all, groups: groups) {
            case .failure(let refusal): done(tag, "copy", refusal)
            case .success(let items):
                switch caller {
                case .extensionProcess(let p): extensions.send(.secretItems(tag: tag, items: items), to: p)
                case .connection(let c): server.send(.secretItems(tag: tag, items: items), to: c.id)
                }
            }
        case let .secretUpdate(tag, query, label, data):
            secrets.update(query, label: label, data: data, groups: groups) { done(tag, "update", $0) }
        case let .secretDelete(tag, query):
            done(tag, "delete", secrets.delete(query, groups: groups))
        default:
            break
        }
    }

    /// `extctl secrets list [GROUP]`: each item's class, group and label, to administrators only.
    func answerSecretList(_ c: ControlConnection, tag: UInt32, groups: [String]) {
        guard isAdministrator(c.identity) else { return refuseAdmin(c, tag, "secrets list") }
        switch secrets.list(group: groups.first) {
        case .failure(let why): server.send(.failure(tag: tag, code: .internalError, text: "the secret store cannot be used: \(why)"), to: c.id)
        case .success(let items):
            server.sendJSON(
                SecretList(
                    items: items.map {
                        SecretList.Item(class: $0.itemClass == .internetPassword ? "internet-password" : "generic-password", group: $0.group, label: $0.label)
                    }), tag: tag, to: c.id)
        }
    }
}
