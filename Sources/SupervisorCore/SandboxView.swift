/// The mounts that give a sandboxed extension its view of the file system, in the order they
/// are applied: every directory before what lies below it. Pure: the shell passes paths that
/// exist, and the child builds the view from this list (docs/security.md, "File system").
public struct SandboxView: Equatable, Sendable {
    /// What a mount does to its directory.
    public enum Kind: Int32, Sendable {
        /// A private, empty, writable directory (`/tmp`, `/var/tmp`), gone with the extension.
        case scratch = 0
        /// An empty, read-only directory (`/home`, the state directory): what was there is hidden.
        case mask = 1
        /// The directory as it is, read-only, even below a mask or scratch directory.
        case keepReadOnly = 2
        /// The same, writable (its container, its shared containers).
        case keepWritable = 3
    }

    /// One mount of the view.
    public struct Mount: Equatable, Sendable {
        /// The absolute path of the directory it applies to.
        public var path: String
        /// What it does to that directory.
        public var kind: Kind

        /// A mount of `kind` at `path`.
        public init(_ path: String, _ kind: Kind) {
            self.path = path
            self.kind = kind
        }
    }

    /// The mounts, in order. Only those that change what the extension sees are kept: a mask
    /// below a mask or scratch directory is already hidden, and a read-only directory visible
    /// as it is (the rest of the system is read-only) needs no mount.
    public private(set) var mounts: [Mount]

    /// The view from the directories to hide (`masks`), to make private (`scratch`), and to keep
    /// visible read-only (`readOnly`) or writable (`writable`). Paths are absolute; trailing
    /// slashes are ignored. A path asked for twice keeps its most open kind (writable over
    /// read-only, a kept directory over a hidden one).
    public init(scratch: [String], masks: [String], readOnly: [String], writable: [String]) {
        var wanted: [String: Kind] = [:]
        func add(_ paths: [String], _ kind: Kind) {
            for raw in paths {
                let path = SandboxView.normalized(raw)
                if let existing = wanted[path], existing.rawValue >= kind.rawValue { continue }
                wanted[path] = kind
            }
        }
        add(masks, .mask)
        add(scratch, .scratch)
        add(readOnly, .keepReadOnly)
        add(writable, .keepWritable)
        // Parents first; at equal depth, by path (bytes), so the order is the same every time.
        // Each depth is counted once, and paths are compared as bytes: a plan is made at every
        // launch, and String's comparison (Unicode-aware) and `split` made most of its cost.
        let ordered = wanted.map { (depth: SandboxView.depth($0.key), mount: Mount($0.key, $0.value)) }.sorted {
            $0.depth != $1.depth ? $0.depth < $1.depth : $0.mount.path.utf8.lexicographicallyPrecedes($1.mount.path.utf8)
        }.map(\.mount)
        var applied: [Mount] = []
        for m in ordered {
            // What the directory looks like before this mount: as the nearest applied mount
            // above it made it, or as the system has it.
            let above = applied.last { SandboxView.isBelow(m.path, $0.path) }?.kind
            let hidden = above == .mask || above == .scratch
            switch m.kind {
            case .mask, .scratch:
                if hidden { continue }
            case .keepReadOnly:
                // The system outside the mounts is read-only already.
                if above == nil || above == .keepReadOnly { continue }
            case .keepWritable:
                if above == .keepWritable { continue }
            }
            applied.append(m)
        }
        mounts = applied
    }

    /// Whether `path` lies strictly below `ancestor`.
    public static func isBelow(_ path: String, _ ancestor: String) -> Bool {
        let (p, a) = (path.utf8, ancestor.utf8)
        if a.elementsEqual("/".utf8) { return !p.elementsEqual("/".utf8) }
        return p.count > a.count && p.starts(with: a) && p[p.index(p.startIndex, offsetBy: a.count)] == UInt8(ascii: "/")
    }

    /// `path` without its trailing slashes ("/" stays "/").
    public static func normalized(_ path: String) -> String {
        var p = Substring(path)
        while p.count > 1 && p.hasSuffix("/") { p = p.dropLast() }
        return String(p)
    }

    /// How many components `path` has ("/a//b/" has 2).
    public static func depth(_ path: String) -> Int {
        var count = 0
        var previous = UInt8(ascii: "/")
        for byte in path.utf8 {
            if byte != UInt8(ascii: "/") && previous == UInt8(ascii: "/") { count += 1 }
            previous = byte
        }
        return count
    }
}
