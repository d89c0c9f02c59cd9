import ExtensionProtocol

/// The notification hints (Darwin's notify center) one extension process observes, and those
/// held for it while it is suspended. Per process generation: a new process starts with none.
///
/// A hint is a name and nothing else. A running observer is told of each post; a suspended
/// one is not resumed for it, and is told once per name, however many posts were made, when
/// it is next resumed; a process that is not running is told nothing.
public struct NotificationHints: Equatable, Sendable, Codable {
    /// Names the process asked to observe.
    public private(set) var observed: Set<String> = []
    /// Names posted while it was suspended, in the order of their first post, each once.
    public private(set) var held: [String] = []

    /// Hints of a new process: none observed, none held.
    public init() {}

    /// Most names one process may observe (`WireLimits.maxObservedHints`); `observe` messages
    /// for more names are ignored.
    public static let maxObserved = WireLimits.maxObservedHints

    /// Adds `name` to the observed names; false when it is over `maxObserved`.
    mutating func observe(_ name: String) -> Bool {
        guard observed.count < Self.maxObserved || observed.contains(name) else { return false }
        observed.insert(name)
        return true
    }

    /// What becomes of a post of `name` for a process in `phase`.
    enum Routing: Equatable { case deliver, hold, none }

    /// Routes a post of `name`: delivered now to an awake observer, held (once per name) for a
    /// stopped or resuming one, nothing otherwise.
    mutating func post(_ name: String, phase: Phase) -> Routing {
        guard observed.contains(name) else { return .none }
        switch phase {
        case .launching, .active, .background, .expiring:
            return .deliver
        case .stopping, .suspended, .resuming:
            if !held.contains(name) { held.append(name) }
            return .hold
        case .notRunning, .terminating:
            return .none
        }
    }

    /// The held names, to deliver on resume; none are held afterwards.
    mutating func takeHeld() -> [String] {
        defer { held.removeAll() }
        return held
    }

    /// The hint name under which a process that opened the shared defaults suite `suite` is
    /// told of changes to it. The `:` keeps it apart from every name a host may post.
    public static func suiteHint(_ suite: String) -> String { suitePrefix + suite }

    private static let suitePrefix = "defaults:"

    /// The message that tells a process of the hint `name`: `suiteChanged` for a suite's hint,
    /// `notify` for any other.
    static func message(for name: String) -> Message {
        name.hasPrefix(suitePrefix) ? .suiteChanged(suite: String(name.dropFirst(suitePrefix.count))) : .notify(name: name)
    }

    /// Whether `name` is a valid hint name: 1 to 255 bytes of letters, digits, `.`, `-`, `_`,
    /// not starting or ending with `.` and without `..` (the extension id rule).
    public static func nameProblem(_ name: String) -> String? {
        Identifier.problem(name)
    }
}

/// Written and read directly in a hand-over document (`BinaryDirectCodable`, see
/// RecordDirectCoding.swift): the members its synthesized `Codable` conformance gives.
extension NotificationHints: BinaryDirectCodable {
    package func write(to output: BinaryOutput, level: Int) throws {
        let w = BinaryFieldWriter(output, level: level)
        try w.list(observed, "observed")
        try w.list(held, "held")
    }

    package init(binary input: BinaryInput, at offset: Int, within end: Int) throws {
        var r = try BinaryFields(input, at: offset, within: end)
        observed = Set(try r.canonical([String].self, "observed"))
        held = try r.canonical([String].self, "held")
    }
}
