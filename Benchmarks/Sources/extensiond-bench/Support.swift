import CBenchShims
import Foundation
import Synchronization

/// CLOCK_MONOTONIC in seconds: the clock of the daemon's event timestamps (`monotonic`).
@inline(__always) func now() -> Double { Double(bench_now_ns()) / 1e9 }

/// A failure that ends the run (the CI smoke run fails on it).
struct BenchError: Error, CustomStringConvertible {
    var description: String
    init(_ d: String) { description = d }
}

func log(_ line: String) {
    FileHandle.standardError.write(Data(("[bench] " + line + "\n").utf8))
}

/// Latency samples in seconds.
struct Samples {
    private(set) var values: [Double] = []
    private var sorted: [Double] = []

    init(_ values: [Double] = []) {
        self.values = values
        sorted = values.sorted()
    }

    mutating func add(_ v: Double) {
        values.append(v)
        sorted = []
    }

    private func ordered() -> [Double] { sorted.count == values.count ? sorted : values.sorted() }

    var count: Int { values.count }
    var isEmpty: Bool { values.isEmpty }

    /// Nearest-rank percentile.
    func percentile(_ p: Double) -> Double {
        let s = ordered()
        guard !s.isEmpty else { return .nan }
        let rank = Int((p / 100 * Double(s.count)).rounded(.up))
        return s[Swift.min(Swift.max(rank, 1), s.count) - 1]
    }

    var p50: Double { percentile(50) }
    var p99: Double { percentile(99) }
    var max: Double { ordered().last ?? .nan }
    var min: Double { ordered().first ?? .nan }
}

/// Formats seconds with a unit that keeps three significant figures.
func duration(_ s: Double) -> String {
    if s.isNaN { return "—" }
    let a = abs(s)
    if a < 1e-3 { return String(format: "%.1f µs", s * 1e6) }
    if a < 1 { return String(format: "%.2f ms", s * 1e3) }
    return String(format: "%.3f s", s)
}

/// The directory holding this executable (and, after `swift build`, the daemon and the extensions).
let executableDirectory: String = {
    let exe = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
    return URL(fileURLWithPath: exe).deletingLastPathComponent().path
}()

let selfExecutable: String = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]

/// Reads a small text file (a /proc file); nil when it cannot be read.
func readText(_ path: String) -> String? {
    guard let data = FileManager.default.contents(atPath: path) else { return nil }
    return String(decoding: data, as: UTF8.self)
}

/// `Key:   value` from a /proc status-like file, as an integer (the first number).
func statusField(_ text: String, _ key: String) -> Int? {
    for line in text.split(separator: "\n") where line.hasPrefix(key + ":") {
        let rest = line.dropFirst(key.count + 1).trimmingCharacters(in: .whitespaces)
        return Int(rest.split(separator: " ").first ?? "")
    }
    return nil
}

/// Resident set size of a process, in bytes.
func residentBytes(_ pid: Int32) -> Int? {
    guard let t = readText("/proc/\(pid)/status"), let kb = statusField(t, "VmRSS") else { return nil }
    return kb * 1024
}

/// Context switches (voluntary + involuntary) summed over every thread of a process, and the
/// thread count.
func contextSwitches(_ pid: Int32) -> (switches: Int, threads: Int) {
    let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
    var total = 0
    for t in tasks {
        guard let text = readText("/proc/\(pid)/task/\(t)/status") else { continue }
        total += (statusField(text, "voluntary_ctxt_switches") ?? 0) + (statusField(text, "nonvoluntary_ctxt_switches") ?? 0)
    }
    return (total, tasks.count)
}

/// CPU time a process has run, in seconds: the scheduler's own nanosecond accounting
/// (/proc/PID/task/*/schedstat), summed over its live threads. Tick-based utime/stime would round
/// a short run of a quiet extension down to nothing.
func cpuSeconds(_ pid: Int32) -> Double {
    let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
    var total = 0.0
    for t in tasks {
        guard let text = readText("/proc/\(pid)/task/\(t)/schedstat"), let ns = Double(text.split(separator: " ").first ?? "") else { continue }
        total += ns / 1e9
    }
    return total
}

/// CPU time the calling thread has run, in seconds (CLOCK_THREAD_CPUTIME_ID).
func threadCPUSeconds() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

/// The /proc state letter of a process, nil when gone.
func processState(_ pid: Int32) -> Character? {
    guard let text = readText("/proc/\(pid)/stat"), let close = text.lastIndex(of: ")") else { return nil }
    return text[text.index(close, offsetBy: 2)...].first
}

/// Number of open descriptors and the soft RLIMIT_NOFILE of a process.
func descriptorUsage(_ pid: Int32) -> (open: Int, limit: Int?) {
    let open = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count) ?? -1
    var limit: Int?
    if let text = readText("/proc/\(pid)/limits") {
        for line in text.split(separator: "\n") where line.hasPrefix("Max open files") {
            let parts = line.split(separator: " ", omittingEmptySubsequences: true)
            if parts.count >= 4 { limit = Int(parts[3]) }
        }
    }
    return (open, limit)
}

/// Writes exactly these bytes to a blocking descriptor.
func writeAll(_ fd: Int32, _ bytes: [UInt8]) throws {
    let rc = bytes.withUnsafeBytes { bench_write_full(fd, $0.baseAddress, $0.count) }
    if rc != 0 { throw BenchError("write: \(String(cString: strerror(-rc)))") }
}

/// Reads exactly `count` bytes from a blocking descriptor.
func readExactly(_ fd: Int32, _ count: Int) throws -> [UInt8] {
    var buffer = [UInt8](repeating: 0, count: count)
    let rc = buffer.withUnsafeMutableBytes { bench_read_full(fd, $0.baseAddress, count) }
    if rc != 0 { throw BenchError("read: \(String(cString: strerror(-rc)))") }
    return buffer
}

/// One-byte ping on a request channel: proves the channel reaches a running extension.
func ping(_ fd: Int32) throws {
    var byte = UInt8(ascii: "p")
    guard bench_write_full(fd, &byte, 1) == 0 else { throw BenchError("ping: write failed") }
    guard bench_read_full(fd, &byte, 1) == 0, byte == UInt8(ascii: "P") else { throw BenchError("ping: no pong") }
}

func le32(_ v: UInt32) -> [UInt8] { (0..<4).map { UInt8(truncatingIfNeeded: v >> (8 * UInt32($0))) } }

func u64(_ b: ArraySlice<UInt8>) -> UInt64 {
    var v: UInt64 = 0
    for (i, byte) in b.prefix(8).enumerated() { v |= UInt64(byte) << (8 * UInt64(i)) }
    return v
}

func u32(_ b: ArraySlice<UInt8>) -> UInt32 {
    var v: UInt32 = 0
    for (i, byte) in b.prefix(4).enumerated() { v |= UInt32(byte) << (8 * UInt32(i)) }
    return v
}

/// A NULL-terminated C string array for the lifetime of `body`.
func withCStrings<R>(_ strings: [String], _ body: (UnsafePointer<UnsafeMutablePointer<CChar>?>) -> R) -> R {
    var pointers: [UnsafeMutablePointer<CChar>?] = strings.map { strdup($0) }
    pointers.append(nil)
    defer { for p in pointers { free(p) } }
    return pointers.withUnsafeBufferPointer { body($0.baseAddress!) }
}

/// The environment extensiond gives an extension (see Spawner.environment), for raw spawns.
func extensionEnvironment(id: String) -> [String] {
    var env: [String: String] = ["PATH": "/usr/local/bin:/usr/bin:/bin"]
    for name in ["PATH", "HOME", "LANG", "LC_ALL", "TZ", "XDG_RUNTIME_DIR"] {
        if let v = getenv(name) { env[name] = String(cString: v) }
    }
    env["EXTENSIOND_EXTENSION_ID"] = id
    env["EXTENSIOND_CHANNEL_FD"] = "3"
    return env.keys.sorted().map { "\($0)=\(env[$0]!)" }
}

/// Spawns `path` as extensiond does, with `channel` at fd 3. Returns the pid.
func spawnLikeTheDaemon(_ path: String, arguments: [String] = [], environment: [String], channel: Int32, quiet: Bool = false) throws -> Int32 {
    let directory = URL(fileURLWithPath: path).deletingLastPathComponent().path
    let pid = withCStrings([path] + arguments) { argv in
        withCStrings(environment) { envp in
            bench_spawn(path, argv, envp, directory, channel, quiet ? 1 : 0)
        }
    }
    if pid < 0 { throw BenchError("spawn \(path): \(String(cString: strerror(-pid)))") }
    return pid
}
