import Foundation

/// The containing app of the lock tests: `sqlite_locks.py app` (real SQLite through python3's
/// sqlite3 module), driven line by line over a socketpair.
final class SQLiteApp {
    static let script =
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path + "/Fixtures/sqlite-locks/sqlite_locks.py"

    let process = Process()
    let channel: HostChannel

    /// Starts the app on `database` in journal `mode` and waits until it has the database open.
    init(database: String, mode: String) throws {
        var fds: [Int32] = [0, 0]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &fds) == 0 else {
            throw HarnessError("socketpair failed")
        }
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = [Self.script, "app", database, mode]
        let theirs = FileHandle(fileDescriptor: fds[1], closeOnDealloc: true)
        process.standardInput = theirs
        process.standardOutput = theirs
        try process.run()
        try theirs.close()
        channel = HostChannel(fd: fds[0])
        let first = channel.readLine(timeout: 20)
        guard first == "open" else { throw HarnessError("the app did not open \(database): \(first ?? "no answer")") }
    }

    /// Sends `command` and returns the answer (nil after `timeout` seconds).
    func ask(_ command: String, timeout: Double = 20) -> String? {
        channel.send(command)
        return channel.readLine(timeout: timeout)
    }

    deinit {
        channel.close()
        process.waitUntilExit()
    }
}

/// A manifest for `sqlite_locks.py extension` (readiness runtime, through the C ABI).
func sqliteLocksExtension(_ id: String, policy: [String: Any]) throws -> [String: Any] {
    [
        "id": id, "point": "widget", "executable": "/usr/bin/python3",
        "arguments": [SQLiteApp.script, "extension"],
        "environment": ["EXTENSION_RUNTIME_LIB": try RuntimeC.library()],
        "policy": policy,
    ]
}
