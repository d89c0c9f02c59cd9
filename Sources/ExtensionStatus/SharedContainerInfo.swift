/// The answer to a `query` of kind 3 (docs/protocol.md): where a shared container is, which
/// `extctl container --json` prints.
public struct SharedContainerInfo: JSONDocument, Equatable {
    /// The container's name, such as `group.com.example.stocks`.
    public var name: String
    /// Its directory.
    public var path: String
    /// Its group; always written, `null` under a daemon that is not root.
    public var gid: UInt32?

    /// An answer with the fields given.
    public init(name: String, path: String, gid: UInt32?) {
        self.name = name
        self.path = path
        self.gid = gid
    }

    enum CodingKeys: String, CodingKey {
        case gid, name, path
    }

    /// Writes the members in `JSONWriter.keyOrder`: the always-written ones (`null` when empty), and the optional ones when they apply.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        if let gid { try c.encode(gid, forKey: .gid) } else { try c.encodeNil(forKey: .gid) }
        try c.encode(name, forKey: .name)
        try c.encode(path, forKey: .path)
    }
}
