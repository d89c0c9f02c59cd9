import Foundation
import Testing

/// Administrative calls of a caller that is not an administrator, on the system bus, decided
/// by the real polkit daemon (docs/dbus.md, "Access"): its rules name the user it allows.
@Suite(
    .serialized,
    .enabled(if: BusClients.unavailability == nil && PrivatePolkit.unavailability == nil, "needs root, dbus-daemon, busctl, gdbus, python3-gi and polkitd"))
struct DBusAccessTests {
    /// Allows `org.extensiond1.manage` to nobody, refuses it to everyone else.
    static let rules = """
        polkit.addRule(function(action, subject) {
            if (action.id == "org.extensiond1.manage") return subject.user == "nobody" ? polkit.Result.YES : polkit.Result.NO;
        });
        """

    static func polkit(_ rig: DBusRig) throws -> PrivatePolkit {
        let policy = try String(contentsOfFile: RuntimeC.packageRoot + "/dbus/org.extensiond1.policy", encoding: .utf8)
        return try PrivatePolkit(address: rig.address, directory: rig.directory + "/polkit", actions: ["org.extensiond1.policy": policy], rules: rules)
    }

    /// The command line that runs what follows it as the `daemon` user (uid and gid 1).
    static let asDaemonUser = [BusClients.setprivPath, "--reuid=1", "--regid=1", "--clear-groups", "--"]

    /// Without polkit on the bus, nobody's Kill is refused; with it, the user its rules refuse
    /// (daemon, uid 1) is refused and nothing happens, and nobody, whom they allow, kills the
    /// extension.
    @Test func polkitDecidesTheAdministrativeCallsOfACallerThatIsNotAnAdministrator() throws {
        let rig = try DBusRig(bus: "system")
        defer { rig.close() }
        let pid = try rig.suspendOnce(DBusTests.widget)
        let mark = rig.daemon.events.count

        let absent = try BusClients.gdbus(rig.address, "org.extensiond1.Manager.Kill", [DBusTests.widget, "15"], nobody: true)
        #expect(absent.errorName == "org.extensiond1.Error.NotPermitted", "no polkit: \(absent)")

        let polkit = try Self.polkit(rig)
        defer { polkit.close() }
        let command =
            Self.asDaemonUser + [BusClients.gdbusPath] + BusClients.gdbusArguments(rig.address, "org.extensiond1.Manager.Kill", [DBusTests.widget, "15"])
        let other = try runProgram(command[0], Array(command.dropFirst()))
        #expect(other.status != 0 && other.err.contains("org.extensiond1.Error.NotPermitted"), "\(other)\npolkitd: \(polkit.log)")
        #expect(processState(pid) == "T", "still suspended")
        let since = rig.daemon.events.all.dropFirst(mark).filter { $0.id == DBusTests.widget }.map(\.kind)
        #expect(since.isEmpty, "nothing happened to the extension: \(since)")

        let kill = try BusClients.gdbus(rig.address, "org.extensiond1.Manager.Kill", [DBusTests.widget, "15"], nobody: true)
        #expect(kill.status == 0 && kill.out.trimmingCharacters(in: .whitespacesAndNewlines) == "()", "\(kill)\npolkitd: \(polkit.log)")
        let exit = try rig.daemon.events.wait("exit", of: DBusTests.widget, after: mark)
        #expect(exit.detail?.hasPrefix("killed-by-admin, signal 15") == true, "\(exit)")
        #expect(rig.close() == 0, "\(rig.daemon.log())")
    }

    /// Eight administrative calls sent at once on one connection by a caller polkit allows
    /// (a Gio client as nobody), and two on each of 11 more connections of the same uid (more
    /// than the 4 questions one uid may have in flight: the callers take turns), are all asked
    /// about and all answered; then a Reexec is answered when the re-exec begins, and the new
    /// program owns the name.
    @Test func administrativeCallsWaitingForPolkitAreEachAnswered() throws {
        let rig = try DBusRig(bus: "system")
        defer { rig.close() }
        let polkit = try Self.polkit(rig)
        defer { polkit.close() }
        let script = """
            import json, sys
            import gi
            gi.require_version("Gio", "2.0")
            from gi.repository import Gio, GLib
            flags = Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT | Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION
            buses = [Gio.DBusConnection.new_for_address_sync(sys.argv[1], flags, None, None) for _ in range(12)]
            bus = buses[0]
            loop = GLib.MainLoop()
            results = []
            def done(connection, result, method):
                try:
                    connection.call_finish(result)
                    results.append(method + " ok")
                except GLib.Error as e:
                    results.append(method + " " + (Gio.DBusError.get_remote_error(e) or e.message))
                if len(results) == 30:
                    loop.quit()
            for connection, count in [(bus, 8)] + [(other, 2) for other in buses[1:]]:
                for i in range(count):
                    method = "Reload" if i % 2 == 0 else "Reset"
                    arguments = None if method == "Reload" else GLib.Variant("(s)", (sys.argv[2],))
                    connection.call("org.extensiond1", "/org/extensiond1", "org.extensiond1.Manager", method, arguments, None, 0, 30000, None, done, method)
            loop.run()
            reexec = bus.call_sync("org.extensiond1", "/org/extensiond1", "org.extensiond1.Manager", "Reexec", None, None, 0, 30000, None)
            print(json.dumps({"calls": sorted(results), "reexec": reexec.unpack()}))
            """
        let owner = try rig.bus.busctl([
            "call", "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "GetNameOwner", "s", "org.extensiond1",
        ])
        let command = BusClients.asNobody + [BusClients.pythonPath, "-c", script, rig.address, DBusTests.sleeper]
        let r = try runProgram(command[0], Array(command.dropFirst()))
        try #require(r.status == 0, "\(r)\npolkitd: \(polkit.log)\n\(rig.daemon.log())")
        let out = try #require(try JSONSerialization.jsonObject(with: Data(r.out.utf8)) as? [String: Any], "\(r)")
        #expect(out["calls"] as? [String] == Array(repeating: "Reload ok", count: 15) + Array(repeating: "Reset ok", count: 15), "\(out)")
        #expect((out["reexec"] as? [Any])?.isEmpty == true, "\(out)")
        try rig.waitForName("org.extensiond1")
        try eventually("the re-executed daemon owns org.extensiond1") {
            let now = try? rig.bus.busctl([
                "call", "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "GetNameOwner", "s", "org.extensiond1",
            ])
            return now?.status == 0 && now?.out != owner.out
        }
        #expect(rig.daemon.log().contains("re-exec asked by pid"), "\(rig.daemon.log())")
        #expect(rig.close() == 0, "\(rig.daemon.log())")
    }
}
