import Foundation

/// Clients of the daemon's D-Bus interface (org.extensiond1, docs/dbus.md) for DBusTests:
/// `gdbus`, GLib's command-line client, and the Python fixtures of Tests/Fixtures/dbus-host,
/// written on GLib's Gio (python3-gi). None of them uses code of this project.
enum BusClients {
    static let gdbusPath = "/usr/bin/gdbus"
    static let pythonPath = "/usr/bin/python3"
    static let setprivPath = "/usr/bin/setpriv"
    static let fixtures = RuntimeC.packageRoot + "/Tests/Fixtures/dbus-host"
    /// The command line that runs what follows it as nobody (uid and gid 65534, no groups).
    static let asNobody = [setprivPath, "--reuid=65534", "--regid=65534", "--clear-groups", "--"]

    /// Why the D-Bus tests cannot run here, or nil when they can: a private bus (dbus-daemon,
    /// busctl), root (root extensions, setpriv to nobody), gdbus and python3-gi.
    static let unavailability: String? = {
        if let why = PrivateBus.unavailability { return why }
        if getuid() != 0 { return "the D-Bus tests need root (their extensions run as root; a caller runs as nobody)" }
        if !FileManager.default.isExecutableFile(atPath: gdbusPath) { return "\(gdbusPath) is not installed (libglib2.0-bin)" }
        if !FileManager.default.isExecutableFile(atPath: setprivPath) { return "\(setprivPath) is not installed (util-linux)" }
        let status = try? run(pythonPath, ["-c", "import gi; gi.require_version('Gio', '2.0'); from gi.repository import Gio, GLib"])
        if status != 0 { return "GLib's Gio for \(pythonPath) is not installed (python3-gi)" }
        return nil
    }()

    /// What a `gdbus call` printed, and the D-Bus error it reported, if any.
    struct CallResult: CustomStringConvertible {
        var status: Int32
        var out: String
        var err: String

        /// The D-Bus error name of a failed call (`Error: GDBus.Error:NAME: MESSAGE`), or nil.
        var errorName: String? { parsedError?.name }
        /// The error's message, or nil.
        var errorMessage: String? { parsedError?.message }

        private var parsedError: (name: String, message: String)? {
            guard let start = err.range(of: "GDBus.Error:") else { return nil }
            let rest = err[start.upperBound...].prefix { $0 != "\n" }
            guard let colon = rest.range(of: ": ") else { return (String(rest), "") }
            return (String(rest[..<colon.lowerBound]), String(rest[colon.upperBound...]))
        }

        var description: String { "gdbus exited \(status); stdout: \(out.debugDescription); stderr: \(err.debugDescription)" }
    }

    /// The arguments of `gdbus call` of `method` (INTERFACE.MEMBER) on `object` of
    /// org.extensiond1 on the bus at `address`; gdbus reads the signature from introspection
    /// and parses `arguments` as GVariant text.
    static func gdbusArguments(_ address: String, object: String = "/org/extensiond1", _ method: String, _ arguments: [String]) -> [String] {
        ["call", "--address", address, "--dest", "org.extensiond1", "--object-path", object, "--timeout", "20", "--method", method] + arguments
    }

    /// Runs `gdbus call` to its end (as nobody with `nobody`).
    static func gdbus(
        _ address: String, object: String = "/org/extensiond1", _ method: String, _ arguments: [String] = [], nobody: Bool = false
    ) throws -> CallResult {
        let command = (nobody ? asNobody : []) + [gdbusPath] + gdbusArguments(address, object: object, method, arguments)
        let r = try runProgram(command[0], Array(command.dropFirst()))
        return CallResult(status: r.status, out: r.out, err: r.err)
    }

    /// `/org/extensiond1/extension/` and the id escaped as `sd_bus_path_encode` does: every byte
    /// outside [A-Za-z0-9] as `_XX` (lower-case hex).
    static func extensionPath(_ id: String) -> String {
        let plain = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789".utf8)
        return "/org/extensiond1/extension/" + id.utf8.map { plain.contains($0) ? String(UnicodeScalar($0)) : String(format: "_%02x", $0) }.joined()
    }
}

/// A child process that prints JSON objects, one a line (the dbus-host fixtures, `extctl
/// monitor --json`), read with deadlines. Lines that are not JSON objects (a library's warning
/// on stderr, which shares the stream) are kept for failure messages and skipped.
final class JSONLines {
    let process: RawProcess
    private let reader: HostChannel
    /// Every line read so far.
    private(set) var transcript: [String] = []

    init(_ path: String, _ arguments: [String]) throws {
        process = try RawProcess(path, arguments, pipes: true)
        reader = HostChannel(fd: process.output)
    }

    /// A Python fixture of Tests/Fixtures/dbus-host, run by /usr/bin/python3.
    static func fixture(_ script: String, _ arguments: [String]) throws -> JSONLines {
        try JSONLines(BusClients.pythonPath, [BusClients.fixtures + "/" + script] + arguments)
    }

    var pid: Int32 { process.pid }

    /// The next JSON object it prints, waiting at most `timeout` seconds; nil at end of output
    /// or at the deadline.
    func next(timeout: Double = 20) -> [String: Any]? {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            let left = deadline.timeIntervalSinceNow
            guard left > 0, let line = reader.readLine(timeout: left) else { return nil }
            transcript.append(line)
            if let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] { return object }
        }
    }

    /// The next JSON object, which must have `"event": event` (objects whose event is in
    /// `skipping` are passed over); throws with everything it printed otherwise (another event,
    /// end of output, or nothing within `timeout` seconds).
    @discardableResult
    func expect(_ event: String, skipping: Set<String> = [], timeout: Double = 20) throws -> [String: Any] {
        let deadline = Date().addingTimeInterval(timeout)
        var next = self.next(timeout: timeout)
        while let o = next, let e = o["event"] as? String, skipping.contains(e) { next = self.next(timeout: max(0, deadline.timeIntervalSinceNow)) }
        guard let object = next else {
            throw HarnessError("pid \(pid) printed no '\(event)' within \(timeout)s; it printed:\n\(transcript.joined(separator: "\n"))")
        }
        guard object["event"] as? String == event else {
            throw HarnessError("pid \(pid) printed something else than '\(event)'; it printed:\n\(transcript.joined(separator: "\n"))")
        }
        return object
    }

    /// Writes `line` and a newline to its stdin.
    func send(_ line: String) { HostChannel(fd: process.input).send(line) }

    /// Closes its stdin (end of input).
    func closeInput() { process.closeInput() }

    /// Waits at most `timeout` seconds for it to exit; its exit code (128 + signal), or nil.
    func exitCode(timeout: Double = 20) -> Int32? {
        process.wait(timeout: timeout) ? process.exitCode : nil
    }
}
