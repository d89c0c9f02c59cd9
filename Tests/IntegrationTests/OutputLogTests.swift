import ExtensionHost
import Foundation
import Testing

/// An extension's output where its author looks (docs/extctl.md, `logs` and `status`): a Python
/// extension that fails to import shows its `ModuleNotFoundError` in the error `extctl open`
/// prints and in `extctl status`; `extctl logs` shows its stderr; `extctl logs -f` follows new
/// lines as they are written.
@Suite struct OutputLogTests {
    static let extctl = BuildProducts.path("extctl")

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
        let id = "org.example.talker"
        let script = "trap 'echo bye >&2; exit 0' TERM; echo one; echo two >&2; sleep 1000 & wait"
        let daemon = try TestDaemon(manifests: [
            // Never suspended: it writes its first lines whenever it gets to run.
            "t.json": [
                "id": id, "point": "widget", "executable": "/bin/sh", "arguments": ["-c", script], "readiness": "exec", "policy": ["suspend": "never"],
            ]
        ])
        try daemon.start()
        let index = daemon.events.count
        #expect(try daemon.extctl(["prewarm", id]).status == 0)
        try daemon.events.wait("ready", of: id, after: index)
        let follower = try RawProcess(Self.extctl, ["logs", "-f", "--socket", daemon.socketPath, id], pipes: true)
        defer { _ = follower.stop(SIGTERM) }
        let output = HostChannel(fd: follower.output)
        // The kept lines first (both written before the follow; the order of two pipes' writes
        // is the order the daemon read them).
        var kept: [String] = []
        while kept.count < 2, let line = output.readLine(timeout: 10) { kept.append(line) }
        #expect(kept.map { $0.split(separator: " ").dropFirst().joined(separator: " ") }.sorted() == ["one", "two"], "\(kept)")
        // Then a line written after the follow began.
        #expect(try daemon.extctl(["kill", "--signal", "TERM", id]).status == 0)
        let next = output.readLine(timeout: 10)
        #expect(next?.hasSuffix(" bye") == true, "\(String(describing: next))")
    }
}
