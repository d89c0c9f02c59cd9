/// The new daemon's answer to `reexec` (docs/protocol.md): which program replaced which,
/// which `extctl reexec` prints.
public struct ReexecReport: JSONDocument, Equatable {
    /// The version of the program that was replaced.
    public var previousVersion: String
    /// The version of the program now running.
    public var version: String
    /// The daemon's pid, the same before and after.
    public var pid: Int32
    /// Extension processes kept across the re-exec.
    public var extensions: Int

    /// A report with the fields given.
    public init(previousVersion: String, version: String, pid: Int32, extensions: Int) {
        self.previousVersion = previousVersion
        self.version = version
        self.pid = pid
        self.extensions = extensions
    }

    enum CodingKeys: String, CodingKey {
        case extensions, pid, previousVersion, version
    }

    /// Writes the members in `JSONWriter.keyOrder`.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(extensions, forKey: .extensions)
        try c.encode(pid, forKey: .pid)
        try c.encode(previousVersion, forKey: .previousVersion)
        try c.encode(version, forKey: .version)
    }
}
