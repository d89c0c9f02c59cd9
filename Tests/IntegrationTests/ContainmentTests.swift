import ExtensionHost
import Foundation
import Testing

/// One cgroup per extension: processes that leave the process group (setsid, a double-forking
/// daemonizer, a fork loop) are suspended, resumed and ended with their extension.
@Suite(.serialized)
struct ContainmentTests {
    static let id = "org.example.escape"
    /// A setsid child, a double-forking daemonizer (its grandchild also in a new session), a
    /// plain child, and a loop that forks a short-lived child continuously.
    static let script = """
        setsid sleep 100021 & (setsid sh -c 'sleep 100022 & wait' &) ; sleep 100023 & \
        (i=0; while [ $i -lt 1000000 ]; do /bin/true; i=$((i+1)); done) & wait
        """

    static func manifest(suspend: String, policy: [String: Any] = [:], script: String = ContainmentTests.script) -> [String: Any] {
        var p = policy
        p["suspend"] = suspend
        return ["id": id, "point": "widget", "executable": "/bin/sh", "readiness": "exec", "arguments": ["-c", script], "policy": p]
    }

    static let markers = ["sleep 100021", "sleep 100022", "sleep 100023"]

    /// The pids of processes whose command line is one of the markers.
    static func markedProcesses() -> [Int32] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap(Int32.init).filter { pid in
            guard processState(pid) != nil, let data = FileManager.default.contents(atPath: "/proc/\(pid)/cmdline") else { return false }
            let line = String(decoding: data.map { $0 == 0 ? 32 : $0 }, as: UTF8.self).trimmingCharacters(in: .whitespaces)
            return markers.contains(line)
        }
    }

    /// The extension's processes and cgroup as `extctl status --json` reports them.
    static func status(_ daemon: TestDaemon) throws -> (pids: [Int32], cgroup: String?, document: [String: Any]) {
        let result = try daemon.extctl(["status", "--json", id])
        let document = try #require(try JSONSerialization.jsonObject(with: Data(result.out.utf8)) as? [String: Any])
        let e = try #require((document["extensions"] as? [[String: Any]])?.first)
        let pids = (e["processes"] as? [[String: Any]] ?? []).compactMap { ($0["pid"] as? Int).map(Int32.init) }
        return (pids, e["cgroup"] as? String, document)
    }

    static func cgroupEvents(_ path: String) -> [String: String] {
        let text = (try? String(contentsOfFile: path + "/cgroup.events", encoding: .utf8)) ?? ""
        var fields: [String: String] = [:]
        for line in text.split(separator: "\n") {
            let parts = line.split(separator: " ")
            if parts.count == 2 { fields[String(parts[0])] = String(parts[1]) }
        }
        return fields
    }

    /// Opens the extension and waits until every marked process exists; returns the session.
    static func openAndWaitForEscapees(_ daemon: TestDaemon, _ host: ExtensionHostConnection) throws -> ExtensionSession {
        let session = try host.begin(id)
        try eventually("the three marked processes run") { markedProcesses().count == 3 }
        return session
    }

    /// Orphans the daemon adopts as their subreaper (process-group containment: a double
    /// fork's grandchildren, whose parent is gone) and that exit are reaped while their
    /// extension runs: none is left a zombie of the daemon, counting against its extension's
    /// task limit.
    @Test func orphansThatExitAreReapedWhileTheirExtensionRuns() throws {
        let script = "i=0; while [ $i -lt 30 ]; do (/bin/true &); i=$((i+1)); done; sleep 100024"
        let daemon = try TestDaemon(manifests: ["e.json": Self.manifest(suspend: "stop", script: script)])
        // Process groups: the daemon is then its extensions' subreaper (with a cgroup each, the
        // cgroup holds them and orphans go to init).
        try daemon.start(arguments: ["--containment", "process-group"])
        defer { daemon.stop() }
        let host = try daemon.host()
        let session = try host.begin(Self.id)
        let daemonPID = try #require(daemon.process?.processIdentifier)
        /// The daemon's children that are zombies.
        func zombies() -> [Int32] {
            let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(daemonPID)/task")) ?? []
            let children = tasks.flatMap { tid -> [Int32] in
                let text = (try? String(contentsOfFile: "/proc/\(daemonPID)/task/\(tid)/children", encoding: .utf8)) ?? ""
                return text.split(separator: " ").compactMap { Int32($0) }
            }
            // processState says nil for a zombie: its stat's state is read here.
            return children.filter { pid in
                guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8), let close = text.lastIndex(of: ")") else { return false }
                return text[text.index(close, offsetBy: 2)...].first == "Z"
            }
        }
        // The loop has run once the extension's last command runs.
        try eventually("the extension's loop is done") { Self.markedSleep(100024) }
        try eventually("no orphan is left a zombie of the daemon: \(zombies())") { zombies().isEmpty }
        try host.dismiss(session)
    }

    static func markedSleep(_ marker: Int) -> Bool {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap(Int32.init).contains { pid in
            guard let data = FileManager.default.contents(atPath: "/proc/\(pid)/cmdline") else { return false }
            return String(decoding: data.map { $0 == 0 ? 32 : $0 }, as: UTF8.self).trimmingCharacters(in: .whitespaces) == "sleep \(marker)"
        }
    }

    @Test(arguments: ["stop", "freeze"])
    func everyProcessIsSuspendedResumedAndKilled(suspend: String) throws {
        let daemon = try TestDaemon(manifests: ["e.json": Self.manifest(suspend: suspend)])
        try daemon.start()
        let host = try daemon.host()
        let first = try Self.openAndWaitForEscapees(daemon, host)
        let escapees = Self.markedProcesses()
        let before = try Self.status(daemon)
        let cgroup = try #require(before.cgroup, "a cgroup per extension on this machine")
        #expect(Set(escapees).isSubset(of: Set(before.pids)), "status lists every process of the cgroup: \(before.pids) ⊇ \(escapees)")

        let mark = daemon.events.count
        try host.dismiss(first)
        try daemon.events.wait("suspend", of: Self.id, after: mark)
        let members = try Self.status(daemon).pids
        #expect(Set(escapees).isSubset(of: Set(members)))
        if suspend == "stop" {
            for pid in members { #expect(isStoppedOrStopPending(pid), "pid \(pid) is not stopped (state \(processState(pid).map(String.init) ?? "gone"))") }
        } else {
            #expect(Self.cgroupEvents(cgroup)["frozen"] == "1")
            for pid in members { #expect(processState(pid) != "T", "the freezer sends no SIGSTOP (pid \(pid) is in T)") }
        }
        // Nothing forked meanwhile: the fork loop is held too.
        #expect(Set(try Self.status(daemon).pids) == Set(members))

        let second = try host.begin(Self.id)
        #expect(second.pid == first.pid)
        try daemon.events.wait("resume", of: Self.id, after: mark)
        for pid in escapees { #expect(processState(pid) != "T", "pid \(pid) still stopped after resume") }
        #expect(Self.cgroupEvents(cgroup)["frozen"] == "0")

        let killed = try daemon.extctl(["kill", Self.id])
        #expect(killed.status == 0, "\(killed.err)")
        try daemon.events.wait("exit", of: Self.id, after: mark)
        try eventually("every process of the extension is gone") { escapees.allSatisfy { processState($0) == nil } }
        try eventually("the cgroup is removed") { !FileManager.default.fileExists(atPath: cgroup) }
    }

    /// A leader alone at its first stop is stopped through its process group the next time,
    /// with no membership read before the signal: a helper it started since, in a session of
    /// its own, is found by the read after the leader's stop and stopped before `suspend`.
    @Test func aHelperStartedAfterALoneStopIsStoppedToo() throws {
        // Alone until it is first resumed; then SIGCONT starts a helper in a new session.
        // It says when its handler is in place (a file): a SIGCONT before that would continue
        // it without starting the helper.
        let script = """
            import signal, subprocess, sys
            def resumed(*_):
                subprocess.Popen(["/bin/sleep", "100031"], start_new_session=True)
            signal.signal(signal.SIGCONT, resumed)
            open(sys.argv[1], "w").close()
            while True:
                signal.pause()
            """
        let handlerReady = NSTemporaryDirectory() + "extensiond-helper-ready-\(getpid())"
        unlink(handlerReady)
        defer { unlink(handlerReady) }
        let daemon = try TestDaemon(manifests: [
            "e.json": [
                "id": Self.id, "point": "widget", "executable": "/usr/bin/python3", "readiness": "exec", "arguments": ["-c", script, handlerReady],
            ]
        ])
        try daemon.start()
        let host = try daemon.host()
        let first = try host.begin(Self.id)
        try eventually("the leader runs its loop") { (try? Self.status(daemon).pids) == [first.pid] && FileManager.default.fileExists(atPath: handlerReady) }
        var mark = daemon.events.count
        try host.dismiss(first)
        try daemon.events.wait("suspend", of: Self.id, after: mark)
        #expect(try Self.status(daemon).pids == [first.pid], "alone at its first stop")

        let second = try host.begin(Self.id)
        #expect(second.pid == first.pid)
        func helper() -> [Int32] {
            let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
            return entries.compactMap(Int32.init).filter { pid in
                guard let data = FileManager.default.contents(atPath: "/proc/\(pid)/cmdline") else { return false }
                return String(decoding: data.map { $0 == 0 ? 32 : $0 }, as: UTF8.self).trimmingCharacters(in: .whitespaces) == "/bin/sleep 100031"
            }
        }
        try eventually("the helper runs, in a session of its own") { helper().count == 1 }
        let helperPID = helper()[0]
        #expect(Set(try Self.status(daemon).pids) == [first.pid, helperPID])

        mark = daemon.events.count
        try host.dismiss(second)
        try daemon.events.wait("suspend", of: Self.id, after: mark)
        #expect(isStoppedOrStopPending(first.pid))
        #expect(
            isStoppedOrStopPending(helperPID),
            "the helper outside the leader's process group is stopped before suspend (state \(processState(helperPID).map(String.init) ?? "gone"))")

        mark = daemon.events.count
        let third = try host.begin(Self.id)
        try daemon.events.wait("resume", of: Self.id, after: mark)
        #expect(processState(helperPID) != "T", "resumed with the leader")
        try host.dismiss(third)
        let killed = try daemon.extctl(["kill", Self.id])
        #expect(killed.status == 0, "\(killed.err)")
        try eventually("the helper is gone with its extension") { processState(helperPID) == nil }
    }

    @Test(arguments: ["stop", "freeze"])
    func reclaimEndsEveryProcess(suspend: String) throws {
        let daemon = try TestDaemon(manifests: ["e.json": Self.manifest(suspend: suspend, policy: ["suspendedLifetimeSeconds": 0.3])])
        try daemon.start()
        let host = try daemon.host()
        let session = try Self.openAndWaitForEscapees(daemon, host)
        let escapees = Self.markedProcesses()
        try host.dismiss(session)
        let reclaim = try daemon.events.wait("reclaim", of: Self.id)
        #expect(reclaim.detail?.hasPrefix("reclaimed, signal 9") == true, "\(reclaim)")
        try eventually("every process of the extension is gone") { escapees.allSatisfy { processState($0) == nil } }
    }

    @Test(arguments: ["stop", "freeze"])
    func daemonShutdownLeavesNoProcess(suspend: String) throws {
        let daemon = try TestDaemon(manifests: ["e.json": Self.manifest(suspend: suspend)])
        try daemon.start()
        let host = try daemon.host()
        let session = try Self.openAndWaitForEscapees(daemon, host)
        let escapees = Self.markedProcesses()
        let cgroup = try #require(try Self.status(daemon).cgroup)
        try host.dismiss(session)
        try daemon.events.wait("suspend", of: Self.id)
        #expect(daemon.stop() == 0)
        // The daemon exits only once every cgroup is empty.
        for pid in escapees { #expect(processState(pid) == nil, "pid \(pid) outlived the daemon") }
        #expect(!FileManager.default.fileExists(atPath: cgroup))
    }

    @Test func descendantsOfAnExitedLeaderAreEnded() throws {
        let daemon = try TestDaemon(manifests: [
            "e.json": Self.manifest(
                suspend: "stop", policy: ["suspend": "never"], script: "setsid sleep 100021 & sleep 0.2; exit 0")
        ])
        try daemon.start()
        let host = try daemon.host()
        _ = try host.begin(Self.id)
        let exit = try daemon.events.wait("exit", of: Self.id)
        #expect(exit.detail?.hasPrefix("leader-exited, exit status 0") == true, "\(exit)")
        try eventually("the setsid child is gone") { Self.markedProcesses().isEmpty }
        let status = try daemon.extctl(["status", "--json", Self.id])
        #expect(status.out.contains("\"reason\":\"leader-exited\""))
    }

    @Test func aKilledDaemonsCgroupsAreEndedByTheNextStart() throws {
        let daemon = try TestDaemon(manifests: ["e.json": Self.manifest(suspend: "stop")])
        try daemon.start()
        let host = try daemon.host()
        _ = try Self.openAndWaitForEscapees(daemon, host)
        let escapees = Self.markedProcesses()
        let cgroup = try #require(try Self.status(daemon).cgroup)
        kill(try #require(daemon.process).processIdentifier, SIGKILL)
        #expect(daemon.waitForExit(timeout: 10))
        for pid in escapees { #expect(processState(pid) != nil, "pid \(pid) died with the daemon: the test proves nothing") }

        try daemon.start()
        try eventually("the leftovers are ended") { escapees.allSatisfy { processState($0) == nil } }
        #expect(!FileManager.default.fileExists(atPath: cgroup))
        #expect(daemon.log().contains("ending a leftover extension cgroup \(cgroup)"))
    }

    /// A start that fails after the cgroup subtree was made (here: an unknown socket group)
    /// removes the subtree it made; a clean exit removes it too.
    @Test func aStartThatFailsLeavesNoCgroupBehind() throws {
        let daemon = try TestDaemon(manifests: ["e.json": Self.manifest(suspend: "stop")])
        try daemon.start()
        let host = try daemon.host()
        _ = try host.begin(Self.id)
        let cgroup = try #require(try Self.status(daemon).cgroup, "extensions run in cgroups here")
        let slash = try #require(cgroup.lastIndex(of: "/"))
        let subtree = String(cgroup[..<slash])
        host.close()
        #expect(daemon.stop() == 0)
        #expect(!FileManager.default.fileExists(atPath: subtree), "a clean exit removes the subtree")

        let failed = try runProgram(
            BuildProducts.path("extensiond"),
            [
                "--socket", daemon.socketPath, "--extensions", daemon.extensionsDirectory, "--state-directory", daemon.directory + "/state",
                "--socket-group", "no-such-group-here",
            ])
        #expect(failed.status == 1)
        #expect(failed.err.contains("--socket-group no-such-group-here: no such group"), "\(failed.err)")
        #expect(!FileManager.default.fileExists(atPath: subtree), "nothing left by the failed start")
    }

    /// Where no writable cgroup v2 exists (here: a private mount namespace in which the cgroup2
    /// mount is read-only), the daemon supervises process groups and says so.
    @Test func withoutAWritableCgroupTheDaemonFallsBackToProcessGroups() throws {
        let mountinfo = try String(contentsOfFile: "/proc/self/mountinfo", encoding: .utf8)
        let mount = try #require(
            mountinfo.split(separator: "\n").compactMap { line -> String? in
                let f = line.split(separator: " ")
                guard let dash = f.firstIndex(of: "-"), dash + 1 < f.count, f[dash + 1] == "cgroup2" else { return nil }
                return String(f[4])
            }.first, "a cgroup2 mount")
        let daemon = try TestDaemon(manifests: [
            "e.json": Self.manifest(suspend: "stop", script: "sleep 100023 & wait"),
            "f.json": [
                "id": "org.example.frozen", "point": "widget", "executable": "/bin/sh", "readiness": "exec",
                "arguments": ["-c", "sleep 100021"], "policy": ["suspend": "freeze"],
            ],
        ])
        let notify = try NotifySocket(path: daemon.directory + "/notify.sock")
        defer { notify.close() }
        try daemon.start(
            notifySocket: notify,
            wrapper: ["/usr/bin/unshare", "-m", "--propagation", "private", "/bin/sh", "-c", "mount -o remount,ro,bind \(mount) && exec \"$@\"", "sh"])
        let reload = try daemon.extctl(["reload"])
        #expect(reload.out.contains("1 manifest error(s)"), "the freeze manifest stays refused: \(reload.out) \(reload.err)")
        var seen: [String] = []
        let line = notify.waitForLine(timeout: 10, seen: &seen) { $0.hasPrefix("STATUS=") && $0.contains("process groups only (no cgroups: cannot create") }
        #expect(line != nil, "STATUS= names the fallback: \(seen)")
        #expect(daemon.log().contains("containment: process groups only, because cannot create"))
        #expect(daemon.log().contains("Read-only file system"))
        #expect(daemon.log().contains("'freeze' (from the manifest or its extension point 'widget') needs a cgroup per extension"))

        let host = try daemon.host()
        let session = try host.begin(Self.id)
        try eventually("the child runs") { Self.markedProcesses().count == 1 }
        let child = Self.markedProcesses()
        let status = try Self.status(daemon)
        #expect(status.cgroup == nil)
        #expect((status.document["containment"] as? [String: Any])?["mode"] as? String == "process-group")
        let text = try daemon.extctl(["status", Self.id])
        #expect(text.out.contains("Containment: process groups only"))
        try host.dismiss(session)
        try daemon.events.wait("suspend", of: Self.id)
        for pid in [session.pid] + child { #expect(isStoppedOrStopPending(pid), "pid \(pid) is not stopped") }
        #expect(daemon.stop() == 0)
        // Killed before the daemon exited; the kernel may still be ending it (state R) as the
        // daemon's exit is seen here.
        for pid in child { try eventually("pid \(pid) is gone", timeout: 5) { [nil, "Z"].contains(processState(pid)) } }
    }
}
