import Dispatch
import ExtensionHost
import ExtensionStatus
import Foundation
import Synchronization

/// The reason a held request ended early, set from the client's reader thread.
final class Interruption: Sendable {
    private let value = Mutex<String?>(nil)
    func set(_ reason: String) { value.withLock { $0 = $0 ?? reason } }
    var reason: String? { value.withLock { $0 } }
}

/// Whether `open`'s request has been begun, set once by the main thread.
final class Begun: Sendable {
    private let flag = Mutex(false)
    func set() { flag.withLock { $0 = true } }
    var value: Bool { flag.withLock { $0 } }
}

/// The result of a request the extension completed or cancelled (the first one only).
final class Outcome: Sendable {
    private let value = Mutex<RequestResult?>(nil)
    func set(_ result: RequestResult) { value.withLock { $0 = $0 ?? result } }
    var result: RequestResult? { value.withLock { $0 } }
}

/// Copies stdin to the request channel and the channel to stdout, for `extctl open`.
/// End of stdin ends the hold: the channel is shut down for writing, and what the extension
/// still sends is copied until it closes its end (or `drainSeconds` pass).
enum Pump {
    static let drainSeconds = 2.0

    static func start(session: ExtensionSession, done: DispatchSemaphore) {
        let channel = session.channel
        let drained = DispatchSemaphore(value: 0)
        if let channel {
            Thread.detachNewThread {
                var buffer = [UInt8](repeating: 0, count: 4096)
                while true {
                    let n = read(channel, &buffer, buffer.count)
                    if n < 0 && errno == EINTR { continue }
                    if n <= 0 { break }
                    Output.write(Array(buffer[0..<n]))
                }
                drained.signal()
            }
        }
        Thread.detachNewThread {
            var buffer = [UInt8](repeating: 0, count: 4096)
            while true {
                let n = read(0, &buffer, buffer.count)
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { break }
                if let channel { _ = buffer.withUnsafeBytes { send(channel, $0.baseAddress!, n, Int32(MSG_NOSIGNAL)) } }
            }
            if let channel {
                shutdown(channel, Int32(SHUT_WR))
                _ = drained.wait(timeout: .now() + drainSeconds)
            }
            done.signal()
        }
    }
}

/// Human-readable output.
enum Format {
    static func table(_ rows: [[String]]) -> String {
        guard let header = rows.first else { return "" }
        var widths = header.map(\.count)
        for row in rows { for (i, cell) in row.enumerated() { widths[i] = max(widths[i], cell.count) } }
        return rows.map { row in
            row.enumerated().map { i, cell in i == row.count - 1 ? cell : cell.padding(toLength: widths[i], withPad: " ", startingAt: 0) }
                .joined(separator: "  ")
        }.joined(separator: "\n") + "\n"
    }

    /// How a process ended, for a table cell: `crashed (signal 6)`.
    static func exit(_ e: ExitInfo?) -> String {
        guard let e else { return "-" }
        let reason = safe(e.reason)
        if let code = e.code { return "\(reason) (status \(code))" }
        if let signal = e.signal { return "\(reason) (signal \(signal))" }
        return reason
    }

    static func bytes(_ n: Int) -> String {
        let units = ["B", "K", "M", "G"]
        var value = Double(n)
        var unit = 0
        while value >= 1024 && unit < units.count - 1 { value /= 1024; unit += 1 }
        return unit == 0 ? "\(n)B" : String(format: "%.1f%@", value, units[unit])
    }

    /// One extension's `status` block, with its last `eventLines` events. Every text from
    /// extensiond is escaped (`safe`): manifests and extensions choose some of it.
    static func statusBlock(_ e: StatusReport.Extension, eventLines: Int = 10, output: [OutputLog.Line] = []) -> String {
        let dot = e.state == "active" ? "●" : e.state == "not-running" ? "○" : "◐"
        var lines = ["\(dot) \(safe(e.id)) (\(safe(e.point)))"]
        func field(_ name: String, _ value: String) { lines.append(name.leftPadded(12) + ": " + value) }
        field("State", "\(safe(e.state)) since \(safe(e.since))")
        field("Executable", safe(e.executable))
        field("PID", e.pid.map(String.init) ?? "-")
        if let cgroup = e.cgroup { field("CGroup", safe(cgroup)) }
        for (i, p) in e.processes.enumerated() {
            let line = "\(p.pid) \(safe(p.state)) \(safe(p.command))"
            if i == 0 { field("Processes", line) } else { lines.append(String(repeating: " ", count: 14) + line) }
        }
        field(
            "Requests",
            e.openRequests.isEmpty
                ? "none"
                : e.openRequests.map {
                    "#\($0.id) host pid \($0.hostPID) uid \($0.hostUID)" + ($0.hostApp.map { " app \(safe($0))" } ?? "")
                }.joined(separator: "; "))
        field("Assertions", e.assertions.isEmpty ? "none" : "")
        for a in e.assertions {
            let age = String(format: "%.1fs", a.ageSeconds)
            let left = String(format: "%.1fs", a.remainingSeconds)
            let expire = a.expireSent ? ", expire sent" : ""
            lines.append("              #\(a.id) \"\(safe(a.reason))\" age \(age), \(left) left\(expire)")
        }
        if let refresh = e.refresh {
            let last = refresh.lastResult.map { r in "last \(safe(r)) at \(refresh.lastAt.map(safe) ?? "?")" } ?? "never refreshed"
            let next = refresh.nextAt.map { "next at \(safe($0))" } ?? "no scheduled refresh"
            let left = "\(refresh.budgetLeft) of \(refresh.dailyBudget) left today"
            field("Refresh", "\(last); \(next); \(left)" + (refresh.inFlight ? "; in progress" : ""))
        }
        if let m = e.memoryBytes { field("Memory", bytes(Int(m))) }
        if let c = e.cpuSeconds { field("CPU", String(format: "%.2fs", c)) }
        if let c = e.credentials {
            let groups = c.groups.map(String.init).joined(separator: ",")
            field("User", "uid \(c.uid) gid \(c.gid)" + (groups.isEmpty ? "" : " groups \(groups)") + (c.ownUID ? " (its own uid)" : ""))
        }
        if !e.limits.isEmpty {
            let order = ["memoryMaxBytes", "tasksMax", "openFilesMax", "cpuWeight", "diskMaxBytes"]
            field(
                "Limits",
                order.compactMap { key -> String? in
                    guard let l = e.limits[key] else { return nil }
                    let value = key.hasSuffix("Bytes") ? bytes(Int(clamping: l.value)) : "\(l.value)"
                    return "\(key) \(value) (\(safe(l.enforcedBy)))"
                }.joined(separator: ", "))
            let controls = order.compactMap { key -> String? in
                guard let control = e.limits[key]?.enforcedWith else { return nil }
                return "\(key) \(safe(control))" + (control == "memory.limit_in_bytes" ? " (cgroup v1)" : "")
            }
            if !controls.isEmpty { field("Enforcement", controls.joined(separator: ", ")) }
        }
        if let app = e.app { field("App", safe(app)) }
        if let container = e.container { field("Container", safe(container)) }
        if let sandbox = e.sandbox { field("Sandbox", safe(sandbox.summary)) }
        if e.locksHeldAtSuspend > 0 {
            field("Locks", "held a lock that blocks others when stopped, \(e.locksHeldAtSuspend) time(s)")
        }
        field("Last exit", exit(e.lastExit) + (e.lastExit.map { " at \(safe($0.time))" } ?? ""))
        if e.consecutiveCrashes > 0 {
            let until = e.throttledUntil.map { ", next launch after \(safe($0))" } ?? ""
            field("Crash loop", "\(e.consecutiveCrashes) consecutive crash(es)\(until)")
        }
        if !e.recentEvents.isEmpty && eventLines > 0 {
            lines.append("")
            for ev in e.recentEvents.suffix(eventLines) { lines.append("  " + eventLine(ev)) }
        }
        if !output.isEmpty {
            lines.append("")
            lines.append("  Output (last \(output.count) line(s); extctl logs \(safe(e.id))):")
            for line in output { lines.append("  " + outputLine(line)) }
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// One output line as `logs` prints it: `TIME TEXT` (escaped by the daemon, and again here).
    static func outputLine(_ line: OutputLog.Line) -> String { safe(line.time) + " " + safe(line.text) }

    /// One event as `monitor` prints it: `TIME ID EVENT pid=P state=S … (DETAIL)`, escaped.
    static func eventLine(_ e: ExtensionEvent) -> String {
        var parts = [safe(e.time), safe(e.id), safe(e.event)]
        if let pid = e.pid { parts.append("pid=\(pid)") }
        parts.append("state=\(safe(e.state))")
        if let a = e.assertion { parts.append("assertion=\(a)") }
        if let r = e.request { parts.append("request=\(r)") }
        if let d = e.detail { parts.append("(\(safe(d)))") }
        return parts.joined(separator: " ")
    }
}

extension String {
    func leftPadded(_ width: Int) -> String { count >= width ? self : String(repeating: " ", count: width - count) + self }
}
