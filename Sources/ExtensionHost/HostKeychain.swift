import ExtensionProtocol

/// The secrets of the calling app's groups (docs/secrets.md), over the control socket: the same
/// store, semantics and errors as `Keychain` in extensions. The app is recognized by its
/// identity (its systemd scope on a desktop, its uid under a root daemon); its groups are its
/// manifest's. Failures are `HostError`s whose `code` is `.duplicateItem`, `.itemNotFound`,
/// `.notPermitted` or `.badRequest`.
extension ExtensionHostConnection {
    /// Adds an item (see `Keychain.add`).
    public func addSecret(_ attributes: SecretAttributes, data: [UInt8]) throws(HostError) {
        let secret = SecretData(data)
        _ = try client.call { .secretAdd(tag: $0, attributes: attributes, data: secret) }
    }

    /// The first match with its data (see `Keychain.copyMatching`).
    public func copySecret(_ query: SecretAttributes) throws(HostError) -> SecretItem {
        guard case .secrets(let items) = try client.call({ .secretCopy(tag: $0, query: query, returnData: true, all: false) }), let first = items.first else {
            throw HostError("unexpected reply to a secret copy")
        }
        return first
    }

    /// Every match's attributes (see `Keychain.copyAllMatching`).
    public func copyAllSecrets(_ query: SecretAttributes) throws(HostError) -> [SecretAttributes] {
        guard case .secrets(let items) = try client.call({ .secretCopy(tag: $0, query: query, returnData: false, all: true) }) else {
            throw HostError("unexpected reply to a secret copy")
        }
        return items.map(\.attributes)
    }

    /// Changes every match's label and/or data (see `Keychain.update`).
    public func updateSecrets(_ query: SecretAttributes, label: String? = nil, data: [UInt8]? = nil) throws(HostError) {
        let secret = data.map { SecretData($0) }
        _ = try client.call { .secretUpdate(tag: $0, query: query, label: label, data: secret) }
    }

    /// Deletes every match (see `Keychain.delete`).
    public func deleteSecrets(_ query: SecretAttributes) throws(HostError) {
        _ = try client.call { .secretDelete(tag: $0, query: query) }
    }
}
