import ArgumentParser
import ExtensionHost
import ExtensionProtocol

/// `extctl reset ID`: end an extension and empty its own container.
struct Reset: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "End an extension (if it runs) and empty its container, its HOME (administrators only).",
        discussion: "Works for an extension whose manifest was removed too: its container is kept until it is reset.")

    @OptionGroup var connection: ConnectionOptions
    @Argument(help: "Extension id.", completion: ExtensionIDCompletion.kind) var id: String

    func validate() throws {
        if let problem = Identifier.problem(id) { throw ValidationError("extension id: \(problem)") }
    }

    func run() throws {
        let client = try connection.connect()
        _ = try perform { () throws(HostError) in try client.call { .reset(tag: $0, extensionID: id) } }
    }
}
