import ArgumentParser
import ExtensionHost
import ExtensionProtocol
import ExtensionStatus

/// `extctl secrets list [GROUP]`: the secret items' classes, groups and labels (administrators).
struct Secrets: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show the secret items an app shares with its extensions: class, group, label, never the data.",
        subcommands: [SecretsList.self])
}

/// `extctl secrets list [--json] [GROUP]`.
struct SecretsList: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list",
        abstract: "List the secret items (root, the daemon's user and the administrator group): class, group and label, sorted by group then label.")

    @OptionGroup var connection: ConnectionOptions
    @Flag(name: .long, help: "Print {\"items\": [{\"class\", \"group\", \"label\"}]} as JSON.") var json = false
    @Argument(help: "Only the items of this access group.") var group: String?

    func validate() throws {
        if let group, let problem = Identifier.problem(group) { throw ValidationError("group: '\(group)' \(problem)") }
    }

    func run() throws {
        let client = try connection.connect()
        let reply = try perform { () throws(HostError) in try client.call { .query(tag: $0, kind: .secrets, extensionIDs: group.map { [$0] } ?? []) } }
        if json { return try printJSON(reply) }
        let list = try decode(SecretList.self, reply)
        let rows = list.items.map { [$0.group, $0.class, $0.label ?? "-"] }
        let widths = (0..<3).map { i in max(["GROUP", "CLASS", "LABEL"][i].count, rows.map { $0[i].count }.max() ?? 0) }
        func line(_ cells: [String]) -> String {
            cells.enumerated().map { i, c in i == 2 ? c : c.padding(toLength: widths[i], withPad: " ", startingAt: 0) }.joined(separator: "  ")
        }
        print(line(["GROUP", "CLASS", "LABEL"]))
        for row in rows { print(safe(line(row))) }
        print("\(rows.count) item(s) listed.")
    }
}
