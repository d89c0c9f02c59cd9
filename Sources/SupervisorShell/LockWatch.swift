import ExtensionProtocol
import ExtensionTransport
import Logging
import SupervisorCore
import SupervisorKernel

/// Suspended groups that hold a file lock another process waits for (0xdead10cc): the locks
/// each group holds when its stop is confirmed (for the core's decision), then, while it
/// stays suspended, the watch that reports contention. Owned by the daemon's loop.
final class LockWatch {
    let kernel: any Kernel
    let logger: Logger
    /// Shared containers' root, resolved: a lock on a file under it names its container.
    private let containersRoot: () -> String
    /// Where contention is posted: the daemon, which owns this watch and so outlives it
    /// (`unowned`: see `ControlServer.delegate`).
    private(set) unowned var sink: (any EventSink)?

    /// Posts contention to `sink` from now on.
    func attach(_ sink: any EventSink) { self.sink = sink }
    /// /proc/locks as read and parsed during the current loop iteration (a burst of stops reads
    /// and parses it once).
    private var snapshot: (at: Instant, entries: [FileLocks.Entry])?
    /// The surveys waiting for the read of /proc/locks under way (`survey`).
    private var waiting: [(members: [Int32], done: (LockSurvey.Outcome) -> Void)] = []
    /// Whether a read in the background failed to start once (said once in the log).
    private var backgroundFailed = false
    /// A survey waiting for the loop's next turn to start on another thread.
    private struct QueuedSurvey {
        var members: [Int32]
        var entries: [FileLocks.Entry]
        var done: (LockSurvey.Outcome) -> Void
    }
    /// The surveys queued until the loop's next turn (`startSurveys` runs them then).
    private var queuedSurveys: [QueuedSurvey] = []
    /// The timer that starts the queued surveys on the loop's next turn (armed while any is
    /// queued).
    private var surveysStart: (any Cancellable)?
    /// The surveys running on threads of their own.
    private var surveysUnderWay = 0
    /// Whether a survey in the background failed to start once (said once in the log).
    private var surveyFailed = false
    /// How many flocks of other processes a survey checks on the loop's thread (whether their
    /// taker lives: one `stat` each) before it leaves the rest of the survey to its thread.
    static let aliveChecksOnLoop = 32
    /// When /proc/locks was last read. A read soon after another does not wait: the kernel
    /// keeps its file-lock semaphore ready for writers for a grace period after each.
    private var lastRead: Instant?
    /// The size of the last read of /proc/locks, in bytes (0 after a failed read).
    private var lastReadBytes = 0
    /// The largest /proc/locks read and parsed on the loop's thread (about 450 locks): a larger
    /// one goes to another thread even soon after the last read, since the kernel makes its
    /// text at each read and parsing it takes time in proportion.
    static let warmBytes = 32 * 1024
    /// How soon after a read another is done on the loop's thread rather than another thread:
    /// a read this close to the last does not wait for an RCU grace period, one much later may
    /// (docs/performance.md, "A dismissal after a quiet spell", has the figures).
    static let warmSeconds = 0.01
    /// /proc/locks, kept open and read from offset 0 at each stop confirmation (no path lookup
    /// per read); nil when it could not be opened, and it is then read by path.
    private let procLocks: Int32?

    /// The check of suspended groups for processes waiting on their locks. Groups that hold no
    /// lock when they stop are never checked: a stopped process cannot take one.
    private lazy var waiterChecks = WaiterChecks(kernel: kernel, logger: logger) { [unowned self] extensionID, generation, detail in
        sink?.post(.lockContention(extensionID: extensionID, generation: generation, detail: detail))
    }

    init(kernel: any Kernel, logger: Logger, containersRoot: @escaping () -> String) {
        self.kernel = kernel
        self.logger = logger
        self.containersRoot = containersRoot
        switch kernel.open("/proc/locks", directory: false) {
        case .success(let fd): procLocks = fd
        case .failure(let e):
            procLocks = nil
            logger.notice("cannot keep /proc/locks open (\(e)): it is opened at each stop confirmation instead")
        }
    }

    deinit {
        surveysStart?.cancel()
        // A read under way on another thread still uses the descriptor: it is left open then
        // (the daemon is ending), never closed under the thread or reused while it reads.
        if let procLocks, waiting.isEmpty { kernel.close(procLocks) }
    }

    /// The entries of /proc/locks, read and parsed at most once per loop iteration (a burst of
    /// stops confirmed together shares one read and one parse).
    private func currentLocks() -> [FileLocks.Entry] {
        if let snapshot, snapshot.at == kernel.iterationTime() { return snapshot.entries }
        return keep(Self.read(procLocks, with: kernel))
    }

    /// /proc/locks read through `procLocks` (kept open; by path when nil) with `files`, on the
    /// loop's thread or another, and parsed: its entries and its size in bytes.
    private static func read(_ procLocks: Int32?, with files: any FileReads) -> Result<ProcLocks, SystemError> {
        (procLocks.map { files.readToEnd(fd: $0) } ?? files.read("/proc/locks")).map { bytes in
            ProcLocks(entries: FileLocks.entries(String(decoding: bytes, as: UTF8.self)), bytes: bytes.count)
        }
    }

    /// Keeps a read of /proc/locks for the rest of the loop iteration.
    private func keep(_ read: Result<ProcLocks, SystemError>) -> [FileLocks.Entry] {
        let entries: [FileLocks.Entry]
        switch read {
        case .success(let locks):
            entries = locks.entries
            lastReadBytes = locks.bytes
        case .failure(let error):
            logger.warning("cannot read /proc/locks (\(error)): locks held at suspension go unnoticed")
            entries = []
            lastReadBytes = 0
        }
        snapshot = (kernel.iterationTime(), entries)
        lastRead = kernel.now()
        return entries
    }

    /// Whether a read of /proc/locks or a survey of descriptors is under way, with a stop
    /// waiting for it.
    var isSurveying: Bool { !waiting.isEmpty || !queuedSurveys.isEmpty || surveysUnderWay > 0 }

    /// The locks the stopped group `members` holds, to `done`: at once when /proc/locks was
    /// read in this loop iteration, or is read again within `warmSeconds` of the last read
    /// and that read was small (under `warmBytes`), else when a read and parse on another
    /// thread returns. A read after a quiet spell waits for an RCU grace period in the kernel
    /// (its file-lock semaphore is taken for writing), and a large file (many locks on the
    /// system) takes long to make and to parse: the loop goes on serving meanwhile, and the
    /// stops that arrive until it returns share it. A group that may hold a lock is then
    /// surveyed on another thread too (`surveyed`), so `done` may run in a later iteration.
    func survey(members: [Int32], _ done: @escaping (LockSurvey.Outcome) -> Void) {
        if waiting.isEmpty, let lastRead, lastReadBytes < Self.warmBytes, kernel.now().seconds(since: lastRead) < Self.warmSeconds {
            return surveyed(members, currentLocks(), done)
        }
        if let snapshot, snapshot.at == kernel.iterationTime() { return surveyed(members, snapshot.entries, done) }
        waiting.append((members, done))
        guard waiting.count == 1 else { return }
        let procLocks = self.procLocks
        guard let error = kernel.inBackground({ files in Self.read(procLocks, with: files) }, { [unowned self] read in arrived(read) }) else { return }
        if !backgroundFailed {
            backgroundFailed = true
            logger.warning("cannot read /proc/locks on another thread (\(error)): the loop waits for each read")
        }
        arrived(Self.read(procLocks, with: kernel))
    }

    /// The read of /proc/locks the waiting surveys needed.
    private func arrived(_ read: Result<ProcLocks, SystemError>) {
        let entries = keep(read)
        let surveys = waiting
        waiting = []
        let run = { for s in surveys { self.surveyed(s.members, entries, s.done) } }
        if let sink { sink.batch(run) } else { run() }
    }

    /// Surveys the locks of the stopped group `members` against /proc/locks (`entries`), to
    /// `done`: at once when /proc/locks shows no lock they could hold (nothing else is read),
    /// else from a thread of its own, which reads their descriptors and, for an exclusive
    /// lock, every process's, while the loop goes on serving. However many processes and
    /// descriptors an extension has, its survey never holds the loop. The surveys queued until
    /// the loop's next turn share one thread, started then (`startSurveys`, from a timer due
    /// at once): a burst of stops confirmed together (extensions with a SQLite WAL database
    /// open always hold a shared lock) costs one thread, not one each.
    private func surveyed(_ members: [Int32], _ entries: [FileLocks.Entry], _ done: @escaping (LockSurvey.Outcome) -> Void) {
        let onLoop = LockSurvey(files: kernel, ownPID: kernel.processID, containersRoot: containersRoot())
        if onLoop.mayHoldLocks(Set(members), procLocks: entries, aliveChecks: Self.aliveChecksOnLoop) == false {
            return done(LockSurvey.Outcome(found: [], openWatch: nil))
        }
        queuedSurveys.append(QueuedSurvey(members: members, entries: entries, done: done))
        guard queuedSurveys.count == 1 else { return }
        switch kernel.addTimer(at: kernel.now(), { [unowned self] in startSurveys() }) {
        case .success(let timer): surveysStart = timer
        case .failure(let e):
            logger.warning("cannot arm the start of a lock survey (\(e)): it starts at once")
            startSurveys()
        }
    }

    /// Starts the queued surveys on one thread; their results come back together, and each
    /// `done` runs in the order they were queued, as one batch. When no thread can start, the
    /// loop surveys them itself.
    private func startSurveys() {
        surveysStart = nil
        guard !queuedSurveys.isEmpty else { return }
        let batch = queuedSurveys
        queuedSurveys = []
        let ownPID = kernel.processID
        let root = containersRoot()
        let asked = batch.map { (members: $0.members, entries: $0.entries) }
        let error = kernel.inBackground({ files in
            let survey = LockSurvey(files: files, ownPID: ownPID, containersRoot: root)
            return asked.map { survey.survey(heldBy: $0.members, procLocks: $0.entries, watchingOpens: true) }
        }) { [unowned self] results in
            surveysUnderWay -= batch.count
            let run = { for (queued, found) in zip(batch, results) { queued.done(found) } }
            if let sink { sink.batch(run) } else { run() }
        }
        guard let error else {
            surveysUnderWay += batch.count
            return
        }
        if !surveyFailed {
            surveyFailed = true
            logger.warning("cannot survey locks on another thread (\(error)): the loop reads the descriptors of each stopped extension that may hold a lock")
        }
        let onLoop = LockSurvey(files: kernel, ownPID: ownPID, containersRoot: root)
        for queued in batch { queued.done(onLoop.survey(heldBy: queued.members, procLocks: queued.entries, watchingOpens: true)) }
    }

    /// The watch of `p`'s locks for a hand-over; nil when it holds none.
    func handover(of p: SupervisedProcess) -> HandoverDocument.Locks? {
        let locks = p.locks
        guard !locks.holders.isEmpty else { return nil }
        return HandoverDocument.Locks(
            holders: locks.holders.sorted(), files: locks.files.keys.sorted().map { .init(watch: $0, locks: locks.files[$0] ?? []) },
            openWatch: locks.openWatch?.fd, checking: waiterChecks.isChecking(locks))
    }

    /// Takes over the watch of `p`'s locks a replaced daemon handed over: its inotify
    /// descriptor is watched again (an open made meanwhile is read at once), and the check for
    /// waiters is armed again if it was.
    func restore(_ p: SupervisedProcess, _ handed: HandoverDocument.Locks) {
        let locks = p.locks
        locks.stop()
        locks.holders = Set(handed.holders)
        for f in handed.files { locks.files[f.watch] = f.locks }
        if let fd = handed.openWatch { watchOpens(of: p, fd: fd) }
        if handed.checking { waiterChecks.add(p) }
    }

    /// The second line, for a group suspended with locks that did not block anyone at the
    /// stop. No timer runs while nobody else touches the locked files: each file is watched
    /// for opens (inotify). Another process opening a file the group holds an exclusive lock
    /// on is contention by the rule of docs/reliability.md; an open of a file with a shared
    /// lock starts the check for blocked waiters (`WaiterChecks`), since the opener may wait
    /// for an exclusive lock. A group holding a lock on a file already open elsewhere is
    /// checked from the start.
    ///
    /// Only files on a file system that checks permissions without asking a server are
    /// watched (`LockSurvey.Found.watchable`): an inotify watch checks the permission to read
    /// its file, which a FUSE, network, overlay or unknown file system may ask a server about,
    /// and a server that does not answer would hold the caller. A group with a lock on any other file
    /// is checked for waiters instead, which catches a process blocked on that lock but not a
    /// plain open of the file.
    ///
    /// The watch is the one the survey made (`LockSurvey.Outcome.openWatch`) before it looked
    /// at other processes' descriptors, so that no open falls between the two; when it could
    /// make none, the group is checked for waiters instead.
    func watch(_ p: SupervisedProcess, _ survey: LockSurvey.Outcome) {
        let locks = p.locks
        locks.stop()
        let found = survey.found
        guard !found.isEmpty else { return discard(survey) }
        locks.holders = Set(found.map(\.lock.pid))
        if found.contains(where: \.lock.openElsewhere) {
            discard(survey)
            return waiterChecks.add(p)
        }
        if found.contains(where: { !$0.watchable }) {
            logger.debug(
                "\(p.extensionID) holds a lock on a file that is not on a local file system: its locks are checked for waiters every \(WaiterChecks.checkSeconds)s while it is suspended"
            )
            waiterChecks.add(p)
        }
        var links: [String] = []
        var locksByLink: [String: [HeldLock]] = [:]
        for f in found where f.watchable {
            if locksByLink[f.link] == nil { links.append(f.link) }
            locksByLink[f.link, default: []].append(f.lock)
        }
        guard !links.isEmpty else { return discard(survey) }
        guard let made = survey.openWatch else { return checkInstead(p, survey.openWatchError ?? .notSupported) }
        for (link, wd) in zip(made.links, made.watches) {
            guard let wd else { continue }
            locks.files[wd, default: []] += locksByLink[link] ?? []
        }
        watchOpens(of: p, fd: made.fd)
    }

    /// Closes the watch a survey made, for a survey whose result is not used (its suspension
    /// ended meanwhile) or whose locks are not watched.
    func discard(_ survey: LockSurvey.Outcome) {
        if let made = survey.openWatch { kernel.close(made.fd) }
    }

    /// Watches the inotify descriptor `fd` on `p`'s locked files for opens; when the loop
    /// cannot, closes it and checks for waiters instead.
    private func watchOpens(of p: SupervisedProcess, fd: Int32) {
        switch kernel.watch(fd: fd, events: Poll.input, { [unowned self, unowned p] _ in lockedFileOpened(p) }) {
        case .success(let source): p.locks.openWatch = OpenWatch(fd: fd, source: source, kernel: kernel)
        case .failure(let error):
            kernel.close(fd)
            checkInstead(p, error)
        }
    }

    /// `p`'s locked files cannot be watched (`error`): the check for waiters runs instead.
    private func checkInstead(_ p: SupervisedProcess, _ error: SystemError) {
        logger.warning("cannot watch the locked files of \(p.extensionID) (\(error)): checking them for waiters every \(WaiterChecks.checkSeconds)s instead")
        waiterChecks.add(p)
    }

    /// A process opened a file the suspended group holds a lock on (a stopped or frozen
    /// process opens nothing, and the daemon only reads `/proc` links, which does not count).
    private func lockedFileOpened(_ p: SupervisedProcess) {
        let locks = p.locks
        guard let watch = locks.openWatch else { return }
        let opened = kernel.readOpenEvents(fd: watch.fd).flatMap { locks.files[$0] ?? [] }
        guard !opened.isEmpty else { return }
        if let exclusive = opened.first(where: \.exclusive) {
            locks.stop()
            let detail = "\(exclusive.summary), and another process opened the file while it was suspended"
            sink?.post(.lockContention(extensionID: p.extensionID, generation: p.generation, detail: detail))
            return
        }
        waiterChecks.add(p)
    }
}

/// The locks one suspended group holds and the watch on them; empty while the group runs.
/// Changed only by `LockWatch` (this file) and emptied by `stop`.
final class SuspendedLocks {
    /// Members of the stopped group that hold file locks.
    fileprivate(set) var holders: Set<Int32> = []
    /// The locks the group holds, by the inotify watch descriptor of their file.
    fileprivate(set) var files: [Int32: [HeldLock]] = [:]
    /// The inotify watch for opens of the files the group holds locks on.
    fileprivate(set) var openWatch: OpenWatch?
    /// How many times the watch stopped: a check for waiters (`WaiterChecks`) holds while this
    /// is what it was when the check began.
    private(set) var stops: UInt64 = 0

    /// Stops watching (the group is resumed, signalled or gone), and with it any check for
    /// waiters.
    func stop() {
        stops &+= 1
        openWatch?.cancel()
        openWatch = nil
        holders = []
        files = [:]
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

/// /proc/locks, read and parsed: its entries, and its size in bytes.
struct ProcLocks: Sendable {
    var entries: [FileLocks.Entry]
    var bytes: Int
}
