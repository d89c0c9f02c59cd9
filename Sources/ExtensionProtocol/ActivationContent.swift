/// What a host holds and wants an extension for, counted by kind: the content of a discovery
/// query (`Message.discover`), matched against each extension's `activation` rule.
///
/// Kinds are `text`, `url`, `image`, `file`, or a MIME type (`type/subtype`, e.g.
/// `application/pdf`). A kind with count 0 is the same as an absent one.
public struct ActivationContent: Equatable, Sendable {
    /// The four kinds with a name of their own; every other kind is a MIME type.
    public static let namedKinds: Set<String> = ["text", "url", "image", "file"]
    /// Most kinds in one query.
    public static let maxKinds = 64
    /// The largest count of one kind: a manifest's activation rule accepts at most this many.
    public static let maxCount: UInt32 = 10_000

    /// Count per kind, without zero counts.
    public private(set) var counts: [String: UInt32]

    /// The content with these counts. Throws `ActivationContent.Problem` naming the first kind
    /// that is neither a named kind nor a `type/subtype` MIME type, or whose count is over
    /// `maxCount`, or when there are more than `maxKinds` kinds.
    public init(_ counts: [String: UInt32]) throws(Problem) {
        guard counts.count <= Self.maxKinds else { throw Problem("more than \(Self.maxKinds) kinds of content") }
        for kind in counts.keys.sorted() {
            guard Self.isKind(kind) else {
                throw Problem("'\(kind)' is not a kind of content (text, url, image, file, or a MIME type such as application/pdf)")
            }
            if let count = counts[kind], count > Self.maxCount {
                throw Problem("'\(kind)=\(count)': a count is an integer from 0 to \(Self.maxCount)")
            }
        }
        self.counts = counts.filter { $0.value > 0 }
    }

    /// Parses `url=1,image=3,application/pdf=1` (`extctl list --content`). Throws a `Problem`
    /// naming the item that is not `KIND=COUNT` or names no kind.
    public init(parsing text: String) throws(Problem) {
        var counts: [String: UInt32] = [:]
        for item in text.split(separator: ",", omittingEmptySubsequences: false) {
            let parts = item.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard parts.count == 2, let count = UInt32(parts[1]) else {
                throw Problem("'\(item)' is not KIND=COUNT (e.g. url=1,image=3)")
            }
            let kind = String(parts[0])
            guard counts[kind] == nil else { throw Problem("'\(kind)' is given twice") }
            counts[kind] = count
        }
        try self.init(counts)
    }

    /// Whether `kind` is a named kind or a MIME type (`type/subtype`, no spaces, no `*`).
    public static func isKind(_ kind: String) -> Bool {
        if namedKinds.contains(kind) { return true }
        return isMIMEType(kind, allowingWildcard: false)
    }

    /// `type/subtype` with a non-empty type and subtype of printable ASCII other than `/` and
    /// spaces; with `allowingWildcard`, the subtype may be `*` (`image/*`).
    public static func isMIMEType(_ text: String, allowingWildcard: Bool) -> Bool {
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2, !parts[0].isEmpty, !parts[1].isEmpty, text.utf8.count <= WireLimits.maxIdentifier else { return false }
        func plain(_ s: Substring) -> Bool { s.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "*") } }
        return plain(parts[0]) && (plain(parts[1]) || (allowingWildcard && parts[1] == "*"))
    }

    /// Why a content description was refused, for people.
    public struct Problem: Error, Equatable, Sendable, CustomStringConvertible {
        /// What was refused and why, for people.
        public let description: String
        /// A problem described by `description`.
        public init(_ description: String) { self.description = description }
    }
}

/// One extension a discovery query found: what a share sheet needs to show it.
public struct DiscoveredExtension: Equatable, Sendable {
    /// The extension id, to `begin` a request with.
    public var id: String
    /// Its extension point.
    public var point: String
    /// The manifest's `displayName`, if it has one.
    public var displayName: String?

    /// An entry with these fields.
    public init(id: String, point: String, displayName: String?) {
        self.id = id
        self.point = point
        self.displayName = displayName
    }
}
