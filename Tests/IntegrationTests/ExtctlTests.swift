import ExtensionHost
import Foundation
import Testing

/// extctl as people and scripts use it: Ctrl-C on a real terminal, the exit statuses of
/// `monitor`, `is-active`, `status --lines`, `reload` with a kept definition, discovery of an
/// unknown point, and `open --timeout` (docs/extctl.md).
@Suite struct ExtctlTests {
    static let id = "org.example.test"
    static let extctl = BuildProducts.path("extctl")

    /// Opens and dismisses a request on `id`, awaiting its suspension: one round of events.
    static func cycle(_ daemon: TestDaemon, _ host: ExtensionHostConnection) throws {
        let index = daemon.events.count
        let session = try host.begin(id)
        try host.dismiss(session)
        if let fd = session.channel { close(fd) }
        try daemon.events.wait("suspend", of: id, after: index)
    }

    /// Produces events until `done` holds: for a monitor whose subscription cannot be seen from
    /// outside, each round awaits the daemon's own events, and the first one it prints ends it.
    static func cycle(_ daemon: TestDaemon, until done: () -> Bool) throws {
        let host = try daemon.host()
        let deadline = Date().addingTimeInterval(20)
        while !done() {
            if Date() > deadline { throw HarnessError("nothing came of 20 s of events") }
            try cycle(daemon, host)
        }
    }

    @Test func ctrlCEndsMonitorAtOnceWithStatus130() throws {
        let daemon = try TestDaemon(manifests: ["test.json": TestDaemon.testExtension(Self.id)])
        try daemon.start()
        let run = try TerminalRun([Self.extctl, "monitor", "--socket", daemon.socketPath], marker: "state=")
        try Self.cycle(daemon) { run.seen(timeout: 0) }
        let result = try run.result()
        #expect(result.status == 130, "\(result)")
        #expect(result.milliseconds < 100, "\(result)")
        #expect(result.output.contains("\(Self.id) ") && result.output.contains("state="), "the events it printed: \(result)")
    }

    @Test func sigtermEndsMonitorWithStatus143() throws {
        let daemon = try TestDaemon(manifests: ["test.json": TestDaemon.testExtension(Self.id)])
        try daemon.start()
        let run = try TerminalRun([Self.extctl, "monitor", "--socket", daemon.socketPath], marker: "state=", how: "SIGTERM")
        try Self.cycle(daemon) { run.seen(timeout: 0) }
        let result = try run.result()
        #expect(result.status == 143, "\(result)")
        #expect(result.milliseconds < 100, "\(result)")
    }

    /// `extctl monitor | head -1`: once the reader has gone, the next event ends monitor with
    /// SIGPIPE's status.
    @Test func aClosedPipeEndsMonitorWithStatus141() throws {
        let daemon = try TestDaemon(manifests: ["test.json": TestDaemon.testExtension(Self.id)])
        try daemon.start()
        let p = Process()
        p.executableURL = URL(fileURLWithPath: Self.extctl)
        p.arguments = ["monitor", "--socket", daemon.socketPath]
        let out = Pipe()
        p.standardOutput = out
        let exited = DispatchSemaphore(value: 0)
        p.terminationHandler = { _ in exited.signal() }
        try p.run()
        try out.fileHandleForReading.close()
        try Self.cycle(daemon) { exited.wait(timeout: .now()) == .success }
        p.waitUntilExit()
        #expect(p.terminationReason == .exit && p.terminationStatus == 141)
    }

    @Test func monitorExits1WhenExtensiondClosesTheConnection() throws {
        let daemon = try TestDaemon(manifests: ["test.json": TestDaemon.testExtension(Self.id)])
        try daemon.start()
        let p = Process()
        p.executableURL = URL(fileURLWithPath: Self.extctl)
        p.arguments = ["monitor", "--socket", daemon.socketPath]
        let err = Pipe(), out = Pipe()
        p.standardError = err
        p.standardOutput = out
        try p.run()
        // Subscribed once it prints an event: the daemon is stopped then.
        let printed = DispatchSemaphore(value: 0)
        let reader = out.fileHandleForReading
        Thread.detachNewThread {
            if !reader.availableData.isEmpty { printed.signal() }
        }
        try Self.cycle(daemon) { printed.wait(timeout: .now()) == .success }
        daemon.stop()
        p.waitUntilExit()
        #expect(p.terminationStatus == 1)
        #expect(String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self) == "extctl: extensiond closed the connection\n")
    }

    /// Ctrl-C on `extctl open` dismisses the request: the extension is suspended, as after end
    /// of input.
    @Test func ctrlCEndsOpenByDismissingAndTheExtensionIsSuspended() throws {
        let daemon = try TestDaemon(manifests: ["test.json": TestDaemon.testExtension(Self.id)])
        try daemon.start()
        let run = try TerminalRun([Self.extctl, "open", "--socket", daemon.socketPath, Self.id], marker: "[0-9]+\r?\n")
        let result = try run.result()
        #expect(result.status == 0, "\(result)")
        #expect(result.milliseconds < 100, "\(result)")
        let pid = Int32(result.output.split(whereSeparator: \.isNewline).first ?? "") ?? -1
        let suspend = try daemon.events.wait("suspend", of: Self.id)
        #expect(suspend.pid.map(Int32.init) == pid)
        #expect(try daemon.events.wait("end", of: Self.id).pid.map(Int32.init) == pid)
        #expect(isStoppedOrStopPending(pid))
    }

    /// Ctrl-C while the request waits for a launch: extctl exits at once (130) and closing its
    /// connection withdraws the request.
    @Test func ctrlCBeforeTheRequestIsBegunExitsAtOnce() throws {
        let slow = "org.example.slow"
        let daemon = try TestDaemon(manifests: [
            "slow.json": TestDaemon.testExtension(slow, arguments: ["--never-ready"], policy: ["launchTimeoutSeconds": 30])
        ])
        try daemon.start()
        let run = try TerminalRun([Self.extctl, "open", "--socket", daemon.socketPath, slow], marker: nil)
        try daemon.events.wait("launch", of: slow)
        run.go()
        let result = try run.result()
        #expect(result.status == 130, "\(result)")
        #expect(result.milliseconds < 100, "\(result)")
    }

    @Test func isActiveAnswersWithItsExitStatus() throws {
        let daemon = try TestDaemon(manifests: [
            "test.json": TestDaemon.testExtension(Self.id),
            "never.json": TestDaemon.testExtension("org.example.never", policy: ["suspend": "never"]),
        ])
        try daemon.start()
        var r = try daemon.extctl(["is-active", Self.id])
        #expect(r.status == 3 && r.out == "not-running\n", "\(r)")
        let host = try daemon.host()
        let session = try host.begin(Self.id)
        r = try daemon.extctl(["is-active", Self.id])
        #expect(r.status == 0 && r.out == "active\n", "\(r)")
        try host.dismiss(session)
        try daemon.events.wait("suspend", of: Self.id)
        r = try daemon.extctl(["is-active", "--quiet", Self.id])
        #expect(r.status == 3 && r.out == "", "\(r)")
        let never = try host.begin("org.example.never")
        try host.dismiss(never)
        r = try daemon.extctl(["is-active", "org.example.never"])
        #expect(r.status == 0 && r.out == "background\n", "\(r)")
        r = try daemon.extctl(["is-active", "org.example.none"])
        #expect(r.status == 4 && r.out == "unknown\n", "\(r)")
    }

    @Test func statusLinesShowsMoreHistory() throws {
        let daemon = try TestDaemon(manifests: ["test.json": TestDaemon.testExtension(Self.id)])
        try daemon.start()
        let host = try daemon.host()
        for _ in 0..<4 { try Self.cycle(daemon, host) }  // launch, ready, then 4 × (begin, end, stop-sent, suspend) (+ resume)
        func eventLines(_ arguments: [String]) throws -> Int {
            let r = try daemon.extctl(["status"] + arguments + [Self.id])
            #expect(r.status == 0, "\(r)")
            return r.out.split(separator: "\n").filter { $0.hasPrefix("  20") }.count
        }
        #expect(try eventLines([]) == 10)
        #expect(try eventLines(["-n", "15"]) == 15)
        #expect(try eventLines(["--lines", "3"]) == 3)
        #expect(try eventLines(["--lines", "0"]) == 0)
        #expect(try eventLines(["-n", "1000"]) == 20, "the daemon keeps the last 20")
        let bad = try daemon.extctl(["status", "-n", "-2", Self.id])
        #expect(bad.status == 2 && bad.err == "extctl: --lines must be 0 or more, got -2\n", "\(bad)")
    }

    /// A reload that breaks a running extension's own manifest keeps its previous definition,
    /// and says so: on stderr, in `reload --json`, with exit status 1.
    @Test func reloadReportsAKeptDefinition() throws {
        let daemon = try TestDaemon(manifests: ["test.json": TestDaemon.testExtension(Self.id)])
        try daemon.start()
        let host = try daemon.host()
        let session = try host.begin(Self.id)
        let file = daemon.extensionsDirectory + "/test.json"
        try Data("{\"id\": ".utf8).write(to: URL(fileURLWithPath: file))
        let r = try daemon.extctl(["reload"])
        #expect(r.status == 1)
        #expect(r.out == "0 extension(s) loaded, 1 manifest error(s)\n", "\(r)")
        #expect(r.err.hasSuffix("extctl: '\(Self.id)' keeps its previous definition until \(file) is fixed\n"), "\(r)")
        let json = try daemon.extctl(["reload", "--json"])
        #expect(json.status == 1)
        let document = try JSONSerialization.jsonObject(with: Data(json.out.utf8)) as? [String: Any] ?? [:]
        #expect(document["loaded"] as? Int == 0)
        #expect((document["errors"] as? [String])?.count == 1)
        #expect(document["kept"] as? [[String: String]] == [["id": Self.id, "file": file]], "\(json.out)")
        #expect(json.err == "", "with --json the report is the document alone")
        let list = try daemon.extctl(["is-active", Self.id])
        #expect(list.out == "active\n", "the running extension is not ended")
        #expect(!daemon.events.all.contains { $0.kind == "exit" })
        try host.dismiss(session)
    }

    @Test func listOfAnUnknownPointIsAnErrorNamingTheKnownOnes() throws {
        let daemon = try TestDaemon(manifests: ["test.json": TestDaemon.testExtension(Self.id)])
        try daemon.start()
        let r = try daemon.extctl(["list", "--point", "keyboard"])
        #expect(r.status == 1)
        #expect(r.err == "extctl: unknown extension point 'keyboard' (known: action, default, share, widget)\n", "\(r)")
        let known = try daemon.extctl(["list", "--point", "widget"])
        #expect(known.status == 0 && known.out.contains(Self.id), "\(known)")
    }

    @Test func openTimeoutIsFractionalValidatedAndNamesWhoDidNotAnswer() throws {
        let slow = "org.example.slow"
        let daemon = try TestDaemon(manifests: [
            "slow.json": TestDaemon.testExtension(slow, arguments: ["--never-ready"], policy: ["launchTimeoutSeconds": 30])
        ])
        try daemon.start()
        for value in ["0", "-1", "-0.5", "nan"] {
            let r = try daemon.extctl(["open", "--timeout", value, slow])
            #expect(r.status == 2, "\(value): \(r)")
            #expect(r.err.hasPrefix("extctl: --timeout must be a positive number of seconds, got "), "\(value): \(r)")
        }
        let started = Date()
        let r = try daemon.extctl(["open", "--timeout", "0.3", slow])
        let took = Date().timeIntervalSince(started)
        #expect(r.status == 1)
        #expect(r.err == "extctl: '\(slow)' did not become ready within 0.3s (--timeout); extensiond answers, and the extension is launching\n", "\(r)")
        #expect(took >= 0.3 && took < 3, "waited \(took)s")
        // A daemon that accepts the connection but never answers (stopped with SIGSTOP).
        let pid = daemon.process!.processIdentifier
        kill(pid, SIGSTOP)
        defer { kill(pid, SIGCONT) }
        let silent = try daemon.extctl(["open", "--timeout", "0.2", slow])
        #expect(silent.status == 1)
        #expect(silent.err == "extctl: extensiond did not answer within 0.2s (--timeout)\n", "\(silent)")
    }

    /// `extctl --help` shows `--socket`; EXTENSIOND_SOCKET names the socket when `--socket` is not
    /// given; the bash completion completes ids after `extctl --socket S status ` (the global
    /// option before the command) as after `extctl status `.
    @Test func theSocketIsAGlobalOptionAnEnvironmentVariableAndCompletesAfter() throws {
        let help = try runProgram(Self.extctl, ["--help"])
        #expect(help.status == 0 && help.out.contains("--socket <path>") && help.out.contains("EXTENSIOND_SOCKET"), "\(help)")

        let daemon = try TestDaemon(manifests: ["test.json": TestDaemon.testExtension(Self.id)])
        try daemon.start()
        let env = try runProgram("/usr/bin/env", ["EXTENSIOND_SOCKET=" + daemon.socketPath, "XDG_RUNTIME_DIR=/nonexistent", Self.extctl, "list"])
        #expect(env.status == 0 && env.out.contains(Self.id), "\(env)")
        let missing = try runProgram("/usr/bin/env", ["EXTENSIOND_SOCKET=/nonexistent/control.sock", Self.extctl, "list"])
        #expect(missing.status == 1 && missing.err.contains("/nonexistent/control.sock"), "\(missing)")

        // The generated bash completion, run as bash runs it for `extctl --socket S status <TAB>`.
        let script = try runProgram(Self.extctl, ["--generate-completion-script", "bash"])
        let file = daemon.directory + "/extctl.bash"
        try script.out.write(toFile: file, atomically: true, encoding: .utf8)
        let driver = """
            source "$1"; PATH="$2:$PATH"
            COMP_WORDS=(extctl --socket "$3" status ""); COMP_CWORD=4
            COMP_LINE="extctl --socket $3 status "; COMP_POINT=${#COMP_LINE}
            _extctl; printf '%s\\n' "${COMPREPLY[@]}"
            """
        let bin = (Self.extctl as NSString).deletingLastPathComponent
        let completed = try runProgram("/bin/bash", ["-c", driver, "bash", file, bin, daemon.socketPath])
        #expect(completed.out.split(separator: "\n").map(String.init) == [Self.id], "\(completed)")
    }

    /// `reset` of an id that is neither loaded nor has a container is an error naming it, and
    /// empties nothing.
    @Test func resetOfAnUnknownIdIsAnErrorNamingIt() throws {
        let daemon = try TestDaemon(manifests: ["test.json": TestDaemon.testExtension(Self.id)])
        try daemon.start()
        let r = try daemon.extctl(["reset", "org.example.never"])
        #expect(r.status == 1, "\(r)")
        #expect(r.err == "extctl: no extension with id 'org.example.never', and no container of that name to empty\n", "\(r)")
        let known = try daemon.extctl(["reset", Self.id])
        #expect(known.status == 0, "\(known)")
    }

    /// At the end of its input `open` drains what the extension still sends (docs/extctl.md):
    /// `echo ping | extctl open ID` prints the answer, then dismisses, and the extension is suspended.
    @Test func openDrainsTheAnswerToTheLastLineThenDismisses() throws {
        let daemon = try TestDaemon(manifests: ["test.json": TestDaemon.testExtension(Self.id)])
        try daemon.start()
        let index = daemon.events.count
        let r = try daemon.extctl(["open", Self.id], stdin: "ping\n")
        #expect(r.status == 0, "\(r)")
        let lines = r.out.split(separator: "\n").map(String.init)
        #expect(lines.count == 2 && lines[1].hasPrefix("pong"), "\(r)")
        try daemon.events.wait("suspend", of: Self.id, after: index)
    }
}
