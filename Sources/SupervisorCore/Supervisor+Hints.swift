import ExtensionProtocol

/// Notification hints: who may post which names, and routing each post to the extensions
/// observing it (`NotificationHints` decides per extension).
extension Supervisor {
    /// The extension whose id is `name` or the longest id `name` continues with a `.`: the
    /// owner of the name's scope, if any.
    func scopeOwner(of name: String) -> String? {
        var candidate = Substring(name)
        while true {
            if let r = records[String(candidate)], !r.retired { return r.manifest.id }
            guard let dot = candidate.lastIndex(of: ".") else { return nil }
            candidate = candidate[..<dot]
        }
    }

    /// A host posts the hint `name`. Who may: for a name under an extension's id
    /// (`com.example.stocks.widget.quotes` for `com.example.stocks.widget`), a host that may
    /// open that extension (its `hosts` rule); for any other name, root and the daemon's uid.
    /// Every observer is then routed (`NotificationHints.post`).
    mutating func post(host: HostID, peer: PeerIdentity, tag: UInt32, name: String) {
        func refuse(_ code: FailureCode, _ text: String) { out.append(.reply(host: host, message: .failure(tag: tag, code: code, text: text))) }
        if let problem = NotificationHints.nameProblem(name) { return refuse(.badRequest, "hint name \(problem)") }
        if let owner = scopeOwner(of: name) {
            guard let m = records[owner]?.manifest, mayOpen(m, peer) else {
                return refuse(.notPermitted, "uid \(peer.uid) may not post '\(name)': it is under '\(owner)', which it may not open")
            }
        } else if peer.uid != 0 && peer.uid != limits.daemonUID {
            return refuse(.notPermitted, "uid \(peer.uid) may not post '\(name)': names under no extension id are for root and the daemon's uid")
        }
        for id in index.observers(of: name) {
            update(id, nil) { s, r in
                if r.hints.post(name, phase: r.phase) == .deliver {
                    s.out.append(.send(extensionID: r.manifest.id, generation: r.generation, message: .notify(name: name)))
                }
            }
        }
        out.append(.reply(host: host, message: .ok(tag: tag)))
    }

    /// A member changed the shared defaults suite `suite`: each other extension process that
    /// opened it is routed as for a hint (told now, or once when next resumed, never woken).
    mutating func suiteChanged(_ suite: String, writer: String?, writerGeneration: UInt64) {
        let name = NotificationHints.suiteHint(suite)
        for id in index.observers(of: name) {
            update(id, nil) { s, r in
                if r.manifest.id == writer && r.generation == writerGeneration { return }
                if r.hints.post(name, phase: r.phase) == .deliver {
                    s.out.append(.send(extensionID: r.manifest.id, generation: r.generation, message: .suiteChanged(suite: suite)))
                }
            }
        }
    }
}
