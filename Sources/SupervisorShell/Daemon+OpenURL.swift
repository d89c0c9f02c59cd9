import ExtensionProtocol
import SupervisorCore
import SupervisorKernel

/// An extension asks to open a URL (`ExtensionContext.open`, docs/extension-model.md, "Opening
/// a URL"): checked here (the URL, the point's `openURLsPerMinute`, an open request, the rate),
/// routed by the core's `URLOpening`, and handed over off the loop (logind's `LockedHint` of the
/// host's session first). Every decision is one journal record with its reason.
extension Daemon {
    func openURL(_ url: String, tag: UInt32, from p: SupervisedProcess) {
        let id = p.extensionID, generation = p.generation
        guard let r = core.records[id] else { return }
        func answer(_ failure: FailureCode?, _ reason: String) {
            let scheme = URLOpening.scheme(of: url) ?? ""
            logger.notice(
                "\(failure == nil ? "opened" : "did not open") a \(scheme.isEmpty ? "malformed" : scheme + ":") URL for \(id): \(reason)",
                metadata: [
                    "EXTENSION_ID": "\(id)", "MESSAGE_ID": "\(MessageIDs.urlOpen)", "URL_SCHEME": "\(scheme)",
                    "URL_OPENED": "\(failure == nil ? 1 : 0)", "REASON": "\(reason)",
                ])
            guard let p = extensions.process(id, generation) else { return }
            extensions.send(.answer(tag: tag, failure: failure, text: reason), to: p)
        }
        if let problem = URLOpening.problem(url) { return answer(.badRequest, problem) }
        let perMinute = r.manifest.policy.openURLsPerMinute
        if perMinute == 0 {
            return answer(.notPermitted, "its extension point '\(r.manifest.point)' does not allow opening URLs (openURLsPerMinute is 0)")
        }
        guard let request = r.requests.max(by: { $0.begunAt < $1.begunAt }) else {
            return answer(.notPermitted, "no host has it open: a URL is opened only for an extension a host shows")
        }
        guard p.openURLRate.admit(at: kernel.now(), perMinute: perMinute) else {
            return answer(.limitReached, "over its point's \(perMinute) URLs a minute")
        }
        let scheme = URLOpening.scheme(of: url)!
        let root = kernel.userID == 0
        let target: URLHandoff.Target
        switch URLOpening.route(scheme: scheme, extensionApp: r.manifest.app, apps: apps.sorted) {
        case .app(let app):
            switch app.launch {
            case .dbusActivatable:
                target = .application(appID: app.id, systemBus: root)
            case .executable:
                // Under a root daemon the app runs as its uid, which may have no passwd entry
                // (an allocated one), and `User=` needs one: setpriv sets the ids instead.
                var command = URLOpening.command(app.launch, url: url)!
                if root {
                    guard let uid = app.uid else {
                        return answer(
                            .internalError, "the app '\(app.id)' has no uid (its user is unknown, or none could be allocated): it is not started as root")
                    }
                    command = ["/usr/bin/setpriv", "--reuid=\(uid)", "--regid=\(uid)", "--clear-groups", "--no-new-privs", "--"] + command
                }
                target = .service(
                    unit: "app-extensiond-\(URLHandoff.unitEscaped(app.id))@\(UInt32.random(in: 1...UInt32.max)).service", command: command,
                    systemManager: root, user: nil)
            }
        case .schemeHandler(let scheme):
            if root {
                return answer(
                    .interrupted, "no app declares the scheme '\(scheme)' (the system daemon opens only the schemes its apps declare)")
            }
            target = .schemeHandler(scheme: scheme)
        }
        let started = kernel.handOffInBackground(URLHandoff(url: url, hostPID: request.peer.pid, target: target)) { [unowned self] outcome in
            urlHandoffsInFlight -= 1
            switch outcome {
            case .opened(let what): answer(nil, "handed to \(what)")
            case .locked: answer(.notPermitted, "the host's session is locked (logind's LockedHint)")
            case .noHandler(let why): answer(.interrupted, why)
            case .failed(let why): answer(.interrupted, "cannot be handed over: \(why)")
            }
        }
        if let e = started { return answer(.internalError, "cannot start handing it over: \(e)") }
        urlHandoffsInFlight += 1
    }
}
