import Foundation

/// A real systemd for the tests: a private systemd user manager and systemd-journald in a
/// mount namespace and cgroup of their own (Tests/IntegrationTests/systemd/run-under-systemd.sh),
/// on machines where systemd is not PID 1. Commands run inside the namespace through
/// `nsenter`: `systemctl --user`, `journalctl`, `extctl`.
///
/// The work directory (`work`, under /tmp) appears to the manager and its services as
/// `SystemdSession.root`; the build products directory as `root/bin`. Unit files go in
/// `work/config/systemd/user` (`installUnits`). `close()` (or deinit) stops the manager and
/// journald and removes the cgroup, even after a failure.
final class SystemdSession {
    /// The work directory as the manager and its services see it (outside /tmp, which
    /// PrivateTmp= hides).
    static let root = "/run/extensiond-test"
    /// The repository's root.
    static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().path
    static let scriptPath = packageRoot + "/Tests/IntegrationTests/systemd/run-under-systemd.sh"

    /// Why a private systemd cannot run here, or nil when it can.
    static let unavailability: String? = {
        if geteuid() != 0 { return "needs root (mount namespaces, cgroups, systemd --user as root)" }
        for tool in [
            "/lib/systemd/systemd", "/lib/systemd/systemd-journald", "/usr/bin/unshare", "/usr/bin/nsenter", "/usr/bin/systemctl", "/usr/bin/journalctl",
        ]
        where !FileManager.default.isExecutableFile(atPath: tool) {
            return "\(tool) is not installed (scripts/dependencies.sh installs systemd)"
        }
        guard let probe = try? runProgram("/usr/bin/unshare", ["-m", "--propagation", "private", "/bin/true"]), probe.status == 0 else {
            return "mount namespaces are not available (unshare -m fails)"
        }
        return nil
    }()

    let work: String
    let runtimeDirectory = "/run/user/\(getuid())"
    /// The control socket the units declare, as seen inside the namespace.
    var controlSocket: String { runtimeDirectory + "/extensiond/control.sock" }
    /// The session script (a RawProcess: it leaves journald and the manager running in the
    /// background, which Foundation's Process would take for the script itself, and SIGTERM
    /// must reach it).
    private let script: RawProcess
    /// The pid whose mount namespace the commands enter (the script's).
    let namespacePID: Int32
    private var closed = false

    init() throws {
        work = try TestDaemon.makeTemporaryDirectory()
        try FileManager.default.createDirectory(atPath: work + "/config/systemd/user", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: work + "/extensions", withIntermediateDirectories: true)
        // The test extension runs as root (see TestDaemon.extensionsAsRoot): its manifests say
        // so, and the daemon's default configuration file ($XDG_CONFIG_HOME) allows it.
        try FileManager.default.createDirectory(atPath: work + "/config/extensiond", withIntermediateDirectories: true)
        try Data(#"{"allowRootExtensions": true}"#.utf8).write(to: URL(fileURLWithPath: work + "/config/extensiond/config.json"))
        script = try RawProcess(
            "/usr/bin/unshare", ["-m", "--propagation", "private", "/bin/bash", SystemdSession.scriptPath, work, BuildProducts.directory],
            pipes: true)
        let reader = HostChannel(fd: script.output)
        var lines: [String] = []
        var ready: Int32?
        while ready == nil, let line = reader.readLine(timeout: 60) {
            lines.append(line)
            if line.hasPrefix("READY ") { ready = Int32(line.dropFirst(6)) }
            if line.hasPrefix("FAILED") { break }
        }
        guard let ready else {
            let log = (try? String(contentsOfFile: work + "/session.log", encoding: .utf8)) ?? ""
            closed = true
            script.closeInput()
            script.stop(SIGTERM, timeout: 60)
            try? FileManager.default.removeItem(atPath: work)
            throw HarnessError("the private systemd did not start:\n\(lines.joined(separator: "\n"))\n\(log)")
        }
        namespacePID = ready
    }

    /// Runs a command inside the namespace (with `XDG_RUNTIME_DIR` of the manager), bounded by
    /// `timeout` seconds.
    @discardableResult
    func run(_ arguments: [String], stdin: String? = nil, timeout: Int = 60) throws -> (status: Int32, out: String, err: String) {
        try runProgram(
            "/usr/bin/nsenter",
            ["--target", "\(namespacePID)", "--mount", "--", "env", "XDG_RUNTIME_DIR=\(runtimeDirectory)", "timeout", "\(timeout)"] + arguments, stdin: stdin)
    }

    /// `systemctl --user ARGS…`; throws when it fails.
    @discardableResult
    func systemctl(_ arguments: String...) throws -> String {
        let r = try run(["systemctl", "--user", "--no-pager"] + arguments)
        guard r.status == 0 else { throw HarnessError("systemctl --user \(arguments.joined(separator: " ")) failed (\(r.status)): \(r.err)\(r.out)") }
        return r.out
    }

    /// `systemctl --user show UNIT -p …` as a dictionary.
    func show(_ unit: String, _ properties: [String]) throws -> [String: String] {
        let out = try systemctl("show", unit, "-p", properties.joined(separator: ","))
        var values: [String: String] = [:]
        for line in out.split(separator: "\n") {
            guard let eq = line.firstIndex(of: "=") else { continue }
            values[String(line[..<eq])] = String(line[line.index(after: eq)...])
        }
        return values
    }

    /// Journal entries matching `matches` (journalctl FIELD=value arguments), oldest first.
    func journal(_ matches: [String]) throws -> [[String: String]] {
        let r = try run(["journalctl", "--no-pager", "-o", "json"] + matches)
        // journalctl exits 1 when nothing matches yet.
        return r.out.split(separator: "\n").compactMap { line in
            guard let o = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else { return nil }
            return o.compactMapValues { $0 as? String }
        }
    }

    /// Waits (re-checking every 50 ms) until `condition` holds; throws at the deadline with
    /// `describe()`'s view of the state.
    func waitUntil(_ what: String, timeout: Double = 30, describe: () -> String = { "" }, _ condition: () throws -> Bool) throws {
        let deadline = Date().addingTimeInterval(timeout)
        while try !condition() {
            if Date() > deadline { throw HarnessError("timed out after \(timeout)s waiting until \(what)\n\(describe())") }
            usleep(50_000)
        }
    }

    /// Installs the repository's units from `units` (e.g. "units/user") into the manager's
    /// configuration, with ExecStart pointing at the built extensiond and the session's
    /// extension directory, plus optional drop-in lines for extensiond.service. Reloads.
    func installUnits(from units: String, serviceDropIn: [String] = []) throws {
        let source = SystemdSession.packageRoot + "/" + units
        let target = work + "/config/systemd/user"
        for name in ["extensiond.service", "extensiond.socket"] {
            var text = try String(contentsOfFile: source + "/" + name, encoding: .utf8)
            text = text.replacingOccurrences(
                of: "ExecStart=/usr/local/bin/extensiond",
                with: "ExecStart=\(SystemdSession.root)/bin/extensiond --extensions \(SystemdSession.root)/extensions")
            try text.write(toFile: target + "/" + name, atomically: true, encoding: .utf8)
        }
        if !serviceDropIn.isEmpty {
            try FileManager.default.createDirectory(atPath: target + "/extensiond.service.d", withIntermediateDirectories: true)
            try (["[Service]"] + serviceDropIn).joined(separator: "\n").appending("\n")
                .write(toFile: target + "/extensiond.service.d/test.conf", atomically: true, encoding: .utf8)
        }
        try systemctl("daemon-reload")
    }

    /// Writes a manifest for the test extension (as the daemon will see it).
    func writeTestManifest(_ file: String, id: String) throws {
        let manifest: [String: Any] = ["id": id, "point": "widget", "executable": SystemdSession.root + "/bin/test-extension", "user": "root"]
        try JSONSerialization.data(withJSONObject: manifest).write(to: URL(fileURLWithPath: work + "/extensions/" + file))
    }

    /// A long-running command inside the namespace (e.g. `extctl open`, a host holding a
    /// request), with pipes for its stdin and stdout.
    func start(_ arguments: [String]) throws -> (process: Process, input: FileHandle, output: HostChannel) {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/nsenter")
        p.arguments = ["--target", "\(namespacePID)", "--mount", "--", "env", "XDG_RUNTIME_DIR=\(runtimeDirectory)"] + arguments
        let stdin = Pipe(), stdout = Pipe()
        p.standardInput = stdin
        p.standardOutput = stdout
        p.standardError = FileHandle.nullDevice
        try p.run()
        return (p, stdin.fileHandleForWriting, HostChannel(fd: stdout.fileHandleForReading.fileDescriptor))
    }

    /// The session's log (the script's own lines and journald's stderr).
    func log() -> String { (try? String(contentsOfFile: work + "/session.log", encoding: .utf8)) ?? "" }

    /// Stops the manager (and with it every unit) and journald, removes the cgroup; waits at
    /// most `timeout` seconds before killing the script. Safe to call twice.
    func close(timeout: Double = 90) {
        guard !closed else { return }
        closed = true
        script.closeInput()
        if !script.wait(timeout: timeout) {
            script.stop(SIGTERM, timeout: 30)  // its trap still tears down
        }
        try? FileManager.default.removeItem(atPath: work)
    }

    deinit { close() }
}
