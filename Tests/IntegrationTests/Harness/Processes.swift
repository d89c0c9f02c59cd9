import ExtensionHost
import Foundation

/// The /proc state letter of a process (R, S, T…), or nil when it is gone (or a zombie).
func processState(_ pid: Int32) -> Character? {
    guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
        let close = text.lastIndex(of: ")")
    else { return nil }
    let rest = text[text.index(close, offsetBy: 2)...]
    guard let state = rest.first, state != "Z", state != "X" else { return nil }
    return state
}

/// The cgroup v2 path of `pid` (its `0::` line in /proc/PID/cgroup), or nil once it is gone.
func cgroupPath(_ pid: Int32) -> String? {
    guard let text = try? String(contentsOfFile: "/proc/\(pid)/cgroup", encoding: .utf8) else { return nil }
    return text.split(separator: "\n").first { $0.hasPrefix("0::") }.map { String($0.dropFirst(3)) }
}

/// The pids listed in the cgroup directory `path`'s cgroup.procs.
func cgroupProcesses(_ path: String) -> [Int32] {
    ((try? String(contentsOfFile: path + "/cgroup.procs", encoding: .utf8)) ?? "").split(separator: "\n").compactMap { Int32($0) }
}

/// Every live process whose process group is `pgid`.
func groupMembers(_ pgid: Int32) -> [Int32] {
    let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
    return entries.compactMap(Int32.init).filter { pid in
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = text.lastIndex(of: ")")
        else { return false }
        let fields = text[text.index(close, offsetBy: 2)...].split(separator: " ")
        return fields.count > 2 && Int32(fields[2]) == pgid && fields[0] != "Z"
    }
}

/// Waits until kernel state satisfies `condition` (process exit by a non-child has no
/// notification, so this re-reads /proc every 10 ms), throwing at the deadline.
func eventually(_ what: String, timeout: Double = 10, _ condition: () -> Bool) throws {
    let deadline = Date().addingTimeInterval(timeout)
    while !condition() {
        if Date() > deadline { throw HarnessError("timed out waiting until \(what)") }
        usleep(10_000)
    }
}

/// Line-oriented access to a request channel from the host side.
struct HostChannel {
    let fd: Int32

    func send(_ line: String) {
        let bytes = Array((line + "\n").utf8)
        _ = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress!, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    /// Reads one line, waiting at most `timeout` seconds; nil on end of stream or timeout.
    func readLine(timeout: Double = 10) -> String? {
        var line: [UInt8] = []
        var byte: UInt8 = 0
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            let left = deadline.timeIntervalSinceNow
            if left <= 0 { return nil }
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            if poll(&pfd, 1, Int32(left * 1000) + 1) <= 0 { continue }
            let n = read(fd, &byte, 1)
            if n <= 0 { return line.isEmpty ? nil : String(decoding: line, as: UTF8.self) }
            if byte == UInt8(ascii: "\n") { return String(decoding: line, as: UTF8.self) }
            line.append(byte)
        }
    }

    func close() { Glibc.close(fd) }
}

extension ExtensionSession {
    /// The host end of the session's channel.
    func hostChannel() throws -> HostChannel {
        guard let channel else { throw HarnessError("the session has no channel") }
        return HostChannel(fd: channel)
    }
}

/// Whether `pid` is stopped (`T`), or blocked in the kernel (`D`) with SIGSTOP pending, so that
/// it stops on its way back to user space: what the daemon confirms as stopped for a member
/// that is in an uninterruptible sleep (a vfork parent, a process in a disk wait).
func isStoppedOrStopPending(_ pid: Int32) -> Bool {
    switch processState(pid) {
    case "T": return true
    case "D": return pendingSignals(pid) & (UInt64(1) << (UInt64(SIGSTOP) - 1)) != 0
    default: return false
    }
}

/// The signals pending for `pid`, the thread's own (`SigPnd`) and the process's (`ShdPnd`).
func pendingSignals(_ pid: Int32) -> UInt64 {
    guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return 0 }
    var mask: UInt64 = 0
    for line in text.split(separator: "\n") where line.hasPrefix("SigPnd:") || line.hasPrefix("ShdPnd:") {
        mask |= UInt64(line.split(separator: "\t").last.map(String.init) ?? "", radix: 16) ?? 0
    }
    return mask
}

/// The pid on the host of the process that has pid `namespacePID` in the pid namespace of
/// `leader` (a sandboxed extension's first process, whose children report pids of that
/// namespace); `namespacePID` itself when `leader` shares the host's namespace. Nil when no
/// such process lives.
func hostPID(_ namespacePID: Int32, inNamespaceOf leader: Int32) -> Int32? {
    guard let namespace = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(leader)/ns/pid") else { return nil }
    if namespace == (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/ns/pid")) { return namespacePID }
    let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
    return entries.compactMap(Int32.init).first { pid in
        guard (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/ns/pid")) == namespace,
            let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
            let line = text.split(separator: "\n").first(where: { $0.hasPrefix("NSpid:") })
        else { return false }
        return line.split(whereSeparator: { $0 == "\t" || $0 == " " }).last == Substring("\(namespacePID)")
    }
}

/// The name of process `pid` (its `comm`), or nil once it is gone.
func processName(_ pid: Int32) -> String? {
    (try? String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines)
}

/// The children of the test daemon's process.
func daemonChildren(_ daemon: TestDaemon) -> [Int32] {
    guard let pid = daemon.pid, let text = try? String(contentsOfFile: "/proc/\(pid)/task/\(pid)/children", encoding: .utf8) else { return [] }
    return text.split(separator: " ").compactMap { Int32($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
}

/// Runs `path` with `arguments` to its end (its output discarded): its exit status.
func run(_ path: String, _ arguments: [String]) throws -> Int32 {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: path)
    process.arguments = arguments
    process.standardOutput = FileHandle.nullDevice
    process.standardError = FileHandle.nullDevice
    try process.run()
    process.waitUntilExit()
    return process.terminationStatus
}
