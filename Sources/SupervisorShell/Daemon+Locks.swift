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
    func currentLocks() -> String {
        let iteration = loop.now()
        if let snapshot = locksSnapshot, snapshot.at == iteration { return snapshot.text }
        let text: String
        switch kernel.read("/proc/locks") {
        case .success(let bytes): text = String(decoding: bytes, as: UTF8.self)
        case .failure(let error):
            logger.warning("cannot read /proc/locks (\(error)): locks held at suspension go unnoticed")
            text = ""
        }
        locksSnapshot = (iteration, text)
        return text
    }

    /// Every lock the stopped group `members` of `p` holds, for the core's decision, and the
    /// second line: a group holding a lock is checked for blocked waiters while suspended.
    func locksAtStop(_ p: SupervisedProcess, members: [Int32]) -> [HeldLock] {
        let text = currentLocks()
        watchLocks(p, members: Set(members), locks: FileLocks.parse(text))
        return LockSurvey(kernel: kernel, ownPID: getpid()).locks(heldBy: members, procLocks: FileLocks.entries(text))
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
            let contended = FileLocks.current(kernel).filter { p.lockHolders.contains($0.holder) && $0.waiters > 0 }
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
