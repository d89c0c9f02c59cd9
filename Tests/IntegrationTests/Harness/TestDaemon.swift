import ExtensionHost
import ExtensionProtocol
import Foundation
import Synchronization
import Testing

/// Where `swift build` put the executables (the test runner lives in the same directory).
enum BuildProducts {
    static let directory: String = {
        let exe = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        var dir = URL(fileURLWithPath: exe).deletingLastPathComponent()
        // The runner may sit inside a bundle directory (…/extensiondPackageTests.xctest).
        while !FileManager.default.fileExists(atPath: dir.appendingPathComponent("extensiond").path), dir.path != "/" {
            dir = dir.deletingLastPathComponent()
        }
        return dir.path
    }()

    static func path(_ name: String) -> String { directory + "/" + name }
}

/// A failure of the harness itself (something did not happen before its deadline).
struct HarnessError: Error, CustomStringConvertible {
    var description: String
    init(_ d: String) { description = d }
}

/// A real extensiond process in a private temporary directory, with its manifests, a
/// readiness notification socket (sd_notify READY=1) and a monitor connection recording
/// every lifecycle event it streams.
final class TestDaemon {
    let directory: String
    let socketPath: String
    let extensionsDirectory: String
    private(set) var process: Process?
    /// Signalled when the current daemon process exits (its termination handler).
    private var exitSignal: DispatchSemaphore?
    let stderrFile: String
    let events = EventLog()
    private var monitor: ControlClient?

    /// Whether manifests without `user` run as root and unsandboxed (the default, under a root
    /// test run): the lifecycle tests share files, locks and the control socket of their
    /// private 0700 directory with the extensions they start, which per-extension uids and a
    /// private /tmp could not reach. The credential and sandbox tests (CredentialTests.swift,
    /// SandboxTests.swift) turn it off to check the daemon's default.
    let extensionsAsRoot: Bool
    /// The cgroups the daemon runs in under the unit's restrictions (`UnitRestrictions`).
    private var delegatedCgroups: [String] = []
    /// The daemon's executable: the build product, or a copy another uid can run.
    var daemonExecutable = BuildProducts.path("extensiond")

    /// Creates the directory and writes `manifests` (file name → JSON object) and `config`.
    /// With `extensionsAsRoot` (and a root test run), manifests without `user` get
    /// `"user": "root"` and `"sandbox": "none"`, and the configuration `"allowRootExtensions":
    /// true` and `"allowUnsandboxedExtensions": true`. The control socket is `socket` in the
    /// directory (its directory created by the daemon when it is in a subdirectory).
    init(manifests: [String: [String: Any]], config: [String: Any]? = nil, extensionsAsRoot: Bool = true, socket: String = "control.sock") throws {
        self.extensionsAsRoot = extensionsAsRoot && getuid() == 0
        directory = try TestDaemon.makeTemporaryDirectory()
        socketPath = directory + "/" + socket
        extensionsDirectory = directory + "/extensions"
        stderrFile = directory + "/daemon.log"
        try FileManager.default.createDirectory(atPath: extensionsDirectory, withIntermediateDirectories: true)
        for (name, object) in manifests { try writeManifest(name, object) }
        var config = config
        if self.extensionsAsRoot {
            config = (config ?? [:]).merging(["allowRootExtensions": true, "allowUnsandboxedExtensions": true]) { given, _ in given }
        }
        if let config {
            try JSONSerialization.data(withJSONObject: config).write(to: URL(fileURLWithPath: directory + "/config.json"))
        }
    }

    static func makeTemporaryDirectory() throws -> String {
        var template = Array((FileManager.default.temporaryDirectory.path + "/extensiond-test-XXXXXX").utf8CString)
        guard let p = mkdtemp(&template) else { throw HarnessError("mkdtemp failed") }
        return String(cString: p)
    }

    func writeManifest(_ name: String, _ object: [String: Any]) throws {
        var object = object
        // An app manifest (`"kind": "app"`) has neither a user nor a sandbox.
        if extensionsAsRoot && object["user"] == nil && object["id"] is String && object["kind"] as? String != "app" {
            object["user"] = "root"
            if object["sandbox"] == nil { object["sandbox"] = "none" }
        }
        try JSONSerialization.data(withJSONObject: object).write(to: URL(fileURLWithPath: extensionsDirectory + "/" + name))
    }

    /// A manifest for the test extension with the given policy overrides.
    static func testExtension(_ id: String, arguments: [String] = [], policy: [String: Any] = [:], extra: [String: Any] = [:]) -> [String: Any] {
        var m: [String: Any] = ["id": id, "point": "widget", "executable": BuildProducts.path("test-extension"), "arguments": arguments]
        if !policy.isEmpty { m["policy"] = policy }
        for (k, v) in extra { m[k] = v }
        return m
    }

    /// Starts the daemon and returns once it has sent READY=1 and the monitor is attached.
    /// `environment` is added to the daemon's. A given `notifySocket` receives the daemon's
    /// sd_notify messages and stays open for the caller; otherwise a temporary one is used.
    /// `wrapper` is a command line the daemon's is appended to (e.g. `unshare …`).
    /// `arguments` are added to the daemon's command line. `output` is the daemon's stdout and
    /// stderr instead of the log file (`log()` then reads nothing). A daemon started as root
    /// runs under the system unit's restrictions (`UnitRestrictions`) unless
    /// `unitRestrictions` is false.
    func start(
        environment extra: [String: String] = [:], notifySocket: NotifySocket? = nil, wrapper: [String] = [], arguments: [String] = [],
        output: FileHandle? = nil, unitRestrictions: Bool = true
    ) throws {
        let notify = try notifySocket ?? NotifySocket(path: directory + "/notify.sock")
        defer { if notifySocket == nil { notify.close() } }
        let p = Process()
        var args = ["--socket", socketPath, "--extensions", extensionsDirectory, "--state-directory", directory + "/state"]
        if FileManager.default.fileExists(atPath: directory + "/config.json") { args += ["--config", directory + "/config.json"] }
        var restrictions: [String] = []
        // EXTENSIOND_TESTS_UNRESTRICTED=1 starts them as before this harness had the unit's
        // restrictions, to tell a difference the restrictions make from another failure.
        if unitRestrictions && getuid() == 0 && ProcessInfo.processInfo.environment["EXTENSIOND_TESTS_UNRESTRICTED"] == nil {
            if delegatedCgroups.isEmpty { delegatedCgroups = UnitRestrictions.delegatedCgroups(URL(fileURLWithPath: directory).lastPathComponent) }
            restrictions = try UnitRestrictions.wrapper(cgroups: delegatedCgroups)
        }
        let command = restrictions + wrapper + [daemonExecutable] + args + arguments
        p.executableURL = URL(fileURLWithPath: command[0])
        p.arguments = Array(command.dropFirst())
        var env = ProcessInfo.processInfo.environment
        env["NOTIFY_SOCKET"] = notify.path
        env.removeValue(forKey: "LISTEN_FDS")
        env.removeValue(forKey: "LISTEN_PID")
        env.removeValue(forKey: "WATCHDOG_USEC")
        for (name, value) in extra { env[name] = value }
        p.environment = env
        guard FileManager.default.createFile(atPath: stderrFile, contents: nil) else { throw HarnessError("cannot create \(stderrFile)") }
        p.standardError = output ?? FileHandle(forWritingAtPath: stderrFile)
        p.standardOutput = output ?? FileHandle(forWritingAtPath: stderrFile)
        let exited = DispatchSemaphore(value: 0)
        p.terminationHandler = { _ in exited.signal() }
        exitSignal = exited
        try p.run()
        process = p
        guard notify.waitFor("READY=1", timeout: 20) else {
            throw HarnessError("extensiond did not send READY=1 within 20s; log:\n\(log())")
        }
        let client = try ControlClient(socketPath: socketPath)
        let events = self.events
        client.setEventHandler { bytes in events.append(bytes) }
        _ = try client.call { .monitor(tag: $0) }
        monitor = client
    }

    /// Starts the daemon as nobody (setpriv), as a daemon that is not root: its directory is
    /// given to nobody, it runs from a copy nobody can reach, and its readiness socket is
    /// writable by it.
    func startAsNobody(environment: [String: String] = [:], boundingSet: String? = nil) throws {
        chown(directory, 65534, 65534)
        daemonExecutable = try ReachableCopies.copy(BuildProducts.path("extensiond"))
        let notify = try NotifySocket(path: directory + "/notify.sock")
        defer { notify.close() }
        chmod(notify.path, 0o777)
        try start(
            environment: environment, notifySocket: notify,
            wrapper: ["/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] + (boundingSet.map { ["--bounding-set", $0] } ?? []) + ["--"],
            unitRestrictions: false)
    }

    /// The daemon's stderr so far.
    func log() -> String { (try? String(contentsOfFile: stderrFile, encoding: .utf8)) ?? "" }

    /// A new host connection.
    func host() throws -> ExtensionHostConnection { try ExtensionHostConnection(socketPath: socketPath) }

    /// Sends SIGTERM and waits for the daemon to exit; returns its exit status.
    @discardableResult
    func stop(timeout: Double = 20) -> Int32 {
        guard let p = process else { return 0 }
        if p.isRunning { p.terminate() }
        if !waitForExit(timeout: timeout) { kill(p.processIdentifier, SIGKILL); p.waitUntilExit() }
        return p.terminationStatus
    }

    /// Waits, on the process's termination handler, at most `timeout` seconds for the daemon
    /// to exit; returns whether it has.
    func waitForExit(timeout: Double) -> Bool {
        guard let p = process, let exited = exitSignal else { return true }
        guard exited.wait(timeout: .now() + timeout) == .success else { return !p.isRunning }
        exited.signal()  // stays signalled for later callers
        p.waitUntilExit()
        return true
    }

    /// Runs `extctl SUBCOMMAND --socket PATH ARGS…` against this daemon.
    func extctl(_ arguments: [String], stdin: String? = nil) throws -> (status: Int32, out: String, err: String) {
        try runProgram(BuildProducts.path("extctl"), [arguments.first ?? "", "--socket", socketPath] + arguments.dropFirst(), stdin: stdin)
    }

    deinit {
        stop()
        UnitRestrictions.removeDelegatedCgroups(delegatedCgroups)
        // EXTENSIOND_KEEP_TEST_DIRS=1 keeps each daemon's directory (log, manifests) for a post-mortem.
        if ProcessInfo.processInfo.environment["EXTENSIOND_KEEP_TEST_DIRS"] == nil {
            try? FileManager.default.removeItem(atPath: directory)
        }
    }
}

/// Runs a program to completion; returns (status, stdout, stderr).
func runProgram(_ path: String, _ arguments: [String], stdin: String? = nil) throws -> (status: Int32, out: String, err: String) {
    let p = Process()
    p.executableURL = URL(fileURLWithPath: path)
    p.arguments = arguments
    let out = Pipe(), err = Pipe(), input = Pipe()
    p.standardOutput = out
    p.standardError = err
    p.standardInput = input
    try p.run()
    if let stdin { input.fileHandleForWriting.write(Data(stdin.utf8)) }
    try input.fileHandleForWriting.close()
    let o = out.fileHandleForReading.readDataToEndOfFile()
    let e = err.fileHandleForReading.readDataToEndOfFile()
    p.waitUntilExit()
    return (p.terminationStatus, String(decoding: o, as: UTF8.self), String(decoding: e, as: UTF8.self))
}
