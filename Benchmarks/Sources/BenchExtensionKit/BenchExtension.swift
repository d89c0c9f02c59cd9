// The benchmark extension: a real extension process linking ExtensionRuntime. Each request
// channel (a blocking stream socket from the host) takes one-byte commands:
//
//   'p'                     -> 'P' (one-byte ping: proves the channel works end to end)
//   'a' n:u32 hold:u32 gap:u32
//                           -> n sequential performExpiringActivity calls, the next one `gap` µs
//                              after the previous assertion was released, each block holding its
//                              assertion `hold` µs; answers n records of (called, blockRunning,
//                              blockReturning, denied) as 4 × u64 LE, CLOCK_MONOTONIC nanoseconds
//                              (the clock extensiond stamps its events with)
//   't' n:u32 chains:u32    -> n acquire+release pairs as `chains` concurrent chains: each chain
//                              asks for its next assertion as soon as the previous one is released
//                              (performExpiringActivity's onFinished); answers
//                              (start ns u64, end ns u64, completed u32, denied u32)
//
//   'd' len:u32 url path    -> a background download (BackgroundSession of the app's group
//                              group.org.example.bench) of `url` to `path` in its container, both
//                              UTF-8 (url, a NUL, path: `len` bytes); answers (elapsed ns u64 from
//                              the create to the completion event, status u32, task u32), status 0
//                              when it failed or was refused
//
// Launched by the bench without a supervisor (raw baselines), the bench plays the daemon's part
// on fd 3 (ready, deliver), so the very same binary and code path serve both measurements.
import Dispatch
import ExtensionProtocol
import ExtensionRuntime
import Foundation
import Synchronization

@inline(__always) func monotonicNanoseconds() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}

/// Written by the activity block, read by the driver after the semaphore (happens-before).
final class ActivityTimes: @unchecked Sendable {
    var running: UInt64 = 0
    var returning: UInt64 = 0
    var denied = false
}

struct Channel {
    let fd: Int32

    func read(_ count: Int) -> [UInt8]? {
        var buffer = [UInt8](repeating: 0, count: count)
        var done = 0
        while done < count {
            let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress! + done, count - done) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return nil }
            done += n
        }
        return buffer
    }

    func u32() -> UInt32? {
        guard let b = read(4) else { return nil }
        return UInt32(b[0]) | UInt32(b[1]) << 8 | UInt32(b[2]) << 16 | UInt32(b[3]) << 24
    }

    @discardableResult
    func write(_ bytes: [UInt8]) -> Bool {
        var done = 0
        while done < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress! + done, bytes.count - done, Int32(MSG_NOSIGNAL)) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return false }
            done += n
        }
        return true
    }
}

func append64(_ v: UInt64, to out: inout [UInt8]) {
    for s in stride(from: 0, to: 64, by: 8) { out.append(UInt8(truncatingIfNeeded: v >> UInt64(s))) }
}

func append32(_ v: UInt32, to out: inout [UInt8]) {
    for s in stride(from: 0, to: 32, by: 8) { out.append(UInt8(truncatingIfNeeded: v >> UInt32(s))) }
}

/// Sequential assertions through `ProcessInfo.performExpiringActivity`. The next one is asked
/// for `gap` µs after the previous block returned (its release is sent right after the block
/// returns, long before the gap ends).
func sequentialActivities(_ n: Int, hold: UInt32, gap: UInt32) -> [UInt8] {
    var out: [UInt8] = []
    out.reserveCapacity(n * 32)
    let done = DispatchSemaphore(value: 0)
    for _ in 0..<n {
        let times = ActivityTimes()
        let called = monotonicNanoseconds()
        ProcessInfo.processInfo.performExpiringActivity(withReason: "bench") { expired in
            if expired {
                times.denied = true
                times.running = monotonicNanoseconds()
                times.returning = times.running
                done.signal()
                return
            }
            times.running = monotonicNanoseconds()
            if hold > 0 { usleep(hold) }  // the work done under the assertion
            times.returning = monotonicNanoseconds()
            done.signal()
        }
        done.wait()
        append64(called, to: &out)
        append64(times.running, to: &out)
        append64(times.returning, to: &out)
        append64(times.denied ? 1 : 0, to: &out)
        if gap > 0 { usleep(gap) }
    }
    return out
}

/// An activity whose `onFinished` runs right after the release was sent: the throughput chains
/// start their next activity from it.
func performActivity(times: ActivityTimes, hold: UInt32, released: @escaping @Sendable () -> Void) {
    ProcessInfo.processInfo.performExpiringActivity(withReason: "bench", using: { expired in
        if expired {
            times.denied = true
            times.running = monotonicNanoseconds()
            times.returning = times.running
            return
        }
        times.running = monotonicNanoseconds()
        if hold > 0 { usleep(hold) }  // the work done under the assertion
        times.returning = monotonicNanoseconds()
    }, onFinished: released)
}

/// Throughput: `n` pairs as `chains` chains, each asking for its next assertion from the
/// previous one's release (no thread of the bench in between).
func throughput(_ n: Int, chains: Int) -> [UInt8] {
    let finished = DispatchSemaphore(value: 0)
    let started = Atomic<Int>(0)
    let completed = Atomic<Int>(0)
    let denied = Atomic<Int>(0)
    let start = monotonicNanoseconds()
    @Sendable func next() {
        guard started.add(1, ordering: .relaxed).newValue <= n else { return }
        let times = ActivityTimes()
        performActivity(times: times, hold: 0) {
            if times.denied { denied.add(1, ordering: .relaxed) }
            if completed.add(1, ordering: .acquiringAndReleasing).newValue == n { finished.signal() }
            next()
        }
    }
    for _ in 0..<min(chains, n) { next() }
    finished.wait()
    let end = monotonicNanoseconds()
    var out: [UInt8] = []
    append64(start, to: &out)
    append64(end, to: &out)
    append32(UInt32(n), to: &out)
    append32(UInt32(denied.load(ordering: .relaxed)), to: &out)
    return out
}

/// Keychain.copyMatching `n` times (an item of the extension's app group, added first): each
/// round trip in nanoseconds, as n × u64; an empty answer when the keychain fails.
func secretCopies(_ n: Int) -> [UInt8] {
    let item = SecretAttributes(itemClass: .genericPassword, service: "bench", account: "copy", label: "bench")
    do {
        try Keychain.add(item, data: Array("token-0123456789abcdef0123456789".utf8))
    } catch {
        if error != .duplicateItem { return [] }
    }
    var out: [UInt8] = []
    for _ in 0..<n {
        let t0 = monotonicNanoseconds()
        guard (try? Keychain.copyMatching(item)) != nil else { return [] }
        append64(monotonicNanoseconds() - t0, to: &out)
    }
    return out
}

/// One background download, from its creation to its completion event.
func download(_ url: String, to path: String) -> [UInt8] {
    let done = DispatchSemaphore(value: 0)
    let status = Mutex<(UInt32, UInt64)>((0, 0))
    let session = BackgroundSession(identifier: "bench", group: "group.org.example.bench") { e in
        guard e.kind != .progress else { return }
        status.withLock { $0 = (e.kind == .completed ? UInt32(e.status) : 0, e.task) }
        done.signal()
    }
    var out: [UInt8] = []
    let t0 = monotonicNanoseconds()
    guard let task = try? session.download(url, to: path) else {
        append64(0, to: &out)
        append32(0, to: &out)
        append32(0, to: &out)
        return out
    }
    while true {
        done.wait()
        if status.withLock({ $0.1 }) == task { break }
    }
    append64(monotonicNanoseconds() - t0, to: &out)
    append32(status.withLock { $0.0 }, to: &out)
    append32(UInt32(truncatingIfNeeded: task), to: &out)
    return out
}

func serve(_ channel: Channel) {
    while let command = channel.read(1) {
        switch command[0] {
        case UInt8(ascii: "p"):
            guard channel.write([UInt8(ascii: "P")]) else { return }
        case UInt8(ascii: "a"):
            guard let n = channel.u32(), let hold = channel.u32(), let gap = channel.u32() else { return }
            guard channel.write(sequentialActivities(Int(n), hold: hold, gap: gap)) else { return }
        case UInt8(ascii: "k"):
            guard let n = channel.u32() else { return }
            let answer = secretCopies(Int(n))
            var head: [UInt8] = []
            append32(UInt32(answer.count / 8), to: &head)
            guard channel.write(head + answer) else { return }
        case UInt8(ascii: "d"):
            guard let n = channel.u32(), let bytes = channel.read(Int(n)), let zero = bytes.firstIndex(of: 0) else { return }
            let url = String(decoding: bytes[..<zero], as: UTF8.self), path = String(decoding: bytes[(zero + 1)...], as: UTF8.self)
            guard channel.write(download(url, to: path)) else { return }
        case UInt8(ascii: "t"):
            guard let n = channel.u32(), let chains = channel.u32() else { return }
            guard channel.write(throughput(Int(n), chains: max(1, Int(chains)))) else { return }
        default:
            return
        }
    }
}

public func runBenchExtension() -> Never {
    ExtensionMain.run { request in
        serve(Channel(fd: request.channel.fd))
        request.channel.close()
    }
}
