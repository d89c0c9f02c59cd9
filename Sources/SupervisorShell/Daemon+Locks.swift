import ExtensionProtocol
import ExtensionTransport
import Logging
import SupervisorCore
import SupervisorKernel

/// Suspended groups that hold a file lock another process waits for (0xdead10cc).
extension Daemon {
    /// How often a suspended group is checked for waiters once another process has opened a
    /// file it holds a lock on. Groups that hold no lock when they stop are never checked: a
    /// stopped process cannot take one.
    static let lockCheckSeconds = 1.0

    /// The entries of /proc/locks, read and parsed at most once per loop iteration (a burst of
    /// stops confirmed together shares one read and one parse).
    func currentLocks() -> [FileLocks.Entry] {
        let iteration = kernel.iterationTime()
        if let snapshot = locksSnapshot, snapshot.at == iteration { return snapshot.entries }
        let text: String
        switch procLocks.map({ kernel.readToEnd(fd: $0) }) ?? kernel.read("/proc/locks") {
        case .success(let bytes): text = String(decoding: bytes, as: UTF8.self)
        case .failure(let error):
            logger.warning("cannot read /proc/locks (\(error)): locks held at suspension go unnoticed")
            text = ""
        }
        let entries = FileLocks.entries(text)
        locksSnapshot = (iteration, entries)
        return entries
    }

    /// Every lock the stopped group `members` of `p` holds, for the core's decision; the
    /// group's locked files are then watched while it stays suspended (the second line).
    func locksAtStop(_ p: SupervisedProcess, members: [Int32]) -> [HeldLock] {
        let survey = LockSurvey(kernel: kernel, ownPID: kernel.processID, containersRoot: containers.resolvedRoot)
        let found = survey.locks(heldBy: members, procLocks: currentLocks())
        watchLocks(p, found)
        return found.map(\.lock)
    }

    /// The second line, for a group suspended with locks that did not block anyone at the
    /// stop. No timer runs while nobody else touches the locked files: each file is watched
    /// for opens (inotify). Another process opening a file the group holds an exclusive lock
    /// on is contention by the rule of docs/reliability.md; an open of a file with a shared
    /// lock starts the check for blocked waiters (`armLockWatch`), since the opener may wait
    /// for an exclusive lock. A group holding a lock on a file already open elsewhere is
    /// checked from the start.
    func watchLocks(_ p: SupervisedProcess, _ found: [LockSurvey.Found]) {
        p.stopLockWatch()
        guard !found.isEmpty else { return }
        p.lockHolders = Set(found.map(\.lock.pid))
        if found.contains(where: \.lock.openElsewhere) { return armLockWatch(p) }
        var links: [String] = []
        var locksByLink: [String: [HeldLock]] = [:]
        for f in found {
            if locksByLink[f.link] == nil { links.append(f.link) }
            locksByLink[f.link, default: []].append(f.lock)
        }
        switch kernel.watchOpens(links) {
        case .success(let (fd, watches)):
            for (link, wd) in zip(links, watches) {
                guard let wd else { continue }
                p.lockedFiles[wd, default: []] += locksByLink[link] ?? []
            }
            switch kernel.watch(fd: fd, events: Poll.input, { [unowned self, unowned p] _ in lockedFileOpened(p) }) {
            case .success(let source): p.openWatch = OpenWatch(fd: fd, source: source, kernel: kernel)
            case .failure(let error):
                kernel.close(fd)
                logger.warning("cannot watch the locked files of \(p.extensionID) (\(error)): checking them for waiters every \(Daemon.lockCheckSeconds)s instead")
                armLockWatch(p)
            }
        case .failure(let error):
            logger.warning("cannot watch the locked files of \(p.extensionID) (\(error)): checking them for waiters every \(Daemon.lockCheckSeconds)s instead")
            armLockWatch(p)
        }
    }

    /// A process opened a file the suspended group holds a lock on (a stopped or frozen
    /// process opens nothing, and the daemon only reads `/proc` links, which does not count).
    func lockedFileOpened(_ p: SupervisedProcess) {
        guard let watch = p.openWatch else { return }
        let opened = kernel.readOpenEvents(fd: watch.fd).flatMap { p.lockedFiles[$0] ?? [] }
        guard !opened.isEmpty else { return }
        if let exclusive = opened.first(where: \.exclusive) {
            p.stopLockWatch()
            let detail = "\(exclusive.summary), and another process opened the file while it was suspended"
            return post(.lockContention(extensionID: p.extensionID, generation: p.generation, detail: detail))
        }
        if p.lockWatch == nil { armLockWatch(p) }
    }

    func armLockWatch(_ p: SupervisedProcess) {
        let armed = kernel.addTimer(at: kernel.now().adding(seconds: Daemon.lockCheckSeconds)) { [unowned self, unowned p] in
            p.lockWatch = nil
            let contended = FileLocks.current(kernel).filter { p.lockHolders.contains($0.holder) && $0.waiters > 0 }
            guard let first = contended.first else { return armLockWatch(p) }
            let detail = "pid \(first.holder) holds a \(first.kind) lock on \(first.file) that \(first.waiters) process(es) wait for"
            p.stopLockWatch()
            post(.lockContention(extensionID: p.extensionID, generation: p.generation, detail: detail))
        }
        switch armed {
        case .success(let timer): p.lockWatch = timer
        case .failure(let error): logger.error("cannot arm the lock watch of \(p.extensionID) (\(error)): its locks are not watched")
        }
    }
}

/// An inotify descriptor and its event source; cancelling it removes the source and closes
/// the descriptor (and with it every watch).
final class OpenWatch: Cancellable {
    let fd: Int32
    private var source: (any Cancellable)?
    private let kernel: any Kernel

    init(fd: Int32, source: any Cancellable, kernel: any Kernel) {
        self.fd = fd
        self.source = source
        self.kernel = kernel
    }

    func cancel() {
        guard let source else { return }
        source.cancel()
        self.source = nil
        kernel.close(fd)
    }
}
