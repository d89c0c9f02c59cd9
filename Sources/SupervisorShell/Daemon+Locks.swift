import CShims
import ExtensionProtocol
import ExtensionTransport
import Logging
import SupervisorCore
#if canImport(Glibc)
import Glibc
#endif

/// Suspended groups that hold a file lock another process waits for (0xdead10cc).
extension Daemon {
    /// How often a suspended group that holds a file lock is checked for waiters. Groups that
    /// hold no lock when they stop are never checked: a stopped process cannot take one.
    static let lockCheckSeconds = 1.0

    /// /proc/locks, read at most once per loop iteration (a burst of stops confirmed together
    /// shares one read).
    func currentLocks() -> [FileLocks.Lock] {
        let iteration = loop.now()
        if let snapshot = locksSnapshot, snapshot.at == iteration { return snapshot.locks }
        let locks = FileLocks.current()
        locksSnapshot = (iteration, locks)
        return locks
    }

    func watchLocks(_ p: SupervisedProcess, members: Set<Int32>, locks: [FileLocks.Lock]) {
        p.stopLockWatch()
        let held = Set(locks.map(\.holder)).intersection(members)
        guard !held.isEmpty else { return }
        p.lockHolders = held
        armLockWatch(p)
    }

    func armLockWatch(_ p: SupervisedProcess) {
        let armed = kernel.addTimer(at: loop.now().adding(seconds: Daemon.lockCheckSeconds)) { [unowned self, unowned p] in
            p.lockWatch = nil
            let contended = FileLocks.current().filter { p.lockHolders.contains($0.holder) && $0.waiters > 0 }
            guard let first = contended.first else { return armLockWatch(p) }
            let detail = "pid \(first.holder) holds a \(first.kind) lock on \(first.file) that \(first.waiters) process(es) wait for"
            p.lockHolders = []
            post(.lockContention(extensionID: p.extensionID, generation: p.generation, detail: detail))
        }
        switch armed {
        case .success(let timer): p.lockWatch = timer
        case .failure(let error): logger.error("cannot arm the lock watch of \(p.extensionID) (\(error)): its locks are not watched")
        }
    }
}
