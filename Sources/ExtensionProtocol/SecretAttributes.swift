/// The description of a secret item, or a query for items (docs/secrets.md): its class, its
/// access group and its attributes, each present or not. On the wire (docs/protocol.md): class
/// u8, group string(255), a u8 bitmask of the fields present, then each present field in
/// declaration order.
public struct SecretAttributes: Equatable, Hashable, Sendable, Codable {
    /// What kind of item.
    public enum ItemClass: UInt8, Sendable, Codable {
        /// Any class: queries only.
        case any = 0
        /// A generic password: `service`, `account`.
        case genericPassword = 1
        /// An internet password: `server`, `account`, `protocol`, `port`, `path`.
        case internetPassword = 2
    }

    /// The item's class (`.any` in a query that takes both).
    public var itemClass: ItemClass
    /// The access group; empty: in a query, every group the caller may use; in an add, the
    /// caller's first group.
    public var group: String
    /// A generic password's service.
    public var service: String?
    /// The account, of either class.
    public var account: String?
    /// An internet password's server.
    public var server: String?
    /// An internet password's protocol (`https`, `imap`…).
    public var `protocol`: String?
    /// An internet password's port.
    public var port: UInt16?
    /// An internet password's path.
    public var path: String?
    /// The item's label, shown to administrators (`extctl secrets list`).
    public var label: String?

    /// Attributes as given.
    public init(
        itemClass: ItemClass, group: String = "", service: String? = nil, account: String? = nil, server: String? = nil, protocol: String? = nil,
        port: UInt16? = nil, path: String? = nil, label: String? = nil
    ) {
        self.itemClass = itemClass
        self.group = group
        self.service = service
        self.account = account
        self.server = server
        self.protocol = `protocol`
        self.port = port
        self.path = path
        self.label = label
    }

    /// The longest `path`, and `protocol`, in UTF-8 bytes.
    public static let maxPath = 1_024
    /// The longest `protocol`, in UTF-8 bytes.
    public static let maxProtocol = 32

    /// What makes two items the same item: class, group, and the class's attributes (an absent
    /// one equal to an empty one).
    public var identity: [String] {
        switch itemClass {
        case .genericPassword, .any: ["\(itemClass.rawValue)", group, service ?? "", account ?? ""]
        case .internetPassword: ["2", group, server ?? "", account ?? "", self.protocol ?? "", "\(port ?? 0)", path ?? ""]
        }
    }

    /// Whether the item these attributes describe matches `query` (its group checked apart):
    /// every attribute the query gives is equal, an absent one counting as empty (a port as 0),
    /// as in `identity`.
    public func matches(_ query: SecretAttributes) -> Bool {
        if query.itemClass != .any && query.itemClass != itemClass { return false }
        func same(_ q: String?, _ v: String?) -> Bool { q == nil || q == (v ?? "") }
        return same(query.service, service) && same(query.account, account) && same(query.server, server) && same(query.protocol, self.protocol)
            && (query.port == nil || query.port == (port ?? 0)) && same(query.path, path) && same(query.label, label)
    }
}

/// Secret bytes: the only holder of its buffer, which it overwrites with zeros when it is
/// released, so that no copy it made outlives it in the heap. Never printed (`description`
/// says only the length).
///
/// Sendable: `bytes` is immutable after `init` (`deinit` alone writes it, when no other
/// reference exists).
public final class SecretData: @unchecked Sendable, Equatable, CustomStringConvertible {
    private var bytes: [UInt8]

    /// Takes `bytes` (the caller should keep no other reference to its storage, or that copy
    /// is not cleared).
    public init(_ bytes: [UInt8]) { self.bytes = bytes }

    /// A copy of `raw`.
    public init(copying raw: UnsafeRawBufferPointer) { bytes = Array(raw) }

    /// How many bytes.
    public var count: Int { bytes.count }

    /// Runs `body` over the bytes, which it must not keep.
    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R { try bytes.withUnsafeBytes(body) }

    /// A copy of the bytes, for an API that takes an array: its caller clears it.
    public func copyBytes() -> [UInt8] { bytes }

    deinit {
        bytes.withUnsafeMutableBytes { raw in
            guard let base = raw.baseAddress else { return }
            // volatile-like: a loop the optimizer keeps, since the buffer is then freed.
            for i in 0..<raw.count { (base + i).storeBytes(of: 0, as: UInt8.self) }
        }
    }

    /// Equal bytes.
    public static func == (a: SecretData, b: SecretData) -> Bool { a.bytes == b.bytes }

    /// Its length, never its bytes.
    public var description: String { "<\(bytes.count) secret bytes>" }
}

/// One item as the daemon returns it: attributes, and its data when asked for.
public struct SecretItem: Equatable, Sendable {
    /// Its class, group and attributes.
    public var attributes: SecretAttributes
    /// Its data, when the query asked for it.
    public var data: SecretData?

    /// An item with these parts.
    public init(attributes: SecretAttributes, data: SecretData?) {
        self.attributes = attributes
        self.data = data
    }
}
