import Foundation
import Testing

/// MESSAGE_IDs the daemon gives lifecycle entries in the journal (Sources/SupervisorKernel/MessageIDs.swift,
/// docs/operations.md). Repeated here on purpose: they are a stable interface.
enum JournalMessageID {
    static let launch = "6cd6b8f3432e4d25bb783e6ec5c9750c"
    static let begin = "06fcf23958fd4e898b9cabf6e11a962a"
    static let suspend = "a46abf7ba7694ca19691fb842f5d7024"
    static let resume = "abc1ae5a24d54b58bbe895b7d00a1327"
    static let exit = "1e582187419f43a8901d8e152034fb3f"
    static let crash = "b283658e62f44fc7923248ccfd4b9f42"
}

/// extensiond under a real systemd: the project's own units, loaded into a private systemd
/// user manager with journald (see `SystemdSession`), driven with systemctl and journalctl.
@Suite(.serialized, .enabled(if: SystemdSession.unavailability == nil, Comment(rawValue: SystemdSession.unavailability ?? "")))
struct SystemdTests {
    static let id = "com.example.widget"
    static let extctl = SystemdSession.root + "/bin/extctl"
    /// The unit's WatchdogSec= is 10 s; a drop-in shortens it so the test waits less.
    static let watchdogDropIn = ["WatchdogSec=4s"]

    /// Socket activation, STATUS=, journal fields, reload, the watchdog restarting a frozen
    /// daemon with nothing left behind, and a stop ending every extension process.
    @Test func userUnitsUnderARealSystemd() throws {
        let session = try SystemdSession()
        defer { session.close() }
        try session.writeTestManifest("widget.json", id: Self.id)
        try session.installUnits(from: "units/user", serviceDropIn: Self.watchdogDropIn)
        let properties = ["ActiveState", "SubState", "StatusText", "MainPID", "NRestarts"]
        func service() throws -> [String: String] { try session.show("extensiond.service", properties) }
        func describe() -> String { ((try? service()).map { "\($0)" } ?? "") + "\n" + session.log() }

        // Only the socket runs until the first connection; extctl's default path is the unit's.
        try session.systemctl("start", "extensiond.socket")
        #expect(try session.show("extensiond.socket", ["ActiveState", "SubState"]) == ["ActiveState": "active", "SubState": "listening"])
        #expect(try service()["ActiveState"] == "inactive")
        let list = try session.run([Self.extctl, "list"])
        #expect(list.status == 0, "extctl list: \(list.err)")
        #expect(list.out.contains(Self.id))
        let started = try service()
        #expect(started["ActiveState"] == "active")
        #expect(started["SubState"] == "running")
        #expect(started["StatusText"] == "1 extension: none running")
        #expect(started["NRestarts"] == "0")
        let daemonPID = try #require(started["MainPID"].flatMap { Int32($0) })
        let status = try session.systemctl("status", "extensiond.service")
        #expect(status.contains("Active: active (running)"))
        #expect(status.contains("Status: \"1 extension: none running\""))
        #expect(status.contains("TriggeredBy: ● extensiond.socket"))
        let startup = try session.journal(["_PID=\(daemonPID)"]).compactMap { $0["MESSAGE"] }
        #expect(startup.contains("listening on inherited socket \(session.controlSocket) (fd 3, passed by the service manager)"), "\(startup)")
        #expect(startup.contains { $0.hasPrefix("watchdog: the event loop sends WATCHDOG=1 every 2000 ms") }, "\(startup)")

        // A host opens the extension (which starts two children), then dismisses it.
        var host = try session.start([Self.extctl, "open", Self.id])
        let firstLine = host.output.readLine(timeout: 30)
        let daemonLog =
            (try? session.journal(["_PID=\(daemonPID)"]).compactMap { entry in
                entry["MESSAGE"].map { $0 + (entry["DETAIL"].map { " (\($0))" } ?? "") }
            }) ?? []
        let extensionPID = try #require(firstLine.flatMap { Int32($0) }, "extctl open said \(firstLine ?? "nothing"); the daemon's log: \(daemonLog)")
        host.input.write(Data("spawn 2\n".utf8))
        #expect(host.output.readLine(timeout: 30)?.hasPrefix("spawned ") == true)
        try session.waitUntil("STATUS= shows the extension active", describe: describe) { try service()["StatusText"] == "1 extension: 1 active" }
        let grouped = groupMembers(extensionPID)
        #expect(grouped.count == 4, "leader, two children, a grandchild: \(grouped)")
        // One more that leaves the process group and session: its cgroup still holds it.
        host.input.write(Data("escape\n".utf8))
        // The pid it reports is its pid namespace's (the sandbox's): the host's is looked up.
        let escapee = try #require(
            host.output.readLine(timeout: 30).flatMap { Int32($0.dropFirst("escaped ".count)) }.flatMap { hostPID($0, inNamespaceOf: extensionPID) })
        let members = grouped + [escapee]
        // The daemon lives in the service's supervisor/ leaf, the extension in extensions/ID.
        #expect(cgroupPath(daemonPID)?.hasSuffix("/extensiond.service/supervisor") == true, "\(cgroupPath(daemonPID) ?? "none")")
        for pid in members {
            #expect(cgroupPath(pid)?.hasSuffix("/extensiond.service/extensions/\(Self.id)") == true, "\(pid): \(cgroupPath(pid) ?? "none")")
        }
        try host.input.close()
        host.process.waitUntilExit()
        try session.waitUntil("STATUS= shows the extension suspended", describe: describe) { try service()["StatusText"] == "1 extension: 1 suspended" }
        for pid in members { #expect(processState(pid) == "T", "pid \(pid) is not stopped") }

        // A second request resumes the same process.
        host = try session.start([Self.extctl, "open", Self.id])
        #expect(host.output.readLine(timeout: 30) == "\(extensionPID)")
        try host.input.close()
        host.process.waitUntilExit()
        try session.waitUntil("the extension is suspended again", describe: describe) { try service()["StatusText"] == "1 extension: 1 suspended" }

        // Its life, in the journal, with structured fields. The four records of every request
        // shown and dismissed (begin, end, suspend, resume) are debug entries: at the default
        // level they stay out of the journal, and `extctl status` shows them.
        var entries: [[String: String]] = []
        try session.waitUntil("the launch is in the journal", describe: { "\(entries)" }) {
            entries = try session.journal(["EXTENSION_ID=\(Self.id)"])
            return entries.contains { $0["EVENT"] == "launch" }
        }
        let launch = entries.first { $0["EVENT"] == "launch" }
        #expect(launch?["MESSAGE"] == "\(Self.id): launch", "\(launch ?? [:])")
        #expect(launch?["MESSAGE_ID"] == JournalMessageID.launch)
        #expect(launch?["LIFECYCLE_STATE"] == "launching")
        #expect(launch?["EXTENSION_PID"] == "\(extensionPID)")
        #expect(launch?["PRIORITY"] == "6")
        #expect(launch?["SYSLOG_IDENTIFIER"] == "extensiond")
        #expect(launch?["_PID"] == "\(daemonPID)")
        #expect(launch?["_TRANSPORT"] == "journal", "a native entry, not a stderr line")
        let history = try session.run([Self.extctl, "status", Self.id])
        for event in ["begin", "end", "suspend", "resume"] {
            #expect(!entries.contains { $0["EVENT"] == event }, "\(event) is a debug entry: \(entries.filter { $0["EVENT"] == event })")
            #expect(history.out.contains(" \(Self.id) \(event) pid=\(extensionPID) "), "\(event) in the recent history: \(history.out)")
        }
        for id in [JournalMessageID.begin, JournalMessageID.suspend, JournalMessageID.resume] {
            #expect(try session.journal(["MESSAGE_ID=\(id)"]).isEmpty)
        }

        // Reload: RELOADING=1, then READY=1 with the new count; the same process keeps running.
        try session.writeTestManifest("second.json", id: "com.example.second")
        try session.systemctl("reload", "extensiond.service")
        try session.waitUntil("STATUS= counts the added manifest", describe: describe) { try service()["StatusText"] == "2 extensions: 1 suspended" }
        #expect(try service()["MainPID"] == "\(daemonPID)")
        #expect(try service()["NRestarts"] == "0")

        // A frozen event loop stops the pings: systemd aborts the daemon and starts a new one.
        // Nothing of the old one survives: no stopped extension, no orphaned child.
        kill(daemonPID, SIGSTOP)
        var restarted: [String: String] = [:]
        try session.waitUntil("systemd's watchdog restarted the frozen daemon", timeout: 60, describe: describe) {
            restarted = try service()
            return restarted["NRestarts"] == "1" && restarted["SubState"] == "running" && restarted["MainPID"] != "\(daemonPID)"
        }
        try eventually("every process of the frozen daemon's extension is gone") { members.allSatisfy { processState($0) == nil } }
        #expect(processState(daemonPID) == nil)
        #expect(restarted["StatusText"] == "2 extensions: none running")
        let manager = try session.journal(["USER_UNIT=extensiond.service"]).compactMap { $0["MESSAGE"] }
        #expect(manager.contains { $0.hasPrefix("extensiond.service: Watchdog timeout (limit 4s)") }, "\(manager)")
        #expect(manager.contains("extensiond.service: Failed with result 'watchdog'."), "\(manager)")

        // The new daemon serves requests; stopping the service ends every extension process.
        host = try session.start([Self.extctl, "open", Self.id])
        let second = try #require(host.output.readLine(timeout: 30).flatMap { Int32($0) })
        #expect(second != extensionPID)
        host.input.write(Data("spawn 2\n".utf8))
        #expect(host.output.readLine(timeout: 30)?.hasPrefix("spawned ") == true)
        host.input.write(Data("escape\n".utf8))
        let secondEscapee = try #require(
            host.output.readLine(timeout: 30).flatMap { Int32($0.dropFirst("escaped ".count)) }.flatMap { hostPID($0, inNamespaceOf: second) })
        let running = groupMembers(second) + [secondEscapee]
        #expect(running.count == 5)
        let statusJSON = try session.run([Self.extctl, "status", "--json", Self.id])
        let document = try JSONSerialization.jsonObject(with: Data(statusJSON.out.utf8)) as? [String: Any]
        let cgroup = try #require((document?["extensions"] as? [[String: Any]])?.first?["cgroup"] as? String, "\(statusJSON.out)")
        #expect(Set(cgroupProcesses(cgroup)) == Set(running), "status's cgroup holds every process of the extension")
        try session.systemctl("stop", "extensiond.service")
        #expect(try service()["ActiveState"] == "inactive")
        try eventually("every extension process is gone after the stop", timeout: 5) { running.allSatisfy { processState($0) == nil } }
        #expect(!FileManager.default.fileExists(atPath: cgroup), "no cgroup is left after the stop")
        host.process.waitUntilExit()
        let exit = try session.journal(["EXTENSION_ID=\(Self.id)", "EVENT=exit"]).last
        #expect(exit?["MESSAGE_ID"] == JournalMessageID.exit)
        #expect(exit?["EXTENSION_PID"] == "\(second)")
        #expect(exit?["LIFECYCLE_STATE"] == "not-running")

        // The socket still listens: the next connection starts the daemon again.
        #expect(try session.show("extensiond.socket", ["SubState"])["SubState"] == "listening")
        #expect(try session.run([Self.extctl, "list"]).status == 0)
        #expect(try service()["ActiveState"] == "active")
        try session.systemctl("stop", "extensiond.socket", "extensiond.service")
    }

    /// `extctl reexec` under the real systemd: the service stays active with the same main PID
    /// and no restart counted, the new program arms the watchdog again, and the extension
    /// process is untouched (the suspended one stays stopped).
    @Test func reexecKeepsTheMainPIDAndCountsNoRestart() throws {
        let session = try SystemdSession()
        defer { session.close() }
        try session.writeTestManifest("widget.json", id: Self.id)
        try session.installUnits(from: "units/user", serviceDropIn: Self.watchdogDropIn)
        let properties = ["ActiveState", "SubState", "MainPID", "NRestarts", "StatusText"]
        func service() throws -> [String: String] { try session.show("extensiond.service", properties) }
        func describe() -> String { ((try? service()).map { "\($0)" } ?? "") + "\n" + session.log() }
        try session.systemctl("start", "extensiond.socket")
        #expect(try session.run([Self.extctl, "list"]).status == 0)
        let before = try service()
        let daemonPID = try #require(before["MainPID"].flatMap { Int32($0) })
        // An extension opened, then dismissed: suspended.
        let host = try session.start([Self.extctl, "open", Self.id])
        let extensionPID = try #require(host.output.readLine(timeout: 30).flatMap { Int32($0) })
        try host.input.close()
        host.process.waitUntilExit()
        try session.waitUntil("the extension is suspended", describe: describe) { try service()["StatusText"] == "1 extension: 1 suspended" }
        #expect(processState(extensionPID) == "T")

        let reexec = try session.run([Self.extctl, "reexec"])
        #expect(reexec.status == 0, "extctl reexec: \(reexec.err)")
        #expect(reexec.out.hasPrefix("extensiond 0.1.0 → 0.1.0 (pid \(daemonPID), 1 extension process kept)"), "\(reexec.out)")
        let after = try service()
        #expect(after["ActiveState"] == "active" && after["SubState"] == "running", "\(after)")
        #expect(after["MainPID"] == before["MainPID"])
        #expect(after["NRestarts"] == before["NRestarts"])
        #expect(processState(extensionPID) == "T", "the suspended extension was not resumed")
        // The new program took over in the same process and enabled the watchdog again.
        let messages = try session.journal(["_PID=\(daemonPID)"]).compactMap { $0["MESSAGE"] }
        #expect(messages.contains { $0.hasPrefix("took over from extensiond 0.1.0: 1 extension process(es)") }, "\(messages.suffix(10))")
        #expect(messages.filter { $0.hasPrefix("watchdog: the event loop sends WATCHDOG=1") }.count == 2, "\(messages.suffix(10))")
        try session.waitUntil("STATUS= is published by the new program", describe: describe) { try service()["StatusText"] == "1 extension: 1 suspended" }
        #expect(try session.run([Self.extctl, "list"]).status == 0)
        try session.systemctl("stop", "extensiond.socket", "extensiond.service")
    }

    /// Under journald (the unit's stdout and stderr are a journal stream), each extension's
    /// output is a pipe of its own that the daemon reads and logs with `EXTENSION_ID`: an
    /// extension can neither truncate nor shut down what it writes to, and a sibling's lines
    /// are logged after it tried.
    @Test func underJournaldEachExtensionsOutputIsItsOwn() throws {
        let session = try SystemdSession()
        defer { session.close() }
        try session.writeTestManifest("a.json", id: "com.example.a")
        try session.writeTestManifest("b.json", id: "com.example.b")
        try session.installUnits(from: "units/user")
        try session.systemctl("start", "extensiond.socket")
        let a = try session.start([Self.extctl, "open", "com.example.a"])
        #expect(a.output.readLine(timeout: 30).flatMap { Int32($0) } != nil, "\(session.log())")
        let b = try session.start([Self.extctl, "open", "com.example.b"])
        #expect(b.output.readLine(timeout: 30).flatMap { Int32($0) } != nil)
        func ask(_ host: (process: Process, input: FileHandle, output: HostChannel), _ command: String) -> String? {
            host.input.write(Data((command + "\n").utf8))
            return host.output.readLine(timeout: 30)
        }
        for fd in [1, 2] {
            #expect(ask(a, "output-kind \(fd)") == "fifo", "fd \(fd) is a pipe of its own, not the journal's stream")
            #expect(ask(a, "truncate \(fd)") == "refused: Invalid argument")
            #expect(ask(a, "shutdown \(fd)") == "refused: Socket operation on non-socket")
        }
        #expect(ask(a, "say from-a-after-its-attempts") == "said")
        #expect(ask(b, "say from-b-after-its-sibling") == "said")
        var lines: [[String: String]] = []
        try session.waitUntil("both lines are in the journal") {
            lines = try session.journal(["EXTENSION_OUTPUT=1"])
            return lines.contains { $0["MESSAGE"]?.hasSuffix("from-a-after-its-attempts") == true }
                && lines.contains { $0["MESSAGE"]?.hasSuffix("from-b-after-its-sibling") == true }
        }
        #expect(lines.first { $0["MESSAGE"]?.hasSuffix("from-b-after-its-sibling") == true }?["EXTENSION_ID"] == "com.example.b")
        #expect(lines.first { $0["MESSAGE"]?.hasSuffix("from-a-after-its-attempts") == true }?["EXTENSION_ID"] == "com.example.a")
        // The same line where its author looks: `extctl logs` (the daemon's own copy).
        let logs = try session.run([Self.extctl, "logs", "-n", "1", "com.example.a"])
        #expect(logs.status == 0 && logs.out.hasSuffix(" from-a-after-its-attempts\n"), "\(logs)")
        for host in [a, b] {
            try host.input.close()
            host.process.waitUntilExit()
        }
        try session.systemctl("stop", "extensiond.socket", "extensiond.service")
    }

    /// An app is known by the systemd scope its desktop starts it in (`app-LAUNCHER-APPID-N.scope`,
    /// made here with `systemd-run --user --scope`): the requests its processes begin say so;
    /// a process in no app's scope, or in the scope of an app no manifest declares, is no app's.
    @Test func anAppIsKnownByItsSystemdScope() throws {
        let session = try SystemdSession()
        defer { session.close() }
        var widget: [String: Any] = [
            "id": Self.id, "point": "widget", "executable": SystemdSession.root + "/bin/test-extension", "user": "root", "app": "com.example.stocks",
        ]
        try JSONSerialization.data(withJSONObject: widget).write(to: URL(fileURLWithPath: session.work + "/extensions/widget.json"))
        widget = ["kind": "app", "id": "com.example.stocks", "groups": [], "dbusActivatable": true]
        try JSONSerialization.data(withJSONObject: widget).write(to: URL(fileURLWithPath: session.work + "/extensions/app.json"))
        try session.installUnits(from: "units/user")
        try session.systemctl("start", "extensiond.socket")

        func openRequests() throws -> [[String: Any]] {
            let status = try session.run([Self.extctl, "status", "--json", Self.id])
            let document = try JSONSerialization.jsonObject(with: Data(status.out.utf8)) as? [String: Any]
            let entry = (document?["extensions"] as? [[String: Any]])?.first
            return entry?["openRequests"] as? [[String: Any]] ?? []
        }
        // The app's own process: extctl open, in the scope its launcher would make.
        let app = try session.start([
            "systemd-run", "--user", "--scope", "--quiet", "--unit=app-test-com.example.stocks-42.scope", Self.extctl, "open", Self.id,
        ])
        #expect(app.output.readLine(timeout: 30).flatMap { Int32($0) } != nil, "\(session.log())")
        // Another process of the same user, in no app's scope.
        let other = try session.start([Self.extctl, "open", Self.id])
        #expect(other.output.readLine(timeout: 30).flatMap { Int32($0) } != nil)
        // One in the scope of an app no manifest declares.
        let stranger = try session.start([
            "systemd-run", "--user", "--scope", "--quiet", "--unit=app-test-com.example.unknown-7.scope", Self.extctl, "open", Self.id,
        ])
        #expect(stranger.output.readLine(timeout: 30).flatMap { Int32($0) } != nil)
        let requests = try openRequests()
        #expect(requests.count == 3, "\(requests)")
        #expect(requests.compactMap { $0["hostApp"] as? String } == ["com.example.stocks"], "\(requests)")
        let text = try session.run([Self.extctl, "status", Self.id]).out
        #expect(text.contains(" app com.example.stocks"), "\(text)")
        for host in [app, other, stranger] {
            try host.input.close()
            host.process.waitUntilExit()
        }
        try session.systemctl("stop", "extensiond.socket", "extensiond.service")
    }

    /// The system unit's stricter sandbox (no capabilities, no /home, private devices…) still
    /// lets the daemon spawn, signal and suspend its extensions and see them crash.
    @Test func systemUnitsSandboxStillSupervises() throws {
        let session = try SystemdSession()
        defer { session.close() }
        try session.writeTestManifest("widget.json", id: Self.id)
        // Hosted by a user manager, the unit's notify socket is under /run/user, which
        // ProtectHome=yes hides (a system manager's is /run/systemd/notify): read-only lets
        // READY=1 through and changes nothing else.
        try session.installUnits(from: "units", serviceDropIn: ["ProtectHome=read-only"])
        try session.systemctl("start", "extensiond.socket")
        func service() throws -> [String: String] { try session.show("extensiond.service", ["ActiveState", "StatusText", "MainPID"]) }
        func describe() -> String { ((try? service()).map { "\($0)" } ?? "") + "\n" + session.log() }

        var host = try session.start([Self.extctl, "open", Self.id])
        func said() -> [String] {
            let entries: [[String: String]] = (try? session.journal([])) ?? []
            return entries.suffix(40).map { entry -> String in (entry["MESSAGE"] ?? "") + " " + (entry["DETAIL"] ?? "") }
        }
        let pid = try #require(host.output.readLine(timeout: 30).flatMap { Int32($0) }, "\(describe()) \(said())")
        host.input.write(Data("spawn 1\n".utf8))
        #expect(host.output.readLine(timeout: 30)?.hasPrefix("spawned ") == true)
        host.input.write(Data("escape\n".utf8))
        // The pid it reports is its pid namespace's (the sandbox's): the host's is looked up.
        let escapee = try #require(
            host.output.readLine(timeout: 30).flatMap { Int32($0.dropFirst("escaped ".count)) }.flatMap { hostPID($0, inNamespaceOf: pid) })
        let members = groupMembers(pid) + [escapee]
        try host.input.close()
        host.process.waitUntilExit()
        try session.waitUntil("the extension is suspended", describe: describe) { try service()["StatusText"] == "1 extension: 1 suspended" }
        for m in members { #expect(processState(m) == "T") }

        host = try session.start([Self.extctl, "open", Self.id])
        #expect(host.output.readLine(timeout: 30) == "\(pid)")
        host.input.write(Data("crash\n".utf8))
        host.process.waitUntilExit()
        var crash: [String: String]?
        try session.waitUntil("the crash is in the journal", describe: describe) {
            crash = try session.journal(["EXTENSION_ID=\(Self.id)", "EVENT=crash"]).first
            return crash != nil
        }
        #expect(crash?["MESSAGE_ID"] == JournalMessageID.crash)
        #expect(crash?["PRIORITY"] == "4")
        #expect(crash?["EXTENSION_PID"] == "\(pid)")
        try eventually("the crashed extension's group is gone") { members.allSatisfy { processState($0) == nil } }
        try session.systemctl("stop", "extensiond.socket", "extensiond.service")
        #expect(try service()["ActiveState"] == "inactive")
    }
}

/// `systemd-analyze verify` accepts every unit, as shipped, once ExecStart names an existing binary.
@Suite struct UnitFileTests {
    static let analyze = "/usr/bin/systemd-analyze"

    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: analyze), "systemd-analyze is not installed"))
    func unitsPassSystemdAnalyzeVerify() throws {
        let directory = try TestDaemon.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        for (scope, source) in [("system", "units"), ("user", "units/user")] {
            try FileManager.default.createDirectory(atPath: directory + "/" + scope, withIntermediateDirectories: true)
            for name in ["extensiond.service", "extensiond.socket"] {
                let text = try String(contentsOfFile: SystemdSession.packageRoot + "/\(source)/\(name)", encoding: .utf8)
                #expect(text.contains("ExecStart=/usr/local/bin/extensiond") || name.hasSuffix(".socket"))
                try text.replacingOccurrences(of: "/usr/local/bin/extensiond", with: BuildProducts.path("extensiond"))
                    .write(toFile: directory + "/\(scope)/\(name)", atomically: true, encoding: .utf8)
            }
        }
        let units = ["extensiond.service", "extensiond.socket"]
        let system = try runProgram(Self.analyze, ["verify"] + units.map { directory + "/system/" + $0 })
        #expect(system.status == 0)
        #expect(system.out + system.err == "", "systemd-analyze verify (system units):\n\(system.out)\(system.err)")
        let runtime = directory + "/runtime"
        try FileManager.default.createDirectory(atPath: runtime, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        let user = try runProgram("/usr/bin/env", ["XDG_RUNTIME_DIR=\(runtime)", Self.analyze, "--user", "verify"] + units.map { directory + "/user/" + $0 })
        #expect(user.status == 0)
        #expect(user.out + user.err == "", "systemd-analyze --user verify (user units):\n\(user.out)\(user.err)")
    }
}

/// The sd_notify protocol and socket activation, without a service manager: a datagram
/// socket stands in for systemd's NOTIFY_SOCKET, systemd-socket-activate passes the socket.
@Suite(.serialized)
struct SystemdProtocolTests {
    static let id = "com.example.notify"

    @Test func statusFollowsTheStatesAndReloadAndShutdownAreAnnounced() throws {
        let daemon = try TestDaemon(manifests: ["test.json": TestDaemon.testExtension(Self.id)])
        let notify = try NotifySocket(path: daemon.directory + "/notify-kept.sock")
        defer { notify.close() }
        try daemon.start(notifySocket: notify)
        var seen: [String] = []
        let host = try daemon.host()
        let session = try host.begin(Self.id)
        #expect(notify.waitForLine(timeout: 10, seen: &seen) { $0 == "STATUS=1 extension: 1 active" } != nil, "\(seen)")
        try host.dismiss(session)
        #expect(notify.waitForLine(timeout: 10, seen: &seen) { $0 == "STATUS=1 extension: 1 suspended" } != nil, "\(seen)")

        let pid = try #require(daemon.pid)
        kill(pid, SIGHUP)
        #expect(notify.waitForLine(timeout: 10, seen: &seen) { $0 == "RELOADING=1" } != nil, "\(seen)")
        let reloading = try #require(seen.last)
        #expect(reloading.split(separator: "\n").contains { $0.hasPrefix("MONOTONIC_USEC=") && UInt64($0.dropFirst(15)) != nil }, "\(reloading)")
        #expect(notify.waitForLine(timeout: 10, seen: &seen) { $0 == "READY=1" } != nil, "\(seen)")
        #expect(seen.last?.contains("STATUS=1 extension: 1 suspended") == true, "READY=1 after a reload carries the status")

        kill(pid, SIGTERM)
        #expect(notify.waitForLine(timeout: 10, seen: &seen) { $0 == "STOPPING=1" } != nil, "\(seen)")
        #expect(seen.last?.contains("STATUS=shutting down; 1 extension: 1 suspended") == true, "\(seen)")
        #expect(daemon.stop() == 0)
        // Each STATUS= is sent once, only when the line changes.
        let statuses = seen.flatMap { $0.split(separator: "\n") }.filter { $0.hasPrefix("STATUS=") }
        #expect(zip(statuses, statuses.dropFirst()).allSatisfy { $0 != $1 }, "\(statuses)")
    }

    @Test func theLoopPingsTheWatchdogOnlyWhenAsked() throws {
        let watched = try TestDaemon(manifests: [:])
        let notify = try NotifySocket(path: watched.directory + "/notify-kept.sock")
        defer { notify.close() }
        try watched.start(environment: ["WATCHDOG_USEC": "200000"], notifySocket: notify)
        var seen: [String] = []
        var pings: [Date] = []
        for _ in 0..<3 {
            #expect(notify.waitForLine(timeout: 5, seen: &seen) { $0 == "WATCHDOG=1" } != nil, "\(seen)")
            pings.append(Date())
        }
        let interval = pings.last!.timeIntervalSince(pings.first!) / 2
        #expect(interval > 0.05 && interval < 0.3, "pings every \(interval)s for WATCHDOG_USEC=200000 (half: 0.1 s)")
        #expect(watched.log().contains("watchdog: the event loop sends WATCHDOG=1 every 100 ms"))

        // No watchdog: no ping, and the idle loop is not woken at all.
        let idle = try TestDaemon(manifests: [:])
        let quiet = try NotifySocket(path: idle.directory + "/notify-kept.sock")
        defer { quiet.close() }
        try idle.start(notifySocket: quiet)
        let pid = try #require(idle.pid)
        // Once it has gone back to sleep after answering the harness's monitor request.
        let before = try settledWakeups(pid)
        var none: [String] = []
        #expect(quiet.waitForLine(timeout: 0.6, seen: &none) { $0 == "WATCHDOG=1" } == nil, "\(none)")
        #expect(try wakeups(pid) == before, "the idle daemon's loop woke up")
        #expect(!idle.log().contains("watchdog"))
    }

    /// `wakeups` once it has not changed for 200 ms (at most 5 s).
    func settledWakeups(_ pid: Int32) throws -> Int {
        var last = try wakeups(pid)
        var stableSince = Date()
        let deadline = Date().addingTimeInterval(5)
        while Date().timeIntervalSince(stableSince) < 0.2 {
            if Date() > deadline { throw HarnessError("the idle daemon keeps waking up") }
            usleep(20_000)
            let now = try wakeups(pid)
            if now != last { last = now; stableSince = Date() }
        }
        return last
    }

    /// Voluntary context switches of the daemon's main (event loop) thread.
    func wakeups(_ pid: Int32) throws -> Int {
        let status = try String(contentsOfFile: "/proc/\(pid)/task/\(pid)/status", encoding: .utf8)
        let line = try #require(status.split(separator: "\n").first { $0.hasPrefix("voluntary_ctxt_switches:") })
        return try #require(Int(line.split(separator: "\t").last ?? ""))
    }

    static let activate = "/usr/bin/systemd-socket-activate"

    /// Starts `extensiond` under systemd-socket-activate, which listens on `socket` and execs the
    /// daemon (same pid, LISTEN_FDS=1) at the first connection.
    func activated(_ directory: String, socket: String, seqpacket: Bool, environment: [String] = []) throws -> RawProcess {
        try FileManager.default.createDirectory(atPath: directory + "/extensions", withIntermediateDirectories: true)
        let arguments =
            (seqpacket ? ["--seqpacket"] : []) + ["-l", socket] + environment.flatMap { ["-E", $0] }
            + [BuildProducts.path("extensiond"), "--extensions", directory + "/extensions", "--state-directory", directory + "/state"]
        let p = try RawProcess(Self.activate, arguments, log: directory + "/daemon.log")
        // Listening, not merely bound (the file appears at bind(), before listen()):
        // systemd-socket-activate logs "Listening on PATH as FD." once listen() returned.
        // (/proc/net/unix was read here before: while other tests create and close thousands
        // of sockets, its reader can skip entries, and the line was missed for 10 s.)
        try eventually("systemd-socket-activate listens on \(socket)") {
            let log = (try? String(contentsOfFile: directory + "/daemon.log", encoding: .utf8)) ?? ""
            return log.contains("Listening on \(socket) as ")
        }
        return p
    }

    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: activate), "systemd-socket-activate is not installed"))
    func anInheritedSeqpacketSocketIsUsed() throws {
        let directory = try TestDaemon.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let socket = directory + "/activated.sock"
        let notify = try NotifySocket(path: directory + "/notify.sock")
        defer { notify.close() }
        let daemon = try activated(directory, socket: socket, seqpacket: true, environment: ["NOTIFY_SOCKET=\(notify.path)"])
        // The first connection starts the daemon, which answers it on the inherited socket.
        let list = try runProgram(BuildProducts.path("extctl"), ["list", "--socket", socket])
        #expect(list.status == 0, "\(list.err)")
        var seen: [String] = []
        #expect(notify.waitForLine(timeout: 20, seen: &seen) { $0 == "READY=1" } != nil, "\(seen)")
        let text = try String(contentsOfFile: directory + "/daemon.log", encoding: .utf8)
        #expect(text.contains("listening on inherited socket \(socket) (fd 3, passed by the service manager)"), "\(text)")
        #expect(daemon.stop(SIGTERM) == 0)
        // An inherited socket belongs to the service manager: the daemon leaves it in place.
        #expect(FileManager.default.fileExists(atPath: socket))
    }

    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: activate), "systemd-socket-activate is not installed"))
    func anInheritedStreamSocketIsRefused() throws {
        let directory = try TestDaemon.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let socket = directory + "/stream.sock"
        let daemon = try activated(directory, socket: socket, seqpacket: false)
        let client = try connectStream(socket)
        defer { close(client) }
        try eventually("the daemon refused the stream socket and exited") { !daemon.isRunning }
        #expect(daemon.exitCode == 1)
        let text = try String(contentsOfFile: directory + "/daemon.log", encoding: .utf8)
        #expect(text.contains("the socket passed by the service manager (fd 3) is not a listening AF_UNIX SOCK_SEQPACKET socket"), "\(text)")
    }

    /// A connected AF_UNIX stream socket.
    func connectStream(_ path: String) throws -> Int32 {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw HarnessError("socket failed") }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, b) in path.utf8.enumerated() { raw[i] = b }
        }
        let rc = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard rc == 0 else { close(fd); throw HarnessError("connect \(path): errno \(errno)") }
        return fd
    }
}

/// scripts/install.sh: the layout under DESTDIR/PREFIX, the units rewritten for the prefix,
/// and a pkg-config file a C extension builds and links with.
@Suite struct InstallScriptTests {
    static let script = SystemdSession.packageRoot + "/scripts/install.sh"

    /// Runs install.sh with the debug build products (no release build from inside the tests).
    func install(_ arguments: [String]) throws -> String {
        let r = try runProgram("/bin/bash", [Self.script, "--from", BuildProducts.directory] + arguments)
        try #require(r.status == 0, "install.sh failed: \(r.err)\(r.out)")
        return r.out
    }

    @Test func stagesEveryFileUnderDestdirForThePrefix() throws {
        let destdir = try TestDaemon.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: destdir) }
        let prefix = "/opt/extensiond"
        let out = try install(["--destdir", destdir, "--prefix", prefix])
        let root = destdir + prefix
        let files: [(path: String, mode: Int)] = [
            ("bin/extensiond", 0o755), ("bin/extctl", 0o755), ("lib/libExtensionRuntimeC.so.0", 0o755),
            ("include/extension_runtime.h", 0o644), ("lib/pkgconfig/extension-runtime.pc", 0o644),
            ("lib/systemd/system/extensiond.service", 0o644), ("lib/systemd/system/extensiond.socket", 0o644),
            ("lib/systemd/user/extensiond.service", 0o644), ("lib/systemd/user/extensiond.socket", 0o644),
            ("share/doc/extensiond/operations.md", 0o644),
            ("share/man/man8/extensiond.8", 0o644), ("share/man/man1/extctl.1", 0o644),
            ("share/man/man5/extensiond.conf.5", 0o644), ("share/man/man5/extensiond-manifest.5", 0o644),
            ("share/man/man5/extensiond.dbus.5", 0o644),
            ("share/bash-completion/completions/extctl", 0o644), ("share/zsh/site-functions/_extctl", 0o644),
            ("share/fish/vendor_completions.d/extctl.fish", 0o644),
            ("lib/libExtensionHostC.so.0", 0o755), ("include/extension_host.h", 0o644), ("lib/pkgconfig/extension-host.pc", 0o644),
            ("share/dbus-1/system.d/org.extensiond1.conf", 0o644), ("share/dbus-1/interfaces/org.extensiond1.Manager.xml", 0o644),
            ("share/dbus-1/system-services/org.extensiond1.service", 0o644), ("share/polkit-1/actions/org.extensiond1.policy", 0o644),
        ]
        for f in files {
            let attributes = try FileManager.default.attributesOfItem(atPath: root + "/" + f.path)
            #expect((attributes[.posixPermissions] as? Int) == f.mode, "\(f.path)")
            #expect(out.contains("installed \(root)/\(f.path)"), "install.sh reports \(f.path)")
        }
        for scope in ["system", "user"] {
            let unit = try String(contentsOfFile: root + "/lib/systemd/\(scope)/extensiond.service", encoding: .utf8)
            #expect(unit.contains("ExecStart=\(prefix)/bin/extensiond\n"), "\(scope) unit")
            #expect(unit.contains("Documentation=file://\(prefix)/share/doc/extensiond/operations.md"))
            #expect(!unit.contains("/usr/local"), "\(scope) unit still names /usr/local")
        }
        #expect(try FileManager.default.destinationOfSymbolicLink(atPath: root + "/lib/libExtensionRuntimeC.so") == "libExtensionRuntimeC.so.0")
        let pc = try String(contentsOfFile: root + "/lib/pkgconfig/extension-runtime.pc", encoding: .utf8)
        #expect(pc.contains("prefix=\(prefix)\n"))
        #expect(pc.contains("libdir=\(prefix)/lib\n"))
        #expect(!pc.contains("@"), "every placeholder substituted:\n\(pc)")
    }

    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/pkg-config"), "pkg-config is not installed"))
    func anInstalledPrefixBuildsACExtensionAndPassesVerify() throws {
        let prefix = try TestDaemon.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: prefix) }
        _ = try install(["--prefix", prefix])
        let flags = try runProgram("/usr/bin/env", ["PKG_CONFIG_PATH=\(prefix)/lib/pkgconfig", "pkg-config", "--cflags", "--libs", "extension-runtime"])
        #expect(flags.status == 0, "\(flags.err)")
        let words = flags.out.split(whereSeparator: \.isWhitespace).map(String.init)
        #expect(words.contains("-I\(prefix)/include"))
        #expect(words.contains("-L\(prefix)/lib"))
        #expect(words.contains("-lExtensionRuntimeC"))
        // A C extension compiled against the installed header and library only.
        let binary = prefix + "/c-extension"
        let cc = try runProgram(
            "/usr/bin/env", ["cc", "-Wall", "-Werror", SystemdSession.packageRoot + "/examples/c-extension/main.c"] + words + ["-lpthread", "-o", binary])
        try #require(cc.status == 0, "cc failed: \(cc.err)")
        let run = try runProgram(binary, [])
        #expect(run.status == 1)
        #expect(run.err == "c-extension: not launched by extensiond\n")
        // The installed units name an existing ExecStart= and pass systemd-analyze verify.
        guard FileManager.default.isExecutableFile(atPath: UnitFileTests.analyze) else { return }
        let verify = try runProgram(
            UnitFileTests.analyze, ["verify", prefix + "/lib/systemd/system/extensiond.service", prefix + "/lib/systemd/system/extensiond.socket"])
        #expect(verify.status == 0 && verify.out + verify.err == "", "\(verify.out)\(verify.err)")
    }
}
