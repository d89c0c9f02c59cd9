import ExtensionHost
import Foundation
import Testing

/// The seed scenario with the database extensions really use: an extension writes batches to
/// a SQLite database in WAL mode under a task assertion, each batch one transaction (the
/// current one rolled back when the assertion expires), while the host dismisses and reopens it in a loop and the app writes to
/// the same database with an 8 s busy timeout. It passes when no app write fails, no batch is
/// torn, the extension is never ended for a lock, and `integrity_check` says ok.
/// `EXTENSIOND_SQLITE_CYCLES` sets the number of cycles (default 300; e.g. 5000 for a long run).
@Suite(.serialized)
struct SQLiteSeedTests {
    static let id = "com.example.sqlite-batches"
    static let rows = 20

    @Test func batchesSurviveDismissAndReopenLoopsWhileTheAppWrites() throws {
        let cycles = Int(ProcessInfo.processInfo.environment["EXTENSIOND_SQLITE_CYCLES"] ?? "") ?? 300
        let daemon = try TestDaemon(manifests: [
            "s.json": sqliteLocksExtension(Self.id, policy: ["backgroundSeconds": 1.0, "expiryGraceSeconds": 0.5])
        ])
        try daemon.start()
        let db = daemon.directory + "/app.db"
        let app = try SQLiteApp(database: db, mode: "wal")
        let host = try daemon.host()
        var pid: Int32 = 0
        var committed = 0
        var cutShort = 0
        var longestAppWrite = 0.0

        for cycle in 0..<cycles {
            let mark = daemon.events.count
            let session = try host.begin(Self.id)
            if pid != 0 { #expect(session.pid == pid, "cycle \(cycle): relaunched instead of resumed") }
            pid = session.pid
            let channel = try session.hostChannel()
            // Every 26th cycle (an even one: dismissed at once) asks for far more batches than
            // fit in the background time, so expiry interrupts the writer mid-batch; the others
            // finish quickly.
            let batches = cycle % 26 == 24 ? 1_000_000 : 3
            channel.send("batches \(db) \(batches) \(Self.rows)")
            #expect(channel.readLine(timeout: 20) == "writing", "cycle \(cycle)")
            if cycle % 2 == 0 { try host.dismiss(session) }
            let answer = app.ask("write cycle \(cycle)") ?? "no answer"
            #expect(answer.hasPrefix("ok "), "cycle \(cycle): the app's write: \(answer)")
            longestAppWrite = max(longestAppWrite, Double(answer.split(separator: " ").last ?? "") ?? 0)
            if cycle % 2 == 1 { try host.dismiss(session) }
            try daemon.events.wait("suspend", of: Self.id, after: mark, timeout: 20)
            let done = channel.readLine(timeout: 1) ?? ""
            #expect(done.hasPrefix("batches "), "cycle \(cycle): \(done)")
            let n = Int(done.dropFirst(8)) ?? 0
            committed += n
            if n < batches { cutShort += 1 }
            channel.close()
        }
        let check = app.ask("check \(Self.rows)") ?? "no answer"
        #expect(check == "integrity ok batches \(committed) torn 0 extension-rows \(committed * Self.rows)", "\(check)")
        #expect(cutShort >= max(1, cycles / 26 - 1), "expiry interrupted \(cutShort) long runs")
        #expect(!daemon.events.all.contains { $0.kind == "lock-held-at-suspend" || $0.kind == "exit" || $0.kind == "crash" })
        print(
            "SQLite seed scenario: \(cycles) cycles, \(committed) batches committed, \(cutShort) runs cut by expiry, "
                + "longest app write \(String(format: "%.1f", longestAppWrite * 1000)) ms")
    }
}
