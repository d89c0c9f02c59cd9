import ExtensionHost
import Foundation
import Testing

/// An extension's output where its author looks (docs/extctl.md, `logs` and `status`): a Python
/// extension that fails to import shows its `ModuleNotFoundError` in the error `extctl open`
/// prints and in `extctl status`; `extctl logs` shows its stderr; `extctl logs -f` follows new
/// lines as they are written.
@Suite struct OutputLogTests {
    static let extctl = BuildProducts.path("extctl")

    static let talkerID = "org.example.talker"
    /// An extension that writes two lines at once, and "bye" at SIGTERM; never suspended: it
    /// writes its first lines whenever it gets to run.
    static var talker: [String: [String: Any]] {
        [
            "t.json": [
                "id": talkerID, "point": "widget", "executable": "/bin/sh",
                "arguments": ["-c", "trap 'echo bye >&2; exit 0' TERM; echo one; echo two >&2; sleep 1000 & wait"], "readiness": "exec",
                "policy": ["suspend": "never"],
            ]
        ]
    }

    /// Launches the talker, starts `extctl logs -f` on it and reads the two lines kept.
    static func follow(_ daemon: TestDaemon) throws -> (RawProcess, HostChannel, [String]) {
        let index = daemon.events.count
        #expect(try daemon.extctl(["prewarm", talkerID]).status == 0)
        try daemon.events.wait("ready", of: talkerID, after: index)
        return try followStarted(daemon)
    }

    /// Starts `extctl logs -f` on the talker, running, and reads the two lines kept.
    static func followStarted(_ daemon: TestDaemon) throws -> (RawProcess, HostChannel, [String]) {
        let follower = try RawProcess(extctl, ["logs", "-f", "--socket", daemon.socketPath, talkerID], pipes: true)
        let output = HostChannel(fd: follower.output)
        var kept: [String] = []
        while kept.count < 2, let line = output.readLine(timeout: 10) { kept.append(line) }
        return (follower, output, kept)
    }

    @Test func anImportErrorIsInTheOpenErrorStatusAndLogs() throws {
        let id = "org.example.broken"
        let daemon = try TestDaemon(manifests: [
            "b.json": ["id": id, "point": "widget", "executable": "/usr/bin/python3", "arguments": ["-c", "import extensiond_no_such_module"]]
        ])
        try daemon.start()
        let open = try daemon.extctl(["open", id], stdin: "")
        #expect(open.status == 1, "\(open)")
        #expect(open.err.contains("exited before it was ready"), "\(open)")
        #expect(open.err.contains("ModuleNotFoundError: No module named 'extensiond_no_such_module'"), "\(open)")

        let status = try daemon.extctl(["status", id])
        #expect(status.out.contains("Output (last"), "\(status)")
        #expect(status.out.contains("ModuleNotFoundError: No module named 'extensiond_no_such_module'"), "\(status)")

        let logs = try daemon.extctl(["logs", "-n", "1", id])
        #expect(logs.status == 0, "\(logs)")
        let lines = logs.out.split(separator: "\n")
        #expect(lines.count == 1 && lines[0].hasSuffix("ModuleNotFoundError: No module named 'extensiond_no_such_module'"), "\(logs)")

        let json = try daemon.extctl(["logs", "--json", id])
        let objects = json.out.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        #expect(objects.contains { ($0["text"] as? String)?.hasPrefix("Traceback") == true && $0["time"] is String }, "\(json)")

        let unknown = try daemon.extctl(["logs", "org.example.none"])
        #expect(unknown.status == 1 && unknown.err == "extctl: no extension with id 'org.example.none'\n", "\(unknown)")
    }

    @Test func logsFollowPrintsTheKeptLinesThenTheNewOnes() throws {
        let daemon = try TestDaemon(manifests: Self.talker)
        try daemon.start()
        let (follower, output, kept) = try Self.follow(daemon)
        defer { _ = follower.stop(SIGTERM) }
        // The kept lines first (both written before the follow; the order of two pipes' writes
        // is the order the daemon read them).
        #expect(kept.map { $0.split(separator: " ").dropFirst().joined(separator: " ") }.sorted() == ["one", "two"], "\(kept)")
        let id = Self.talkerID
        // Then a line written after the follow began.
        #expect(try daemon.extctl(["kill", "--signal", "TERM", id]).status == 0)
        let next = output.readLine(timeout: 10)
        #expect(next?.hasSuffix(" bye") == true, "\(String(describing: next))")
    }

    /// The kept lines and a follower cross `extctl reexec`: after it `extctl logs` still shows
    /// the lines written before, and the follower started before prints the next line. A caller
    /// that is neither an administrator nor the extension's app (nobody) is refused its output,
    /// by `logs` and by `logs -f`.
    @Test func theKeptLinesAndAFollowerCrossAReexecAndOnlyAdministratorsReadThem() throws {
        let id = Self.talkerID
        let daemon = try TestDaemon(manifests: Self.talker, socket: "run/control.sock")
        // The socket reachable by nobody (a member of its group).
        chmod(daemon.directory, 0o711)
        try daemon.start(arguments: ["--socket-group", "nogroup"])
        let (follower, output, kept) = try Self.follow(daemon)
        defer { _ = follower.stop(SIGTERM) }
        #expect(kept.count == 2, "\(kept)")

        for arguments in [["logs", id], ["logs", "-f", id]] {
            let command =
                ["--reuid=65534", "--regid=65534", "--clear-groups", Self.extctl, arguments[0], "--socket", daemon.socketPath] + arguments.dropFirst()
            let refused = try runProgram("/usr/bin/setpriv", command)
            #expect(refused.status == 1 && refused.err.contains("the output of \(id) is shown to root"), "\(arguments): \(refused)")
        }

        let reexec = try daemon.extctl(["reexec"])
        try #require(reexec.status == 0, "\(reexec)\n\(daemon.log())")
        let logs = try daemon.extctl(["logs", id])
        let texts = logs.out.split(separator: "\n").map { $0.split(separator: " ").dropFirst().joined(separator: " ") }
        #expect(texts.sorted() == ["one", "two"], "the lines written before the re-exec: \(logs)")
        #expect(try daemon.extctl(["kill", "--signal", "TERM", id]).status == 0)
        let next = output.readLine(timeout: 10)
        #expect(next?.hasSuffix(" bye") == true, "the follower of the replaced program: \(String(describing: next))\n\(daemon.log())")
    }

    /// Output access is checked again at a reload: the talker belongs to app A, whose user is
    /// nobody, so nobody reads and follows its output; moved to app B by a reload, its kept
    /// lines are dropped, nobody's follower is stopped (the daemon says so) and nobody is
    /// refused its lines, while an administrator's follower sees the next line.
    @Test func aReloadThatMovesAnExtensionToAnotherAppRechecksWhoReadsItsOutput() throws {
        let id = Self.talkerID
        var talker = try #require(Self.talker["t.json"])
        talker["app"] = "com.example.a"
        let apps: [String: [String: Any]] = [
            "a.json": ["kind": "app", "id": "com.example.a", "user": 65534, "dbusActivatable": true],
            "b.json": ["kind": "app", "id": "com.example.b", "dbusActivatable": true],
        ]
        let daemon = try TestDaemon(manifests: apps.merging(["t.json": talker]) { a, _ in a }, socket: "run/control.sock")
        chmod(daemon.directory, 0o711)
        try daemon.start(arguments: ["--socket-group", "nogroup"])
        let index = daemon.events.count
        let prewarm = try daemon.extctl(["prewarm", id])
        try #require(prewarm.status == 0, "\(prewarm)\n\(daemon.log())")
        try daemon.events.wait("ready", of: id, after: index)
        func asNobody(_ arguments: [String]) -> [String] {
            ["--reuid=65534", "--regid=65534", "--clear-groups", Self.extctl, arguments[0], "--socket", daemon.socketPath] + arguments.dropFirst()
        }
        let allowed = try runProgram("/usr/bin/setpriv", asNobody(["logs", id]))
        #expect(allowed.status == 0 && allowed.out.split(separator: "\n").count == 2, "app A's user reads its lines: \(allowed)")
        let nobodyFollower = try RawProcess("/usr/bin/setpriv", asNobody(["logs", "-f", id]), pipes: true)
        defer { _ = nobodyFollower.stop(SIGTERM) }
        let nobodyOutput = HostChannel(fd: nobodyFollower.output)
        var kept: [String] = []
        while kept.count < 2, let line = nobodyOutput.readLine(timeout: 10) { kept.append(line) }
        #expect(kept.count == 2, "\(kept)")
        let (adminFollower, adminOutput, _) = try Self.followStarted(daemon)
        defer { _ = adminFollower.stop(SIGTERM) }

        talker["app"] = "com.example.b"
        try daemon.writeManifest("t.json", talker)
        #expect(try daemon.extctl(["reload"]).status == 0)
        #expect(daemon.log().contains("the output kept for \(id) is dropped: its app changed"), "\(daemon.log())")
        #expect(daemon.log().contains("no longer follows the output of \(id) after the reload"), "\(daemon.log())")
        let logs = try daemon.extctl(["logs", id])
        #expect(logs.status == 0 && logs.out.isEmpty, "the lines written for app A are gone: \(logs)")
        let refused = try runProgram("/usr/bin/setpriv", asNobody(["logs", id]))
        #expect(refused.status == 1 && refused.err.contains("the output of \(id) is shown to root"), "\(refused)")

        #expect(try daemon.extctl(["kill", "--signal", "TERM", id]).status == 0)
        let next = adminOutput.readLine(timeout: 10)
        #expect(next?.hasSuffix(" bye") == true, "the administrator follows on: \(String(describing: next))")
        _ = nobodyFollower.stop(SIGTERM)
        var rest: [String] = []
        while let line = nobodyOutput.readLine(timeout: 1) { rest.append(line) }
        #expect(!rest.contains { $0.hasSuffix(" bye") }, "nobody's follower got no line after the reload: \(rest)")
    }

    /// A launch whose spawn fails (its program removed since the last one) quotes none of the
    /// lines the earlier process wrote.
    @Test func aFailedSpawnQuotesNoneOfAnEarlierProcesssLines() throws {
        let id = "org.example.vanishing"
        let directory = try TestDaemon.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let program = directory + "/talk.sh"
        try Data("#!/bin/sh\necho earlier-line-of-the-first-process\nexit 3\n".utf8).write(to: URL(fileURLWithPath: program))
        chmod(program, 0o755)
        chmod(directory, 0o755)
        let daemon = try TestDaemon(manifests: ["v.json": ["id": id, "point": "widget", "executable": program, "sandbox": "none"]])
        try daemon.start()
        let first = try daemon.extctl(["open", id], stdin: "")
        #expect(first.status == 1 && first.err.contains("earlier-line-of-the-first-process"), "\(first)")
        unlink(program)
        let second = try daemon.extctl(["open", id], stdin: "")
        #expect(second.status == 1, "\(second)")
        #expect(!second.err.contains("earlier-line-of-the-first-process"), "\(second)")
    }
}
