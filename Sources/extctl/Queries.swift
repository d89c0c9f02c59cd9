import ArgumentParser
import ExtensionHost
import ExtensionProtocol
import ExtensionStatus
import Foundation

struct List: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List every known extension with its state, pid and last exit.",
        discussion: """
            With --point or --content, list instead the extensions this user may open of that \
            point whose activation rule accepts the content (discovery, as a share sheet does), \
            sorted by id.
            """)

    @OptionGroup var connection: ConnectionOptions
    @Flag(name: .long, help: "Print one JSON document (see docs/json.md).") var json = false
    @Option(name: .long, help: "Only extensions of this extension point (discovery).") var point: String?
    @Option(
        name: .long,
        help: ArgumentHelp(
            "Only extensions whose activation rule accepts this content (discovery).",
            discussion: "Counts by kind: text, url, image, file or a MIME type, e.g. url=1,image=3.",
            valueName: "KIND=COUNT,..."))
    var content: String?

    func run() throws {
        if point != nil || content != nil { return try discover() }
        let client = try connection.connect()
        let reply = try perform { () throws(HostError) in try client.call { .query(tag: $0, kind: .list, extensionIDs: []) } }
        if json { return try printJSON(reply) }
        let document = try decode(ListDocument.self, reply)
        let extensions = document.extensions
        var rows = [["ID", "STATE", "PID", "REQUESTS", "ASSERTIONS", "LAST EXIT"]]
        for e in extensions {
            rows.append([
                safe(e.id), safe(e.state), e.pid.map(String.init) ?? "-", "\(e.requests)", "\(e.assertions)", Format.exit(e.lastExit),
            ])
        }
        print(Format.table(rows), terminator: "")
        print("\n\(extensions.count) extension(s) listed.")
        guard !document.apps.isEmpty else { return }
        var apps = [["APP", "EXTENSIONS", "GROUPS", "URL SCHEMES"]]
        for a in document.apps {
            func joined(_ list: [String]) -> String { list.isEmpty ? "-" : list.map(safe).joined(separator: ",") }
            apps.append([safe(a.id), joined(a.extensions), joined(a.groups), joined(a.urlSchemes)])
        }
        print("\n" + Format.table(apps), terminator: "")
        print("\n\(document.apps.count) app(s) listed.")
    }

    /// `list --point P --content K=N,...`: the matching extensions, as a table or JSON.
    func discover() throws {
        let query: ActivationContent
        do { query = try content.map { text throws(ActivationContent.Problem) in try ActivationContent(parsing: text) } ?? ActivationContent([:]) } catch {
            throw ValidationError("--content: \(error)")
        }
        let client = try connection.connect()
        let reply = try perform { () throws(HostError) in try client.call { .discover(tag: $0, point: point ?? "", content: query) } }
        guard case .extensions(let found) = reply else { throw Failure("extensiond sent an unexpected reply") }
        if json {
            let document = DiscoveryList(extensions: found.map { DiscoveryList.Extension(id: $0.id, point: $0.point, displayName: $0.displayName) })
            FileHandle.standardOutput.write(Data(document.jsonBytes() + [UInt8(ascii: "\n")]))
            return
        }
        var rows = [["ID", "POINT", "NAME"]]
        for e in found { rows.append([safe(e.id), safe(e.point), e.displayName.map(safe) ?? "-"]) }
        print(Format.table(rows), terminator: "")
        print("\n\(found.count) extension(s) found.")
    }
}

struct Status: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Show detailed status of extensions (all when no id is given).")

    @OptionGroup var connection: ConnectionOptions
    @Flag(name: .long, help: "Print one JSON document (see docs/json.md).") var json = false
    @Option(
        name: [.customShort("n"), .customLong("lines")], parsing: .unconditional,
        help: ArgumentHelp("How many recent events to show per extension (default 10; the daemon keeps the last 20).", valueName: "N"))
    var lines = 10
    @Argument(help: "Extension ids.", completion: ExtensionIDCompletion.kind) var ids: [String] = []

    func validate() throws {
        if lines < 0 { throw ValidationError("--lines must be 0 or more, got \(lines)") }
    }

    func run() throws {
        let client = try connection.connect()
        let reply = try perform { () throws(HostError) in try client.call { .query(tag: $0, kind: .status, extensionIDs: ids) } }
        if json { return try printJSON(reply) }
        let document = try decode(StatusReport.self, reply)
        if document.containment.mode == "process-group" {
            print("Containment: process groups only (no cgroup per extension: \(document.containment.reason.map(safe) ?? "unknown reason")).")
            print("             A process that leaves its process group (setsid) escapes suspension and termination.\n")
        }
        // Like `systemctl status`, each extension's last output lines (`logs`), when ids were
        // given (the status of everything stays short).
        let blocks = try document.extensions.map { e in
            var output: [OutputLog.Line] = []
            // Output is shown to administrators and the extension's app only: for anyone else the
            // status goes without it.
            if !ids.isEmpty && lines > 0, let log = try? client.call({ .query(tag: $0, kind: .logs, extensionIDs: [e.id]) }) {
                output = Array(try decode(OutputLog.self, log).lines.suffix(lines))
            }
            return Format.statusBlock(e, eventLines: lines, output: output)
        }
        print(blocks.joined(separator: "\n"), terminator: "")
    }
}

struct Monitor: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Stream lifecycle events as they happen (until interrupted).",
        discussion: """
            Ends at once on SIGINT (Ctrl-C), SIGTERM or SIGPIPE (its reader went away), with exit status 130, 143 or \
            141. When extensiond closes the connection, prints 'extctl: extensiond closed the connection' on stderr and \
            exits 1.
            """)

    @OptionGroup var connection: ConnectionOptions
    @Flag(name: .long, help: "Print one JSON object per event.") var json = false

    func run() throws {
        // Before the connection starts its reader thread, so that the thread blocks them too.
        Signals.handle([SIGINT, SIGTERM, SIGPIPE]) { signal in _exit(Signals.exitStatus(signal)) }
        let client = try connection.connect()
        let asJSON = json
        let decoder = JSONDecoder()
        client.setEventHandler { bytes in
            let line: [UInt8]
            if asJSON {
                line = bytes + [UInt8(ascii: "\n")]
            } else if let e = try? decoder.decode(ExtensionEvent.self, from: Data(bytes)) {
                line = Array((Format.eventLine(e) + "\n").utf8)
            } else {
                return
            }
            // A closed pipe (`extctl monitor | head -1`): SIGPIPE's status, whichever thread sees it first.
            if !Output.write(line) { _exit(errno == EPIPE ? Signals.exitStatus(SIGPIPE) : 1) }
        }
        let done = DispatchSemaphore(value: 0)
        let lost = Interruption()
        client.setCloseHandler { why in
            lost.set(why.message)
            done.signal()
        }
        _ = try perform { () throws(HostError) in try client.call { .monitor(tag: $0) } }
        done.wait()
        throw Failure(lost.reason ?? "extensiond closed the connection")
    }
}
