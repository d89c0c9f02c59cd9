/// Why a user cannot reach a file: the first directory on its path it may not search, or the file
/// itself when it may not execute it (docs/extensiond.md, "Launch errors"). Pure: the shell gives
/// the ownership and mode of each component as root sees them.
public enum PathTraversal {
    /// One component of a path, as `stat` gives it.
    public struct Component: Equatable, Sendable {
        /// The path up to and including this component.
        public var path: String
        /// Its mode's permission bits (`0o755`).
        public var permissions: UInt32
        /// Its owner's uid.
        public var owner: UInt32
        /// Its group.
        public var group: UInt32
        /// Whether it is a directory (else the file at the end of the path).
        public var isDirectory: Bool

        /// A component with these facts.
        public init(path: String, permissions: UInt32, owner: UInt32, group: UInt32, isDirectory: Bool) {
            self.path = path
            self.permissions = permissions
            self.owner = owner
            self.group = group
            self.isDirectory = isDirectory
        }
    }

    /// The prefixes of an absolute `path`, shortest first, without `/` itself:
    /// `/a/b/c` → `/a`, `/a/b`, `/a/b/c`.
    public static func prefixes(_ path: String) -> [String] {
        var result: [String] = []
        var current = ""
        for part in path.split(separator: "/", omittingEmptySubsequences: true) {
            current += "/" + part
            result.append(current)
        }
        return result
    }

    /// The first component `credentials` may not pass: a directory without search permission
    /// for it, or the last component, a file it may not execute. Root searches every directory
    /// but executes only a file with at least one execute bit (as the kernel decides). Nil when
    /// every component lets it through (its permission problem lies elsewhere). Mode bits only:
    /// access control lists are not read, so a refusal an ACL makes is not named here.
    public static func firstRefused(_ components: [Component], as credentials: Credentials) -> Component? {
        guard credentials.uid != 0 else { return components.first { !$0.isDirectory && $0.permissions & 0o111 == 0 } }
        for c in components {
            let bits: UInt32
            if c.owner == credentials.uid {
                bits = (c.permissions >> 6) & 7
            } else if c.group == credentials.gid || credentials.groups.contains(c.group) {
                bits = (c.permissions >> 3) & 7
            } else {
                bits = c.permissions & 7
            }
            if bits & 1 == 0 { return c }
        }
        return nil
    }

    /// The sentence naming what `credentials` cannot pass on the way to `target`.
    public static func explanation(_ refused: Component, target: String, as credentials: Credentials) -> String {
        let mode = "0" + String(refused.permissions & 0o7777, radix: 8)
        let what = refused.isDirectory ? "search the directory" : "execute"
        let via = refused.path == target ? "" : " on the way to \(target)"
        return "uid \(credentials.uid) (the extension's) cannot \(what) \(refused.path) (mode \(mode), owner \(refused.owner), group \(refused.group))\(via)"
    }
}
