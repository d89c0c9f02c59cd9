import ExtensionProtocol
import SupervisorCore
import SupervisorKernel

/// Shared defaults (docs/defaults.md): members open a suite and get its mapping; writes come
/// here, are published to every reader at once, and are posted to the other members (an
/// extension suspended meanwhile is told once, when next resumed, and never woken for it).
extension Daemon {
    /// An extension's runtime opens a suite.
    func openSuite(_ suite: String, tag: UInt32, from p: SupervisedProcess) {
        if let (code, text) = suiteProblem(suite, extensionID: p.extensionID) {
            logger.notice("refused the defaults suite \(suite) to \(p.extensionID): \(text)", metadata: ["EXTENSION_ID": "\(p.extensionID)"])
            extensions.send(.answer(tag: tag, failure: code, text: text), to: p)
            return
        }
        switch defaults.descriptor(suite) {
        case .success(let fd):
            if extensions.send(.answer(tag: tag, failure: nil, text: ""), to: p, descriptor: fd) {
                post(.suiteOpened(extensionID: p.extensionID, generation: p.generation, suite: suite))
            }
        case .failure(let refusal):
            extensions.send(.answer(tag: tag, failure: refusal.code, text: refusal.text), to: p)
        }
    }

    /// An extension's runtime writes a key of a suite.
    func writeSuite(_ suite: String, key: String, value: [UInt8]?, tag: UInt32, from p: SupervisedProcess) {
        if let (code, text) = suiteProblem(suite, extensionID: p.extensionID) {
            extensions.send(.answer(tag: tag, failure: code, text: text), to: p)
            return
        }
        switch defaults.write(suite, key: key, value: value) {
        case .success(let changed):
            extensions.send(.answer(tag: tag, failure: nil, text: ""), to: p)
            if changed { suiteChanged(suite, byExtension: p.extensionID, generation: p.generation, host: nil) }
        case .failure(let refusal):
            extensions.send(.answer(tag: tag, failure: refusal.code, text: refusal.text), to: p)
        }
    }

    /// A control connection (an app, or `extctl defaults`) opens a suite.
    func openSuite(_ suite: String, tag: UInt32, from c: ControlConnection) {
        if let (code, text) = suiteProblem(suite, peer: c.identity) {
            logger.notice("refused the defaults suite \(suite) to pid \(c.identity.pid) uid \(c.identity.uid): \(text)")
            return server.send(.failure(tag: tag, code: code, text: text), to: c.id)
        }
        switch defaults.descriptor(suite) {
        case .success(let fd):
            defaults.opened(suite, by: c.id)
            server.send(.defaultsOpened(tag: tag), to: c.id, descriptor: fd)
        case .failure(let refusal):
            server.send(.failure(tag: tag, code: refusal.code, text: refusal.text), to: c.id)
        }
    }

    /// A control connection writes a key of a suite.
    func writeSuite(_ suite: String, key: String, value: [UInt8]?, tag: UInt32, from c: ControlConnection) {
        if let (code, text) = suiteProblem(suite, peer: c.identity) { return server.send(.failure(tag: tag, code: code, text: text), to: c.id) }
        switch defaults.write(suite, key: key, value: value) {
        case .success(let changed):
            server.send(.ok(tag: tag), to: c.id)
            if changed { suiteChanged(suite, byExtension: nil, generation: 0, host: c.id) }
        case .failure(let refusal):
            server.send(.failure(tag: tag, code: refusal.code, text: refusal.text), to: c.id)
        }
    }

    /// Tells every other member that opened the suite: extensions through the core (now, or
    /// once when resumed), control connections at once.
    private func suiteChanged(_ suite: String, byExtension writer: String?, generation: UInt64, host: HostID?) {
        post(.suiteChanged(suite: suite, writer: writer, writerGeneration: generation))
        for opener in defaults.openers(of: suite) where opener != host { server.send(.defaultsChanged(suite: suite), to: opener) }
    }

    private func suiteProblem(_ suite: String, extensionID: String) -> (FailureCode, String)? {
        let app = core.records[extensionID]?.manifest.app
        return SuiteAccess.problem(suite, asker: .extensionProcess(id: extensionID, app: app), apps: apps.apps)
    }

    private func suiteProblem(_ suite: String, peer: PeerIdentity) -> (FailureCode, String)? {
        SuiteAccess.problem(suite, asker: .process(app: peer.app, administrator: isAdministrator(peer)), apps: apps.apps)
    }
}

extension Daemon: RuntimeCalls {
    func call(_ message: Message, from p: SupervisedProcess) {
        switch message {
        case let .suiteOpen(tag, suite): openSuite(suite, tag: tag, from: p)
        case let .suiteWrite(tag, suite, key, value): writeSuite(suite, key: key, value: value, tag: tag, from: p)
        case let .openURL(tag, url): openURL(url, tag: tag, from: p)
        case .secretAdd, .secretCopy, .secretUpdate, .secretDelete: secretRequest(message, from: .extensionProcess(p))
        case .transferCreate, .transferCancel, .transferClaim, .transferHandled: transferRequest(message, from: .extensionProcess(p))
        default: break
        }
    }
}
