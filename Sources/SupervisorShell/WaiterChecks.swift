import ExtensionTransport
import Logging
import SupervisorKernel

/// The check for processes blocked on the locks of suspended groups (`/proc/locks` `->`
/// lines), every `checkSeconds` while any group needs one: a group holding a lock on a file
/// another process has open, where the opener may be waiting. Every group checked shares one
/// read of /proc/locks per check, made and parsed on another thread (on the loop's when none
/// can start), so the loop never waits for it and a system with many locks costs one read a
/// second, however many groups are checked. No timer runs while no group is checked. Owned by
/// `LockWatch`, on the loop's thread.
final class WaiterChecks {
    /// How often the groups are checked.
    static let checkSeconds = 1.0

    /// One group checked: its locks (while their watch holds: `SuspendedLocks.stops` still
    /// `stops`), and what contention is reported against.
    private struct Checked {
        let locks: SuspendedLocks
        let stops: UInt64
        let extensionID: String
        let generation: UInt64
        var holds: Bool { locks.stops == stops }
    }

    private let kernel: any Kernel
    private let logger: Logger
    /// Called with the group, its generation and what blocks, for each group found holding a
    /// lock another process waits for (its watch has stopped by then).
    private let contended: (_ extensionID: String, _ generation: UInt64, _ detail: String) -> Void
    private var checked: [Checked] = []
    /// The next check, armed while a group is checked and no read is under way.
    private var timer: (any Cancellable)?
    /// Whether a check's read of /proc/locks is under way on another thread.
    private var reading = false
    /// Whether a read in the background failed to start once (said once in the log).
    private var backgroundFailed = false

    init(kernel: any Kernel, logger: Logger, contended: @escaping (_ extensionID: String, _ generation: UInt64, _ detail: String) -> Void) {
        self.kernel = kernel
        self.logger = logger
        self.contended = contended
    }

    /// Whether `locks` are checked (for a hand-over: the next program checks them too).
    func isChecking(_ locks: SuspendedLocks) -> Bool { checked.contains { $0.locks === locks && $0.holds } }

    /// Checks `p`'s locks from the next check on, until their watch stops (`SuspendedLocks.stop`)
    /// or a waiter is found. Checking them already, nothing changes.
    func add(_ p: SupervisedProcess) {
        checked.removeAll { !$0.holds }
        guard !isChecking(p.locks) else { return }
        checked.append(Checked(locks: p.locks, stops: p.locks.stops, extensionID: p.extensionID, generation: p.generation))
        arm()
    }

    private func arm() {
        guard timer == nil, !reading else { return }
        switch kernel.addTimer(at: kernel.now().adding(seconds: Self.checkSeconds), { [unowned self] in due() }) {
        case .success(let t): timer = t
        case .failure(let error):
            logger.error("cannot arm the check of suspended extensions' locks for waiters (\(error)): it is not made")
        }
    }

    /// The check is due: /proc/locks is read for every group still checked.
    private func due() {
        timer = nil
        checked.removeAll { !$0.holds }
        guard !checked.isEmpty else { return }
        reading = true
        let error = kernel.inBackground({ files in FileLocks.current(files) }) { [unowned self] read in arrived(read) }
        guard let error else { return }
        if !backgroundFailed {
            backgroundFailed = true
            logger.warning("cannot read /proc/locks on another thread for the lock watch (\(error)): the loop reads it")
        }
        arrived(FileLocks.current(kernel))
    }

    /// A check's read of /proc/locks: contention for each group still checked whose member holds
    /// a lock another process waits for; the next check for the others.
    private func arrived(_ read: Result<[FileLocks.Lock], SystemError>) {
        reading = false
        switch read {
        case .failure(let e): logger.warning("cannot read /proc/locks for the lock watch: \(e); reading it again later")
        case .success(let current):
            for group in checked where group.holds {
                guard let first = current.first(where: { group.locks.holders.contains($0.holder) && $0.waiters > 0 }) else { continue }
                group.locks.stop()
                let detail = "pid \(first.holder) holds a \(first.kind) lock on \(first.file) that \(first.waiters) process(es) wait for"
                contended(group.extensionID, group.generation, detail)
            }
        }
        checked.removeAll { !$0.holds }
        if !checked.isEmpty { arm() }
    }
}
