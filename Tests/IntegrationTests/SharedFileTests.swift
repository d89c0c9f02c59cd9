import ExtensionHost
import Foundation
import Testing

/// The seed scenario: a host and an extension share a file guarded by an exclusive flock. The
/// extension appends records under a task assertion while the host dismisses and reopens it in
/// a loop. No record may be torn, and the host must never wait on a lock held by a stopped
/// extension. `EXTENSIOND_SEED_CYCLES` sets the number of cycles (default 150; e.g. 5000 for a
/// long run).
@Suite(.serialized)
struct SharedFileTests {
    static let id = "com.example.records"

    @Test func recordsSurviveDismissAndReopenLoops() throws {
        let cycles = Int(ProcessInfo.processInfo.environment["EXTENSIOND_SEED_CYCLES"] ?? "") ?? 150
        let daemon = try TestDaemon(manifests: [
            "r.json": TestDaemon.testExtension(Self.id, policy: ["backgroundSeconds": 1.0, "expiryGraceSeconds": 0.5])
        ])
        try daemon.start()
        let file = daemon.directory + "/shared.log"
        let host = try daemon.host()
        var pid: Int32 = 0
        var expiredRuns = 0
        var contended = 0
        var longestWait = 0.0

        for cycle in 0..<cycles {
            let mark = daemon.events.count
            let session = try host.begin(Self.id)
            if pid != 0 { #expect(session.pid == pid, "cycle \(cycle): relaunched instead of resumed") }
            pid = session.pid
            let channel = try session.hostChannel()
            // Every 25th cycle asks for far more records than fit in the background time, so
            // expiry interrupts the writer; the others finish quickly.
            let count = cycle % 25 == 24 ? 10_000_000 : 50
            channel.send("records \(file) \(count)")
            // The writer holds its assertion from here on; the host dismisses while it writes.
            let first = channel.readLine(timeout: 20)
            #expect(first == "writing", "cycle \(cycle): \(first ?? "no answer")")
            if cycle % 2 == 0 { try host.dismiss(session) }
            // The host takes the lock for its own record, checking that whoever holds the lock
            // meanwhile is never a stopped extension.
            let fd = open(file, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o600)
            #expect(fd >= 0)
            let started = Date()
            var stoppedHolder = false
            var waitedForLock = false
            try eventually("cycle \(cycle): the host gets the lock", timeout: 20) {
                if flock(fd, LOCK_EX | LOCK_NB) == 0 { return true }
                waitedForLock = true
                if processState(session.pid) == "T" { stoppedHolder = true }
                return false
            }
            if waitedForLock { contended += 1 }
            longestWait = max(longestWait, Date().timeIntervalSince(started))
            #expect(!stoppedHolder, "cycle \(cycle): the host waited on a lock while the extension was stopped")
            let record = "H:\(cycle):end\n"
            _ = record.withCString { write(fd, $0, strlen($0)) }
            flock(fd, LOCK_UN)
            close(fd)
            if cycle % 2 == 1 { try host.dismiss(session) }
            // The cycle ends when the kernel confirms the suspension: the writer finished, or
            // was told to expire and let go, and released its assertion.
            try daemon.events.wait("suspend", of: Self.id, after: mark, timeout: 20)
            #expect(processState(pid) == "T")
            let done = channel.readLine(timeout: 1) ?? ""
            #expect(done.hasPrefix("records "), "cycle \(cycle): \(done)")
            if let written = Int(done.dropFirst(8)), written < count { expiredRuns += 1 }
            channel.close()
        }
        let expires = daemon.events.all.filter { $0.kind == "expire" && $0.id == Self.id }.count
        #expect(expires == expiredRuns, "every run cut short was cut by an expire")

        let text = try String(contentsOfFile: file, encoding: .utf8)
        var extensionRecords = 0, hostRecords = 0
        for line in text.split(separator: "\n", omittingEmptySubsequences: false).dropLast() {
            if line.hasPrefix("H:") && line.hasSuffix(":end") && line.split(separator: ":").count == 3 {
                hostRecords += 1
            } else if line.hasPrefix("R\(pid):") && line.hasSuffix(":" + String(repeating: "x", count: 64) + ":end") {
                extensionRecords += 1
            } else {
                Issue.record("torn or interleaved record: \(line.prefix(120))")
                break
            }
        }
        #expect(text.hasSuffix("\n"))
        #expect(hostRecords == cycles)
        #expect(expiredRuns >= max(1, cycles / 25 - 1), "expiry interrupted \(expiredRuns) long runs")
        #expect(!daemon.events.all.contains { $0.kind == "assertion-overrun" || $0.kind == "expiry-unacknowledged" })
        print(
            "seed scenario: \(cycles) cycles, \(extensionRecords) extension records, \(hostRecords) host records, "
                + "\(expiredRuns) runs cut by expiry, host lock contended \(contended) times, longest wait \(String(format: "%.1f", longestWait * 1000)) ms")
    }
}
