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
    /// What loads but will not work as the manifest expects, one sentence each, `ID: …`: a
    /// program the sandbox hides from its extension (docs/extensiond.md, "Launch errors").
    /// Left out when there is none.
    public var warnings: [String]

    /// A report with the fields given.
    public init(loaded: Int, errors: [String], kept: [Kept], warnings: [String] = []) {
        self.loaded = loaded
        self.errors = errors
        self.kept = kept
        self.warnings = warnings
    }

    enum CodingKeys: String, CodingKey {
        case errors, kept, loaded, warnings
    }

    /// Reads the members; `warnings` may be absent (none).
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        loaded = try c.decode(Int.self, forKey: .loaded)
        errors = try c.decode([String].self, forKey: .errors)
        kept = try c.decode([Kept].self, forKey: .kept)
        warnings = try c.decodeIfPresent([String].self, forKey: .warnings) ?? []
    }

    /// Writes the members in `JSONWriter.keyOrder`: the always-written ones (`null` when empty), and the optional ones when they apply.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(errors, forKey: .errors)
        try c.encode(kept, forKey: .kept)
        try c.encode(loaded, forKey: .loaded)
        if !warnings.isEmpty { try c.encode(warnings, forKey: .warnings) }
    }
}
