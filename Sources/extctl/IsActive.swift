import ArgumentParser
import ExtensionHost
import ExtensionStatus

/// `extctl is-active ID`: whether an extension is running unsuspended, for scripts, as
/// `systemctl is-active` answers for units.
struct IsActive: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "is-active",
        abstract: "Print an extension's state; exit 0 when it is active or background, 3 otherwise, 4 for an unknown id.",
        discussion: """
            For scripts: `extctl is-active --quiet ID && …`. Exit status 0 when the state is active or background \
            (running, not suspended), 3 for any other state (not-running, launching, expiring, suspended, terminating), \
            4 when no extension has that id (printing 'unknown'), 1 when extensiond cannot be asked.
            """)

    /// Exit status for a known extension that is not active or background.
    static let inactiveStatus: Int32 = 3
    /// Exit status for an id no extension has.
    static let unknownStatus: Int32 = 4

    @OptionGroup var connection: ConnectionOptions
    @Flag(name: [.short, .long], help: "Print nothing; only the exit status answers.") var quiet = false
    @Argument(help: "Extension id.", completion: ExtensionIDCompletion.kind) var id: String

    func run() throws {
        let client = try connection.connect()
        let reply = try perform { () throws(HostError) in try client.call { .query(tag: $0, kind: .list, extensionIDs: []) } }
        let extensions = try decode(ListDocument.self, reply).extensions
        guard let state = extensions.first(where: { $0.id == id })?.state else {
            if !quiet { print("unknown") }
            throw ExitCode(IsActive.unknownStatus)
        }
        if !quiet { print(safe(state)) }
        if state != "active" && state != "background" { throw ExitCode(IsActive.inactiveStatus) }
    }
}
