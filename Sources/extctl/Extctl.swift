import ArgumentParser
import ExtensionHost
import ExtensionProtocol
import ExtensionStatus
import Foundation

/// `extctl`: inspect and control extensiond, in the manner of `systemctl`.
struct Extctl: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "extctl",
        abstract: "Inspect and control extensiond.",
        discussion: """
            Exit status: 0 on success, 1 when the operation failed or extensiond is unreachable, 2 on bad arguments; \
            is-active exits 3 for an extension that is not active and 4 for an unknown id; monitor ended by SIGINT, \
            SIGPIPE or SIGTERM exits 130, 141 or 143.
            """,
        subcommands: [
            List.self, Status.self, Logs.self, IsActive.self, Open.self, Kill.self, Monitor.self, Reload.self, Prewarm.self, Post.self,
            Refresh.self, Container.self, Defaults.self, Secrets.self, Transfers.self, Transfer.self, Reset.self, Reexec.self,
        ])

    /// `--socket` before the command: shown in `extctl --help` and known to the shell
    /// completion, which then completes the command after it. `ExtctlMain` hands its value to
    /// the command, whose own `--socket` it becomes.
    @OptionGroup(title: "Global options") var connection: ConnectionOptions
}

/// Options every subcommand takes.
struct ConnectionOptions: ParsableArguments {
    @Option(
        name: .long,
        help: ArgumentHelp(
            "Control socket path (default: $EXTENSIOND_SOCKET, else $XDG_RUNTIME_DIR/extensiond/control.sock, else /run/extensiond/control.sock). Accepted before or after the command.",
            valueName: "path"))
    var socket: String?

    func connect() throws -> ControlClient {
        do {
            return try ControlClient(socketPath: socket ?? ControlClient.defaultSocketPath)
        } catch {
            throw Failure(error.description)
        }
    }
}

/// A runtime failure: printed as one line, exit status 1.
struct Failure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// Runs a call, turning daemon errors into one-line failures.
func perform(_ body: () throws(HostError) -> Reply) throws -> Reply {
    do { return try body() } catch { throw Failure(error.message) }
}

/// Decodes a JSON reply as the document `type` (docs/json.md).
func decode<Document: JSONDocument>(_ type: Document.Type, _ reply: Reply) throws -> Document {
    guard case .json(let bytes) = reply else { throw Failure("extensiond sent an unexpected reply") }
    do {
        return try JSONDecoder().decode(type, from: Data(bytes))
    } catch let error as DecodingError {
        throw Failure("extensiond sent an unreadable reply: \(describe(error))")
    } catch {
        throw Failure("extensiond sent an unreadable reply: \(error)")
    }
}

/// What was wrong with a document, naming the field (`extensions.0.state`).
func describe(_ error: DecodingError) -> String {
    func field(_ path: [any CodingKey]) -> String {
        path.map { $0.intValue.map(String.init) ?? $0.stringValue }.joined(separator: ".")
    }
    switch error {
    case .keyNotFound(let key, let context): return "field '\(field(context.codingPath + [key]))' is missing"
    case .typeMismatch(_, let context), .valueNotFound(_, let context), .dataCorrupted(let context):
        return context.codingPath.isEmpty ? context.debugDescription : "field '\(field(context.codingPath))': \(context.debugDescription)"
    @unknown default: return "\(error)"
    }
}

func printJSON(_ reply: Reply) throws {
    guard case .json(let bytes) = reply else { throw Failure("extensiond sent an unexpected reply") }
    FileHandle.standardOutput.write(Data(bytes + [UInt8(ascii: "\n")]))
}

/// Writes `extctl: LINE` on standard error, after whatever standard output holds buffered, so
/// that the two keep their order when they go to the same file. The line is escaped
/// (`UntrustedText`): it can quote what extensiond relays from manifests and extensions.
func writeError(_ line: String) {
    fflush(nil)
    FileHandle.standardError.write(Data("extctl: \(UntrustedText.escaped(line))\n".utf8))
}

/// Text from extensiond, which can come from a manifest or an extension, made safe to print.
func safe(_ text: String) -> String {
    UntrustedText.escaped(text)
}

@main
enum ExtctlMain {
    /// Accepts `--socket PATH` before the subcommand too (`extctl --socket S list`), as
    /// systemctl accepts its options anywhere.
    static func normalizedArguments() -> [String] {
        var args = Array(CommandLine.arguments.dropFirst())
        var moved: [String] = []
        while let first = args.first, first == "--socket" || first.hasPrefix("--socket=") {
            moved.append(args.removeFirst())
            if first == "--socket", !args.isEmpty { moved.append(args.removeFirst()) }
        }
        guard !moved.isEmpty, !args.isEmpty else { return moved + args }
        return [args[0]] + moved + args.dropFirst()
    }

    static func main() {
        do {
            var command = try Extctl.parseAsRoot(normalizedArguments())
            try command.run()
        } catch let failure as Failure {
            writeError(failure.description)
            exit(1)
        } catch let code as ExitCode {
            exit(code.rawValue)
        } catch {
            let code = Extctl.exitCode(for: error)
            if code == .success {
                Extctl.exit(withError: error)  // --help, --version: printed as usual
            }
            let message = Extctl.message(for: error).split(separator: "\n").first.map(String.init) ?? "invalid arguments"
            writeError(message.hasPrefix("Error: ") ? String(message.dropFirst(7)) : message)
            exit(2)
        }
    }
}
