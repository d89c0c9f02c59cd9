import ArgumentParser
import ExtensionHost
import ExtensionProtocol
import ExtensionStatus

/// `extctl container NAME`: the path of a shared container, for an app admitted to it.
struct Container: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print the directory of a shared container (root, the daemon's user, the administrator group and members of the container's group).")

    @OptionGroup var connection: ConnectionOptions
    @Flag(name: .long, help: "Print {\"name\", \"path\", \"gid\"} as JSON.") var json = false
    @Argument(help: "The container's name, such as group.com.example.stocks.") var name: String

    func validate() throws {
        if let problem = SharedContainer.problem(name) { throw ValidationError("container name: \(problem)") }
    }

    func run() throws {
        let client = try connection.connect()
        let reply = try perform { () throws(HostError) in try client.call { .query(tag: $0, kind: .container, extensionIDs: [name]) } }
        if json { return try printJSON(reply) }
        print(safe(try decode(SharedContainerInfo.self, reply).path))
    }
}
