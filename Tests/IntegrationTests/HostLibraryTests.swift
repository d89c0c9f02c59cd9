import Foundation
import Testing

/// The C host library (libExtensionHostC, include/extension_host.h) and the Python module on it
/// (`extension_runtime.host`), against the real daemon on a private bus: the C host example
/// opens an extension and prints its first line, twice on the same process; the Python host
/// lists, begins, pings over the channel, dismisses, and sees the events of it.
@Suite(.serialized, .enabled(if: BusClients.unavailability == nil, "needs root, dbus-daemon and busctl"))
struct HostLibraryTests {
    static let root = RuntimeC.packageRoot
    static let hostLibrary: Result<String, HarnessError> = Result {
        let out = root + "/.build/host-c"
        let r = try runProgram("/bin/bash", [root + "/scripts/build-host-c.sh", "--out", out])
        guard r.status == 0 else { throw HarnessError("scripts/build-host-c.sh failed: \(r.err)") }
        return out
    }.mapError { ($0 as? HarnessError) ?? HarnessError("\($0)") }

    /// The arguments of /usr/bin/env running the Python host `script` with the widget's id as
    /// its argument, on the rig's bus, with the library built here and the source tree's package.
    static func python(_ script: String, rig: DBusRig, library: String) -> [String] {
        [
            "EXTENSIOND_BUS=session", "DBUS_SESSION_BUS_ADDRESS=" + rig.address, "EXTENSION_HOST_LIB=" + library + "/libExtensionHostC.so.0",
            "PYTHONPATH=" + root + "/bindings/python/src", "/usr/bin/python3", "-c", script, DBusTests.widget,
        ]
    }

    /// The Python host `script` running on `rig`'s bus (after `environment`, `NAME=value`
    /// words), its output piped.
    static func pythonHost(_ script: String, rig: DBusRig, library: String, environment: [String] = []) throws -> RawProcess {
        try RawProcess("/usr/bin/env", environment + python(script, rig: rig, library: library), pipes: true)
    }

    /// The output of `host` once it printed `begun` (it must, within 30 s).
    static func begun(_ host: RawProcess) throws -> HostChannel {
        let output = HostChannel(fd: host.output)
        let begun = output.readLine(timeout: 30)
        try #require(begun == "begun", "\(String(describing: begun))")
        return output
    }

    @Test func theCHostExampleOpensTheExtensionAndTheSecondOpenResumesIt() throws {
        let library = try Self.hostLibrary.get()
        let rig = try DBusRig()
        defer { rig.close() }
        let binary = rig.directory + "/c-host"
        let cc = try runProgram(
            "/usr/bin/env",
            [
                "cc", "-Wall", "-Werror", "-I", Self.root + "/include", Self.root + "/examples/c-host/host.c", "-L", library, "-lExtensionHostC",
                "-Wl,-rpath," + library, "-o", binary,
            ])
        try #require(cc.status == 0, "cc: \(cc.err)")
        let env = ["EXTENSIOND_BUS=session", "DBUS_SESSION_BUS_ADDRESS=" + rig.address]
        let first = try runProgram("/usr/bin/env", env + [binary, DBusTests.widget, "ping"])
        #expect(first.status == 0, "\(first)")
        let pong = try #require(first.out.split(separator: "\n").first.map(String.init), "\(first)")
        #expect(pong.hasPrefix("pong "), "\(first)")
        let second = try runProgram("/usr/bin/env", env + [binary, DBusTests.widget, "ping"])
        #expect(second.out.split(separator: "\n").first.map(String.init) == pong, "the same process answers: \(second)")
        let unknown = try runProgram("/usr/bin/env", env + [binary, "org.example.none"])
        #expect(unknown.status == 1 && unknown.err.contains("org.extensiond1.Error.UnknownExtension"), "\(unknown)")
    }

    @Test func thePythonHostBeginsPingsDismissesAndFollowsTheEvents() throws {
        let library = try Self.hostLibrary.get()
        let rig = try DBusRig()
        defer { rig.close() }
        let script = """
            import json, sys
            from extension_runtime.host import Host
            with Host() as host:
                ids = [e.id for e in host.list()]
                events = []
                host.monitor(lambda e: events.append((e.id, e.event, e.state)))
                request = host.begin(sys.argv[1])
                request.channel.sendall(b"ping\\n")
                answer = request.channel.recv(100).decode().strip()
                request.dismiss()
                while not any(e[1] == "suspend" for e in events):
                    host.wait(10)
                print(json.dumps({"ids": ids, "answer": answer, "events": [e[1] for e in events if e[0] == sys.argv[1]]}))
            """
        let r = try runProgram(
            "/usr/bin/env", Self.python(script, rig: rig, library: library))
        try #require(r.status == 0, "\(r)")
        let out = try #require(try JSONSerialization.jsonObject(with: Data(r.out.utf8)) as? [String: Any], "\(r)")
        #expect(out["ids"] as? [String] == [DBusTests.widget, DBusTests.sleeper], "\(out)")
        #expect((out["answer"] as? String)?.hasPrefix("pong ") == true, "\(out)")
        let events = out["events"] as? [String] ?? []
        #expect(["launch", "ready", "begin", "end", "suspend"].allSatisfy(events.contains), "\(events)")
    }

    /// A request open when the daemon goes away ends: the library sees org.extensiond1 lose
    /// its owner (the daemon killed with SIGKILL: no signal of its own) and delivers
    /// `interrupted` with why, to the Python host's request.
    @Test func aRequestOpenWhenTheDaemonDiesIsInterrupted() throws {
        let library = try Self.hostLibrary.get()
        let rig = try DBusRig()
        defer { rig.close() }
        let script = """
            import sys
            from extension_runtime.host import Host
            with Host() as host:
                request = host.begin(sys.argv[1])
                print("begun", flush=True)
                outcome = request.wait(30)
                print(outcome.kind if outcome else "none", outcome.reason if outcome else "", flush=True)
            """
        let host = try Self.pythonHost(script, rig: rig, library: library)
        defer { _ = host.stop(SIGKILL, timeout: 5) }
        let output = try Self.begun(host)
        let widget = try rig.killDaemonLeavingWidget()
        defer { kill(widget, SIGKILL) }
        let ended = output.readLine(timeout: 30)
        #expect(ended == "interrupted extensiond left the bus: the request ended with it", "\(String(describing: ended))")
        #expect(host.wait(timeout: 10) && host.exitCode == 0)
    }

    /// A Python host's callback may close the host, and change its monitor: both take effect
    /// once the library's dispatch returns (no use of the freed host), and no callback runs
    /// after the close.
    @Test func aPythonCallbackMayCloseTheHost() throws {
        let library = try Self.hostLibrary.get()
        let rig = try DBusRig()
        defer { rig.close() }
        let script = """
            import sys
            from extension_runtime.host import Host
            host = Host()
            seen = []
            def on_event(event):
                seen.append(event.event)
                host.monitor(lambda e: seen.append("second " + e.event))
                host.close()
            host.monitor(on_event)
            request = host.begin(sys.argv[1])
            try:
                while True:
                    host.wait(10)
            except ValueError as error:
                print(len(seen), str(error), flush=True)
            """
        let r = try runProgram(
            "/usr/bin/env", Self.python(script, rig: rig, library: library))
        #expect(r.status == 0 && r.out == "1 the host is closed\n", "\(r)")
    }
}
