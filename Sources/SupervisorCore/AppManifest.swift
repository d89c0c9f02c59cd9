/// An app that contains extensions, as its manifest declares it (`"kind": "app"`, docs/manifest.md,
/// "Apps"): its identity, the app groups it and its extensions belong to, the URL schemes it
/// answers, and how it is brought up. An extension names its app (`"app"`), and may use only
/// that app's groups.
public struct AppManifest: Equatable, Sendable, Codable {
    /// Reverse-DNS id; on a desktop, the freedesktop application id of its `.desktop` file.
    public var id: String
    /// The name shown for it, from `displayName`.
    public var displayName: String?
    /// Its app groups (`groups`): the shared containers, and the defaults suites and secret
    /// access groups, its extensions may use. Reverse-DNS names, each once.
    public var groups: [String]
    /// The URL schemes it answers (`urlSchemes`), lower-cased, each once.
    public var urlSchemes: [String]
    /// How it is brought up.
    public var launch: AppLaunch
    /// The manifest file it was read from.
    public var source: String
    /// The user it runs as (`user`, a name or a number), under a root daemon; nil: a uid of
    /// its own is allocated.
    public var user: AccountReference?
    /// Under a root daemon, the uid its processes run as, resolved from `user` or allocated
    /// (kept across restarts, as extensions' are) when it is loaded: a connecting process of
    /// that uid is the app's. Nil under a daemon that is not root, and until loaded.
    public var uid: UInt32?

    /// An app with these fields, stored as given.
    public init(
        id: String, displayName: String? = nil, groups: [String], urlSchemes: [String] = [], launch: AppLaunch, source: String = "<memory>",
        user: AccountReference? = nil, uid: UInt32? = nil
    ) {
        self.id = id
        self.displayName = displayName
        self.groups = groups
        self.urlSchemes = urlSchemes
        self.launch = launch
        self.source = source
        self.user = user
        self.uid = uid
    }
}

/// How an app is brought up (to open one of its URLs, say).
public enum AppLaunch: Equatable, Sendable, Codable {
    /// Through D-Bus activation of its desktop entry (`"dbusActivatable": true`): the
    /// `org.freedesktop.Application` interface at the bus name that is its id.
    case dbusActivatable
    /// By running `path` with `arguments` (`"executable"`, `"arguments"`).
    case executable(path: String, arguments: [String])
}
