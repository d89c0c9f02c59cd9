import ArgumentParser
import CShims
import ExtensionHost
import ExtensionProtocol
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
    static let configuration = CommandConfiguration(abstract: "Re-read manifests without disturbing running extensions.")

    @OptionGroup var connection: ConnectionOptions

    func run() throws {
        let client = try connection.connect()
        let object = try jsonObject(try perform { () throws(HostError) in try client.call { .reload(tag: $0) } })
        let errors = object["errors"] as? [String] ?? []
        print("\(object["loaded"] as? Int ?? 0) extension(s) loaded, \(errors.count) manifest error(s)")
        for e in errors { writeError(e) }
        if !errors.isEmpty { throw ExitCode(1) }
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
    @Option(name: .long, help: ArgumentHelp("Seconds to wait for the extension to become ready.", valueName: "seconds")) var timeout: Double = 60
    @Argument(help: "Extension id.", completion: ExtensionIDCompletion.kind) var id: String

    func run() throws {
        let host: ExtensionHostConnection
        do { host = try ExtensionHostConnection(socketPath: connection.socket) } catch { throw Failure(error.message) }
        let done = DispatchSemaphore(value: 0)
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
        do { session = try host.begin(id, timeout: timeout) } catch { throw Failure(error.message) }
        FileHandle.standardOutput.write(Data("\(session.pid)\n".utf8))
        let stop = Signals.onTermination { done.signal() }
        Pump.start(session: session, done: done)
        done.wait()
        _ = stop
        // The extension ended the request itself: it is over, no dismiss.
        switch outcome.result {
        case .completed(let payload)?:
            FileHandle.standardOutput.write(Data(payload))
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
}
