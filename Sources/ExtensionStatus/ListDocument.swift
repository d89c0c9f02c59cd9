/// The document of `extctl list --json`, the answer to a `query` of kind 1 (docs/json.md,
/// "list"): every known extension, sorted by id.
public struct ListDocument: JSONDocument, Equatable {
    /// One extension of the list.
    public struct Extension: Codable, Sendable, Equatable {
        /// The manifest's id.
        public var id: String
        /// Its extension point.
        public var point: String
        /// Its public state (docs/json.md, "States").
        public var state: String
        /// When the public state last changed, wall-clock ISO 8601.
        public var since: String
        /// Its leader's pid; always written, `null` when it has no process.
        public var pid: Int32?
        /// Open requests.
        public var requests: Int
        /// Live assertions, as a count.
        public var assertions: Int
        /// How its previous process ended; always written, `null` when none has.
        public var lastExit: ExitInfo?
        /// The id of the app that contains it; left out when it names none.
        public var app: String? = nil

        /// An entry with the fields given.
        public init(id: String, point: String, state: String, since: String, pid: Int32?, requests: Int, assertions: Int, lastExit: ExitInfo?) {
            self.id = id
            self.point = point
            self.state = state
            self.since = since
            self.pid = pid
            self.requests = requests
            self.assertions = assertions
            self.lastExit = lastExit
        }

        enum CodingKeys: String, CodingKey {
            case app, assertions, id, lastExit, pid, point, requests, since, state
        }

        /// Writes the members in `JSONWriter.keyOrder`: the always-written ones (`null` when empty), and the optional ones when they apply.
        public func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encodeIfPresent(app, forKey: .app)
            try c.encode(assertions, forKey: .assertions)
            try c.encode(id, forKey: .id)
            if let lastExit { try c.encode(lastExit, forKey: .lastExit) } else { try c.encodeNil(forKey: .lastExit) }
            if let pid { try c.encode(pid, forKey: .pid) } else { try c.encodeNil(forKey: .pid) }
            try c.encode(point, forKey: .point)
            try c.encode(requests, forKey: .requests)
            try c.encode(since, forKey: .since)
            try c.encode(state, forKey: .state)
        }
    }

    /// An app the manifests declare (`"kind": "app"`), with the extensions that name it.
    public struct App: Codable, Sendable, Equatable {
        /// Its id (reverse-DNS; on a desktop, its freedesktop application id).
        public var id: String
        /// The name shown for it; always written, `null` when its manifest gives none.
        public var displayName: String?
        /// Its app groups, in its manifest's order.
        public var groups: [String]
        /// The URL schemes it answers.
        public var urlSchemes: [String]
        /// How it is brought up: `dbus-activation` or `executable`.
        public var launch: String
        /// The ids of the known extensions that name it, sorted.
        public var extensions: [String]
        /// The uid its processes run as, under a root daemon (`user`, or one of its own); always
        /// written, `null` otherwise.
        public var uid: UInt32?

        /// An entry with the fields given.
        public init(
            id: String, displayName: String?, groups: [String], urlSchemes: [String], launch: String, extensions: [String], uid: UInt32? = nil
        ) {
            self.id = id
            self.displayName = displayName
            self.groups = groups
            self.urlSchemes = urlSchemes
            self.launch = launch
            self.extensions = extensions
            self.uid = uid
        }

        enum CodingKeys: String, CodingKey {
            case displayName, extensions, groups, id, launch, uid, urlSchemes
        }

        /// Writes the members in `JSONWriter.keyOrder`.
        public func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            if let displayName { try c.encode(displayName, forKey: .displayName) } else { try c.encodeNil(forKey: .displayName) }
            try c.encode(extensions, forKey: .extensions)
            try c.encode(groups, forKey: .groups)
            try c.encode(id, forKey: .id)
            try c.encode(launch, forKey: .launch)
            if let uid { try c.encode(uid, forKey: .uid) } else { try c.encodeNil(forKey: .uid) }
            try c.encode(urlSchemes, forKey: .urlSchemes)
        }
    }

    /// Every declared app, sorted by id; always written, empty when there is none.
    public var apps: [App]
    /// One entry per extension, sorted by id.
    public var extensions: [Extension]

    /// A list of these apps and extensions.
    public init(apps: [App] = [], extensions: [Extension]) {
        self.apps = apps
        self.extensions = extensions
    }

    enum CodingKeys: String, CodingKey {
        case apps, extensions
    }

    /// Reads a list; one without `apps` (an older daemon's) has none.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        apps = try c.decodeIfPresent([App].self, forKey: .apps) ?? []
        extensions = try c.decode([Extension].self, forKey: .extensions)
    }

    /// Writes `apps`, then `extensions`.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(apps, forKey: .apps)
        try c.encode(extensions, forKey: .extensions)
    }
}
