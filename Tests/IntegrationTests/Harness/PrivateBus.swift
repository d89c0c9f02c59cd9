import Foundation

/// The C fixtures of the open-URL tests, on sd-bus: Tests/Fixtures/dbus-app (a D-Bus-activatable
/// app recording the org.freedesktop.Application calls it gets) and Tests/Fixtures/fake-logind
/// (org.freedesktop.login1 with one session, c1, whose LockedHint the tests set). Built once
/// per test run with the system C compiler into .build/dbus-fixtures, as RuntimeC builds the
/// C runtime into .build/runtime-c.
enum DBusFixtures {
    static let directory = RuntimeC.packageRoot + "/.build/dbus-fixtures"

    private static let dbusAppBuilt = build("dbus-app")
    private static let fakeLogindBuilt = build("fake-logind")

    /// dbus-app's path: `dbus-app BUS_NAME RECORD_FILE`.
    static func dbusApp() throws -> String { try dbusAppBuilt.get() }

    /// fake-logind's path: `fake-logind ADDRESS` (see `PrivateBus.startFakeLogind`).
    static func fakeLogind() throws -> String { try fakeLogindBuilt.get() }

    /// The lines dbus-app has appended to `recordFile` (none while it does not exist):
    /// `open URI`, `activate`, `action NAME`, `platform KEY=VALUE`; each call's lines arrive in
    /// one write.
    static func records(_ recordFile: String) -> [String] {
        ((try? String(contentsOfFile: recordFile, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
    }

    /// Compiles Tests/Fixtures/NAME/NAME.c to .build/dbus-fixtures/NAME (through a temporary
    /// file renamed into place, so that a leftover process running an older build does not
    /// make the compiler's write fail).
    private static func build(_ name: String) -> Result<String, HarnessError> {
        let source = RuntimeC.packageRoot + "/Tests/Fixtures/\(name)/\(name).c"
        let output = directory + "/" + name
        let temporary = output + ".\(getpid()).tmp"
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            let r = try runProgram(
                "/bin/sh", ["-c", #"cc -O1 -Wall -Werror -o "$1" "$2" $(pkg-config --cflags --libs libsystemd)"#, "sh", temporary, source])
            guard r.status == 0 else {
                unlink(temporary)
                return .failure(HarnessError("cannot compile \(source) (cc exited \(r.status)):\n\(r.err)\(r.out)"))
            }
            guard rename(temporary, output) == 0 else {
                let e = errno
                unlink(temporary)
                return .failure(HarnessError("cannot rename \(temporary) to \(output): \(String(cString: strerror(e)))"))
            }
            return .success(output)
        } catch {
            return .failure(HarnessError("cannot compile \(source): \(error)"))
        }
    }
}

/// A private message bus for a test: dbus-daemon on `DIRECTORY/bus`, with its own service
/// directory (`DIRECTORY/services`) for D-Bus activation, and a policy that lets every uid
/// connect, own any name and send anything. It stands in for both the session bus (activatable
/// apps, `addService`) and the system bus (logind, `startFakeLogind`): point
/// DBUS_SESSION_BUS_ADDRESS and DBUS_SYSTEM_BUS_ADDRESS of the daemon under test at `address`.
///
/// The bus's messages, and the output of every service it activates, are appended to
/// `logPath`. `close()` (or deinit) stops the fake logind and the bus; activated services see
/// their connection end and exit. For another uid to connect, `directory` must be searchable
/// by it (the socket itself is 0777).
final class PrivateBus {
    static let daemonPath = "/usr/bin/dbus-daemon"
    static let busctlPath = "/usr/bin/busctl"

    /// Why a private bus cannot run here, or nil when it can.
    static let unavailability: String? = {
        if !FileManager.default.isExecutableFile(atPath: daemonPath) { return "\(daemonPath) is not installed (scripts/dependencies.sh installs dbus-daemon)" }
        if !FileManager.default.isExecutableFile(atPath: busctlPath) { return "\(busctlPath) is not installed (scripts/dependencies.sh installs systemd)" }
        return nil
    }()

    let directory: String
    /// The bus's listening socket, `DIRECTORY/bus`.
    let socketPath: String
    /// Where `addService` writes the .service files, `DIRECTORY/services`.
    let servicesDirectory: String
    let configPath: String
    /// The bus's messages and the activated services' stdout and stderr.
    let logPath: String
    /// The address dbus-daemon printed: `unix:path=DIRECTORY/bus,guid=…`.
    let address: String
    private let daemon: RawProcess
    /// The fake logind processes started on this bus (stopped by `close`).
    private var fakeLoginds: [RawProcess] = []
    private var closed = false

    /// Writes the configuration, starts dbus-daemon and waits (at most `timeout` seconds) for
    /// the address it prints once it listens. An activated service that exits 0 without taking
    /// its name fails the activation only after `serviceStartTimeout` seconds (one that exits
    /// with another status fails it at once).
    init(directory: String, serviceStartTimeout: Double = 25, timeout: Double = 10) throws {
        self.directory = directory
        socketPath = directory + "/bus"
        servicesDirectory = directory + "/services"
        configPath = directory + "/bus.conf"
        logPath = directory + "/bus.log"
        guard socketPath.utf8.count < 108 else { throw HarnessError("the bus socket path is too long for sun_path: \(socketPath)") }
        try FileManager.default.createDirectory(atPath: servicesDirectory, withIntermediateDirectories: true)
        let config = """
            <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
             "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
            <busconfig>
              <type>session</type>
              <listen>\(PrivateBus.xml("unix:path=" + PrivateBus.addressValue(socketPath)))</listen>
              <servicedir>\(PrivateBus.xml(servicesDirectory))</servicedir>
              <auth>EXTERNAL</auth>
              <limit name="service_start_timeout">\(Int(serviceStartTimeout * 1000))</limit>
              <policy context="default">
                <!-- Any uid may connect (a session bus admits only its own uid otherwise). -->
                <allow user="*"/>
                <allow own="*"/>
                <allow send_destination="*" eavesdrop="true"/>
                <allow receive_sender="*"/>
                <allow eavesdrop="true"/>
              </policy>
            </busconfig>

            """
        try Data(config.utf8).write(to: URL(fileURLWithPath: configPath))
        // The address goes to descriptor 3, our socket; stdout and stderr (which the activated
        // services inherit) to the log, so nothing ever blocks on a socket no one reads. A
        // RawProcess: the daemon and the services it spawns get an empty signal mask.
        let process = try RawProcess(
            "/bin/sh",
            ["-c", #"exec "$0" --nofork --print-address=3 --config-file="$1" 3>&1 >>"$2" 2>&1 </dev/null"#, PrivateBus.daemonPath, configPath, logPath],
            pipes: true)
        process.closeInput()
        let line = HostChannel(fd: process.output).readLine(timeout: timeout)
        guard let line, line.hasPrefix("unix:") else {
            process.stop(SIGTERM, timeout: 5)
            let log = (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? ""
            throw HarnessError("dbus-daemon printed no address within \(timeout)s (\(line ?? "nothing")); log:\n\(log)")
        }
        daemon = process
        address = line
    }

    /// The bus's log so far.
    var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    /// Runs `busctl --address=ADDRESS --timeout=…s ARGUMENTS…` to its end.
    @discardableResult
    func busctl(_ arguments: [String], timeout: Int = 10) throws -> (status: Int32, out: String, err: String) {
        try runProgram(PrivateBus.busctlPath, ["--address=\(address)", "--timeout=\(timeout)s"] + arguments)
    }

    /// Makes `name` activatable: writes `SERVICES/NAME.service` (`Exec=` the executable and
    /// arguments, quoted for the bus's parser), has the bus reload its configuration, and
    /// waits (at most `timeout` seconds) until the bus lists the name as activatable. The
    /// service runs with the bus's environment plus DBUS_STARTER_ADDRESS and
    /// DBUS_STARTER_BUS_TYPE; for other variables, run it through /usr/bin/env.
    func addService(name: String, executable: String, arguments: [String], timeout: Double = 10) throws {
        try PrivateBus.checkName(name)
        let exec = try ([executable] + arguments).map(PrivateBus.execWord).joined(separator: " ")
        let file = "[D-BUS Service]\nName=\(name)\nExec=\(exec)\n"
        try Data(file.utf8).write(to: URL(fileURLWithPath: servicesDirectory + "/\(name).service"), options: .atomic)
        try reload(until: "\(name) is activatable", timeout: timeout) { $0.contains(name) }
    }

    /// Removes `name`'s .service file (no longer activatable) and waits until the bus agrees.
    func removeService(name: String, timeout: Double = 10) throws {
        try PrivateBus.checkName(name)
        unlink(servicesDirectory + "/\(name).service")
        try reload(until: "\(name) is no longer activatable", timeout: timeout) { !$0.contains(name) }
    }

    /// The names the bus can activate.
    func activatableNames() throws -> [String] {
        let r = try busctl(["--json=short", "call", "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "ListActivatableNames"])
        guard r.status == 0, let object = try? JSONSerialization.jsonObject(with: Data(r.out.utf8)) as? [String: Any],
            let data = object["data"] as? [Any], let names = data.first as? [String]
        else { throw HarnessError("ListActivatableNames failed (\(r.status)): \(r.err)\(r.out)") }
        return names
    }

    /// Starts fake-logind on this bus and waits (at most `timeout` seconds) until it owns
    /// org.freedesktop.login1 (its READY line). Its session, c1, starts unlocked. It runs until
    /// `close()`; stopping the returned process earlier is up to the test.
    @discardableResult
    func startFakeLogind(timeout: Double = 10) throws -> RawProcess {
        let process = try RawProcess(try DBusFixtures.fakeLogind(), [address], pipes: true)
        process.closeInput()
        let channel = HostChannel(fd: process.output)
        var lines: [String] = []
        while let line = channel.readLine(timeout: timeout) {
            if line == "READY" {
                fakeLoginds.append(process)
                return process
            }
            lines.append(line)
        }
        let exited = process.wait(timeout: 1)
        let code = process.stop(SIGTERM, timeout: 5)
        let how = exited ? "exited with \(code.map { String($0) } ?? "?")" : "not ready within \(timeout)s"
        throw HarnessError("fake-logind did not print READY (\(how)): \(lines.joined(separator: "\n"))")
    }

    /// Sets the LockedHint of fake-logind's session c1 (it emits PropertiesChanged).
    func setLocked(_ locked: Bool) throws {
        let r = try busctl([
            "call", "org.freedesktop.login1", "/org/freedesktop/login1/session/c1", "org.freedesktop.login1.Session", "SetLockedHint", "b",
            locked ? "true" : "false",
        ])
        guard r.status == 0 else { throw HarnessError("SetLockedHint \(locked) failed (\(r.status)): \(r.err)\(r.out)") }
    }

    /// The LockedHint of fake-logind's session c1.
    func isLocked() throws -> Bool {
        let r = try busctl(["get-property", "org.freedesktop.login1", "/org/freedesktop/login1/session/c1", "org.freedesktop.login1.Session", "LockedHint"])
        switch r.out.trimmingCharacters(in: .whitespacesAndNewlines) {
        case "b true": return true
        case "b false": return false
        default: throw HarnessError("LockedHint: \(r.status) \(r.err)\(r.out)")
        }
    }

    /// Stops the fake logind processes and the bus (SIGTERM, SIGKILL after `timeout` seconds).
    func close(timeout: Double = 10) {
        guard !closed else { return }
        closed = true
        for process in fakeLoginds { process.stop(SIGTERM, timeout: timeout) }
        fakeLoginds = []
        daemon.stop(SIGTERM, timeout: timeout)
    }

    deinit { close() }

    /// Has the bus reload its configuration (synchronously: the reply comes after the reload)
    /// and then re-reads its activatable names until `condition` holds.
    private func reload(until what: String, timeout: Double, _ condition: ([String]) -> Bool) throws {
        let r = try busctl(["call", "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "ReloadConfig"])
        guard r.status == 0 else { throw HarnessError("ReloadConfig failed (\(r.status)): \(r.err)\(r.out)") }
        let deadline = Date().addingTimeInterval(timeout)
        while try !condition(activatableNames()) {
            if Date() > deadline { throw HarnessError("timed out waiting until \(what); bus log:\n\(log)") }
            usleep(20_000)
        }
    }

    private static func checkName(_ name: String) throws {
        let allowed = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.")
        guard !name.isEmpty, name.allSatisfy(allowed.contains), !name.hasPrefix("."), name.contains(".") else {
            throw HarnessError("not a well-known bus name: \(name)")
        }
    }

    /// One word of an `Exec=` line. dbus-daemon reads the line in two steps: the key file
    /// unescapes `\\`, `\n`, `\t`, `\r` and `\s` (and rejects the whole file, silently, for any
    /// other backslash sequence); then a shell-like parser splits words, with single quotes
    /// taking everything literally. So: single-quote the word (`'` as `'\''`), then escape
    /// backslashes and control characters for the key file. No variables or % codes expand.
    static func execWord(_ word: String) throws -> String {
        var quoted = "'"
        for c in word.unicodeScalars {  // scalars: "\r\n" is one Character
            switch c {
            case "'": quoted += #"'\\''"#
            case "\\": quoted += #"\\"#
            case "\n": quoted += #"\n"#
            case "\t": quoted += #"\t"#
            case "\r": quoted += #"\r"#
            case "\0": throw HarnessError("a NUL in an Exec= word: \(word.debugDescription)")
            default: quoted.unicodeScalars.append(c)
            }
        }
        return quoted + "'"
    }

    /// `value` escaped for a D-Bus address: bytes outside [-0-9A-Za-z_/.\*] as %XX.
    static func addressValue(_ value: String) -> String {
        let plain = Set("-0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_/.\\*".utf8)
        return value.utf8.map { plain.contains($0) ? String(UnicodeScalar($0)) : String(format: "%%%02X", $0) }.joined()
    }

    /// `text` escaped for XML character data.
    static func xml(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;").replacingOccurrences(of: ">", with: "&gt;")
    }
}
