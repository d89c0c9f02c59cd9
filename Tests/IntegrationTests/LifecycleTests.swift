import ExtensionHost
import ExtensionProtocol
import Foundation
import Synchronization
import Testing

/// The supervisor with real processes, real signals and real sockets.
@Suite(.serialized)
struct LifecycleTests {
    static let id = "com.example.test"

    @Test func requestLaunchesAndHostTalksToExtension() throws {
        let daemon = try TestDaemon(manifests: ["test.json": TestDaemon.testExtension(Self.id)])
        try daemon.start()
        let host = try daemon.host()
        let session = try host.begin(Self.id)
        let channel = try session.hostChannel()
        channel.send("ping")
        #expect(channel.readLine() == "pong \(session.pid)")
        let launch = try daemon.events.wait("launch", of: Self.id)
        #expect(launch.pid == Int(session.pid))
        try daemon.events.wait("ready", of: Self.id)
        #expect(processState(session.pid) != nil)
        #expect(processState(session.pid) != "T")
    }

    @Test func dismissStopsTheWholeGroupAndResumeKeepsThePid() throws {
        let daemon = try TestDaemon(manifests: ["test.json": TestDaemon.testExtension(Self.id)])
        try daemon.start()
        let host = try daemon.host()
        let first = try host.begin(Self.id)
        let channel = try first.hostChannel()
        channel.send("spawn 2")
        let spawned = try #require(channel.readLine())
        #expect(spawned.hasPrefix("spawned "))
        let members = groupMembers(first.pid)
        #expect(members.count == 4, "leader, two children and a double-forked grandchild: \(members)")

        let mark = daemon.events.count
        try host.dismiss(first)
        try daemon.events.wait("suspend", of: Self.id, after: mark)
        for pid in groupMembers(first.pid) {
            #expect(isStoppedOrStopPending(pid), "pid \(pid) of the group is not stopped")
        }
        #expect(Set(groupMembers(first.pid)) == Set(members))

        let second = try host.begin(Self.id)
        #expect(second.pid == first.pid, "a suspended extension is resumed, not relaunched")
        let resumed = try daemon.events.wait("resume", of: Self.id, after: mark)
        #expect(resumed.pid == Int(first.pid))
        for pid in members { #expect(processState(pid) != "T") }
        let again = try second.hostChannel()
        again.send("ping")
        #expect(again.readLine() == "pong \(first.pid)")
        #expect(!daemon.events.all.dropFirst(mark).contains { $0.kind == "launch" })
    }

    @Test func closingTheHostConnectionIsADismiss() throws {
        let daemon = try TestDaemon(manifests: ["test.json": TestDaemon.testExtension(Self.id)])
        try daemon.start()
        // A separate host process that is SIGKILLed while it holds the request.
        let p = Process()
        p.executableURL = URL(fileURLWithPath: BuildProducts.path("extctl"))
        p.arguments = ["open", "--socket", daemon.socketPath, Self.id]
        let input = Pipe(), output = Pipe()
        p.standardInput = input
        p.standardOutput = output
        try p.run()
        let line = String(decoding: output.fileHandleForReading.availableDataLine(), as: UTF8.self)
        let pid = try #require(Int32(line.trimmingCharacters(in: .whitespacesAndNewlines)))
        try daemon.events.wait("begin", of: Self.id)
        kill(p.processIdentifier, SIGKILL)
        p.waitUntilExit()
        try daemon.events.wait("suspend", of: Self.id)
        #expect(processState(pid) == "T")
    }

    @Test func crashInterruptsHostsRelaunchesAndThrottlesALoop() throws {
        let daemon = try TestDaemon(
            manifests: ["test.json": TestDaemon.testExtension(Self.id)],
            config: ["limits": ["crashBackoffBaseSeconds": 30, "stableRunSeconds": 600]])
        try daemon.start()
        let host = try daemon.host()
        let interrupted = InterruptionBox()
        host.onInterruption { request, reason in interrupted.record(request, reason) }

        let first = try host.begin(Self.id)
        try first.hostChannel().send("crash")
        let crash = try daemon.events.wait("crash", of: Self.id)
        #expect(crash.detail?.contains("crashed") == true)
        try eventually("the host is told its request was interrupted") { interrupted.requests.contains(first.requestID) }
        #expect(interrupted.reasons.first?.contains("crashed") == true)
        #expect(processState(first.pid) == nil)

        // First crash: relaunched at once, with a new pid.
        let second = try host.begin(Self.id)
        #expect(second.pid != first.pid)
        try second.hostChannel().send("crash")
        let mark = daemon.events.count
        try daemon.events.wait("crash", of: Self.id, after: mark - 1)
        try eventually("the second crash is recorded") { daemon.events.all.filter { $0.kind == "crash" }.count == 2 }

        // Second crash in a row: throttled for crashBackoffBaseSeconds.
        #expect(throws: HostError.self) { _ = try host.begin(Self.id) }
        do {
            _ = try host.begin(Self.id)
        } catch {
            #expect(error.code == .throttled)
            #expect(error.message.contains("next launch allowed in"))
        }
        let status = try daemon.extctl(["status", Self.id])
        #expect(status.out.contains("Crash loop: 2 consecutive crash(es)"), "\(status.out)")
        let list = try daemon.extctl(["list", "--json"])
        let doc = try JSONSerialization.jsonObject(with: Data(list.out.utf8)) as? [String: Any]
        let entry = (doc?["extensions"] as? [[String: Any]])?.first
        #expect((entry?["lastExit"] as? [String: Any])?["reason"] as? String == "crashed")
        #expect((entry?["lastExit"] as? [String: Any])?["signal"] as? Int == Int(SIGABRT))
    }

    @Test func exitZeroIsRecordedAsExited() throws {
        let daemon = try TestDaemon(manifests: ["test.json": TestDaemon.testExtension(Self.id)])
        try daemon.start()
        let host = try daemon.host()
        let session = try host.begin(Self.id)
        try session.hostChannel().send("exit 0")
        let exit = try daemon.events.wait("exit", of: Self.id)
        #expect(exit.detail?.hasPrefix("exited, exit status 0") == true)
        #expect(exit.state == "not-running")
    }

    @Test func killByAdministratorEndsTheWholeGroup() throws {
        let daemon = try TestDaemon(manifests: ["test.json": TestDaemon.testExtension(Self.id)])
        try daemon.start()
        let host = try daemon.host()
        let session = try host.begin(Self.id)
        let channel = try session.hostChannel()
        channel.send("spawn 1")
        _ = channel.readLine()
        let members = groupMembers(session.pid)
        #expect(members.count == 3)
        try host.dismiss(session)
        try daemon.events.wait("suspend", of: Self.id)

        let result = try daemon.extctl(["kill", Self.id])
        #expect(result.status == 0, "\(result.err)")
        let exit = try daemon.events.wait("exit", of: Self.id)
        #expect(exit.detail?.hasPrefix("killed-by-admin, signal 15") == true, "\(exit)")
        try eventually("every process of the group is gone") { members.allSatisfy { processState($0) == nil } }
    }

    @Test func suspendedExtensionIsReclaimed() throws {
        let daemon = try TestDaemon(manifests: ["test.json": TestDaemon.testExtension(Self.id, policy: ["suspendedLifetimeSeconds": 0.3])])
        try daemon.start()
        let host = try daemon.host()
        let session = try host.begin(Self.id)
        try host.dismiss(session)
        let suspended = try daemon.events.wait("suspend", of: Self.id)
        let reclaimed = try daemon.events.wait("reclaim", of: Self.id)
        #expect(reclaimed.detail?.hasPrefix("reclaimed, signal 9") == true)
        let idle = reclaimed.monotonic - suspended.monotonic
        #expect(idle >= 0.3 && idle < 1.3, "reclaimed after \(idle)s for a 0.3s lifetime")
        try eventually("the process is gone") { processState(session.pid) == nil }
        // The next request launches it again.
        let again = try host.begin(Self.id)
        #expect(again.pid != session.pid)
    }

    @Test func launchTimeoutKillsAndReportsToTheHost() throws {
        let daemon = try TestDaemon(manifests: [
            "test.json": TestDaemon.testExtension(Self.id, arguments: ["--never-ready"], policy: ["launchTimeoutSeconds": 0.5])
        ])
        try daemon.start()
        let host = try daemon.host()
        let started = Date()
        do {
            _ = try host.begin(Self.id)
            Issue.record("begin succeeded on an extension that never becomes ready")
        } catch {
            #expect(error.code == .launchTimeout)
            #expect(error.message.contains("did not become ready within 0.5s"))
        }
        #expect(Date().timeIntervalSince(started) < 5)
        let launch = try daemon.events.wait("launch", of: Self.id)
        let exit = try daemon.events.wait("exit", of: Self.id)
        #expect(exit.detail?.hasPrefix("launch-timeout") == true)
        let pid = try #require(launch.pid)
        try eventually("the timed-out process is gone") { processState(Int32(pid)) == nil }
    }

    @Test func execReadinessGivesLifecycleWithoutAChannel() throws {
        let manifest: [String: Any] = ["id": "org.example.sleeper", "executable": "/bin/sleep", "arguments": ["1000"], "readiness": "exec"]
        let daemon = try TestDaemon(manifests: ["sleeper.json": manifest])
        try daemon.start()
        let host = try daemon.host()
        let session = try host.begin("org.example.sleeper")
        #expect(session.channel == nil)
        #expect(processState(session.pid) != nil)
        try host.dismiss(session)
        try daemon.events.wait("suspend", of: "org.example.sleeper")
        #expect(processState(session.pid) == "T")
        let again = try host.begin("org.example.sleeper")
        #expect(again.pid == session.pid)
    }

    @Test func sigtermOfTheDaemonEndsEveryExtensionAndExitsZero() throws {
        let daemon = try TestDaemon(
            manifests: [
                "a.json": TestDaemon.testExtension("com.example.a"),
                "b.json": TestDaemon.testExtension("com.example.b", arguments: ["--ignore-term"]),
            ], config: ["limits": ["terminateGraceSeconds": 1]])
        try daemon.start()
        let host = try daemon.host()
        let a = try host.begin("com.example.a")
        let channel = try a.hostChannel()
        channel.send("spawn 1")
        _ = channel.readLine()
        let b = try host.begin("com.example.b")
        try host.dismiss(a)
        try daemon.events.wait("suspend", of: "com.example.a")
        let pids = groupMembers(a.pid) + groupMembers(b.pid)
        #expect(pids.count == 4)
        #expect(daemon.stop() == 0)
        for pid in pids { #expect(processState(pid) == nil, "pid \(pid) survived the daemon") }
        #expect(daemon.log().contains("every extension process is gone"))
    }

    @Test func badManifestsAreReportedWhileOthersLoad() throws {
        let daemon = try TestDaemon(manifests: [
            "good.json": TestDaemon.testExtension(Self.id),
            "dup.json": TestDaemon.testExtension(Self.id),
            "type.json": ["id": 42, "executable": "/bin/true"],
            "unknown.json": ["id": "com.example.u", "executable": "/bin/true", "colour": "blue"],
            "missing.json": ["id": "com.example.m", "executable": "/nonexistent/program"],
            "point.json": ["id": "com.example.p", "executable": "/bin/true", "point": "gadget"],
        ])
        #expect(FileManager.default.createFile(atPath: daemon.extensionsDirectory + "/broken.json", contents: Data("{not json".utf8)))
        #expect(FileManager.default.createFile(atPath: daemon.extensionsDirectory + "/notes.txt", contents: Data("ignored".utf8)))
        try daemon.start()
        let log = daemon.log()
        #expect(log.contains("dup.json: field 'id': duplicate id 'com.example.test'") || log.contains("good.json: field 'id': duplicate id"))
        #expect(log.contains("type.json: field 'id': expected a string"))
        #expect(log.contains("unknown.json: field 'colour': unknown key"))
        #expect(log.contains("missing.json: field 'executable': '/nonexistent/program' does not exist"))
        #expect(log.contains("point.json: field 'point': unknown extension point 'gadget'"))
        #expect(log.contains("broken.json: invalid JSON"))
        #expect(!log.contains("notes.txt"))
        let list = try daemon.extctl(["list"])
        #expect(list.out.contains(Self.id))
        #expect(list.out.contains("1 extension(s) listed."))
    }

    @Test func reloadWithABrokenManifestLeavesRunningExtensionsAlone() throws {
        let daemon = try TestDaemon(manifests: ["test.json": TestDaemon.testExtension(Self.id)])
        try daemon.start()
        let host = try daemon.host()
        let session = try host.begin(Self.id)
        try daemon.writeManifest("new.json", TestDaemon.testExtension("com.example.new"))
        #expect(FileManager.default.createFile(atPath: daemon.extensionsDirectory + "/broken.json", contents: Data("[1,".utf8)))
        let reload = try daemon.extctl(["reload"])
        #expect(reload.status == 1)
        #expect(reload.out.contains("2 extension(s) loaded, 1 manifest error(s)"))
        #expect(reload.err.contains("broken.json: invalid JSON"))
        let channel = try session.hostChannel()
        channel.send("ping")
        #expect(channel.readLine() == "pong \(session.pid)", "the running extension was disturbed")
        kill(daemon.process!.processIdentifier, SIGHUP)
        try eventually("the SIGHUP reload is logged") { daemon.log().components(separatedBy: "reloaded: 2 extension(s), 1 manifest error(s)").count == 3 }
        channel.send("ping")
        #expect(channel.readLine() == "pong \(session.pid)")
        let again = try host.begin("com.example.new")
        #expect(again.pid != session.pid)
    }

    /// `ExtensionMain.start` runs once: a second call is a programming error that stops the
    /// process (the C runtime returns -EALREADY).
    @Test func aSecondStartStopsTheExtension() throws {
        let daemon = try TestDaemon(manifests: ["t.json": TestDaemon.testExtension(Self.id)])
        try daemon.start()
        let session = try daemon.host().begin(Self.id)
        try session.hostChannel().send("start-again")
        let crash = try daemon.events.wait("crash", of: Self.id)
        #expect(crash.pid == Int(session.pid))
        #expect(crash.detail?.contains("crashed") == true, "\(crash)")
    }
}

extension LifecycleTests {
    @Test func requestsFromSeveralHostsShareOneProcess() throws {
        let daemon = try TestDaemon(manifests: ["test.json": TestDaemon.testExtension(Self.id)])
        try daemon.start()
        let panel = try daemon.host()
        let sheet = try daemon.host()
        let a = try panel.begin(Self.id)
        let b = try sheet.begin(Self.id)
        #expect(a.pid == b.pid, "one process serves both hosts")
        #expect(a.requestID != b.requestID)
        for session in [a, b] {
            let channel = try session.hostChannel()
            channel.send("ping")
            #expect(channel.readLine() == "pong \(a.pid)", "each host has its own channel to the extension")
        }
        let mark = daemon.events.count
        try panel.dismiss(a)
        try daemon.events.wait("end", of: Self.id, after: mark)
        #expect(processState(a.pid) != "T", "still serving the second host")
        #expect(try daemon.extctl(["list"]).out.contains("active"))
        try sheet.dismiss(b)
        try daemon.events.wait("suspend", of: Self.id, after: mark)
        #expect(processState(a.pid) == "T")
    }

    @Test func prewarmLaunchesAndSuspendsSoTheNextBeginIsAResume() throws {
        let daemon = try TestDaemon(manifests: ["test.json": TestDaemon.testExtension(Self.id)])
        try daemon.start()
        let host = try daemon.host()
        try host.prewarm([Self.id])
        let launch = try daemon.events.wait("launch", of: Self.id)
        let suspend = try daemon.events.wait("suspend", of: Self.id)
        #expect(!daemon.events.all.contains { $0.kind == "begin" }, "prewarmed without a request")
        let pid = try #require(launch.pid.map(Int32.init))
        #expect(processState(pid) == "T")
        #expect(suspend.pid == launch.pid)
        let session = try host.begin(Self.id)
        #expect(session.pid == pid, "the begin resumed the prewarmed process")
        try daemon.events.wait("resume", of: Self.id)
        #expect(daemon.events.all.filter { $0.kind == "launch" }.count == 1)
    }

    @Test func breakingARunningExtensionsOwnManifestKeepsItsPreviousDefinition() throws {
        let daemon = try TestDaemon(manifests: ["test.json": TestDaemon.testExtension(Self.id)])
        try daemon.start()
        let host = try daemon.host()
        let session = try host.begin(Self.id)
        #expect(FileManager.default.createFile(atPath: daemon.extensionsDirectory + "/test.json", contents: Data("{\"id\": ".utf8)))
        let reload = try daemon.extctl(["reload"])
        #expect(reload.err.contains("test.json: invalid JSON"))
        #expect(daemon.log().contains("keeping the previous definition of \(Self.id)"))
        let channel = try session.hostChannel()
        channel.send("ping")
        #expect(channel.readLine() == "pong \(session.pid)")
        #expect(!daemon.events.all.contains { $0.kind == "exit" })
        try host.dismiss(session)
        try daemon.events.wait("suspend", of: Self.id)
        let again = try host.begin(Self.id)
        #expect(again.pid == session.pid)
    }

    @Test func extctlReportsBadInputInOneLine() throws {
        let daemon = try TestDaemon(manifests: ["test.json": TestDaemon.testExtension(Self.id)])
        try daemon.start()
        let unknown = try daemon.extctl(["status", "com.example.nope"])
        #expect(unknown.status == 1)
        #expect(unknown.err == "extctl: no extension with id 'com.example.nope'\n")
        let badSignal = try daemon.extctl(["kill", "--signal", "BOGUS", Self.id])
        #expect(badSignal.status == 2)
        #expect(badSignal.err.split(separator: "\n").count == 1, "\(badSignal.err)")
        let reserved = try daemon.extctl(["kill", "--signal", "STOP", Self.id])
        #expect(reserved.status == 1)
        #expect(reserved.err.contains("reserved"))
        let absent = try runProgram(BuildProducts.path("extctl"), ["list", "--socket", daemon.directory + "/absent.sock"])
        #expect(absent.status == 1)
        #expect(absent.err.hasPrefix("extctl: cannot reach extensiond at "))
        #expect(absent.err.split(separator: "\n").count == 1)
        let noCommand = try runProgram(BuildProducts.path("extctl"), ["frobnicate"])
        #expect(noCommand.status == 2)
        #expect(noCommand.err.split(separator: "\n").count == 1)
    }
}

/// Interruptions reported to a host, recorded from the client's reader thread.
final class InterruptionBox: Sendable {
    private let value = Mutex<[(UInt64, String)]>([])
    func record(_ request: UInt64, _ reason: String) { value.withLock { $0.append((request, reason)) } }
    var requests: [UInt64] { value.withLock { $0.map(\.0) } }
    var reasons: [String] { value.withLock { $0.map(\.1) } }
}

extension FileHandle {
    /// Reads until a newline (blocking), for a child's first line of output.
    func availableDataLine() -> Data {
        var line = Data()
        while true {
            let byte = readData(ofLength: 1)
            if byte.isEmpty || byte.first == UInt8(ascii: "\n") { return line }
            line.append(byte)
        }
    }
}
