import SupervisorKernel

/// What /proc says about one process.
struct ProcessStat: Equatable {
    var pid: Int32
    /// The state letter: R, S, D, T (stopped), t (traced), Z (zombie)…
    var state: Character
    var parent: Int32
    var processGroup: Int32
    /// The session id (an extension leads its own session, so it equals the leader's pid).
    var session: Int32 = 0
    /// User plus system CPU time, in clock ticks.
    var cpuTicks: UInt64
    /// Start time after boot, in clock ticks (identifies the process across pid reuse).
    var startTicks: UInt64
    /// Resident set size, in pages.
    var rssPages: Int64

    var isStopped: Bool { state == "T" || state == "t" }
    var isGone: Bool { state == "Z" || state == "X" }
}

/// Reads process information from /proc, through the kernel interface. The only place the
/// daemon parses /proc.
struct ProcessTable {
    let kernel: any Kernel

    /// Parses /proc/PID/stat; nil when the process is gone.
    func stat(_ pid: Int32) -> ProcessStat? {
        stat(path: "/proc/\(pid)/stat", pid: pid)
    }

    /// Parses a stat file (of a process or of one of its threads); nil when it is gone.
    func stat(path: String, pid: Int32) -> ProcessStat? {
        guard case .success(let bytes) = kernel.read(path), !bytes.isEmpty else { return nil }
        return ProcessTable.parseStat(pid: pid, bytes)
    }

    /// Parses the contents of a stat file. The command name may contain spaces and
    /// parentheses, so fields are counted from the last ')'.
    static func parseStat(pid: Int32, _ bytes: [UInt8]) -> ProcessStat? {
        guard let close = bytes.lastIndex(of: UInt8(ascii: ")")), close + 2 < bytes.count else { return nil }
        let fields = bytes[(close + 2)...].split(separator: UInt8(ascii: " "))
        // fields[0] = state (field 3), [1] = ppid, [2] = pgrp, [3] = session, [11] = utime, [12] = stime,
        // [19] = starttime, [21] = rss
        guard fields.count > 21 else { return nil }
        func int(_ i: Int) -> Int64 { Int64(String(decoding: fields[i], as: UTF8.self)) ?? 0 }
        return ProcessStat(
            pid: pid, state: Character(UnicodeScalar(fields[0].first ?? UInt8(ascii: "?"))),
            parent: Int32(truncatingIfNeeded: int(1)), processGroup: Int32(truncatingIfNeeded: int(2)),
            session: Int32(truncatingIfNeeded: int(3)),
            cpuTicks: UInt64(max(0, int(11))) + UInt64(max(0, int(12))),
            startTicks: UInt64(max(0, int(19))), rssPages: int(21))
    }

    /// The command name of a process (/proc/PID/comm), or nil when it is gone.
    func command(_ pid: Int32) -> String? {
        guard case .success(let bytes) = kernel.read("/proc/\(pid)/comm") else { return nil }
        return String(decoding: bytes.prefix(while: { $0 != UInt8(ascii: "\n") }), as: UTF8.self)
    }

    /// The cgroup v2 path of a process (the `0::` line of /proc/PID/cgroup).
    func cgroup(_ pid: Int32) -> String? {
        guard case .success(let bytes) = kernel.read("/proc/\(pid)/cgroup") else { return nil }
        return CgroupTree.unifiedPath(String(decoding: bytes, as: UTF8.self))
    }

    /// Every process whose process group is `pgid`. Scans /proc: members that left the
    /// tree (double-forked) are found too, as long as they stayed in the group.
    func groupMembers(_ pgid: Int32) -> [ProcessStat] {
        members(ofGroups: [pgid])[pgid] ?? []
    }

    /// The live members of each of the `groups`, in one scan of /proc (for a batch of stop
    /// verifications, the scan is paid once).
    func members(ofGroups groups: Set<Int32>) -> [Int32: [ProcessStat]] {
        guard !groups.isEmpty, let names = kernel.listDirectory("/proc") else { return [:] }
        var result: [Int32: [ProcessStat]] = [:]
        for name in names {
            guard let pid = Int32(name), let s = stat(pid), groups.contains(s.processGroup), !s.isGone else { continue }
            result[s.processGroup, default: []].append(s)
        }
        return result
    }

    /// The children of `pid` (of all its threads), from /proc/PID/task/TID/children.
    func children(of pid: Int32) -> [Int32] {
        var result: [Int32] = []
        for tid in kernel.listDirectory("/proc/\(pid)/task") ?? [] {
            guard case .success(let text) = kernel.read("/proc/\(pid)/task/\(tid)/children") else { continue }
            result += text.split(separator: UInt8(ascii: " ")).compactMap { Int32(String(decoding: $0, as: UTF8.self)) }
        }
        return result
    }

    /// How far the threads of a process are from running user code.
    enum ThreadsState {
        /// Every thread is stopped (or the process is gone).
        case stopped
        /// Every thread is stopped or in uninterruptible sleep, at least one of them asleep.
        case blockedInKernel
        /// Some thread can run.
        case running
    }

    /// The combined state of every thread of `pid`, from /proc/PID/task/*/stat.
    func threadsStopped(_ pid: Int32) -> ThreadsState {
        var result = ThreadsState.stopped
        for name in kernel.listDirectory("/proc/\(pid)/task") ?? [] {
            guard let tid = Int32(name), let s = stat(path: "/proc/\(pid)/task/\(tid)/stat", pid: tid) else { continue }
            if s.isStopped || s.isGone { continue }
            if s.state == "D" { result = .blockedInKernel; continue }
            return .running
        }
        return result
    }

    /// Clock ticks per second (for CPU time).
    var ticksPerSecond: Double { kernel.clockTicksPerSecond }
    /// Page size in bytes (for RSS).
    var pageSize: Int64 { kernel.pageSize }
}
