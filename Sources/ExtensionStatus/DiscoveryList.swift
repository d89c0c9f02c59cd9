/// What `extctl list --json --point POINT --content …` prints (docs/json.md, "Discovery"): the
/// extensions a discovery query found, sorted by id. On the wire the answer is `discovered`
/// messages; `extctl` writes this document from them.
public struct DiscoveryList: JSONDocument, Equatable {
    /// One extension found.
    public struct Extension: Codable, Sendable, Equatable {
        /// The manifest's id, to open it with.
        public var id: String
        /// Its extension point.
        public var point: String
        /// The manifest's `displayName`; always written, `null` when it has none.
        public var displayName: String?

        /// An entry with the fields given.
        public init(id: String, point: String, displayName: String?) {
            self.id = id
            self.point = point
            self.displayName = displayName
        }

        enum CodingKeys: String, CodingKey {
            case displayName, id, point
        }

        /// Writes the members in `JSONWriter.keyOrder`: the always-written ones (`null` when empty), and the optional ones when they apply.
        public func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            if let displayName { try c.encode(displayName, forKey: .displayName) } else { try c.encodeNil(forKey: .displayName) }
            try c.encode(id, forKey: .id)
            try c.encode(point, forKey: .point)
        }
    }

    /// The extensions found, sorted by id.
    public var extensions: [Extension]

    /// A list of these extensions.
    public init(extensions: [Extension]) {
        self.extensions = extensions
    }
}
