import Dispatch
import ExtensionHost
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

    static func exit(_ value: Any?) -> String {
        guard let e = value as? [String: Any] else { return "-" }
        let reason = e["reason"] as? String ?? "?"
        if let code = e["code"] as? Int { return "\(reason) (status \(code))" }
        if let signal = e["signal"] as? Int { return "\(reason) (signal \(signal))" }
        return reason
    }

    static func bytes(_ n: Int) -> String {
        let units = ["B", "K", "M", "G"]
        var value = Double(n)
        var unit = 0
        while value >= 1024 && unit < units.count - 1 { value /= 1024; unit += 1 }
        return unit == 0 ? "\(n)B" : String(format: "%.1f%@", value, units[unit])
    }

    /// One extension's `status` block, with its last `eventLines` events.
    static func statusBlock(_ e: [String: Any], eventLines: Int = 10) -> String {
        let state = e["state"] as? String ?? "?"
        let dot = state == "active" ? "●" : state == "not-running" ? "○" : "◐"
        var lines = ["\(dot) \(e["id"] as? String ?? "?") (\(e["point"] as? String ?? "?"))"]
        func field(_ name: String, _ value: String) { lines.append(name.leftPadded(12) + ": " + value) }
        field("State", "\(state) since \(e["since"] as? String ?? "?")")
        field("Executable", e["executable"] as? String ?? "?")
        field("PID", (e["pid"] as? Int).map(String.init) ?? "-")
        if let cgroup = e["cgroup"] as? String { field("CGroup", cgroup) }
        let processes = e["processes"] as? [[String: Any]] ?? []
        for (i, p) in processes.enumerated() {
            let line = "\(p["pid"] as? Int ?? 0) \(p["state"] as? String ?? "?") \(p["command"] as? String ?? "?")"
            if i == 0 { field("Processes", line) } else { lines.append(String(repeating: " ", count: 14) + line) }
        }
        let requests = e["openRequests"] as? [[String: Any]] ?? []
        field("Requests", requests.isEmpty ? "none" : requests.map {
            "#\($0["id"] as? Int ?? 0) host pid \($0["hostPID"] as? Int ?? 0) uid \($0["hostUID"] as? Int ?? 0)"
        }.joined(separator: "; "))
        let assertions = e["assertions"] as? [[String: Any]] ?? []
        field("Assertions", assertions.isEmpty ? "none" : "")
        for a in assertions {
            let age = String(format: "%.1fs", a["ageSeconds"] as? Double ?? 0)
            let left = String(format: "%.1fs", a["remainingSeconds"] as? Double ?? 0)
            let expire = (a["expireSent"] as? Bool ?? false) ? ", expire sent" : ""
            lines.append("              #\(a["id"] as? Int ?? 0) \"\(a["reason"] as? String ?? "")\" age \(age), \(left) left\(expire)")
        }
        if let refresh = e["refresh"] as? [String: Any] {
            let last = (refresh["lastResult"] as? String).map { r in "last \(r) at \(refresh["lastAt"] as? String ?? "?")" } ?? "never refreshed"
            let next = (refresh["nextAt"] as? String).map { "next at \($0)" } ?? "no scheduled refresh"
            let left = "\(refresh["budgetLeft"] as? Int ?? 0) of \(refresh["dailyBudget"] as? Int ?? 0) left today"
            field("Refresh", "\(last); \(next); \(left)" + ((refresh["inFlight"] as? Bool ?? false) ? "; in progress" : ""))
        }
        if let m = e["memoryBytes"] as? Int { field("Memory", bytes(m)) }
        if let c = e["cpuSeconds"] as? Double { field("CPU", String(format: "%.2fs", c)) }
        if let c = e["credentials"] as? [String: Any] {
            let groups = (c["groups"] as? [Int] ?? []).map(String.init).joined(separator: ",")
            field("User", "uid \(c["uid"] as? Int ?? -1) gid \(c["gid"] as? Int ?? -1)" + (groups.isEmpty ? "" : " groups \(groups)")
                + ((c["ownUID"] as? Bool ?? false) ? " (its own uid)" : ""))
        }
        if let limits = e["limits"] as? [String: Any], !limits.isEmpty {
            let order = ["memoryMaxBytes", "tasksMax", "openFilesMax", "cpuWeight"]
            field("Limits", order.compactMap { key -> String? in
                guard let l = limits[key] as? [String: Any], let v = l["value"] as? Int else { return nil }
                let value = key == "memoryMaxBytes" ? bytes(v) : "\(v)"
                return "\(key) \(value) (\(l["enforcedBy"] as? String ?? "?"))"
            }.joined(separator: ", "))
            let controls = order.compactMap { key -> String? in
                guard let control = (limits[key] as? [String: Any])?["enforcedWith"] as? String else { return nil }
                return "\(key) \(control)" + (control == "memory.limit_in_bytes" ? " (cgroup v1)" : "")
            }
            if !controls.isEmpty { field("Enforcement", controls.joined(separator: ", ")) }
        }
        if let container = e["container"] as? String { field("Container", container) }
        if let sandbox = e["sandbox"] as? [String: Any], let summary = sandbox["summary"] as? String { field("Sandbox", summary) }
        if let held = e["locksHeldAtSuspend"] as? Int, held > 0 {
            field("Locks", "held a lock that blocks others when stopped, \(held) time(s)")
        }
        field("Last exit", exit(e["lastExit"]) + ((e["lastExit"] as? [String: Any])?["time"].map { " at \($0)" } ?? ""))
        if let crashes = e["consecutiveCrashes"] as? Int, crashes > 0 {
            let until = (e["throttledUntil"] as? String).map { ", next launch after \($0)" } ?? ""
            field("Crash loop", "\(crashes) consecutive crash(es)\(until)")
        }
        let events = e["recentEvents"] as? [[String: Any]] ?? []
        if !events.isEmpty && eventLines > 0 {
            lines.append("")
            for ev in events.suffix(eventLines) { lines.append("  " + eventLine(ev)) }
        }
        return lines.joined(separator: "\n") + "\n"
    }

    static func eventLine(_ e: [String: Any]) -> String {
        var parts = [e["time"] as? String ?? "?", e["id"] as? String ?? "?", e["event"] as? String ?? "?"]
        if let pid = e["pid"] as? Int { parts.append("pid=\(pid)") }
        parts.append("state=\(e["state"] as? String ?? "?")")
        if let a = e["assertion"] as? Int { parts.append("assertion=\(a)") }
        if let r = e["request"] as? Int { parts.append("request=\(r)") }
        if let d = e["detail"] as? String { parts.append("(\(d))") }
        return parts.joined(separator: " ")
    }
}

extension String {
    func leftPadded(_ width: Int) -> String { count >= width ? self : String(repeating: " ", count: width - count) + self }
}
