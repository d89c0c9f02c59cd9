/// A user or group as a manifest names it: a name from the account database, or a number.
public enum AccountReference: Equatable, Sendable, CustomStringConvertible, Codable {
    /// A name, looked up in the account database when credentials are resolved.
    case name(String)
    /// A numeric uid or gid, used as is.
    case number(UInt32)

    /// The name in single quotes, or the number, as refusals quote it.
    public var description: String {
        switch self {
        case .name(let n): return "'\(n)'"
        case .number(let n): return "\(n)"
        }
    }
}

/// The credentials a manifest asks for (`user`, `group`, `supplementaryGroups`), as written.
public struct CredentialRequest: Equatable, Sendable, Codable {
    /// `user`: the account to run as; nil when the manifest names none.
    public var user: AccountReference?
    /// `group`: the primary group; nil means the user's primary group.
    public var group: AccountReference?
    /// `supplementaryGroups`, in the manifest's order; empty when not given.
    public var supplementaryGroups: [AccountReference]

    /// A request as a manifest writes it; every key defaults to absent.
    public init(user: AccountReference? = nil, group: AccountReference? = nil, supplementaryGroups: [AccountReference] = []) {
        self.user = user
        self.group = group
        self.supplementaryGroups = supplementaryGroups
    }
}

/// The credentials an extension's processes run with: switched to in the child before exec
/// under a root daemon; under another daemon, the daemon's own, inherited. Either way the
/// child sets `PR_SET_NO_NEW_PRIVS` and an empty capability set.
public struct Credentials: Equatable, Sendable, Codable {
    /// The user id the processes run as.
    public var uid: UInt32
    /// The primary group id the processes run as.
    public var gid: UInt32
    /// Supplementary groups (setgroups), in order, without duplicates.
    public var groups: [UInt32]
    /// Whether `uid` is this extension's alone (allocated from `extensionUIDs`).
    public var ownUID: Bool

    /// Credentials with these ids; by default no supplementary groups, and a uid not the
    /// extension's own.
    public init(uid: UInt32, gid: UInt32, groups: [UInt32] = [], ownUID: Bool = false) {
        self.uid = uid
        self.gid = gid
        self.groups = groups
        self.ownUID = ownUID
    }
}

/// The account database, as lookups (the shell answers from getpwnam/getgrnam; tests from
/// tables).
public struct AccountDirectory: Sendable {
    /// A user by name: its uid and primary gid.
    public var userNamed: @Sendable (String) -> (uid: UInt32, gid: UInt32)?
    /// The primary gid of a uid that has an entry.
    public var primaryGroup: @Sendable (UInt32) -> UInt32?
    /// A group by name: its gid.
    public var groupNamed: @Sendable (String) -> UInt32?

    /// A directory answering with these lookups.
    public init(
        userNamed: @escaping @Sendable (String) -> (uid: UInt32, gid: UInt32)?,
        primaryGroup: @escaping @Sendable (UInt32) -> UInt32?,
        groupNamed: @escaping @Sendable (String) -> UInt32?
    ) {
        self.userNamed = userNamed
        self.primaryGroup = primaryGroup
        self.groupNamed = groupNamed
    }

    /// A directory answering from tables: users name → (uid, gid), groups name → gid.
    public static func table(users: [String: (uid: UInt32, gid: UInt32)], groups: [String: UInt32]) -> AccountDirectory {
        let u = users.map { ($0.key, $0.value.uid, $0.value.gid) }
        return AccountDirectory(
            userNamed: { name in u.first { $0.0 == name }.map { ($0.1, $0.2) } },
            primaryGroup: { uid in u.first { $0.1 == uid }?.2 },
            groupNamed: { groups[$0] })
    }
}

/// The rules that turn a manifest's credential request into the credentials it runs with
/// (docs/security.md):
/// - A daemon that is not root runs every extension as itself, with its own gid and groups
///   (nothing is switched); a manifest asking for another user, another primary group or a
///   supplementary group the daemon lacks is refused.
/// - A root daemon runs an extension without `user` under a uid of its own (allocated from
///   `extensionUIDs`, primary gid the same number, no supplementary groups).
/// - A root daemon never runs an extension as uid 0, or with gid 0 or supplementary group 0,
///   unless its manifest says `"user": "root"` and the configuration has
///   `"allowRootExtensions": true`.
/// - `group` defaults to the user's primary group; a numeric user without an account entry
///   then needs `group`.
public struct CredentialRules: Sendable {
    /// The uid the daemon runs as; 0 is a root daemon, which switches each extension's credentials.
    public var daemonUID: UInt32
    /// The daemon's primary gid, which a non-root daemon's extensions run with.
    public var daemonGID: UInt32
    /// The daemon's supplementary groups (a non-root daemon may pass these on).
    public var daemonGroups: [UInt32]
    /// Whether a manifest saying `"user": "root"` may run as root (`allowRootExtensions` in
    /// the configuration).
    public var allowRootExtensions: Bool
    /// Where user and group names are looked up.
    public var accounts: AccountDirectory
    /// The ids a root daemon allocates, one uid (and gid) per extension and one gid per shared
    /// container (`extensionUIDs`): a manifest may not name one, which would give its
    /// extension another's processes, container or shared files. Nil: none is reserved.
    public var reserved: IdentityRange?

    /// Rules for a daemon with these ids and configuration; by default the daemon has no
    /// supplementary groups and refuses root extensions.
    public init(
        daemonUID: UInt32, daemonGID: UInt32, daemonGroups: [UInt32] = [], allowRootExtensions: Bool = false, accounts: AccountDirectory,
        reserved: IdentityRange? = nil
    ) {
        self.reserved = reserved
        self.daemonUID = daemonUID
        self.daemonGID = daemonGID
        self.daemonGroups = daemonGroups
        self.allowRootExtensions = allowRootExtensions
        self.accounts = accounts
    }

    /// Why a manifest may not name `id`, an id of the `reserved` range.
    static func taken(_ what: String, _ id: UInt32, _ reserved: IdentityRange) -> String {
        let last = UInt64(reserved.first) + UInt64(reserved.count) - 1
        return
            "\(what) \(id) is in the range extensiond allocates to extensions and shared containers (extensionUIDs: \(reserved.first) to \(last)): it would be another extension's"
    }

    /// Whether an extension with this request needs a uid of its own (root daemon, no `user`).
    public func needsOwnUID(_ request: CredentialRequest) -> Bool { daemonUID == 0 && request.user == nil }

    /// The credentials for `request`, in the manifest `file`. `ownUID` is the uid allocated to
    /// the extension (required when `needsOwnUID`). `extraGroups` are added as supplementary
    /// groups (shared containers). Refusals name the file and the key.
    public func resolve(
        _ request: CredentialRequest, file: String, ownUID: UInt32? = nil, extraGroups: [UInt32] = []
    ) -> Result<Credentials, ManifestError> {
        func fail(_ field: String, _ problem: String) -> Result<Credentials, ManifestError> {
            .failure(ManifestError(file: file, field: field, problem: problem))
        }
        // Users and groups by number or name.
        var uid: UInt32
        var primary: UInt32?
        switch request.user {
        case nil:
            uid = daemonUID
            if daemonUID == 0 {
                guard let ownUID else { return fail("user", "no uid could be allocated for this extension") }
                uid = ownUID
                primary = ownUID
            } else {
                primary = daemonGID
            }
        case .number(let n):
            uid = n
            primary = accounts.primaryGroup(n)
        case .name(let name):
            guard let found = accounts.userNamed(name) else { return fail("user", "no user named '\(name)' in the account database") }
            uid = found.uid
            primary = found.gid
        }
        if let reserved, request.user != nil, reserved.contains(uid) { return fail("user", Self.taken("uid", uid, reserved)) }
        var gid: UInt32
        switch request.group {
        case nil:
            guard let primary else {
                return fail("group", "user \(request.user!) has no account entry, so it has no primary group: name one with \"group\"")
            }
            gid = primary
        case .number(let n): gid = n
        case .name(let name):
            guard let found = accounts.groupNamed(name) else { return fail("group", "no group named '\(name)' in the account database") }
            gid = found
        }
        var groups: [UInt32] = []
        for (i, reference) in request.supplementaryGroups.enumerated() {
            let g: UInt32
            switch reference {
            case .number(let n): g = n
            case .name(let name):
                guard let found = accounts.groupNamed(name) else {
                    return fail("supplementaryGroups[\(i)]", "no group named '\(name)' in the account database")
                }
                g = found
            }
            if !groups.contains(g) { groups.append(g) }
        }

        if daemonUID != 0 {
            // The user session: extensions keep the daemon's uid, gid and groups (nothing is
            // switched in the child); the manifest may only name what they have.
            if uid != daemonUID {
                return fail(
                    "user",
                    "asks for user \(request.user!) (uid \(uid)), but this daemon runs as uid \(daemonUID) and is not root: it runs extensions as itself only")
            }
            if gid != daemonGID {
                return fail(
                    "group",
                    "asks for group \(request.group!) (gid \(gid)), but this daemon (uid \(daemonUID), not root) runs extensions with its own group \(daemonGID) only"
                )
            }
            for (i, g) in groups.enumerated() where g != daemonGID && !daemonGroups.contains(g) {
                return fail(
                    "supplementaryGroups[\(i)]",
                    "asks for group \(request.supplementaryGroups[i]) (gid \(g)), which this daemon (uid \(daemonUID), not root) does not have")
            }
            return .success(Credentials(uid: daemonUID, gid: daemonGID, groups: daemonGroups, ownUID: false))
        }

        // A root daemon: root only when the manifest says so and the configuration allows it.
        let rootAllowed = request.user == .name("root") && allowRootExtensions
        if uid == 0 && !rootAllowed {
            if request.user != .name("root") {
                return fail("user", "uid 0 is root: write \"user\": \"root\" (and allow it in the configuration) to run an extension as root")
            }
            return fail("user", "runs as root, which the configuration does not allow (set \"allowRootExtensions\": true in the daemon's configuration file)")
        }
        if gid == 0 && !rootAllowed {
            return fail(
                "group", "gid 0 (root's group) is refused for an extension not running as an allowed root (\"user\": \"root\" with allowRootExtensions)")
        }
        for (i, g) in groups.enumerated() where g == 0 && !rootAllowed {
            return fail(
                "supplementaryGroups[\(i)]",
                "gid 0 (root's group) is refused for an extension not running as an allowed root (\"user\": \"root\" with allowRootExtensions)")
        }
        // The allocated ids are the daemon's to give: an extension's own, a shared container's.
        if let reserved {
            if request.group != nil && reserved.contains(gid) { return fail("group", Self.taken("gid", gid, reserved)) }
            for (i, g) in groups.enumerated() where reserved.contains(g) { return fail("supplementaryGroups[\(i)]", Self.taken("gid", g, reserved)) }
        }
        for g in extraGroups where !groups.contains(g) { groups.append(g) }
        return .success(Credentials(uid: uid, gid: gid, groups: groups, ownUID: request.user == nil))
    }
}
