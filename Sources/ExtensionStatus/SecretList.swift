/// The answer to a `query` of kind 4 (docs/protocol.md), which `extctl secrets list --json`
/// prints: each secret item's class, access group and label, sorted by group then label. Never
/// its data, nor its other attributes.
public struct SecretList: JSONDocument, Equatable {
    /// One item.
    public struct Item: Codable, Equatable, Sendable {
        /// `generic-password` or `internet-password`.
        public var `class`: String
        /// Its access group.
        public var group: String
        /// Its label; `null` when it has none.
        public var label: String?

        /// An item with these fields.
        public init(class: String, group: String, label: String?) {
            self.class = `class`
            self.group = group
            self.label = label
        }

        enum CodingKeys: String, CodingKey { case `class`, group, label }

        /// Writes every member, `label` as `null` when absent.
        public func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(self.class, forKey: .class)
            try c.encode(group, forKey: .group)
            if let label { try c.encode(label, forKey: .label) } else { try c.encodeNil(forKey: .label) }
        }
    }

    /// The items.
    public var items: [Item]

    /// A list of these items.
    public init(items: [Item]) { self.items = items }
}
