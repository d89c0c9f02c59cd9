import ExtensionProtocol

#if canImport(Glibc)
import Glibc
#endif

/// Secrets an app shares with its extensions (docs/secrets.md), kept encrypted by extensiond:
/// the keychain's add, copy matching, update and delete, with typed queries
/// (`SecretAttributes`) for its query dictionaries. An item belongs to an access group, one of
/// the groups of the extension's app; queries search every group the extension may use unless
/// they name one, and an item of any other group is never found. Each call is one round trip.
public enum Keychain {
    /// Adds an item (`SecItemAdd`): `attributes` with a class, in the group it names or the
    /// app's first. Throws `.duplicateItem` when one with the same class, group and identifying
    /// attributes exists.
    public static func add(_ attributes: SecretAttributes, data: [UInt8]) throws(KeychainError) {
        guard data.count <= WireLimits.maxSecret else { throw .invalid("the data is \(data.count) bytes, over \(WireLimits.maxSecret)") }
        let secret = SecretData(data)
        try check(call { .secretAdd(tag: $0, attributes: attributes, data: secret) })
    }

    /// The first item `query` matches, with its data (`SecItemCopyMatching` with return data
    /// and match limit one). Throws `.itemNotFound`.
    public static func copyMatching(_ query: SecretAttributes) throws(KeychainError) -> SecretItem {
        guard let first = try items(call { .secretCopy(tag: $0, query: query, returnData: true, all: false) }).first else { throw .itemNotFound }
        return first
    }

    /// The attributes of every item `query` matches (match limit all, no data; at most
    /// `WireLimits.maxSecretItems`). Throws `.itemNotFound` when none does.
    public static func copyAllMatching(_ query: SecretAttributes) throws(KeychainError) -> [SecretAttributes] {
        try items(call { .secretCopy(tag: $0, query: query, returnData: false, all: true) }).map(\.attributes)
    }

    /// Changes the label and/or the data of every item `query` matches (`SecItemUpdate`).
    public static func update(_ query: SecretAttributes, label: String? = nil, data: [UInt8]? = nil) throws(KeychainError) {
        let secret = data.map { SecretData($0) }
        try check(call { .secretUpdate(tag: $0, query: query, label: label, data: secret) })
    }

    /// Deletes every item `query` matches (`SecItemDelete`). Throws `.itemNotFound` when none does.
    public static func delete(_ query: SecretAttributes) throws(KeychainError) {
        try check(call { .secretDelete(tag: $0, query: query) })
    }

    private static func call(_ make: (UInt32) -> Message) throws(KeychainError) -> RuntimeChannel.Answer {
        guard let channel = RuntimeChannel.shared else { throw .notSupervised }
        return channel.call(make)
    }

    private static func check(_ answer: RuntimeChannel.Answer) throws(KeychainError) {
        if let fd = answer.descriptor { close(fd) }
        if let failure = answer.failure { throw KeychainError(failure, answer.text) }
    }

    private static func items(_ answer: RuntimeChannel.Answer) throws(KeychainError) -> [SecretItem] {
        try check(answer)
        return answer.items
    }
}

/// Why a keychain call failed, with the model's names.
public enum KeychainError: Error, Equatable, Sendable, CustomStringConvertible {
    /// errSecDuplicateItem: an item with these attributes exists in that group.
    case duplicateItem
    /// errSecItemNotFound: no item matches in the groups the extension may use.
    case itemNotFound
    /// The group is not one of the app's, or the extension's manifest names no app.
    case notPermitted(String)
    /// errSecParam: the attributes or data are not acceptable.
    case invalid(String)
    /// The process was not launched by extensiond.
    case notSupervised
    /// extensiond failed, or is gone.
    case failed(String)

    init(_ code: FailureCode, _ text: String) {
        switch code {
        case .duplicateItem: self = .duplicateItem
        case .itemNotFound: self = .itemNotFound
        case .notPermitted: self = .notPermitted(text)
        case .badRequest, .limitReached: self = .invalid(text)
        default: self = .failed(text)
        }
    }

    public var description: String {
        switch self {
        case .duplicateItem: "duplicate item"
        case .itemNotFound: "item not found"
        case .notSupervised: "not launched by extensiond"
        case .notPermitted(let text), .invalid(let text), .failed(let text): text
        }
    }
}
