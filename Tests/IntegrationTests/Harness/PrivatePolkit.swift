import Foundation

/// The real polkit daemon (polkitd, Debian's `polkitd` package) on a test's private bus, with
/// actions and rules of the test's own: it runs in a mount namespace of its own where the
/// test's directories are bound over /usr/share/polkit-1/actions and /etc/polkit-1/rules.d, so
/// the machine's files are neither read nor changed.
final class PrivatePolkit {
    static let polkitdPath = "/usr/lib/polkit-1/polkitd"
    static let unsharePath = "/usr/bin/unshare"

    /// Why polkitd cannot run here, or nil when it can.
    static let unavailability: String? = {
        if !FileManager.default.isExecutableFile(atPath: polkitdPath) { return "\(polkitdPath) is not installed (scripts/dependencies.sh installs polkitd)" }
        if !FileManager.default.isExecutableFile(atPath: unsharePath) { return "\(unsharePath) is not installed (util-linux)" }
        if getpwnam("polkitd") == nil { return "there is no polkitd user (the polkitd package makes it)" }
        return nil
    }()

    private let process: RawProcess
    let logPath: String

    /// Starts polkitd on the bus at `address` with `actions` (file name → the .policy's text)
    /// and one rules file `rules` (JavaScript), in `directory`; waits (at most `timeout`
    /// seconds) until it owns org.freedesktop.PolicyKit1.
    init(address: String, directory: String, actions: [String: String], rules: String, timeout: Int = 30) throws {
        let actionsDirectory = directory + "/actions", rulesDirectory = directory + "/rules.d"
        for d in [directory, actionsDirectory, rulesDirectory] {
            try FileManager.default.createDirectory(atPath: d, withIntermediateDirectories: true)
            chmod(d, 0o755)
        }
        for (name, text) in actions { try Data(text.utf8).write(to: URL(fileURLWithPath: actionsDirectory + "/" + name)) }
        try Data(rules.utf8).write(to: URL(fileURLWithPath: rulesDirectory + "/50-test.rules"))
        logPath = directory + "/polkitd.log"
        process = try RawProcess(
            "/usr/bin/env",
            [
                "DBUS_SYSTEM_BUS_ADDRESS=" + address, Self.unsharePath, "--mount", "--propagation", "private", "/bin/sh", "-c",
                #"mount --bind "$1" /usr/share/polkit-1/actions && mount --bind "$2" /etc/polkit-1/rules.d && exec "$3" --no-debug"#, "sh",
                actionsDirectory, rulesDirectory, Self.polkitdPath,
            ], log: logPath)
        let r = try runProgram(BusClients.gdbusPath, ["wait", "--address", address, "--timeout", String(timeout), "org.freedesktop.PolicyKit1"])
        guard r.status == 0 else {
            close()
            throw HarnessError("polkitd did not take org.freedesktop.PolicyKit1 within \(timeout) s: \(r.err)\nlog:\n\(log)")
        }
    }

    /// What polkitd printed.
    var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    /// Stops it.
    func close() { _ = process.stop(SIGTERM, timeout: 10) }

    deinit { close() }
}
