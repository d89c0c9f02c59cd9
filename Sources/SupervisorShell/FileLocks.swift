#if canImport(Glibc)
import Glibc
#endif

/// File locks from /proc/locks: which process holds which lock, and how many processes wait
/// for it. Used to notice a suspended extension that blocks others on a lock (0xdead10cc).
/// OFD locks (owner pid -1) cannot be attributed to a process and are skipped.
enum FileLocks {
    struct Lock: Equatable {
        /// The lock's number in /proc/locks (waiters repeat it after "->").
        var number: Int
        var holder: Int32
        var kind: String
        var file: String
        var waiters: Int
    }

    /// Every held lock, with its waiter count.
    static func current() -> [Lock] {
        guard let bytes = try? Daemon.readFile("/proc/locks") else { return [] }
        return parse(String(decoding: bytes, as: UTF8.self))
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
