import ExtensionProtocol
import ExtensionStatus
import Foundation

/// In-process costs of the per-message work on the hot paths, in nanoseconds per operation.
/// What cannot be called from here (the daemon's log handler is in no library product)
/// is reproduced line for line, and says so.
enum Micro {
    /// Runs `body` `n` times after a warm-up; returns nanoseconds per call (best of 5 rounds).
    static func time(_ n: Int, _ body: () throws -> Void) rethrows -> Double {
        for _ in 0..<(n / 10) { try body() }
        var best = Double.infinity
        for _ in 0..<5 {
            let t0 = now()
            for _ in 0..<n { try body() }
            best = min(best, (now() - t0) / Double(n) * 1e9)
        }
        return best
    }

    static func run(quick: Bool) throws -> [(String, Double, String)] {
        let n = quick ? 20_000 : 200_000
        var results: [(String, Double, String)] = []
        var encoder = WireEncoder()
        var sink = 0

        results.append(("WireEncoder.encode(.granted), reused encoder", try time(n) {
            try encoder.encode(.granted(tag: 7, assertionID: 42))
            sink &+= encoder.bytes.count
        }, "daemon: every send"))
        results.append(("WireEncoder.encoded(.acquire), new array", try time(n) {
            sink &+= try WireEncoder.encoded(.acquire(tag: 7, reason: "bench")).count
        }, "runtime and hosts: MessageChannel.send, every message"))
        let acquire = try WireEncoder.encoded(.acquire(tag: 7, reason: "bench"))
        results.append(("WireDecoder.decode(acquire)", try time(n) {
            if case .acquire(let tag, _) = try WireDecoder.decode(acquire) { sink &+= Int(tag) }
        }, "daemon: every datagram"))
        let begin = try WireEncoder.encoded(.begin(tag: 7, extensionID: "com.example.stocks.widget"))
        results.append(("WireDecoder.decode(begin)", try time(n) {
            if case .begin(let tag, _) = try WireDecoder.decode(begin) { sink &+= Int(tag) }
        }, "daemon: every begin"))
        results.append(("[UInt8](repeating: 0, count: 65536) + free", time(n / 4) {
            let buffer = [UInt8](repeating: 0, count: WireLimits.maxMessageSize)
            sink &+= Int(buffer[sink & 1023])
        }, "runtime and hosts: MessageChannel.receive allocates this per message"))

        // A monitor event as the daemon writes it (`MonitorFeed.take`: `EventJSON.encode` with
        // the time from one `WallClock` per loop iteration; the daemon's `EventJSON.object` only
        // copies the `LifecycleEvent`'s fields into the `ExtensionEvent`), and the `events`
        // message of an iteration.
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        let clock = WallClock(monotonicNanoseconds: UInt64(now() * 1e9), wallClock: Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9)
        func event(_ at: UInt64) -> ExtensionEvent {
            ExtensionEvent(
                time: clock.iso(monotonicNanoseconds: at), monotonic: Double(at) / 1e9, event: "acquire", id: "com.example.stocks.widget",
                state: "active", pid: 4242, assertion: 17, detail: "save model")
        }
        results.append(("monitor event JSON (ExtensionEvent + WallClock.iso + jsonBytes)", time(n) {
            sink &+= event(UInt64(now() * 1e9)).jsonBytes().count
        }, "daemon: every event, with a monitor attached"))
        results.append(("  of which the ISO 8601 time (WallClock.iso)", time(n) {
            sink &+= clock.iso(monotonicNanoseconds: UInt64(now() * 1e9)).utf8.count
        }, ""))
        let objects = (0..<64).map { event(UInt64($0) * 1_000 + 793_270_737_000).jsonBytes() }
        results.append(("events message of 64 events: Message.events + WireEncoder.encode, per event", try time(n / 64) {
            for m in Message.events(carrying: objects) {
                try encoder.encode(m)
                sink &+= encoder.bytes.count
            }
        } / 64, "daemon: each monitor, each loop iteration with events"))

        // ConsoleLogHandler.log + the metadata Daemon.record builds, reproduced; the write(2) goes
        // to /dev/null here (a journal stream or a file costs more).
        let devnull = open("/dev/null", O_WRONLY)
        defer { close(devnull) }
        results.append(("log line (Daemon.record metadata + ConsoleLogHandler), to /dev/null", time(n / 10) {
            var metadata: [String: String] = ["EXTENSION_ID": "com.example.stocks.widget", "LIFECYCLE_STATE": "active", "EVENT": "acquire"]
            metadata["EXTENSION_PID"] = "4242"
            metadata["ASSERTION_ID"] = "17"
            metadata["ASSERTION_REASON"] = "save model"
            var line = "INFO com.example.stocks.widget: acquire"
            let merged = [String: String]().merging(metadata) { _, new in new }
            for key in merged.keys.sorted() { line += " \(key)=\(merged[key]!)" }
            line += "\n"
            _ = line.withCString { write(devnull, $0, strlen($0)) }
        }, "daemon: every event (journal or stderr)"))
        let core = CoreCycle.run(quick: quick)
        results.append(("core: end of a request that suspends the extension (1,000 running)", core.end, "daemon: every dismissal, SupervisorCore"))
        results.append(("core: stopConfirmed", core.stopConfirmed, "daemon: every dismissal, SupervisorCore"))
        results.append(("core: begin on a suspended extension", core.begin, "daemon: every resume, SupervisorCore"))
        results.append(("core: continueConfirmed (opens the request)", core.continueConfirmed, "daemon: every resume, SupervisorCore"))
        if sink == 42 { print("") }  // keep the work observable
        return results
    }
}
