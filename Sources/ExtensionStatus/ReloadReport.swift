/// The daemon's answer to `reload`, which `extctl reload --json` prints (docs/json.md, "reload").
public struct ReloadReport: JSONDocument, Equatable {
    /// An extension whose own file was refused, and which keeps its previous definition.
    public struct Kept: Codable, Sendable, Equatable {
        /// The extension's id.
        public var id: String
        /// The refused file.
        public var file: String

        /// A kept definition with the fields given.
        public init(id: String, file: String) {
            self.id = id
            self.file = file
        }

        enum CodingKeys: String, CodingKey {
            case file, id
        }

        /// Writes the members in `JSONWriter.keyOrder`: the always-written ones (`null` when empty), and the optional ones when they apply.
        public func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(file, forKey: .file)
            try c.encode(id, forKey: .id)
        }
    }

    /// Manifests read afresh from their files and now in force.
    public var loaded: Int
    /// Each refused manifest, as `FILE: field 'FIELD': PROBLEM` or `FILE: PROBLEM`.
    public var errors: [String]
    /// The extensions that keep their previous definition; empty when none do.
    public var kept: [Kept]

    /// A report with the fields given.
    public init(loaded: Int, errors: [String], kept: [Kept]) {
        self.loaded = loaded
        self.errors = errors
        self.kept = kept
    }

    enum CodingKeys: String, CodingKey {
        case errors, kept, loaded
    }

    /// Writes the members in `JSONWriter.keyOrder`: the always-written ones (`null` when empty), and the optional ones when they apply.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(errors, forKey: .errors)
        try c.encode(kept, forKey: .kept)
        try c.encode(loaded, forKey: .loaded)
    }
}
