import ArgumentParser
import ExtensionHost
import ExtensionProtocol
import ExtensionStatus

/// `extctl transfers [--json] [ID|APP]`: the background transfer tasks.
struct Transfers: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List background transfer tasks: state, bytes done and total, rate and the last error.",
        discussion: """
            Administrators see every task; a process of an app sees its app's. ID|APP narrows the list to one task, \
            one app, or the tasks one extension created.
            """)

    @OptionGroup var connection: ConnectionOptions
    @Flag(name: .long, help: "Print the transfers document (docs/json.md, \"Transfers\") as JSON.") var json = false
    @Argument(help: "A task id, an app id or an extension id.") var name: String?

    func run() throws {
        let client = try connection.connect()
        let reply = try perform { () throws(HostError) in try client.call { .query(tag: $0, kind: .transfers, extensionIDs: name.map { [$0] } ?? []) } }
        if json { return try printJSON(reply) }
        let list = try decode(TransferList.self, reply)
        let headers = ["ID", "APP", "SESSION", "KIND", "STATE", "DONE", "TOTAL", "RATE", "LAST ERROR"]
        let rows = list.tasks.map { t in
            [
                String(t.id), t.app, t.group + "/" + t.session, t.kind, t.state, Transfers.bytes(t.bytes), t.total.map(Transfers.bytes) ?? "-",
                t.rate.map { Transfers.bytes(UInt64(max(0, $0))) + "/s" } ?? "-", t.lastError ?? "-",
            ]
        }
        let widths = headers.indices.map { i in max(headers[i].count, rows.map { $0[i].count }.max() ?? 0) }
        func line(_ cells: [String]) -> String {
            cells.enumerated().map { i, c in i == cells.count - 1 ? c : c.padding(toLength: widths[i], withPad: " ", startingAt: 0) }.joined(separator: "  ")
        }
        print(line(headers))
        for row in rows { print(safe(line(row))) }
        print("\(rows.count) task(s) listed.")
    }

    /// `n` bytes for people: B, KiB, MiB or GiB with one decimal.
    static func bytes(_ n: UInt64) -> String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB"]
        var value = Double(n)
        var unit = 0
        while value >= 1024 && unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        if unit == 0 { return "\(n) B" }
        let tenths = Int((value * 10).rounded())
        return "\(tenths / 10).\(tenths % 10) \(units[unit])"
    }
}

/// `extctl transfer cancel TASK`.
struct Transfer: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Act on one background transfer task.", subcommands: [TransferCancel.self])

    /// Also here, so that `extctl --socket PATH transfer cancel TASK` parses: an option given
    /// before the subcommand's name is decoded by each command of the path that declares it.
    @OptionGroup var connection: ConnectionOptions
}

/// `extctl transfer cancel TASK`: administrators, or a process of the task's app.
struct TransferCancel: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cancel", abstract: "Cancel a background transfer task (administrators, or a process of its app).")

    @OptionGroup var connection: ConnectionOptions
    @Argument(help: "The task's id (extctl transfers).") var task: UInt64

    func run() throws {
        let client = try connection.connect()
        _ = try perform { () throws(HostError) in try client.call { .transferCancel(tag: $0, task: task) } }
        print("Cancelled transfer task \(task).")
    }
}
