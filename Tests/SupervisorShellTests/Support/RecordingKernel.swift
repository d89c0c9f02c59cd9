import ExtensionTransport
import SupervisorCore
import SupervisorKernel

@testable import SupervisorShell

#if canImport(Glibc)
import Glibc
#endif

/// A fake of the kernel interface: it answers from a script (file contents, directory
/// listings, which pidfds report a stop or an exit) and records every call, in order, so a
/// test can check the exact sequence the shell makes. It is also an embedded event loop, in
/// the manner of NIOEmbedded: watches, signals, timers and the deadline are kept with their
/// handlers, and the test fires them (`fire(fd:)`, `raise(_:)`, `advance(to:)`).
final class RecordingKernel: Kernel {
    enum Call: Equatable, CustomStringConvertible {
        case kill(Int32, Int32)
        case openPidfd(Int32)
        case signalPidfd(Int32, Int32)
        case stopReported(pidfd: Int32)
        case exitStatus(pidfd: Int32, reap: Bool)
        case reapIfExited(Int32)
        case read(String)
        case readFD(Int32)
        case inBackground
        case write(String, String)
        case writeFD(Int32, String)
        case openForWriting(String)
        case makeDirectory(String)
        case removeDirectory(String)
        case listDirectory(String)
        case readLink(String)
        case cachedIdentity(String)
        case stat(String)
        case open(String)
        case close(Int32)
        case spawn(String, cgroupFD: Int32?)
        case addTimer(at: Instant)
        case cancelTimer(at: Instant)
        case watch(fd: Int32, events: UInt32)
        case setEvents(fd: Int32, events: UInt32)
        case cancelWatch(fd: Int32)
        case watchSignal(Int32)
        case setDeadline(Instant?)
        case replaceFile(String)
        case removeFile(String)
        case removeTree(String, owner: FileOwner?)
        case measureTree(String)
        case limitTree(String, project: UInt32, limit: UInt64)
        case rename(String, String)
        case outputPipe
        case setGroupDefaultACL(String, UInt32)
        case changeOwner(String, UInt32, UInt32)
        case changeMode(String, UInt32)
        case notify(String)
        case watchOpens([String])
        case readOpenEvents(fd: Int32)
        case memoryFile(String)
        case startChild([String])
        case finishChild(Int32)
        case abandonChild(Int32)
        case execute([String])

        var description: String {
            switch self {
            case let .kill(pid, sig): "kill(\(pid), \(sig))"
            case let .openPidfd(pid): "pidfd_open(\(pid))"
            case .inBackground: "work on another thread"
            case let .signalPidfd(fd, sig): "pidfd_send_signal(\(fd), \(sig))"
            case let .stopReported(fd): "waitid(pidfd \(fd), WSTOPPED)"
            case let .exitStatus(fd, reap): "waitid(pidfd \(fd), WEXITED\(reap ? "" : "|WNOWAIT"))"
            case let .reapIfExited(pid): "waitid(\(pid), WEXITED)"
            case let .read(path): "read(\(path))"
            case let .readFD(fd): "pread(\(fd))"
            case let .write(path, text): "write(\(path), \(text))"
            case let .writeFD(fd, text): "pwrite(\(fd), \(text))"
            case let .openForWriting(path): "open(\(path), O_WRONLY)"
            case let .makeDirectory(path): "mkdir(\(path))"
            case let .removeDirectory(path): "rmdir(\(path))"
            case let .listDirectory(path): "readdir(\(path))"
            case let .readLink(path): "readlink(\(path))"
            case let .cachedIdentity(path): "statx(\(path), AT_STATX_DONT_SYNC)"
            case let .stat(path): "stat(\(path))"
            case let .open(path): "open(\(path))"
            case let .close(fd): "close(\(fd))"
            case let .spawn(path, fd): "clone3(\(path), cgroup fd \(fd.map(String.init) ?? "none"))"
            case let .addTimer(at): "timer(\(at))"
            case let .cancelTimer(at): "cancel timer(\(at))"
            case let .watch(fd, events): "watch(\(fd), \(events))"
            case let .setEvents(fd, events): "set events(\(fd), \(events))"
            case let .cancelWatch(fd): "cancel watch(\(fd))"
            case let .watchSignal(signal): "signalfd(\(signal))"
            case let .setDeadline(at): "deadline(\(at.map { "\($0)" } ?? "off"))"
            case let .replaceFile(path): "replace(\(path))"
            case let .removeFile(path): "unlink(\(path))"
            case let .removeTree(path, owner): "rm -r(\(path)\(owner.map { " as \($0.uid):\($0.gid)" } ?? ""))"
            case let .measureTree(path): "du(\(path))"
            case let .limitTree(path, project, limit): "chattr -R +P -p \(project) \(path); setquota -P \(project) \(limit)"
            case let .rename(path, newPath): "rename(\(path), \(newPath))"
            case .outputPipe: "pipe2(O_CLOEXEC)"
            case let .setGroupDefaultACL(path, gid): "setfacl(\(path), default:g:\(gid):rwx)"
            case let .changeOwner(path, uid, gid): "chown(\(path), \(uid), \(gid))"
            case let .changeMode(path, mode): "chmod(\(path), \(String(mode, radix: 8)))"
            case let .notify(state): "sd_notify(\(state))"
            case let .watchOpens(paths): "inotify IN_OPEN \(paths)"
            case let .readOpenEvents(fd): "read inotify(\(fd))"
            case let .memoryFile(name): "memfd_create(\(name))"
            case let .startChild(argv): "posix_spawn(\(argv.joined(separator: " ")))"
            case let .finishChild(pid): "feed and wait(\(pid))"
            case let .abandonChild(pid): "kill and reap(\(pid))"
            case let .execute(argv): "execve(\(argv.joined(separator: " ")))"
            }
        }
    }

    final class FakeTimer: Cancellable {
        let at: Instant
        let handler: () -> Void
        weak var kernel: RecordingKernel?
        var cancelled = false
        init(at: Instant, handler: @escaping () -> Void, kernel: RecordingKernel) {
            self.at = at
            self.handler = handler
            self.kernel = kernel
        }
        func cancel() {
            guard !cancelled else { return }
            cancelled = true
            kernel?.calls.append(.cancelTimer(at: at))
        }
    }

    final class FakeWatch: Watch {
        let fd: Int32
        var events: UInt32
        let handler: (UInt32) -> Void
        weak var kernel: RecordingKernel?
        var cancelled = false
        init(fd: Int32, events: UInt32, handler: @escaping (UInt32) -> Void, kernel: RecordingKernel) {
            self.fd = fd
            self.events = events
            self.handler = handler
            self.kernel = kernel
        }
        var isPending: Bool { false }
        func setEvents(_ events: UInt32) -> SystemError? {
            kernel?.calls.append(.setEvents(fd: fd, events: events))
            if let errno = kernel?.refusedEventChanges { return SystemError(errno: errno) }
            self.events = events
            return nil
        }
        func cancel() {
            guard !cancelled else { return }
            cancelled = true
            kernel?.calls.append(.cancelWatch(fd: fd))
        }
    }

    final class FakeSource: Cancellable {
        var cancelled = false
        func cancel() { cancelled = true }
    }

    var calls: [Call] = []
    var clock = Instant.seconds(100)
    /// Contents returned by `read(path)`; a missing path fails with ENOENT.
    var files: [String: String] = [:]
    /// Contents returned by `read(fd:)`.
    var descriptors: [Int32: String] = [:]
    var directories: [String: [String]] = [:]
    /// What `status(path)` answers; a missing path fails with ENOENT.
    var statuses: [String: FileStatus] = [:]
    /// Targets returned by `readLink(path)`; a missing path fails with ENOENT.
    var links: [String: String] = [:]
    /// Identities returned by `status(path)` of a `/proc/PID/fd/N` link; a missing path fails with ENOENT.
    var identities: [String: FileIdentity] = [:]
    /// Pidfds whose stop is reported, and exit statuses by pidfd.
    var stopped: Set<Int32> = []
    var exits: [Int32: ExitStatus] = [:]
    var timers: [FakeTimer] = []
    var watches: [FakeWatch] = []
    var signalHandlers: [Int32: (Int32, Int32) -> Void] = [:]
    var deadline: (at: Instant, handler: () -> Void)?
    var nextFD: Int32 = 50
    /// Paths whose writes fail with this errno.
    var failingWrites: [String: Int32] = [:]
    /// The errno with which every watch refuses a change of its events (nil: none refused).
    var refusedEventChanges: Int32?
    /// The pid and pidfd the next spawn returns (each spawn then moves both on by one).
    var nextSpawn: (pid: Int32, pidfd: Int32) = (4242, 7)
    var environmentVariables: [String: String] = [:]
    var exitCode: Int32?
    /// Work started with `inBackground` and not run yet: each runs, with this kernel's reads,
    /// at `finishBackgroundWork`, on the test's thread.
    var backgroundWork: [() -> Void] = []
    /// The descriptor `open` last returned for each path.
    var opened: [String: Int32] = [:]

    func now() -> Instant { clock }
    func iterationTime() -> Instant { clock }
    func wallClock() -> Double { 1_790_000_000 + Double(clock.nanoseconds) / 1e9 }
    var processID: Int32 = 1000
    var userID: UInt32 = 0
    var groupID: UInt32 = 0
    var supplementaryGroups: [UInt32] = []
    let clockTicksPerSecond = 100.0
    let pageSize: Int64 = 4096
    func environment(_ name: String) -> String? { environmentVariables[name] }
    var accounts = AccountDirectory.table(users: [:], groups: [:])

    func kill(_ pid: Int32, _ signal: Int32) -> SystemError? {
        calls.append(.kill(pid, signal))
        return nil
    }

    func openPidfd(_ pid: Int32) -> Result<Int32, SystemError> {
        calls.append(.openPidfd(pid))
        defer { nextFD += 1 }
        return .success(nextFD)
    }

    func signal(pidfd: Int32, _ signal: Int32) -> SystemError? {
        calls.append(.signalPidfd(pidfd, signal))
        return nil
    }

    func stopReported(pidfd: Int32) -> Result<Bool, SystemError> {
        calls.append(.stopReported(pidfd: pidfd))
        return .success(stopped.contains(pidfd))
    }

    func exitStatus(pidfd: Int32, reap: Bool) -> Result<ExitStatus?, SystemError> {
        calls.append(.exitStatus(pidfd: pidfd, reap: reap))
        return .success(exits[pidfd])
    }

    func reapIfExited(_ pid: Int32) -> Bool {
        calls.append(.reapIfExited(pid))
        return false
    }

    func exitedChild() -> Int32? { nil }

    func becomeChildSubreaper() -> Bool { true }

    func prepareSandbox(known: SandboxProbe?) -> (filter: UnsafeRawPointer?, filterError: SystemError?, probe: SandboxProbe) {
        (nil, SystemError(errno: ENOSYS), SandboxProbe(errors: SandboxPart.allCases.map { _ in SystemError(errno: EPERM) }, userNamespace: false))
    }

    func read(_ path: String) -> Result<[UInt8], SystemError> {
        calls.append(.read(path))
        guard let text = files[path] else { return .failure(SystemError(errno: ENOENT)) }
        return .success(Array(text.utf8))
    }

    func inspectFile(_ path: String, limit: Int64) -> Result<(status: FileStatus, contents: [UInt8]?), SystemError> {
        calls.append(.read(path))
        guard let text = files[path] else { return .failure(SystemError("open", errno: ENOENT)) }
        let status =
            statuses[path]
            ?? FileStatus(
                kind: .regular, permissions: 0o644, owner: 0, group: 0, size: Int64(text.utf8.count), identity: FileIdentity(device: 1, inode: 1))
        return .success((status, status.kind == .regular && status.size <= limit ? Array(text.utf8) : nil))
    }

    func isExecutable(_ path: String) -> Bool { statuses[path].map { $0.permissions & 0o111 != 0 } ?? false }

    /// Descriptors whose reads fail with this errno.
    var failingDescriptorReads: [Int32: Int32] = [:]

    func read(fd: Int32) -> Result<[UInt8], SystemError> {
        calls.append(.readFD(fd))
        if let errno = failingDescriptorReads[fd] { return .failure(SystemError(errno: errno)) }
        guard let text = descriptors[fd] else { return .failure(SystemError(errno: EBADF)) }
        return .success(Array(text.utf8))
    }

    func readToEnd(fd: Int32) -> Result<[UInt8], SystemError> { read(fd: fd) }

    /// The CPUs a test says there are (one unless it says otherwise), and the number of jobs
    /// each `concurrently` was given; the jobs run in order, on the test's thread.
    var processorCount = 1
    var concurrentJobs: [Int] = []
    func concurrently(_ jobs: [@Sendable () -> Void]) {
        concurrentJobs.append(jobs.count)
        for job in jobs { job() }
    }

    func inBackground<T: Sendable>(_ work: @escaping @Sendable (any FileReads) -> T, _ done: @escaping (T) -> Void) -> SystemError? {
        calls.append(.inBackground)
        backgroundWork.append { [unowned self] in done(work(self)) }
        return nil
    }

    func write(_ path: String, _ text: String) -> SystemError? {
        calls.append(.write(path, text))
        return failingWrites[path].map { SystemError(errno: $0) }
    }

    func write(fd: Int32, _ text: String) -> SystemError? {
        calls.append(.writeFD(fd, text))
        return nil
    }

    /// The bytes each path was last replaced with (`replaceFile`), kept after its removal.
    var lastReplacement: [String: [UInt8]] = [:]
    /// What `replaceFile` fails with, when set (the file is then not written).
    var replaceFileFailure: SystemError?

    func replaceFile(_ path: String, withParts parts: [[UInt8]], mode: UInt32, durable: Bool) -> SystemError? {
        let bytes = Array(parts.joined())
        calls.append(.replaceFile(path))
        if let replaceFileFailure { return replaceFileFailure }
        files[path] = String(decoding: bytes, as: UTF8.self)
        lastReplacement[path] = bytes
        return nil
    }

    /// The bytes of each memory file made (`memoryFile`), by descriptor; what it fails with,
    /// when set; the descriptor the next one gets.
    var memoryFiles: [Int32: [UInt8]] = [:]
    var memoryFileFailure: SystemError?
    private var nextMemoryFile: Int32 = 900

    func memoryFile(_ name: String, withParts parts: [[UInt8]]) -> Result<Int32, SystemError> {
        calls.append(.memoryFile(name))
        if let memoryFileFailure { return .failure(memoryFileFailure) }
        nextMemoryFile += 1
        memoryFiles[nextMemoryFile] = Array(parts.joined())
        return .success(nextMemoryFile)
    }

    /// With `parentsMustExist`, `makeDirectory` fails with ENOENT where `statuses` has no
    /// directory above the path, as the kernel does.
    var parentsMustExist = false

    func makeDirectory(_ path: String, mode: UInt32) -> SystemError? {
        calls.append(.makeDirectory(path))
        if statuses[path] != nil { return SystemError(errno: EEXIST) }
        if parentsMustExist, let slash = path.lastIndex(of: "/"), slash != path.startIndex, statuses[String(path[..<slash])] == nil {
            return SystemError(errno: ENOENT)
        }
        statuses[path] = FileStatus(kind: .directory, permissions: mode, owner: userID, group: groupID, size: 0, identity: FileIdentity(device: 1, inode: 2))
        return nil
    }

    func removeDirectory(_ path: String) -> SystemError? {
        calls.append(.removeDirectory(path))
        return nil
    }

    func removeFile(_ path: String) -> SystemError? {
        calls.append(.removeFile(path))
        return files.removeValue(forKey: path) == nil ? SystemError(errno: ENOENT) : nil
    }

    func removeTreeInBackground(_ path: String, owner: FileOwner?, _ done: @escaping (SystemError?) -> Void) -> SystemError? {
        calls.append(.removeTree(path, owner: owner))
        backgroundWork.append { done(nil) }
        return nil
    }

    func outputPipe() -> Result<(read: Int32, write: Int32), SystemError> {
        calls.append(.outputPipe)
        defer { nextFD += 2 }
        return .success((nextFD, nextFD + 1))
    }

    /// What `readSome` returns for each descriptor, one result a call, at most `limit` bytes of
    /// it (the rest comes at the next call; then EAGAIN: empty).
    var reads: [Int32: [[UInt8]?]] = [:]

    func readSome(fd: Int32, limit: Int) -> Result<[UInt8]?, SystemError> {
        guard var queue = reads[fd], !queue.isEmpty else { return .success([]) }
        var next = queue.removeFirst()
        if let bytes = next, bytes.count > limit {
            next = Array(bytes.prefix(limit))
            queue.insert(Array(bytes.dropFirst(limit)), at: 0)
        }
        reads[fd] = queue
        return .success(next)
    }

    func rename(_ path: String, to newPath: String) -> SystemError? {
        calls.append(.rename(path, newPath))
        guard let moved = statuses.removeValue(forKey: path) else { return SystemError(errno: ENOENT) }
        statuses[newPath] = moved
        return nil
    }

    func setGroupDefaultACL(_ path: String, group: UInt32) -> SystemError? {
        calls.append(.setGroupDefaultACL(path, group))
        return nil
    }

    func changeOwner(_ path: String, user: UInt32, group: UInt32) -> SystemError? {
        calls.append(.changeOwner(path, user, group))
        return nil
    }

    func changeMode(_ path: String, _ mode: UInt32) -> SystemError? {
        calls.append(.changeMode(path, mode))
        return nil
    }

    func status(_ path: String, followLinks: Bool) -> Result<FileStatus, SystemError> {
        calls.append(.stat(path))
        if let identity = identities[path] {
            return .success(FileStatus(kind: .regular, permissions: 0o644, owner: 0, group: 0, size: 0, identity: identity))
        }
        guard let status = statuses[path] else { return .failure(SystemError(errno: ENOENT)) }
        return .success(status)
    }

    func resolvePath(_ path: String) -> String? { path }

    func listDirectory(_ path: String) -> [String]? {
        calls.append(.listDirectory(path))
        return directories[path]
    }

    func cachedIdentity(_ path: String) -> Result<FileIdentity, SystemError> {
        calls.append(.cachedIdentity(path))
        guard let identity = identities[path] else { return .failure(SystemError(errno: ENOENT)) }
        return .success(identity)
    }

    func readLink(_ path: String) -> Result<String, SystemError> {
        calls.append(.readLink(path))
        guard let target = links[path] else { return .failure(SystemError(errno: ENOENT)) }
        return .success(target)
    }

    func open(_ path: String, directory: Bool) -> Result<Int32, SystemError> {
        calls.append(.open(path))
        nextFD += 1
        opened[path] = nextFD
        return .success(nextFD)
    }

    func checkConstraintsInBackground(_ done: @escaping (Constraints) -> Void) -> SystemError? { .notSupported }
    func openBus(system: Bool, handler: any BusServiceHandler) -> Result<BusService, SystemError> { .failure(.notSupported) }
    func openPartialFile(_ path: String) -> Result<(fd: Int32, size: UInt64), SystemError> { .failure(SystemError(errno: ENOSYS)) }
    func truncate(fd: Int32) -> SystemError? { SystemError(errno: ENOSYS) }
    func openBeneath(_ root: String, _ relative: String) -> Result<(fd: Int32, size: UInt64), SystemError> { .failure(SystemError(errno: ENOSYS)) }
    func placeBeneath(_ root: String, _ relative: String, from path: String, group: UInt32?) -> SystemError? { SystemError(errno: ENOSYS) }

    func openForWriting(_ path: String) -> Result<Int32, SystemError> {
        calls.append(.openForWriting(path))
        nextFD += 1
        return .success(nextFD)
    }

    func close(_ fd: Int32) { calls.append(.close(fd)) }

    var canSpawnIntoCgroup = true

    /// Every spawn request, in order (`calls` has only its path and cgroup).
    var spawnRequests: [SpawnRequest] = []

    /// The extension's end of each spawned runtime channel (a duplicate of the descriptor the
    /// child would get at fd 3), by pid: a test plays the extension's runtime on it.
    var runtimeChannels: [Int32: PacketSocket] = [:]

    /// No network stack is started in the shell's tests: refused as unsupported.
    func bindNamespace(_ fd: Int32, at path: String) -> SystemError? { .notSupported }
    func unbindNamespace(at path: String) -> SystemError? { nil }
    /// The sizes the next `measureTreeInBackground` walks find, one each, at
    /// `finishBackgroundWork` (nil: none can be started).
    var treeSizes: [Result<UInt64, SystemError>]?
    func measureTreeInBackground(_ path: String, owner: FileOwner?, limit: UInt64, _ done: @escaping (Result<UInt64, SystemError>) -> Void) -> SystemError? {
        guard var sizes = treeSizes, !sizes.isEmpty else { return .notSupported }
        calls.append(.measureTree(path))
        let size = sizes.removeFirst()
        treeSizes = sizes
        backgroundWork.append { done(size) }
        return nil
    }
    /// What the next `limitTreeInBackground` calls come to, one each, at
    /// `finishBackgroundWork` (none left: they cannot be started).
    var projectQuotas: [Result<ProjectQuotaOutcome, SystemError>] = []
    func limitTreeInBackground(
        _ path: String, owner: FileOwner, limit: UInt64, _ done: @escaping (Result<ProjectQuotaOutcome, SystemError>) -> Void
    ) -> SystemError? {
        guard !projectQuotas.isEmpty else { return .notSupported }
        calls.append(.limitTree(path, project: owner.uid, limit: limit))
        let outcome = projectQuotas.removeFirst()
        backgroundWork.append { done(outcome) }
        return nil
    }
    func replaceFileInBackground(_ path: String, with bytes: [UInt8], mode: UInt32, _ done: @escaping (SystemError?) -> Void) -> SystemError? {
        .notSupported
    }
    func handOffInBackground(_ handoff: URLHandoff, _ done: @escaping (URLHandoff.Outcome) -> Void) -> SystemError? {
        .notSupported
    }
    func makeSuiteMemory() -> Result<SuiteMemory, SystemError> { .failure(.notSupported) }
    func adoptSuiteMemory(fd: Int32) -> Result<SuiteMemory, SystemError> { .failure(.notSupported) }
    var landlockABI: Int { 0 }
    func networkNamespace() -> Result<Int32, SystemError> { .failure(.notSupported) }
    /// What the next `sandboxTemplateInBackground` makes (a failure by default), at
    /// `finishBackgroundWork`.
    var sandboxTemplates: [Result<Int32, SystemError>] = []
    func sandboxTemplateInBackground(masks: [String], _ done: @escaping (Result<Int32, SystemError>) -> Void) -> SystemError? {
        calls.append(.inBackground)
        let outcome = sandboxTemplates.isEmpty ? .failure(.notSupported) : sandboxTemplates.removeFirst()
        backgroundWork.append { done(outcome) }
        return nil
    }
    func hasPriorityEvent(fd: Int32) -> Bool { false }
    func waitReadable(fd: Int32, seconds: Double) -> Result<Bool, SystemError> { .failure(.notSupported) }

    func spawn(_ request: SpawnRequest) -> Result<(pid: Int32, pidfd: Int32), SystemError> {
        calls.append(.spawn(request.path, cgroupFD: request.cgroupFD))
        spawnRequests.append(request)
        if let fd = request.channelFD { runtimeChannels[nextSpawn.pid] = PacketSocket(fd: dup(fd)) }
        defer { nextSpawn = (nextSpawn.pid + 1, nextSpawn.pidfd + 1) }
        return .success(nextSpawn)
    }

    /// Watch descriptors `readOpenEvents` returns (then forgets).
    var openEvents: [Int32] = []

    /// The inotify descriptors `watchOpens` made, in order.
    var inotifyDescriptors: [Int32] = []

    func watchOpens(_ paths: [String]) -> Result<(fd: Int32, watches: [Int32?]), SystemError> {
        calls.append(.watchOpens(paths))
        nextFD += 1
        inotifyDescriptors.append(nextFD)
        return .success((nextFD, paths.indices.map { Int32($0 + 1) }))
    }

    func readOpenEvents(fd: Int32) -> [Int32] {
        calls.append(.readOpenEvents(fd: fd))
        defer { openEvents = [] }
        return openEvents
    }

    func waitFor(fd: Int32, events: UInt32, seconds: Double) -> Bool { false }

    /// What `finish` answers (when nil, what a real check of the input says: exit 0 and its
    /// report); each program started (`startChild`), and the input each child was given, or nil
    /// when it was abandoned.
    var childResult: Result<(status: ExitStatus?, output: String), SystemError>?
    /// Called while each child runs (`finish`): what happens on the system meanwhile.
    var whileAChildRuns: (() -> Void)?
    var childrenRun: [[String]] = []
    var childInputs: [[UInt8]?] = []
    /// Each execve asked for: the program, its arguments and the descriptors kept.
    var executions: [(path: String, arguments: [String], keeping: [Int32])] = []
    /// The descriptors made close-on-exec again (`setCloseOnExec`).
    var closeOnExec: Set<Int32> = []

    func executablePath() -> String? { "/usr/bin/extensiond" }

    func startChild(_ path: String, arguments: [String], seconds: Double) -> Result<ChildProgram, SystemError> {
        childrenRun.append([path] + arguments)
        calls.append(.startChild([path] + arguments))
        return .success(ChildProgram(pid: 90_000 + Int32(childrenRun.count), pidfd: -1, input: -1, output: -1, deadline: now().adding(seconds: seconds)))
    }

    func finish(_ child: ChildProgram, input: [[UInt8]], whileItRuns: () -> Void) -> Result<(status: ExitStatus?, output: String), SystemError> {
        childInputs.append(Array(input.joined()))
        calls.append(.finishChild(child.pid))
        whileItRuns()
        whileAChildRuns?()
        if let childResult { return childResult }
        guard let document = try? HandoverFile.decode(Array(input.joined()), kernel: self) else {
            return .success((.exited(1), "not a hand-over document"))
        }
        return .success((.exited(0), "\(Daemon.checkReport(document)): decoded in 0.0 ms, restored in 0.0 ms; the document read in 0.0 ms"))
    }

    func abandon(_ child: ChildProgram) {
        childInputs.append(nil)
        calls.append(.abandonChild(child.pid))
    }

    func setCloseOnExec(_ fds: [Int32]) -> [(fd: Int32, error: SystemError)] {
        closeOnExec.formUnion(fds)
        return []
    }

    /// Called at each execve, before it fails: what a test looks at the moment the program
    /// would be replaced.
    var onExecute: (() -> Void)?

    /// The signals `takePendingSignal` finds pending (each taken once).
    var pendingSignals: [Int32] = []

    func takePendingSignal(_ signal: Int32) -> Bool {
        guard let i = pendingSignals.firstIndex(of: signal) else { return false }
        pendingSignals.remove(at: i)
        return true
    }

    func execute(_ path: String, arguments: [String], keeping: [Int32]) -> SystemError {
        onExecute?()
        executions.append((path, arguments, keeping))
        calls.append(.execute([path] + arguments))
        return SystemError("execve \(path)", errno: ENOSYS)
    }

    // MARK: The embedded loop

    func addTimer(at: Instant, priority: Int64, _ handler: @escaping () -> Void) -> Result<any Cancellable, SystemError> {
        calls.append(.addTimer(at: at))
        let timer = FakeTimer(at: at, handler: handler, kernel: self)
        timers.append(timer)
        return .success(timer)
    }

    func watch(fd: Int32, events: UInt32, _ handler: @escaping (UInt32) -> Void) -> Result<any Watch, SystemError> {
        calls.append(.watch(fd: fd, events: events))
        let watch = FakeWatch(fd: fd, events: events, handler: handler, kernel: self)
        watches.append(watch)
        return .success(watch)
    }

    func watchSignal(_ signal: Int32, priority: Int64, _ handler: @escaping (Int32, Int32) -> Void) -> SystemError? {
        calls.append(.watchSignal(signal))
        signalHandlers[signal] = handler
        return nil
    }

    func setDeadline(_ at: Instant?, _ handler: @escaping () -> Void) -> SystemError? {
        calls.append(.setDeadline(at))
        deadline = at.map { ($0, handler) }
        return nil
    }

    func runLoop() -> Int32 { exitCode ?? 0 }
    func exitLoop(_ code: Int32) { exitCode = code }

    func notifyServiceManager(_ state: String) { calls.append(.notify(state)) }
    func watchdogInterval() -> UInt64? { nil }
    func enableWatchdog() -> Bool { false }

    /// Fires the live watch of `fd` with `events` (readable by default), as one loop iteration.
    /// Returns false when nothing watches `fd`.
    @discardableResult
    func fire(fd: Int32, events: UInt32 = Poll.input) -> Bool {
        guard let w = watches.last(where: { $0.fd == fd && !$0.cancelled }) else { return false }
        w.handler(events)
        return true
    }

    /// Delivers `signal` from `sender` with `code` to its handler, as one loop iteration.
    func raise(_ signal: Int32, sender: Int32 = 0, code: Int32 = 0) {
        signalHandlers[signal]?(sender, code)
    }

    /// Whether a live watch is on `fd`.
    func isWatched(_ fd: Int32) -> Bool { watches.contains { $0.fd == fd && !$0.cancelled } }

    /// Moves the clock to `instant`, firing each timer and the deadline due on the way, in
    /// order, each as one loop iteration.
    func advance(to instant: Instant) {
        while true {
            let timer = timers.filter { !$0.cancelled && $0.at <= instant }.min { $0.at < $1.at }
            let due = deadline.flatMap { $0.at <= instant ? $0 : nil }
            if let timer, due == nil || timer.at <= due!.at {
                timer.cancelled = true
                clock = max(clock, timer.at)
                timer.handler()
            } else if let due {
                deadline = nil
                clock = max(clock, due.at)
                due.handler()
            } else {
                break
            }
        }
        clock = max(clock, instant)
    }

    /// Fires the earliest timer not cancelled, moving the clock to it.
    func fireNextTimer() {
        guard let t = timers.filter({ !$0.cancelled }).min(by: { $0.at < $1.at }) else { return }
        t.cancelled = true
        clock = max(clock, t.at)
        t.handler()
    }

    /// Runs the work started in the background so far, in the order it was started, each with
    /// this kernel's reads, and hands each result to its handler, as one loop iteration.
    func finishBackgroundWork() {
        let work = backgroundWork
        backgroundWork = []
        for w in work { w() }
    }

    /// Forgets the calls recorded so far.
    func clearCalls() { calls.removeAll() }
}
