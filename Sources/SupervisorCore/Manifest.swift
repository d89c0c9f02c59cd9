/// How the supervisor learns that a launched extension is ready for requests.
public enum Readiness: String, Sendable, Codable, Equatable {
    /// Ready when the process has linked `ExtensionRuntime` and announced itself (the default).
    case runtime
    /// Ready as soon as exec succeeded: any program, lifecycle only, no host channel.
    case exec
}

/// Which hosts may open an extension. Empty lists mean the default: the daemon's uid and root.
public struct HostRestriction: Equatable, Sendable, Encodable {
    /// User ids whose processes may open it.
    public var uids: [UInt32]
    /// Group ids whose members (primary or supplementary) may open it.
    public var gids: [UInt32]

    /// A restriction with these lists; with both empty, the default applies.
    public init(uids: [UInt32] = [], gids: [UInt32] = []) {
        self.uids = uids
        self.gids = gids
    }
}

/// One extension, as declared by its manifest file, with its policy resolved.
public struct Manifest: Equatable, Sendable, Codable {
    /// Unique reverse-DNS identifier, e.g. `com.example.stocks.widget`.
    public var id: String
    /// The extension point it belongs to (`widget`, `share`, `action`, `default`, or a configured one).
    public var point: String
    /// Absolute path of the executable.
    public var executable: String
    /// Arguments passed after the executable's path.
    public var arguments: [String]
    /// Environment added to the clean environment the supervisor gives every extension.
    public var environment: [String: String]
    /// How readiness is announced.
    public var readiness: Readiness
    /// The resolved policy (extension point defaults with the manifest's overrides).
    public var policy: Policy
    /// Which hosts may begin requests on it.
    public var hosts: HostRestriction
    /// Whether its processes may connect to the control socket themselves (as hosts or
    /// `extctl`). Off by default: an extension acts only through its inherited channel.
    public var hostAccess: Bool
    /// The name a host shows for it (a share sheet's row), from `displayName`.
    public var displayName: String?
    /// Which content it handles, for discovery by content; nil: it matches no content query
    /// (it can still be opened by id).
    public var activation: ActivationRule?
    /// The manifest file it was read from.
    public var source: String
    /// The credentials it asks for (`user`, `group`, `supplementaryGroups`).
    public var credentialRequest: CredentialRequest
    /// The credentials it runs with, resolved by `CredentialRules` when it is loaded; nil: the
    /// daemon's own (only where nothing resolved them, such as in core tests).
    public var credentials: Credentials?
    /// The shared containers it names (`sharedContainers`), reverse-DNS names.
    public var sharedContainers: [String] = []
    /// The directory of each named container, filled in when it is loaded (name → path).
    public var containerPaths: [String: String] = [:]
    /// Whether it runs in the sandbox (docs/security.md); false only for `"sandbox": "none"`,
    /// which the daemon's configuration must allow (`allowUnsandboxedExtensions`).
    public var sandboxed = true
    /// The id of the app that contains it (`"app"`, an `AppManifest`), or nil for none.
    public var app: String? = nil

    /// A manifest with these fields. Left out: the `default` point, `runtime` readiness, no
    /// arguments, environment, display name or activation rule, the default hosts, no host
    /// access, no credential request, source `<memory>`, and nil `credentials` (the daemon's own).
    public init(
        id: String, point: String = "default", executable: String, arguments: [String] = [],
        environment: [String: String] = [:], readiness: Readiness = .runtime, policy: Policy,
        hosts: HostRestriction = HostRestriction(), hostAccess: Bool = false, displayName: String? = nil,
        activation: ActivationRule? = nil, source: String = "<memory>", credentialRequest: CredentialRequest = CredentialRequest(),
        credentials: Credentials? = nil
    ) {
        self.id = id
        self.point = point
        self.executable = executable
        self.arguments = arguments
        self.environment = environment
        self.readiness = readiness
        self.policy = policy
        self.hosts = hosts
        self.hostAccess = hostAccess
        self.displayName = displayName
        self.activation = activation
        self.source = source
        self.credentialRequest = credentialRequest
        self.credentials = credentials
    }
}

/// A manifest or configuration file that could not be used, naming the file and the field.
public struct ManifestError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The file that was refused.
    public var file: String
    /// The field at fault (a dotted path such as `policy.backgroundSeconds`), or nil for the whole file.
    public var field: String?
    /// What is wrong, for people.
    public var problem: String

    /// An error about `file`, and about `field` in it when given.
    public init(file: String, field: String? = nil, problem: String) {
        self.file = file
        self.field = field
        self.problem = problem
    }

    /// `FILE: field 'FIELD': PROBLEM`, or `FILE: PROBLEM` without a field.
    public var description: String {
        if let field { return "\(file): field '\(field)': \(problem)" }
        return "\(file): \(problem)"
    }
}
