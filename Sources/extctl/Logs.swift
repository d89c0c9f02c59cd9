import ArgumentParser
import ExtensionHost
import ExtensionProtocol
import ExtensionStatus
import Foundation
import Synchronization

/// `extctl logs [-f] [-n N] [--json] ID`: an extension's last output lines, kept by the daemon,
/// and with `-f` the new ones as they come (docs/extctl.md).
struct Logs: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show an extension's last output lines (stdout and stderr); follow them with -f.",
        discussion: """
            extensiond keeps the last \(OutputLog.kept) lines of each extension in memory, across its launches; the \
            journal (EXTENSION_ID=ID) or the daemon's log keeps every line. With -f, new lines are printed as the \
            extension writes them until extctl is interrupted (SIGINT, SIGTERM or SIGPIPE: exit status 130, 143 or 141).
            """)

    @OptionGroup var connection: ConnectionOptions
    @Flag(name: .long, help: "Print one JSON object per line (docs/json.md, \"Output lines\").") var json = false
    @Flag(name: [.customShort("f"), .long], help: "Follow: print new lines as they come.") var follow = false
    @Option(name: [.customShort("n"), .customLong("lines")], help: ArgumentHelp("How many of the last lines to show (default 10).", valueName: "N"))
    var lines = 10
    @Argument(help: "The extension's id.", completion: ExtensionIDCompletion.kind) var id: String

    func validate() throws {
        if lines < 0 { throw ValidationError("--lines must be 0 or more, got \(lines)") }
    }

    /// Writes one line as text or JSON; a closed pipe ends extctl with SIGPIPE's status.
    static func write(_ line: OutputLog.Line, json: Bool) {
        let text: [UInt8] = json ? line.jsonBytes() + [UInt8(ascii: "\n")] : Array((Format.outputLine(line) + "\n").utf8)
        if !Output.write(text) { _exit(errno == EPIPE ? Signals.exitStatus(SIGPIPE) : 1) }
    }

    func run() throws {
        if follow { Signals.handle([SIGINT, SIGTERM, SIGPIPE]) { signal in _exit(Signals.exitStatus(signal)) } }
        let client = try connection.connect()
        let asJSON = json
        guard follow else {
            let reply = try perform { () throws(HostError) in try client.call { .query(tag: $0, kind: .logs, extensionIDs: [id]) } }
            for line in try decode(OutputLog.self, reply).lines.suffix(lines) { Logs.write(line, json: asJSON) }
            return
        }
        // The daemon answers `follow` with the lines kept so far and then sends every new one:
        // new lines wait here until the kept ones are printed. Lines are written under the
        // gate's lock, so the waiting ones are all out before a newer one.
        let gate = Mutex<(open: Bool, waiting: [OutputLog.Line])>((false, []))
        let decoder = JSONDecoder()
        client.setEventHandler { bytes in
            guard let line = try? decoder.decode(OutputLog.Line.self, from: Data(bytes)) else { return }
            gate.withLock { state in
                if state.open { Logs.write(line, json: asJSON) } else { state.waiting.append(line) }
            }
        }
        let done = DispatchSemaphore(value: 0)
        let lost = Interruption()
        client.setCloseHandler { why in
            lost.set(why.message)
            done.signal()
        }
        let reply = try perform { () throws(HostError) in try client.call { .follow(tag: $0, extensionIDs: [id]) } }
        for line in try decode(OutputLog.self, reply).lines.suffix(lines) { Logs.write(line, json: asJSON) }
        gate.withLock { state in
            for line in state.waiting { Logs.write(line, json: asJSON) }
            state.waiting = []
            state.open = true
        }
        done.wait()
        throw Failure(lost.reason ?? "extensiond closed the connection")
    }
}
