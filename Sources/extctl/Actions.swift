import ArgumentParser
import CShims
import ExtensionHost
import ExtensionProtocol
import ExtensionStatus
import Foundation

struct Kill: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Send a signal to every process of an extension (SIGCONT follows for a stopped one).")

    @OptionGroup var connection: ConnectionOptions
    @Option(name: .long, help: ArgumentHelp("Signal name or number (default TERM).", valueName: "signal")) var signal = "TERM"
    @Argument(help: "Extension id.", completion: ExtensionIDCompletion.kind) var id: String

    func validate() throws {
        if Kill.signalNumber(signal) == nil { throw ValidationError("unknown signal '\(signal)'") }
    }

    static func signalNumber(_ text: String) -> Int32? {
        if let n = Int32(text) { return n > 0 && n < 65 ? n : nil }
        let n = shim_signal_number(text)
        return n > 0 ? n : nil
    }

    func run() throws {
        let client = try connection.connect()
        let number = Kill.signalNumber(signal)!
        _ = try perform { () throws(HostError) in try client.call { .kill(tag: $0, extensionID: id, signal: number) } }
    }
}

struct Reload: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Re-read manifests without disturbing running extensions.",
        discussion: """
            Prints a summary, then each refused manifest and each extension that keeps its previous definition (its \
            file no longer loads) on stderr. Exits 1 when any manifest was refused.
            """)

    @OptionGroup var connection: ConnectionOptions
    @Flag(name: .long, help: "Print the reload report as JSON: {\"loaded\", \"errors\", \"kept\"} (see docs/json.md).") var json = false

    func run() throws {
        let client = try connection.connect()
        let reply = try perform { () throws(HostError) in try client.call { .reload(tag: $0) } }
        let report = try decode(ReloadReport.self, reply)
        if json {
            try printJSON(reply)
        } else {
            print("\(report.loaded) extension(s) loaded, \(report.errors.count) manifest error(s)")
            for e in report.errors { writeError(e) }
            for w in report.warnings { writeError("warning: " + w) }
            for k in report.kept {
                writeError("'\(k.id)' keeps its previous definition until \(k.file) is fixed")
            }
        }
        if !report.errors.isEmpty { throw ExitCode(1) }
    }
}

struct Prewarm: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Launch extensions ahead of use and suspend them at once.")

    @OptionGroup var connection: ConnectionOptions
    @Argument(help: "Extension ids.", completion: ExtensionIDCompletion.kind) var ids: [String]

    func run() throws {
        let client = try connection.connect()
        _ = try perform { () throws(HostError) in try client.call { .prewarm(tag: $0, extensionIDs: ids) } }
    }
}

struct Refresh: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Refresh an extension now (resumed or launched for it, then back where it was) and print its answer.",
        discussion: """
            Prints exactly one of new-data, no-data or failed, and exits 0, once the extension answered. Exits 1 with one \
            line when it does not support refresh (no 'refresh' in its manifest, or no refresh handler) or did not answer \
            within its refreshSeconds. The schedule's daily budget is not spent.
            """)

    @OptionGroup var connection: ConnectionOptions
    @Argument(help: "Extension id.", completion: ExtensionIDCompletion.kind) var id: String

    func run() throws {
        let client = try connection.connect()
        let reply = try perform { () throws(HostError) in try client.call(timeout: 300) { .forceRefresh(tag: $0, extensionID: id) } }
        guard case .refreshed(let answer) = reply else { throw Failure("extensiond sent an unexpected reply") }
        switch answer {
        case .newData: print("new-data")
        case .noData: print("no-data")
        case .failed: print("failed")
        case .unsupported: throw Failure("'\(id)' does not support refresh")
        }
    }
}

struct Post: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Post a notification hint: running observers are told now, suspended ones once when next resumed.",
        discussion: """
            A name under an extension's id (com.example.stocks.widget.quotes) needs the permission to open that \
            extension; any other name needs root or the daemon's uid.
            """)

    @OptionGroup var connection: ConnectionOptions
    @Argument(help: "The hint's name (letters, digits, '.', '-', '_').") var name: String

    func validate() throws {
        if let problem = Identifier.problem(name) { throw ValidationError("hint name \(problem)") }
    }

    func run() throws {
        let client = try connection.connect()
        _ = try perform { () throws(HostError) in try client.call { .post(tag: $0, name: name) } }
    }
}

struct Open: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Act as a host: begin a request, print the extension's pid, hold the request until stdin closes or SIGINT/SIGTERM, then dismiss.",
        discussion: """
            Lines read on stdin are sent to the extension over the request channel; what the extension sends back is copied to stdout. \
            When the extension completes the request, the bytes it returns are printed and extctl exits 0; when it cancels the \
            request, its reason is printed on stderr and extctl exits 1.
            """)

    @OptionGroup var connection: ConnectionOptions
    @Option(
        name: .long, parsing: .unconditional,
        help: ArgumentHelp("Seconds to wait for the request to begin (default 60; fractions allowed).", valueName: "seconds"))
    var timeout: Double = 60
    @Argument(help: "Extension id.", completion: ExtensionIDCompletion.kind) var id: String

    func validate() throws {
        if !(timeout.isFinite && timeout > 0) {
            throw ValidationError("--timeout must be a positive number of seconds, got \(Open.seconds(timeout))")
        }
    }

    static func seconds(_ value: Double) -> String {
        value == value.rounded() && abs(value) < 1e15 ? String(Int(value)) : String(value)
    }

    func run() throws {
        let done = DispatchSemaphore(value: 0)
        let begun = Begun()
        // SIGINT or SIGTERM ends the hold: dismissed below. Before the request is begun, exiting
        // closes the connection, which withdraws it. Set up before any thread is started.
        Signals.handle([SIGINT, SIGTERM]) { signal in
            if !begun.value { _exit(Signals.exitStatus(signal)) }
            done.signal()
        }
        let host: ExtensionHostConnection
        do { host = try ExtensionHostConnection(socketPath: connection.socket) } catch { throw Failure(error.message) }
        let interruption = Interruption()
        host.onInterruption { _, reason in
            interruption.set(reason)
            done.signal()
        }
        host.client.setCloseHandler { why in
            interruption.set(why.message)
            done.signal()
        }
        let outcome = Outcome()
        host.onResult { _, result in
            outcome.set(result)
            done.signal()
        }
        let session: ExtensionSession
        do { session = try host.begin(id, timeout: timeout) } catch {
            throw Failure(error.timedOut ? notReadyMessage(host) : error.message)
        }
        begun.set()
        Output.write("\(session.pid)\n")
        Pump.start(session: session, done: done)
        done.wait()
        // The extension ended the request itself: it is over, no dismiss.
        switch outcome.result {
        case .completed(let payload)?:
            Output.write(payload)
            return
        case .cancelled(let reason)?:
            writeError("request cancelled by the extension: \(reason)")
            throw ExitCode(1)
        case nil: break
        }
        if let reason = interruption.reason {
            writeError("request interrupted: \(reason)")
            throw ExitCode(1)
        }
        do { try host.dismiss(session) } catch { throw Failure(error.message) }
        if let fd = session.channel { close(fd) }
    }

    /// Why `begin` got no answer within `--timeout`: extensiond, or the extension it is still
    /// launching or resuming (asked with a short query on the same connection).
    func notReadyMessage(_ host: ExtensionHostConnection) -> String {
        let within = "within \(Open.seconds(timeout))s (--timeout)"
        guard let reply = try? host.client.call(timeout: 1, { .query(tag: $0, kind: .list, extensionIDs: []) }),
            let document = try? decode(ListDocument.self, reply)
        else { return "extensiond did not answer \(within)" }
        let state = document.extensions.first { $0.id == id }?.state
        return "'\(id)' did not become ready \(within); extensiond answers, and the extension is \(state ?? "not listed")"
    }
}
