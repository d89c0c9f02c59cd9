import ExtensionHost
import Foundation
import Testing

/// The D-Bus interface (docs/dbus.md, the contract of issue 43) of a real daemon started with
/// `--bus=session` on a private dbus-daemon (`PrivateBus`) that stands in for the session bus,
/// driven by clients of other toolkits: busctl (sd-bus), gdbus, and Python on GLib's Gio
/// (Tests/Fixtures/dbus-host). Introspection and lists, Begin from gdbus and from a Gio host
/// that talks to the extension over the descriptor it receives, a caller leaving the bus with
/// a request open, PropertiesChanged in the order of `extctl monitor`, who may call what, and
/// bad input.
@Suite(
    "The D-Bus interface", .serialized,
    .enabled(if: BusClients.unavailability == nil, "\(BusClients.unavailability ?? "needs root, dbus-daemon, busctl, gdbus and python3-gi")"))
struct DBusTests {
    static let appID = "com.example.stocks"
    static let widget = "com.example.stocks.widget"
    static let sleeper = "org.example.sleeper"
    static let widgetPath = BusClients.extensionPath(widget)
    static let sleeperPath = BusClients.extensionPath(sleeper)

    /// The manifests every test has: an app, the test extension in it (`widget`), and an
    /// extension with exec readiness and no app (`sleeper`).
    static func manifests() -> [String: [String: Any]] {
        [
            "app.json": ["kind": "app", "id": appID, "groups": ["group.com.example.stocks"], "dbusActivatable": true],
            "widget.json": TestDaemon.testExtension(widget, extra: ["app": appID]),
            "sleeper.json": ["id": sleeper, "executable": "/bin/sleep", "arguments": ["1000"], "readiness": "exec"],
        ]
    }

    // MARK: - Introspection, lists and properties

    /// busctl (sd-bus) sees the contract's objects: the manager's methods with their signatures
    /// and its properties, an enumerable object per extension at its escaped path with every
    /// property, ListExtensions equal to `extctl list --json` before and after a launch,
    /// GetExtension, ListApps and Status.
    @Test func busctlIntrospectsTheObjectsListsTheExtensionsAndReadsTheirProperties() throws {
        let rig = try DBusRig()
        defer { rig.close() }
        // The contract's example of the escaping.
        #expect(BusClients.extensionPath("com.example.stocks") == "/org/extensiond1/extension/com_2eexample_2estocks")

        let manager = try rig.introspect("/org/extensiond1")
        #expect(manager["org.extensiond1.Manager"]?.first == "interface", "\(manager)")
        let methods: [(String, String, String)] = [
            (".Begin", "sa{sv}", "oh"), (".ListExtensions", "-", "a(ssssuo)"), (".ListApps", "-", "a(sssas)"), (".GetExtension", "s", "o"),
            (".Status", "as", "s"), (".Prewarm", "as", "-"), (".PostHint", "s", "-"), (".Kill", "si", "-"), (".Reload", "-", "s"),
            (".Reset", "s", "-"), (".Reexec", "-", "-"),
        ]
        for (name, signature, result) in methods {
            #expect(manager[name].map { Array($0.prefix(3)) } == ["method", signature, result], "\(name): \(manager[name] ?? [])")
        }
        #expect(manager[".Reexecuted"].map { Array($0.prefix(3)) } == ["signal", "bsss", "-"], "\(manager[".Reexecuted"] ?? [])")
        #expect(try rig.property("/org/extensiond1", "org.extensiond1.Manager", "Bus") as? String == "session")
        let version = try runProgram(BuildProducts.path("extensiond"), ["--version"]).out.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(try rig.property("/org/extensiond1", "org.extensiond1.Manager", "Version") as? String == version)

        // One object per extension, enumerable, with the contract's properties.
        let tree = try rig.bus.busctl(["tree", "--list", "org.extensiond1"])
        let paths = Set(tree.out.split(separator: "\n").map(String.init))
        #expect(paths.isSuperset(of: [Self.widgetPath, Self.sleeperPath]), "busctl tree: \(tree.out)\(tree.err)")
        let object = try rig.introspect(Self.widgetPath, interface: "org.extensiond1.Extension")
        for name in ["Id", "Point", "App", "Sandbox", "Container", "Limits"] {
            #expect(object["." + name]?.first == "property", "\(name): \(object)")
        }
        // The properties each lifecycle event carries, announced as changing.
        for name in ["State", "Pid", "Since", "Requests", "Assertions", "LastEvent", "LastEventDetail"] {
            #expect(object["." + name]?.first == "property" && object["." + name]?.last == "emits-change", "\(name): \(object["." + name] ?? [])")
        }
        #expect(try rig.extensionProperty(Self.widget, "Id") as? String == Self.widget)
        #expect(try rig.extensionProperty(Self.widget, "Point") as? String == "widget")
        #expect(try rig.extensionProperty(Self.widget, "App") as? String == Self.appID)
        #expect(try rig.extensionProperty(Self.sleeper, "App") as? String == "")
        #expect(try rig.extensionProperty(Self.widget, "State") as? String == "not-running")
        #expect(try rig.extensionProperty(Self.widget, "Pid") as? Int == 0)
        #expect(try rig.extensionProperty(Self.widget, "Requests") as? Int == 0)
        #expect(try rig.extensionProperty(Self.widget, "LastEvent") as? String == "")

        let before = try rig.listExtensions()
        #expect(
            before == [
                "\(Self.widget)|widget|not-running|\(Self.appID)|0|\(Self.widgetPath)", "\(Self.sleeper)|default|not-running||0|\(Self.sleeperPath)",
            ])
        #expect(try before == rig.extctlList())

        // Launched: active, with its pid, in the list and in its properties.
        let host = try rig.daemon.host()
        let session = try host.begin(Self.widget)
        let after = try rig.listExtensions()
        #expect(after.first == "\(Self.widget)|widget|active|\(Self.appID)|\(session.pid)|\(Self.widgetPath)", "\(after)")
        #expect(try after == rig.extctlList())
        #expect(try rig.extensionProperty(Self.widget, "State") as? String == "active")
        #expect(try rig.extensionProperty(Self.widget, "Pid") as? Int == Int(session.pid))
        #expect(try rig.extensionProperty(Self.widget, "Requests") as? Int == 1)
        #expect(try rig.extensionProperty(Self.widget, "LastEvent") as? String == "begin")

        #expect(try rig.call("GetExtension", ["s", Self.widget]).first as? String == Self.widgetPath)
        let apps = try #require(try rig.call("ListApps").first as? [[Any]])
        #expect(apps.count == 1, "\(apps)")
        #expect(apps.first?.prefix(3).compactMap { $0 as? String } == [Self.appID, "", "dbus-activation"], "\(apps)")
        #expect(apps.first?.last as? [String] == [Self.widget], "\(apps)")
        let status = try #require(try rig.call("Status", ["as", "1", Self.widget]).first as? String)
        let document = try JSONSerialization.jsonObject(with: Data(status.utf8)) as? [String: Any]
        let entries = try #require(document?["extensions"] as? [[String: Any]], "\(status)")
        #expect(entries.count == 1 && entries.first?["id"] as? String == Self.widget, "\(status)")
        #expect(entries.first?["state"] as? String == "active" && entries.first?["pid"] as? Int == Int(session.pid), "\(status)")
        let all = try #require(try rig.call("Status", ["as", "0"]).first as? String)
        let allIDs = ((try JSONSerialization.jsonObject(with: Data(all.utf8)) as? [String: Any])?["extensions"] as? [[String: Any]])?.map {
            $0["id"] as? String
        }
        #expect(allIDs == [Self.widget, Self.sleeper], "\(all)")
        #expect(rig.close() == 0, "\(rig.daemon.log())")
    }

    // MARK: - Begin from gdbus

    /// gdbus calls Begin on a suspended extension: the reply carries a descriptor (gdbus prints
    /// the request's object and `handle 0`), the extension is resumed (the same process), the
    /// daemon knows gdbus's pid from the bus, and once gdbus exits (its connection leaves the bus)
    /// the request is dismissed and the extension suspended again.
    @Test func gdbusBeginsOnASuspendedExtensionWhichIsResumedAndSuspendedAgainWhenGdbusLeaves() throws {
        let rig = try DBusRig()
        defer { rig.close() }
        let pid = try rig.suspendOnce(Self.widget)
        #expect(try rig.extensionProperty(Self.widget, "State") as? String == "suspended")
        #expect(try rig.extensionProperty(Self.widget, "Pid") as? Int == Int(pid))

        let mark = rig.daemon.events.count
        let gdbus = try RawProcess(
            BusClients.gdbusPath, BusClients.gdbusArguments(rig.address, "org.extensiond1.Manager.Begin", [Self.widget, "{}"]), pipes: true)
        gdbus.closeInput()
        var printed: [String] = []
        while let line = HostChannel(fd: gdbus.output).readLine(timeout: 30) { printed.append(line) }
        #expect(gdbus.wait(timeout: 20) && gdbus.exitCode == 0, "gdbus: \(printed)")
        let reply = try #require(printed.first, "gdbus printed nothing; log:\n\(rig.daemon.log())")
        let prefix = "(objectpath '/org/extensiond1/request/", suffix = "', handle 0)"
        #expect(
            reply.hasPrefix(prefix) && reply.hasSuffix(suffix) && UInt64(reply.dropFirst(prefix.count).dropLast(suffix.count)) != nil,
            "gdbus printed \(printed)")

        let resume = try rig.daemon.events.wait("resume", of: Self.widget, after: mark)
        #expect(resume.pid == Int(pid), "resumed, not relaunched")
        let begin = try rig.daemon.events.wait("begin", of: Self.widget, after: mark)
        #expect(begin.pid == Int(pid) && begin.state == "active", "\(begin)")
        #expect(begin.detail?.hasPrefix("host pid \(gdbus.pid) uid 0") == true, "the caller's credentials from the bus: \(begin)")
        try rig.daemon.events.wait("end", of: Self.widget, after: mark)
        let suspend = try rig.daemon.events.wait("suspend", of: Self.widget, after: mark)
        #expect(suspend.pid == Int(pid))
        #expect(processState(pid) == "T")
        #expect(!rig.daemon.events.all.dropFirst(mark).contains { $0.id == Self.widget && $0.kind == "launch" })
        #expect(try rig.openRequests(Self.widget).isEmpty)
        #expect(try rig.requestPaths().isEmpty, "the request's object went away")
        #expect(rig.close() == 0, "\(rig.daemon.log())")
    }

    // MARK: - A host on Gio

    /// A Python host on Gio begins a request, receives the channel descriptor, writes a ping to
    /// it and reads the extension's answer; the request has its object (ExtensionId, Pid) and is
    /// counted with the host's pid; after Request.Dismiss the extension is suspended with the
    /// same pid and the object is gone.
    @Test func aGioHostTalksToTheExtensionOverTheDescriptorItReceives() throws {
        let rig = try DBusRig()
        defer { rig.close() }
        let host = try JSONLines.fixture("gio-host.py", [rig.address, Self.widget])
        let begun = try host.expect("begun")
        let request = try #require(begun["request"] as? String)
        #expect(request.hasPrefix("/org/extensiond1/request/"), "\(begun)")
        let launch = try rig.daemon.events.wait("launch", of: Self.widget)
        let pid = try #require(launch.pid)
        #expect(begun["pid"] as? Int == pid, "the request's Pid property: \(begun)")

        host.send("ping")
        #expect(try host.expect("answer")["answer"] as? String == "pong \(pid)")

        // While the request is open.
        #expect(processState(Int32(pid)) != nil && processState(Int32(pid)) != "T")
        #expect(try rig.extensionProperty(Self.widget, "State") as? String == "active")
        #expect(try rig.extensionProperty(Self.widget, "Requests") as? Int == 1)
        #expect(try rig.property(request, "org.extensiond1.Request", "ExtensionId") as? String == Self.widget)
        #expect(try rig.property(request, "org.extensiond1.Request", "Pid") as? Int == pid)
        #expect(try rig.requestPaths() == [request])
        let open = try rig.openRequests(Self.widget)
        #expect(open.count == 1 && open.first?["hostPID"] as? Int == Int(host.pid), "the host's pid, from the bus: \(open)")

        let mark = rig.daemon.events.count
        host.send("dismiss")
        #expect(try host.expect("dismissed")["request"] as? String == request)
        let suspend = try rig.daemon.events.wait("suspend", of: Self.widget, after: mark)
        #expect(suspend.pid == pid)
        #expect(processState(Int32(pid)) == "T")
        #expect(try rig.requestPaths().isEmpty, "the request's object went away")
        #expect(try rig.openRequests(Self.widget).isEmpty)
        host.closeInput()
        try host.expect("done")
        #expect(host.exitCode() == 0)
        #expect(rig.close() == 0, "\(rig.daemon.log())")
    }

    /// A re-exec ends the requests begun over the bus (their control connections live in the
    /// replaced program): the extension is suspended, no request stays open in the new program,
    /// and the new program owns org.extensiond1 again, under a new unique name, and says so
    /// with the manager's Reexecuted signal.
    @Test func aReexecEndsBusRequestsAndTheNewProgramTakesTheName() throws {
        let rig = try DBusRig()
        defer { rig.close() }
        let monitor = try JSONLines.fixture("gio-monitor.py", [rig.address, "--reexecuted"])
        _ = try monitor.expect("subscribed")
        let before = try rig.bus.busctl([
            "call", "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "GetNameOwner", "s", "org.extensiond1",
        ])
        let host = try JSONLines.fixture("gio-host.py", [rig.address, Self.widget])
        _ = try host.expect("begun")
        let launch = try rig.daemon.events.wait("launch", of: Self.widget)
        let mark = rig.daemon.events.count
        let reexec = try rig.daemon.extctl(["reexec"])
        try #require(reexec.status == 0, "\(reexec)\n\(rig.daemon.log())")
        let suspend = try rig.daemon.events.wait("suspend", of: Self.widget, after: mark)
        #expect(suspend.pid == launch.pid, "the same process, suspended")
        #expect(try rig.openRequests(Self.widget).isEmpty)
        let after = try rig.bus.busctl([
            "call", "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "GetNameOwner", "s", "org.extensiond1",
        ])
        #expect(after.status == 0 && after.out.hasPrefix("s \":") && after.out != before.out, "before: \(before.out) after: \(after)")
        #expect(try rig.extensionProperty(Self.widget, "State") as? String == "suspended")
        // Ended once, by the new program: the replaced one did nothing more to the request
        // after writing its snapshot.
        let since = rig.daemon.events.all.dropFirst(mark).filter { $0.id == Self.widget }.map(\.kind)
        #expect(since.filter { $0 == "end" }.count == 1 && since.filter { $0 == "suspend" }.count == 1, "\(since)")
        let version = try runProgram(BuildProducts.path("extensiond"), ["--version"]).out.trimmingCharacters(in: .whitespacesAndNewlines)
        let reexecuted = try monitor.expect("reexecuted", skipping: ["changed"])
        #expect(reexecuted["succeeded"] as? Bool == true, "\(reexecuted)")
        #expect(reexecuted["version"] as? String == version && reexecuted["previous_version"] as? String == version, "\(reexecuted)")
        #expect((reexecuted["detail"] as? String)?.hasPrefix("took over ") == true, "\(reexecuted)")
        host.closeInput()
    }

    /// The bus daemon restarting (every connection cut, as a restart of the system's
    /// dbus-daemon does) does not leave extensiond off the bus: the request begun on the lost
    /// connection ends (the extension is suspended, the same process), and it connects to the
    /// new bus, owns org.extensiond1 again and answers there.
    @Test func aDaemonThatLostTheBusConnectsAgainAndTakesTheName() throws {
        let rig = try DBusRig()
        defer { rig.close() }
        let host = try JSONLines.fixture("gio-host.py", [rig.address, Self.widget])
        _ = try host.expect("begun")
        let launch = try rig.daemon.events.wait("launch", of: Self.widget)
        let mark = rig.daemon.events.count
        try rig.restartBus()
        let suspend = try rig.daemon.events.wait("suspend", of: Self.widget, after: mark)
        #expect(suspend.pid == launch.pid, "the same process, suspended")
        #expect(try rig.openRequests(Self.widget).isEmpty)
        try rig.waitForName("org.extensiond1")
        #expect(try rig.listExtensions() == (try rig.extctlList()))
        let begin = try BusClients.gdbus(rig.address, "org.extensiond1.Manager.Begin", [Self.widget, "{}"])
        #expect(begin.status == 0 && begin.out.contains("/org/extensiond1/request/"), "\(begin)\n\(rig.daemon.log())")
        #expect(rig.daemon.log().contains("lost the connection to the session bus"), "\(rig.daemon.log())")
        host.closeInput()
        #expect(rig.close() == 0, "\(rig.daemon.log())")
    }

    /// A daemon started while its bus is down (`--bus=session`, the socket absent) says so,
    /// runs, and takes the name once the bus is up.
    @Test func aDaemonStartedBeforeItsBusTakesTheNameOnceTheBusIsUp() throws {
        let rig = try DBusRig(busDown: true)
        defer { rig.close() }
        #expect(rig.daemon.log().contains("not on the session bus"), "\(rig.daemon.log())")
        #expect(rig.daemon.log().contains("trying again in 1 s"), "\(rig.daemon.log())")
        try rig.startBus()
        try rig.waitForName("org.extensiond1")
        #expect(try rig.listExtensions() == (try rig.extctlList()))
        let begin = try BusClients.gdbus(rig.address, "org.extensiond1.Manager.Begin", [Self.widget, "{}"])
        #expect(begin.status == 0 && begin.out.contains("/org/extensiond1/request/"), "\(begin)\n\(rig.daemon.log())")
        #expect(rig.close() == 0, "\(rig.daemon.log())")
    }

    /// A caller that expects no reply to its `Begin` could never get the request's channel: the
    /// request the daemon began ends at once (the extension is suspended) while the caller stays
    /// on the bus, and no request object is left.
    @Test func aBeginWhoseReplyCannotBeSentEndsItsRequest() throws {
        let rig = try DBusRig()
        defer { rig.close() }
        let caller = try JSONLines.fixture("gio-host.py", [rig.address, Self.widget, "--no-reply"])
        _ = try caller.expect("sent")
        let launch = try rig.daemon.events.wait("launch", of: Self.widget)
        let suspend = try rig.daemon.events.wait("suspend", of: Self.widget)
        #expect(suspend.pid == launch.pid)
        #expect(try rig.openRequests(Self.widget).isEmpty)
        #expect(try rig.requestPaths().isEmpty, "no request object is left")
        #expect(rig.daemon.log().contains("ended: reply with the request's descriptor"), "\(rig.daemon.log())")
        caller.closeInput()
        _ = try caller.expect("done")
        #expect(rig.close() == 0, "\(rig.daemon.log())")
    }

    // MARK: - Leaving the bus

    /// A host whose connection leaves the bus with its request open, by exiting without
    /// Dismiss and by being killed, has it dismissed: the extension is suspended (the same
    /// process each time) and no request stays open.
    @Test func aHostLeavingTheBusWithARequestOpenHasItDismissed() throws {
        let rig = try DBusRig()
        defer { rig.close() }
        let quitter = try JSONLines.fixture("gio-host.py", [rig.address, Self.widget, "--exit-without-dismiss"])
        let pid = try #require(try quitter.expect("begun")["pid"] as? Int)
        #expect(try quitter.expect("answer")["answer"] as? String == "pong \(pid)")
        #expect(quitter.exitCode() == 0, "\(quitter.transcript)")
        let first = try rig.daemon.events.wait("suspend", of: Self.widget)
        #expect(first.pid == pid)
        #expect(processState(Int32(pid)) == "T")
        #expect(try rig.openRequests(Self.widget).isEmpty)
        #expect(try rig.extensionProperty(Self.widget, "Requests") as? Int == 0)

        let mark = rig.daemon.events.count
        let killed = try JSONLines.fixture("gio-host.py", [rig.address, Self.widget])
        #expect(try killed.expect("begun")["pid"] as? Int == pid, "resumed, not relaunched")
        try rig.daemon.events.wait("resume", of: Self.widget, after: mark)
        #expect(try rig.openRequests(Self.widget).count == 1)
        killed.process.stop(SIGKILL)
        let second = try rig.daemon.events.wait("suspend", of: Self.widget, after: mark)
        #expect(second.pid == pid)
        #expect(processState(Int32(pid)) == "T")
        #expect(try rig.openRequests(Self.widget).isEmpty)
        #expect(try rig.extensionProperty(Self.widget, "State") as? String == "suspended")
        #expect(try rig.requestPaths().isEmpty)
        #expect(rig.close() == 0, "\(rig.daemon.log())")
    }

    // MARK: - PropertiesChanged

    /// One lifecycle event as the monitor prints it or as PropertiesChanged carries it.
    struct Change: Equatable, CustomStringConvertible {
        var kind: String
        var state: String
        var pid: Int
        var description: String { "\(kind) state=\(state) pid=\(pid)" }
    }

    /// The properties every PropertiesChanged of an extension carries (docs/dbus.md).
    static let carried: Set<String> = ["State", "Pid", "Since", "Requests", "Assertions", "LastEvent", "LastEventDetail"]

    /// A launch (begun on the control socket), a suspension (dismissed), a resumption (begun by
    /// a Gio host over the bus) and an exit (`extctl kill` with that request open, which the Gio
    /// host hears as Interrupted): the widget's PropertiesChanged signals carry the same events,
    /// states and pids, in the same order, as `extctl monitor --json` prints.
    @Test func propertiesChangedCarriesEachLifecycleEventInTheOrderOfExtctlMonitor() throws {
        let rig = try DBusRig()
        defer { rig.close() }
        let signals = try JSONLines.fixture("gio-monitor.py", [rig.address])
        try signals.expect("subscribed")
        let monitor = try JSONLines(BuildProducts.path("extctl"), ["monitor", "--socket", rig.daemon.socketPath, "--json"])
        try rig.attach(monitor, using: Self.sleeper)

        let host = try rig.daemon.host()
        let first = try host.begin(Self.widget)
        try host.dismiss(first)
        try rig.daemon.events.wait("suspend", of: Self.widget)
        let gio = try JSONLines.fixture("gio-host.py", [rig.address, Self.widget])
        let begun = try gio.expect("begun")
        #expect(begun["pid"] as? Int == Int(first.pid))
        let kill = try rig.daemon.extctl(["kill", Self.widget])
        #expect(kill.status == 0, "\(kill.err)")
        try rig.daemon.events.wait("exit", of: Self.widget)
        gio.send("wait-signal")
        let signal = try gio.expect("signal")
        #expect(signal["member"] as? String == "Interrupted" && signal["request"] as? String == begun["request"] as? String, "\(signal)")
        #expect(((signal["args"] as? [Any])?.first as? String)?.contains("killed-by-admin") == true, "\(signal)")

        let recorded = Self.throughExit(
            rig.daemon.events.all.filter { $0.id == Self.widget }.map { Change(kind: $0.kind, state: $0.state, pid: $0.pid ?? 0) })
        let printed = try Self.collect(monitor, "extctl monitor") { o in
            guard o["id"] as? String == Self.widget else { return nil }
            return Change(kind: o["event"] as? String ?? "?", state: o["state"] as? String ?? "?", pid: o["pid"] as? Int ?? 0)
        }
        var incomplete: [[String: Any]] = []
        let emitted = try Self.collect(signals, "PropertiesChanged") { o in
            guard o["event"] as? String == "changed", o["path"] as? String == Self.widgetPath,
                o["interface"] as? String == "org.extensiond1.Extension", let changed = o["changed"] as? [String: Any]
            else { return nil }
            if !Self.carried.isSubset(of: changed.keys) { incomplete.append(changed) }
            return Change(kind: changed["LastEvent"] as? String ?? "?", state: changed["State"] as? String ?? "?", pid: changed["Pid"] as? Int ?? -1)
        }
        #expect(printed == recorded, "extctl monitor --json against the harness's monitor")
        #expect(emitted == printed, "PropertiesChanged against extctl monitor --json")
        #expect(incomplete.isEmpty, "signals without every property of the event: \(incomplete)")
        let kinds = printed.map(\.kind)
        let positions = ["launch", "suspend", "resume", "exit"].map { kinds.firstIndex(of: $0) ?? -1 }
        #expect(!positions.contains(-1) && positions == positions.sorted(), "the events driven, in order: \(kinds)")
        gio.closeInput()
        #expect(rig.close() == 0, "\(rig.daemon.log())")
    }

    /// `changes` up to its first `exit` (included).
    static func throughExit(_ changes: [Change]) -> [Change] {
        guard let exit = changes.firstIndex(where: { $0.kind == "exit" }) else { return changes }
        return Array(changes[...exit])
    }

    /// Reads `lines` until `change` has made an `exit` of one of its objects: the changes up to it.
    static func collect(_ lines: JSONLines, _ what: String, timeout: Double = 20, _ change: ([String: Any]) -> Change?) throws -> [Change] {
        let deadline = Date().addingTimeInterval(timeout)
        var changes: [Change] = []
        while changes.last?.kind != "exit" {
            guard let object = lines.next(timeout: max(0, deadline.timeIntervalSinceNow)) else {
                throw HarnessError("\(what) gave no exit within \(timeout)s; so far: \(changes); it printed:\n\(lines.transcript.joined(separator: "\n"))")
            }
            if let c = change(object) { changes.append(c) }
        }
        return changes
    }

    // MARK: - Who may call

    /// An extension's own process calling over the bus (a Python extension on Gio, run by the
    /// daemon): without `hostAccess`, NotPermitted at every call, ListExtensions and Begin (with
    /// the control socket's text), and nothing begins; with it, both work, the request is the
    /// extension's (its pid, from the bus), and is dismissed when its connection closes.
    @Test(arguments: [false, true])
    func anExtensionsOwnProcessMayCallOnlyWithHostAccess(hostAccess: Bool) throws {
        let caller = "org.example.caller"
        let rig = try DBusRig { address, directory in
            [
                "caller.json": [
                    "id": caller, "executable": BusClients.pythonPath,
                    "arguments": [BusClients.fixtures + "/extension-caller.py", directory + "/caller.json", Self.widget],
                    "readiness": "exec", "environment": ["DBUS_SESSION_BUS_ADDRESS": address], "hostAccess": hostAccess,
                ]
            ]
        }
        defer { rig.close() }
        // The request stays open until the caller has exited: a dismissed caller would be
        // suspended before it has called.
        let host = try rig.daemon.host()
        let session = try host.begin(caller)
        let ended = try rig.daemon.events.wait(timeout: 30, "the caller ends") { $0.id == caller && ["exit", "crash"].contains($0.kind) }
        #expect(ended.kind == "exit", "\(ended); log:\n\(rig.daemon.log())")
        let record = try Data(contentsOf: URL(fileURLWithPath: rig.directory + "/caller.json"))
        let calls = try #require(try JSONSerialization.jsonObject(with: record) as? [String: Any])
        #expect(calls["pid"] as? Int == Int(session.pid), "\(calls)")
        let list = try #require(calls["ListExtensions"] as? [String: Any], "\(calls)")
        let begin = try #require(calls["Begin"] as? [String: Any], "\(calls)")
        if hostAccess {
            #expect(list["error"] is NSNull && list["value"] as? [String] == [Self.widget, caller, Self.sleeper], "\(list)")
            #expect(begin["error"] is NSNull && (begin["value"] as? String)?.hasPrefix("/org/extensiond1/request/") == true, "\(begin)")
            let began = try rig.daemon.events.wait("begin", of: Self.widget)
            #expect(began.detail?.hasPrefix("host pid \(session.pid) ") == true, "\(began)")
            try rig.daemon.events.wait("suspend", of: Self.widget)
            #expect(try rig.openRequests(Self.widget).isEmpty)
        } else {
            let refusal = "extension '\(caller)' may not use the control socket (its manifest does not set hostAccess)"
            #expect(list["error"] as? String == "org.extensiond1.Error.NotPermitted", "at any call: \(list)")
            #expect(begin["error"] as? String == "org.extensiond1.Error.NotPermitted", "\(begin)")
            #expect(begin["message"] as? String == refusal, "\(begin)")
            #expect(!rig.daemon.events.all.contains { $0.id == Self.widget }, "\(rig.daemon.events.all)")
        }
        #expect(rig.close() == 0, "\(rig.daemon.log())")
    }

    /// A caller that is not an administrator (gdbus as nobody): ListExtensions works; Kill,
    /// Reset, Reload and Reexec are NotPermitted and change nothing; Begin is refused by the
    /// manifest's hosts, as on the control socket. The same Kill from root is obeyed.
    @Test func aCallerThatIsNotAnAdministratorMayListButNotKillResetReloadOrReexec() throws {
        let rig = try DBusRig()
        defer { rig.close() }
        let pid = try rig.suspendOnce(Self.widget)
        let daemonPID = rig.daemon.process?.processIdentifier
        let mark = rig.daemon.events.count

        let list = try BusClients.gdbus(rig.address, "org.extensiond1.Manager.ListExtensions", nobody: true)
        #expect(list.status == 0 && list.out.contains("'\(Self.widget)'") && list.out.contains("'suspended'"), "\(list)")
        let refused: [(String, [String])] = [("Kill", [Self.widget, "15"]), ("Reset", [Self.widget]), ("Reload", []), ("Reexec", [])]
        for (method, arguments) in refused {
            let r = try BusClients.gdbus(rig.address, "org.extensiond1.Manager." + method, arguments, nobody: true)
            #expect(r.status != 0 && r.errorName == "org.extensiond1.Error.NotPermitted", "\(method): \(r)")
        }
        let begin = try BusClients.gdbus(rig.address, "org.extensiond1.Manager.Begin", [Self.widget, "{}"], nobody: true)
        #expect(begin.errorName == "org.extensiond1.Error.NotPermitted", "\(begin)")
        let refuse = try rig.daemon.events.wait("refuse", of: Self.widget, after: mark)
        #expect(refuse.detail?.hasPrefix("host uid 65534 ") == true, "\(refuse)")

        #expect(processState(pid) == "T", "still suspended")
        #expect(rig.daemon.process?.isRunning == true && rig.daemon.process?.processIdentifier == daemonPID)
        #expect(try rig.extensionProperty(Self.widget, "State") as? String == "suspended")
        let since = rig.daemon.events.all.dropFirst(mark).filter { $0.id == Self.widget }.map(\.kind)
        #expect(since == ["refuse"], "nothing but the refusal happened: \(since)")

        let kill = try BusClients.gdbus(rig.address, "org.extensiond1.Manager.Kill", [Self.widget, "15"])
        #expect(kill.status == 0 && kill.out.trimmingCharacters(in: .whitespacesAndNewlines) == "()", "\(kill)")
        let exit = try rig.daemon.events.wait("exit", of: Self.widget, after: mark)
        #expect(exit.detail?.hasPrefix("killed-by-admin, signal 15") == true, "\(exit)")
        try eventually("the killed extension is gone") { processState(pid) == nil }
        #expect(rig.close() == 0, "\(rig.daemon.log())")
    }

    // MARK: - Bad input

    /// Begin of an unknown id: UnknownExtension naming it (GetExtension and Kill too); Begin with
    /// an option: InvalidArgs naming the key, and nothing begins; Dismiss of another
    /// connection's request: UnknownRequest, and the request stays its owner's.
    @Test func badInputIsRefusedWithTheContractsErrors() throws {
        let rig = try DBusRig()
        defer { rig.close() }
        let nowhere = "org.example.nowhere"
        let calls: [(String, [String])] = [("Begin", [nowhere, "{}"]), ("GetExtension", [nowhere]), ("Kill", [nowhere, "15"])]
        for (method, arguments) in calls {
            let r = try BusClients.gdbus(rig.address, "org.extensiond1.Manager." + method, arguments)
            #expect(r.errorName == "org.extensiond1.Error.UnknownExtension" && r.errorMessage?.contains(nowhere) == true, "\(method): \(r)")
        }
        let bogus = try BusClients.gdbus(rig.address, "org.extensiond1.Manager.Begin", [Self.widget, "{'bogus': <1>}"])
        #expect(bogus.errorName == "org.freedesktop.DBus.Error.InvalidArgs" && bogus.errorMessage?.contains("bogus") == true, "\(bogus)")
        #expect(!rig.daemon.events.all.contains { $0.id == Self.widget }, "a refused Begin begins nothing: \(rig.daemon.events.all)")
        #expect(try rig.extensionProperty(Self.widget, "State") as? String == "not-running")

        let owner = try JSONLines.fixture("gio-host.py", [rig.address, Self.widget])
        let request = try #require(try owner.expect("begun")["request"] as? String)
        let other = try BusClients.gdbus(rig.address, object: request, "org.extensiond1.Request.Dismiss")
        #expect(other.errorName == "org.extensiond1.Error.UnknownRequest", "\(other)")
        #expect(try rig.requestPaths() == [request], "the request is untouched")
        #expect(try rig.openRequests(Self.widget).count == 1)
        owner.send("ping")
        let pid = try #require(try rig.extensionProperty(Self.widget, "Pid") as? Int)
        #expect(try owner.expect("answer")["answer"] as? String == "pong \(pid)")
        let mark = rig.daemon.events.count
        owner.send("dismiss")
        try owner.expect("dismissed")
        try rig.daemon.events.wait("suspend", of: Self.widget, after: mark)
        #expect(try rig.requestPaths().isEmpty)
        owner.closeInput()
        try owner.expect("done")
        #expect(rig.close() == 0, "\(rig.daemon.log())")
    }
}

/// One test's bus and daemon: a private dbus-daemon in a temporary directory of the test's own
/// (searchable by every uid, so that a caller run as nobody reaches the bus), and a root
/// extensiond with `DBusTests.manifests()` (and any `extra`) started with `--bus=session` (or
/// `bus`) on it (DBUS_SESSION_BUS_ADDRESS and DBUS_SYSTEM_BUS_ADDRESS both point at it, as
/// `unix:path=…` with no guid, as a system's address is: a bus started again on the same path
/// is the same bus to it).
final class DBusRig {
    let directory: String
    private(set) var bus: PrivateBus
    let daemon: TestDaemon
    private var status: Int32?

    var address: String { bus.address }

    /// Starts both. The daemon tells its readiness (READY=1) only once it owns org.extensiond1
    /// (docs/dbus.md): this throws when the name has no owner right after.
    /// With `busDown`, the bus is stopped before the daemon starts (`startBus` starts it again),
    /// and nothing is checked of the name.
    init(
        bus choice: String = "session", busDown: Bool = false,
        extra: (_ address: String, _ directory: String) throws -> [String: [String: Any]] = { _, _ in [:] }
    ) throws {
        let directory = try TestDaemon.makeTemporaryDirectory()
        self.directory = directory
        do {
            chmod(directory, 0o755)
            let bus = try PrivateBus(directory: directory + "/bus")
            let manifests = DBusTests.manifests().merging(try extra(bus.address, directory)) { _, given in given }
            let daemon = try TestDaemon(manifests: manifests)
            let address = "unix:path=" + PrivateBus.addressValue(bus.socketPath)
            if busDown {
                bus.close()
                unlink(bus.socketPath)
            }
            try daemon.start(environment: ["DBUS_SESSION_BUS_ADDRESS": address, "DBUS_SYSTEM_BUS_ADDRESS": address], arguments: ["--bus=" + choice])
            self.bus = bus
            self.daemon = daemon
        } catch {
            try? FileManager.default.removeItem(atPath: directory)
            throw error
        }
        if busDown { return }
        let owned = try bus.busctl(["call", "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "NameHasOwner", "s", "org.extensiond1"])
        guard owned.out.trimmingCharacters(in: .whitespacesAndNewlines) == "b true" else {
            throw HarnessError("org.extensiond1 has no owner once extensiond sent READY=1 (\(owned.status): \(owned.out)\(owned.err)); log:\n\(daemon.log())")
        }
    }

    /// Stops the bus (every connection to it is cut, as when the system's dbus-daemon is
    /// restarted) and starts a new one listening on the same path.
    func restartBus() throws {
        bus.close()
        unlink(bus.socketPath)
        try startBus()
    }

    /// Starts a bus listening on the bus's path (after `busDown`).
    func startBus() throws {
        bus = try PrivateBus(directory: directory + "/bus")
    }

    /// Waits (at most `timeout` seconds) until `name` has an owner on the bus (`gdbus wait`).
    func waitForName(_ name: String, timeout: Int = 30) throws {
        let r = try runProgram(BusClients.gdbusPath, ["wait", "--address", address, "--timeout", String(timeout), name])
        guard r.status == 0 else { throw HarnessError("\(name) got no owner within \(timeout) s (\(r.status)): \(r.err)\nlog:\n\(daemon.log())") }
    }

    /// Kills the daemon with SIGKILL (it says nothing on the bus); returns the pid of the
    /// widget, which a killed daemon leaves behind, for the caller to kill at its end.
    func killDaemonLeavingWidget() throws -> pid_t {
        let widget = try #require(extensionProperty(DBusTests.widget, "Pid") as? Int)
        kill(try #require(daemon.process?.processIdentifier), SIGKILL)
        return pid_t(widget)
    }

    /// Stops the daemon, then the bus, and removes the directory; the daemon's exit status.
    @discardableResult
    func close() -> Int32 {
        if let status { return status }
        let code = daemon.stop()
        status = code
        bus.close()
        if ProcessInfo.processInfo.environment["EXTENSIOND_KEEP_TEST_DIRS"] == nil { try? FileManager.default.removeItem(atPath: directory) }
        return code
    }

    deinit { close() }

    /// `busctl --json=short ARGUMENTS…`'s `data`; throws when it fails.
    func busctlData(_ arguments: [String]) throws -> Any? {
        let r = try bus.busctl(["--json=short"] + arguments)
        guard r.status == 0, let object = try? JSONSerialization.jsonObject(with: Data(r.out.utf8)) as? [String: Any] else {
            throw HarnessError("busctl \(arguments.joined(separator: " ")) failed (\(r.status)): \(r.err)\(r.out)")
        }
        return object["data"]
    }

    /// The value of property `name` of `interface` on `path`, as busctl's JSON gives it.
    func property(_ path: String, _ interface: String, _ name: String) throws -> Any? {
        try busctlData(["get-property", "org.extensiond1", path, interface, name])
    }

    /// A property of extension `id`'s object.
    func extensionProperty(_ id: String, _ name: String) throws -> Any? {
        try property(BusClients.extensionPath(id), "org.extensiond1.Extension", name)
    }

    /// The out-arguments of Manager.`method` called by busctl with `arguments` (signature first).
    func call(_ method: String, _ arguments: [String] = []) throws -> [Any] {
        try busctlData(["call", "org.extensiond1", "/org/extensiond1", "org.extensiond1.Manager", method] + arguments) as? [Any] ?? []
    }

    /// ListExtensions, one `id|point|state|app|pid|path` string per extension, in its order.
    func listExtensions() throws -> [String] {
        let entries = try call("ListExtensions").first as? [[Any]] ?? []
        return entries.map { $0.map { "\($0)" }.joined(separator: "|") }
    }

    /// `extctl list --json`'s extensions as `listExtensions` writes them.
    func extctlList() throws -> [String] {
        let r = try daemon.extctl(["list", "--json"])
        let document = try JSONSerialization.jsonObject(with: Data(r.out.utf8)) as? [String: Any]
        return (document?["extensions"] as? [[String: Any]] ?? []).map { e in
            let id = e["id"] as? String ?? ""
            let fields: [Any] = [id, e["point"] ?? "", e["state"] ?? "", e["app"] as? String ?? "", e["pid"] as? Int ?? 0, BusClients.extensionPath(id)]
            return fields.map { "\($0)" }.joined(separator: "|")
        }
    }

    /// `busctl introspect` of `path` (one interface, or all): each member's row (`.Begin`,
    /// `org.extensiond1.Manager`) by name, the row's other columns (type, signature, result or
    /// value, flags; a value with spaces spans several).
    func introspect(_ path: String, interface: String? = nil) throws -> [String: [String]] {
        let r = try bus.busctl(["introspect", "org.extensiond1", path] + (interface.map { [$0] } ?? []))
        guard r.status == 0 else { throw HarnessError("busctl introspect \(path) failed (\(r.status)): \(r.err)") }
        var rows: [String: [String]] = [:]
        for line in r.out.split(separator: "\n").dropFirst() {
            let columns = line.split(separator: " ").map(String.init)
            if let name = columns.first, rows[name] == nil { rows[name] = Array(columns.dropFirst()) }
        }
        return rows
    }

    /// The request objects under /org/extensiond1/request (enumerated by the daemon).
    func requestPaths() throws -> [String] {
        let r = try bus.busctl(["tree", "--list", "org.extensiond1"])
        guard r.status == 0 else { throw HarnessError("busctl tree failed (\(r.status)): \(r.err)") }
        return r.out.split(separator: "\n").map(String.init).filter { $0.hasPrefix("/org/extensiond1/request/") }
    }

    /// `openRequests` of extension `id` in `extctl status --json`.
    func openRequests(_ id: String) throws -> [[String: Any]] {
        try CredentialTests.statusEntry(daemon, id)["openRequests"] as? [[String: Any]] ?? []
    }

    /// Begins a request on `id` on the control socket and dismisses it: the pid of the process,
    /// once the daemon reports it suspended and /proc shows it stopped.
    func suspendOnce(_ id: String) throws -> Int32 {
        let host = try daemon.host()
        let mark = daemon.events.count
        let session = try host.begin(id)
        if let fd = session.channel { Glibc.close(fd) }
        try host.dismiss(session)
        let suspend = try daemon.events.wait("suspend", of: id, after: mark)
        guard suspend.pid == Int(session.pid), processState(session.pid) == "T" else {
            throw HarnessError("\(id) (pid \(session.pid)) is not suspended: \(suspend), state \(processState(session.pid).map { String($0) } ?? "gone")")
        }
        return session.pid
    }

    /// Begins and dismisses `id` until `monitor` (a fresh `extctl monitor --json`) prints an
    /// event: it prints nothing before it has subscribed, and gives no other sign of it.
    func attach(_ monitor: JSONLines, using id: String) throws {
        let host = try daemon.host()
        for _ in 0..<20 {
            let session = try host.begin(id)
            try host.dismiss(session)
            if monitor.next(timeout: 1) != nil { return }
        }
        throw HarnessError("extctl monitor printed no event of 20 requests; it printed:\n\(monitor.transcript.joined(separator: "\n"))")
    }
}
