import ExtensionTransport
import SupervisorKernel

/// File locks from /proc/locks: which process holds which lock, and how many processes wait
/// for it. Used to notice a suspended extension that blocks others on a lock (0xdead10cc).
/// OFD locks (owner pid -1) cannot be attributed to a process and are skipped.
enum FileLocks {
    struct Lock: Equatable, Sendable {
        /// The lock's number in /proc/locks (waiters repeat it after "->").
        var number: Int
        var holder: Int32
        var kind: String
        var file: String
        var waiters: Int
    }

    /// Every held lock, with its waiter count, or why /proc/locks cannot be read (`files` may
    /// be the loop's kernel or another thread's reads).
    static func current(_ files: any FileReads) -> Result<[Lock], SystemError> {
        files.read("/proc/locks").map { parse(String(decoding: $0, as: UTF8.self)) }
    }

    /// One lock line of /proc/locks or of a `lock:` line in /proc/PID/fdinfo/FD (which has the
    /// same format): `N: [->] KIND ADVISORY TYPE PID MAJ:MIN:INODE START END`.
    struct Entry: Equatable, Sendable {
        var number: Int
        /// A process blocked waiting for lock `number` (`->`).
        var waiting: Bool
        /// `POSIX`, `FLOCK`, `OFDLCK`, `LEASE`, ...
        var kind: String
        /// `WRITE` (exclusive); `READ` is shared.
        var exclusive: Bool
        /// The holder (the taker, for flock); -1 for OFD locks.
        var pid: Int32
        /// `MAJ:MIN:INODE` of the locked file.
        var file: String
        var start: String
        var end: String

        init?(_ line: Substring) {
            var fields = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
            guard fields.count >= 7, fields[0].hasSuffix(":"), let number = Int(fields[0].dropLast()) else { return nil }
            waiting = fields[1] == "->"
            if waiting { fields.remove(at: 1) }
            guard fields.count >= 8, let pid = Int32(fields[4]) else { return nil }
            self.number = number
            kind = String(fields[1])
            exclusive = fields[3] == "WRITE"
            self.pid = pid
            file = String(fields[5])
            start = String(fields[6])
            end = String(fields[7])
        }

        /// The same lock seen through another descriptor or in /proc/locks.
        var key: String { "\(kind) \(exclusive ? "WRITE" : "READ") \(file) \(start) \(end)" }
    }

    /// Every line of /proc/locks (held locks and waiters).
    static func entries(_ text: String) -> [Entry] {
        text.split(separator: "\n").compactMap { Entry($0) }
    }

    /// The locks held through one descriptor: the `lock:` lines of /proc/PID/fdinfo/FD.
    static func descriptorLocks(_ fdinfo: String) -> [Entry] {
        fdinfo.split(separator: "\n").compactMap { line in
            guard line.hasPrefix("lock:") else { return nil }
            return Entry(line.dropFirst(5)).flatMap { $0.waiting ? nil : $0 }
        }
    }

    /// Parses /proc/locks text: `N: FLOCK ADVISORY WRITE PID MAJ:MIN:INODE START END`, and
    /// `N: -> FLOCK …` lines for processes blocked on lock N.
    static func parse(_ text: String) -> [Lock] {
        var locks: [Int: Lock] = [:]
        var waiters: [Int: Int] = [:]
        for line in text.split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard fields.count >= 6, let number = Int(fields[0].dropLast()) else { continue }
            if fields[1] == "->" {
                waiters[number, default: 0] += 1
                continue
            }
            guard let pid = Int32(fields[4]), pid > 0 else { continue }
            locks[number] = Lock(number: number, holder: pid, kind: String(fields[1]), file: String(fields[5]), waiters: 0)
        }
        return locks.keys.sorted().map { n in
            var lock = locks[n]!
            lock.waiters = waiters[n] ?? 0
            return lock
        }
    }
}
