import ExtensionHost
import Foundation
import Synchronization
import Testing

/// Faults the supervisor must survive, with real processes (docs/reliability.md lists them).
@Suite(.serialized)
struct FaultTests {
    static let id = "com.example.fault"

    func daemonRSS(_ daemon: TestDaemon) -> Int {
        guard let pid = daemon.process?.processIdentifier,
            let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
            let line = text.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") })
        else { return 0 }
        return Int(line.split(separator: " ").dropFirst().first ?? "0") ?? 0  // kB
    }

    @Test func aCrashWithAssertionsHeldDropsThemAndTellsTheHost() throws {
        let daemon = try TestDaemon(manifests: ["f.json": TestDaemon.testExtension(Self.id)])
        try daemon.start()
        let host = try daemon.host()
        let interrupted = InterruptionBox()
        host.onInterruption { request, reason in interrupted.record(request, reason) }
        let session = try host.begin(Self.id)
        let channel = try session.hostChannel()
        channel.send("assert 30 one")
        #expect(channel.readLine() == "granted")
        channel.send("assert 30 two")
        #expect(channel.readLine() == "granted")
        channel.send("crash")
        let crash = try daemon.events.wait("crash", of: Self.id)
        #expect(crash.detail?.contains("2 assertion(s) dropped") == true, "\(crash)")
        try eventually("the host hears of it") { interrupted.requests == [session.requestID] }
        let status = try daemon.extctl(["status", "--json", Self.id])
        #expect(status.out.contains("\"assertions\":[]"))
        let again = try host.begin(Self.id)
        #expect(again.pid != session.pid)
    }

    @Test func aForkRacingTheStopIsCaught() throws {
        let daemon = try TestDaemon(manifests: ["f.json": TestDaemon.testExtension(Self.id)])
        try daemon.start()
        let host = try daemon.host()
        for round in 0..<5 {
            let session = try host.begin(Self.id)
            let channel = try session.hostChannel()
            if round == 0 {
                channel.send("fork-loop")
                #expect(channel.readLine() == "forking")
            }
            let mark = daemon.events.count
            try host.dismiss(session)
            try daemon.events.wait("suspend", of: Self.id, after: mark)
            let members = groupMembers(session.pid)
            for pid in members {
                #expect(isStoppedOrStopPending(pid), "round \(round): pid \(pid) of the group escaped the stop")
            }
        }
    }

    @Test func aFloodingExtensionIsCutOffAndOthersAreUnaffected() throws {
        let daemon = try TestDaemon(manifests: [
            "f.json": TestDaemon.testExtension(Self.id),
            "g.json": TestDaemon.testExtension("com.example.bystander"),
        ])
        try daemon.start()
        let host = try daemon.host()
        let bystander = try host.begin("com.example.bystander")
        let quiet = try bystander.hostChannel()
        let before = daemonRSS(daemon)
        let session = try host.begin(Self.id)
        try session.hostChannel().send("flood")
        let cut = try daemon.events.wait(timeout: 20, "the flood cut off") { $0.kind == "kill" && $0.id == Self.id }
        #expect(cut.detail?.contains("flooding its channel") == true, "\(cut)")
        quiet.send("ping")
        #expect(quiet.readLine() == "pong \(bystander.pid)")
        try daemon.events.wait("exit", of: Self.id)
        let after = daemonRSS(daemon)
        #expect(after - before < 20_000, "daemon RSS grew from \(before) kB to \(after) kB")
    }

    @Test func anExtensionThatNeverReadsIsCutOff() throws {
        // Requests stay open, so every delivered channel waits in the extension's queue.
        let daemon = try TestDaemon(manifests: ["f.json": TestDaemon.testExtension(Self.id, arguments: ["--mute"])])
        try daemon.start()
        var hosts: [ExtensionHostConnection] = []
        var begun = 0
        outer: for _ in 0..<8 {
            let host = try daemon.host()
            hosts.append(host)
            for _ in 0..<200 {
                guard let session = try? host.begin(Self.id, timeout: 10) else { break outer }
                session.channel.map { _ = close($0) }
                begun += 1
                if daemon.events.all.contains(where: { $0.kind == "kill" && $0.id == Self.id }) { break outer }
            }
        }
        let event = try daemon.events.wait(timeout: 10, "the cut-off after \(begun) requests") { $0.kind == "kill" && $0.id == Self.id }
        #expect(event.detail?.contains("runtime channel closed") == true, "\(event)")
        try daemon.events.wait("exit", of: Self.id, timeout: 15)
        #expect(daemon.log().contains("cutting off runtime channel of \(Self.id)"))
    }

    @Test func tooManyConnectionsFromOneUIDAreRefusedAndOthersServed() throws {
        let daemon = try TestDaemon(manifests: ["f.json": TestDaemon.testExtension(Self.id)], config: ["limits": ["maxConnectionsPerUID": 20]])
        try daemon.start()
        // The monitor connection already counts as one.
        var clients: [ControlClient] = []
        for _ in 0..<19 { clients.append(try ControlClient(socketPath: daemon.socketPath)) }
        for c in clients { _ = try c.call { .query(tag: $0, kind: .list, extensionIDs: []) } }
        let extra = try ControlClient(socketPath: daemon.socketPath)
        #expect(throws: HostError.self) { _ = try extra.call { .query(tag: $0, kind: .list, extensionIDs: []) } }
        try eventually("the refusal is logged") { daemon.log().contains("too many control connections from uid \(getuid()) (limit 20)") }
        let host = ExtensionHostConnection(client: clients[0])
        let session = try host.begin(Self.id)
        #expect(session.pid > 0)
    }

    @Test func aStoppedMonitorIsCutOffAndTheDaemonKeepsServing() throws {
        let daemon = try TestDaemon(manifests: ["f.json": TestDaemon.testExtension(Self.id)])
        try daemon.start()
        let monitor = Process()
        monitor.executableURL = URL(fileURLWithPath: BuildProducts.path("extctl"))
        monitor.arguments = ["monitor", "--socket", daemon.socketPath]
        let output = daemon.directory + "/monitor.out"
        #expect(FileManager.default.createFile(atPath: output, contents: nil))
        monitor.standardOutput = FileHandle(forWritingAtPath: output)
        try monitor.run()
        defer { kill(monitor.processIdentifier, SIGKILL); monitor.waitUntilExit() }
        let host = try daemon.host()
        // Attached once it prints the events of a request (before, it receives nothing, and
        // stopping it then would leave nothing to pile up).
        try eventually("the monitor prints events") {
            if let session = try? host.begin(Self.id) { try? host.dismiss(session) }
            return ((try? String(contentsOfFile: output, encoding: .utf8)) ?? "").contains(Self.id)
        }
        kill(monitor.processIdentifier, SIGSTOP)
        var cycles = 0
        while !daemon.log().contains("does not read its replies") && cycles < 5_000 {
            let session = try host.begin(Self.id)
            try host.dismiss(session)
            cycles += 1
        }
        #expect(daemon.log().contains("cutting off control connection of pid \(monitor.processIdentifier)"), "after \(cycles) cycles")
        let list = try daemon.extctl(["list"])
        #expect(list.status == 0)
    }

    @Test func aSuspendedExtensionHoldingAWaitedForLockIsKilled() throws {
        let daemon = try TestDaemon(manifests: ["f.json": TestDaemon.testExtension(Self.id)])
        try daemon.start()
        let lockFile = daemon.directory + "/shared.lock"
        let host = try daemon.host()
        let session = try host.begin(Self.id)
        let channel = try session.hostChannel()
        channel.send("hold-lock \(lockFile)")
        #expect(channel.readLine() == "locked")
        try host.dismiss(session)
        let suspended = try daemon.events.wait("suspend", of: Self.id)
        // Another process now waits for the lock the stopped extension holds.
        let waiter = Process()
        waiter.executableURL = URL(fileURLWithPath: "/usr/bin/flock")
        waiter.arguments = ["--exclusive", lockFile, "/bin/true"]
        try waiter.run()
        let noticed = try daemon.events.wait("lock-held-while-suspended", of: Self.id, timeout: 10)
        #expect(noticed.detail?.contains("another process opened the file while it was suspended") == true, "\(noticed)")
        #expect(noticed.monotonic - suspended.monotonic < 3, "noticed within a bounded time")
        let exit = try daemon.events.wait("exit", of: Self.id)
        #expect(exit.detail?.hasPrefix("lock-held-while-suspended") == true, "\(exit)")
        waiter.waitUntilExit()
        #expect(waiter.terminationStatus == 0, "the waiter got the lock once the holder was gone")
    }

    @Test(arguments: [false, true])
    func anExtensionProcessUsesTheControlSocketOnlyWhenItsManifestAllows(hostAccess: Bool) throws {
        let daemon = try TestDaemon(manifests: [
            "f.json": TestDaemon.testExtension(Self.id, extra: hostAccess ? ["hostAccess": true] : [:])
        ])
        try daemon.start()
        let host = try daemon.host()
        let session = try host.begin(Self.id)
        let channel = try session.hostChannel()
        channel.send("probe-control \(daemon.socketPath)")
        let answer = channel.readLine() ?? ""
        if hostAccess {
            #expect(answer == "allowed")
        } else {
            #expect(answer == "refused: extension '\(Self.id)' may not use the control socket (its manifest does not set hostAccess)")
        }
    }
}
