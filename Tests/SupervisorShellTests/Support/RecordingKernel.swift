@testable import SupervisorShell
import SupervisorCore

/// A fake of the kernel interface: it answers from a script (file contents, directory
/// listings, which pidfds report a stop or an exit) and records every call, in order, so a
/// test can check the exact sequence the shell makes.
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
        case write(String, String)
        case writeFD(Int32, String)
        case openForWriting(String)
        case makeDirectory(String)
        case removeDirectory(String)
        case listDirectory(String)
        case readLink(String)
        case stat(String)
        case open(String)
        case close(Int32)
        case spawn(String, cgroupFD: Int32?)
        case addTimer(at: Instant)
        case cancelTimer(at: Instant)
        case watch(fd: Int32, events: UInt32)
        case watchOpens([String])
        case readOpenEvents(fd: Int32)

        var description: String {
            switch self {
            case let .kill(pid, sig): "kill(\(pid), \(sig))"
            case let .openPidfd(pid): "pidfd_open(\(pid))"
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
            case let .stat(path): "stat(\(path))"
            case let .open(path): "open(\(path))"
            case let .close(fd): "close(\(fd))"
            case let .spawn(path, fd): "clone3(\(path), cgroup fd \(fd.map(String.init) ?? "none"))"
            case let .addTimer(at): "timer(\(at))"
            case let .cancelTimer(at): "cancel timer(\(at))"
            case let .watch(fd, events): "watch(\(fd), \(events))"
            case let .watchOpens(paths): "inotify IN_OPEN \(paths)"
            case let .readOpenEvents(fd): "read inotify(\(fd))"
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

    var calls: [Call] = []
    var clock = Instant.seconds(100)
    /// Contents returned by `read(path)`; a missing path fails with ENOENT.
    var files: [String: String] = [:]
    /// Contents returned by `read(fd:)`.
    var descriptors: [Int32: String] = [:]
    var directories: [String: [String]] = [:]
    /// Targets returned by `readLink(path)`; a missing path fails with ENOENT.
    var links: [String: String] = [:]
    /// Identities returned by `fileIdentity(path)`; a missing path fails with ENOENT.
    var identities: [String: FileIdentity] = [:]
    /// Pidfds whose stop is reported, and exit statuses by pidfd.
    var stopped: Set<Int32> = []
    var exits: [Int32: ExitStatus] = [:]
    var timers: [FakeTimer] = []
    var nextFD: Int32 = 50
    /// Paths whose writes fail with this errno.
    var failingWrites: [String: Int32] = [:]

    func now() -> Instant { clock }

    func kill(_ pid: Int32, _ signal: Int32) -> Errno? {
        calls.append(.kill(pid, signal))
        return nil
    }

    func openPidfd(_ pid: Int32) -> Result<Int32, Errno> {
        calls.append(.openPidfd(pid))
        defer { nextFD += 1 }
        return .success(nextFD)
    }

    func signal(pidfd: Int32, _ signal: Int32) -> Errno? {
        calls.append(.signalPidfd(pidfd, signal))
        return nil
    }

    func stopReported(pidfd: Int32) -> Result<Bool, Errno> {
        calls.append(.stopReported(pidfd: pidfd))
        return .success(stopped.contains(pidfd))
    }

    func exitStatus(pidfd: Int32, reap: Bool) -> Result<ExitStatus?, Errno> {
        calls.append(.exitStatus(pidfd: pidfd, reap: reap))
        return .success(exits[pidfd])
    }

    func reapIfExited(_ pid: Int32) -> Bool {
        calls.append(.reapIfExited(pid))
        return false
    }

    func read(_ path: String) -> Result<[UInt8], Errno> {
        calls.append(.read(path))
        guard let text = files[path] else { return .failure(.noEntry) }
        return .success(Array(text.utf8))
    }

    func read(fd: Int32) -> Result<[UInt8], Errno> {
        calls.append(.readFD(fd))
        guard let text = descriptors[fd] else { return .failure(Errno(9)) }
        return .success(Array(text.utf8))
    }

    func readToEnd(fd: Int32) -> Result<[UInt8], Errno> { read(fd: fd) }

    func write(_ path: String, _ text: String) -> Errno? {
        calls.append(.write(path, text))
        return failingWrites[path].map { Errno($0) }
    }

    func write(fd: Int32, _ text: String) -> Errno? {
        calls.append(.writeFD(fd, text))
        return nil
    }

    func makeDirectory(_ path: String) -> Errno? {
        calls.append(.makeDirectory(path))
        return nil
    }

    func removeDirectory(_ path: String) -> Errno? {
        calls.append(.removeDirectory(path))
        return nil
    }

    func listDirectory(_ path: String) -> [String]? {
        calls.append(.listDirectory(path))
        return directories[path]
    }

    func readLink(_ path: String) -> Result<String, Errno> {
        calls.append(.readLink(path))
        guard let target = links[path] else { return .failure(.noEntry) }
        return .success(target)
    }

    func fileIdentity(_ path: String) -> Result<FileIdentity, Errno> {
        calls.append(.stat(path))
        guard let identity = identities[path] else { return .failure(.noEntry) }
        return .success(identity)
    }

    func open(_ path: String, directory: Bool) -> Result<Int32, Errno> {
        calls.append(.open(path))
        nextFD += 1
        return .success(nextFD)
    }

    func openForWriting(_ path: String) -> Result<Int32, Errno> {
        calls.append(.openForWriting(path))
        nextFD += 1
        return .success(nextFD)
    }

    func close(_ fd: Int32) { calls.append(.close(fd)) }

    var canSpawnIntoCgroup = true

    /// Every spawn request, in order (`calls` has only its path and cgroup).
    var spawnRequests: [SpawnRequest] = []

    func spawn(_ request: SpawnRequest) -> Result<(pid: Int32, pidfd: Int32), Errno> {
        calls.append(.spawn(request.path, cgroupFD: request.cgroupFD))
        spawnRequests.append(request)
        return .success((4242, 7))
    }

    func addTimer(at: Instant, priority: Int64, _ handler: @escaping () -> Void) -> Result<any Cancellable, Errno> {
        calls.append(.addTimer(at: at))
        let timer = FakeTimer(at: at, handler: handler, kernel: self)
        timers.append(timer)
        return .success(timer)
    }

    func watch(fd: Int32, events: UInt32, _ handler: @escaping (UInt32) -> Void) -> Result<any Cancellable, Errno> {
        calls.append(.watch(fd: fd, events: events))
        return .success(FakeTimer(at: clock, handler: {}, kernel: self))
    }

    /// Watch descriptors `readOpenEvents` returns (then forgets).
    var openEvents: [Int32] = []

    func watchOpens(_ paths: [String]) -> Result<(fd: Int32, watches: [Int32?]), Errno> {
        calls.append(.watchOpens(paths))
        nextFD += 1
        return .success((nextFD, paths.indices.map { Int32($0 + 1) }))
    }

    func readOpenEvents(fd: Int32) -> [Int32] {
        calls.append(.readOpenEvents(fd: fd))
        defer { openEvents = [] }
        return openEvents
    }

    /// Fires the earliest timer not cancelled, moving the clock to it.
    func fireNextTimer() {
        guard let t = timers.filter({ !$0.cancelled }).min(by: { $0.at < $1.at }) else { return }
        t.cancelled = true
        clock = max(clock, t.at)
        t.handler()
    }

    /// Forgets the calls recorded so far.
    func clearCalls() { calls.removeAll() }
}
