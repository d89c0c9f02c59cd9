import ExtensionTransport
import SupervisorCore
import SupervisorKernel

@testable import SupervisorShell

#if canImport(Glibc)
import Glibc
#endif

/// The kernel interface answered from simulated processes, one `GroupWorld` per extension
/// generation: `kill` (a pid or a process group), `waitid` on the leaders' pidfds, the open
/// `cgroup.procs`, `cgroup.events` and `cgroup.freeze` and the written `cgroup.kill`, the
/// `/proc` files `ProcessTable` reads (the process list, each stat, each task's children),
/// the clock, and timers the `Simulation` fires. What the supervisor's process handling never
/// calls (spawning, other files, inotify, descriptor and signal watches, the service manager)
/// is refused and listed in `unexpected`.
final class SimulatedKernel: Kernel {
    /// A timer armed through `addTimer`; the `Simulation` fires it when it is due.
    final class Timer: Cancellable {
        let at: Instant
        private let handler: () -> Void
        private weak var kernel: SimulatedKernel?

        init(at: Instant, handler: @escaping () -> Void, kernel: SimulatedKernel) {
            self.at = at
            self.handler = handler
            self.kernel = kernel
        }

        func cancel() { kernel?.armed.removeAll { $0 === self } }

        func fire() {
            cancel()
            handler()
        }
    }

    /// The descriptors it hands out, by what they refer to.
    enum Descriptor: Equatable {
        case pidfd(leader: Int32)
        case events(leader: Int32)
        case procs(leader: Int32)
        case freeze(leader: Int32)
    }

    var clock = Instant.seconds(0)
    /// Decides every random step of the simulation (the `Simulation` draws from it too).
    var rng: SplitMix64
    /// The daemon, parent of every leader (`ProcessControl` reads its children as its own pid's).
    let daemon: Int32 = 100
    /// Where the cgroup v2 file system is, and the daemon's subtree in it.
    static let mount = "/sys/fs/cgroup"
    /// Each generation's processes, by its leader's pid.
    private(set) var worlds: [Int32: GroupWorld] = [:]
    private(set) var descriptors: [Int32: Descriptor] = [:]
    /// The timers armed and not fired or cancelled.
    fileprivate(set) var armed: [Timer] = []
    /// Calls the process handling should never make, described.
    private(set) var unexpected: [String] = []
    private var nextPid: Int32 = 1000
    private var nextFD: Int32 = 10

    init(seed: UInt64) { rng = SplitMix64(seed: seed) }

    func chance(_ p: Double) -> Bool { Double.random(in: 0..<1, using: &rng) < p }

    // MARK: The simulation's side

    /// Starts an extension's processes: a leader (child of the daemon) with `extraMembers`
    /// children and `orphans` helpers the daemon adopted, in a cgroup of their own or in the
    /// leader's process group. Returns the
    /// leader's pid and pidfd, and the cgroup with its files open (`cgroup.freeze` with
    /// `freezer`), as `CgroupTree.create` and the spawn give them to the daemon.
    func spawn(
        containment: SupervisorCore.Containment, cgroupBase: String?, name: String, freezer: Bool, extraMembers: Int, orphans: Int, ignoresTerm: Bool
    ) -> (pid: Int32, pidfd: Int32, cgroup: ExtensionCgroup?) {
        let leader = allocatePid()
        let path = containment == .cgroup ? cgroupBase.map { $0 + "/" + name } : nil
        worlds[leader] = GroupWorld(
            leader: leader, containment: containment, cgroupPath: path, extraMembers: extraMembers, orphans: orphans,
            ignoresTerm: ignoresTerm, daemon: daemon, allocatePid: { [unowned self] in allocatePid() })
        let pidfd = open(.pidfd(leader: leader))
        guard let path else { return (leader, pidfd, nil) }
        let cgroup = ExtensionCgroup(
            path: path, directoryFD: -1, eventsFD: open(.events(leader: leader)), procsFD: open(.procs(leader: leader)),
            freezeFD: freezer ? open(.freeze(leader: leader)) : nil)
        return (leader, pidfd, cgroup)
    }

    /// The world of the generation whose leader is `leader`.
    func world(_ leader: Int32) -> GroupWorld? { worlds[leader] }

    /// Drops a generation's processes (its handle was replaced or its exit reported).
    func discard(_ leader: Int32) { worlds[leader] = nil }

    /// Whether a SIGCHLD is due, clearing it (signals of one kind coalesce).
    func takeChildSignal() -> Bool {
        var due = false
        for w in worlds.values where w.childSignal {
            w.childSignal = false
            due = true
        }
        return due
    }

    private func allocatePid() -> Int32 {
        nextPid += 1
        return nextPid
    }

    private func open(_ d: Descriptor) -> Int32 {
        nextFD += 1
        descriptors[nextFD] = d
        return nextFD
    }

    private func refuse<T>(_ call: String) -> Result<T, SystemError> {
        unexpected.append(call)
        return .failure(SystemError(call, errno: ENOSYS))
    }

    private func refused(_ call: String) -> SystemError {
        unexpected.append(call)
        return SystemError(call, errno: ENOSYS)
    }

    /// The world holding process `pid` (the zombie leader included).
    private func owner(of pid: Int32) -> GroupWorld? {
        if let w = worlds[pid], w.has(pid) { return w }
        return worlds.values.first { $0.has(pid) }
    }

    /// Every process of every world, zombies included.
    private var allPIDs: [Int32] {
        worlds.values.flatMap { w in Array(w.members.keys) + (w.isZombie ? [w.leader] : []) }.sorted()
    }

    private func world(for fd: Int32) -> (GroupWorld, Descriptor)? {
        guard let d = descriptors[fd] else { return nil }
        switch d {
        case let .pidfd(l), let .events(l), let .procs(l), let .freeze(l):
            guard let w = worlds[l] else { return nil }
            return (w, d)
        }
    }

    private func cgroupWorld(_ path: String) -> GroupWorld? { worlds.values.first { $0.cgroupPath == path } }

    // MARK: Kernel: clock and identity

    func now() -> Instant { clock }
    func iterationTime() -> Instant { clock }
    func wallClock() -> Double { Double(clock.nanoseconds) / 1e9 }
    var processID: Int32 { daemon }
    let userID: UInt32 = 0
    let groupID: UInt32 = 0
    let supplementaryGroups: [UInt32] = []
    let clockTicksPerSecond = 100.0
    let pageSize: Int64 = 4096
    func environment(_ name: String) -> String? { nil }
    let accounts = AccountDirectory.table(users: [:], groups: [:])

    // MARK: Kernel: processes

    func kill(_ pid: Int32, _ signal: Int32) -> SystemError? {
        if pid < 0 {
            guard let w = worlds.values.first(where: { $0.hasGroup(-pid) }) else { return SystemError("kill", errno: ESRCH) }
            w.deliver(signal, to: w.group(-pid))
            return nil
        }
        guard let w = owner(of: pid) else { return SystemError("kill", errno: ESRCH) }
        w.deliver(signal, to: [pid])
        return nil
    }

    func openPidfd(_ pid: Int32) -> Result<Int32, SystemError> { refuse("pidfd_open(\(pid))") }
    func signal(pidfd: Int32, _ signal: Int32) -> SystemError? { refused("pidfd_send_signal(\(pidfd), \(signal))") }

    func stopReported(pidfd: Int32) -> Result<Bool, SystemError> {
        guard let (w, d) = world(for: pidfd), case .pidfd = d else { return .failure(SystemError("waitid", errno: EBADF)) }
        if w.leaderReaped { return .failure(SystemError("waitid", errno: ECHILD)) }
        return .success(w.collectLeaderStop())
    }

    func exitStatus(pidfd: Int32, reap: Bool) -> Result<ExitStatus?, SystemError> {
        guard let (w, d) = world(for: pidfd), case .pidfd = d else { return .failure(SystemError("waitid", errno: EBADF)) }
        if w.leaderReaped { return .failure(SystemError("waitid", errno: ECHILD)) }
        return .success(w.collectLeaderExit(reap: reap))
    }

    /// Orphans are reaped the moment they die; leaders through their pidfds.
    func reapIfExited(_ pid: Int32) -> Bool { false }
    func exitedChild() -> Int32? { nil }

    func becomeChildSubreaper() -> Bool { true }
    var canSpawnIntoCgroup: Bool { true }
    func spawn(_ request: SpawnRequest) -> Result<(pid: Int32, pidfd: Int32), SystemError> { refuse("spawn(\(request.path))") }
    func bindNamespace(_ fd: Int32, at path: String) -> SystemError? { refused("bind(\(path))") }
    func unbindNamespace(at path: String) -> SystemError? { refused("umount(\(path))") }
    func measureTreeInBackground(_ path: String, owner: FileOwner?, limit: UInt64, _ done: @escaping (Result<UInt64, SystemError>) -> Void) -> SystemError? {
        refused("measure(\(path))")
    }
    func limitTreeInBackground(
        _ path: String, owner: FileOwner, limit: UInt64, _ done: @escaping (Result<ProjectQuotaOutcome, SystemError>) -> Void
    ) -> SystemError? {
        refused("limit(\(path))")
    }
    func replaceFileInBackground(_ path: String, with bytes: [UInt8], mode: UInt32, _ done: @escaping (SystemError?) -> Void) -> SystemError? {
        refused("replace(\(path))")
    }
    func handOffInBackground(_ handoff: URLHandoff, _ done: @escaping (URLHandoff.Outcome) -> Void) -> SystemError? {
        refused("hand off \(handoff.url)")
    }
    func makeSuiteMemory() -> Result<SuiteMemory, SystemError> { .failure(.notSupported) }
    func adoptSuiteMemory(fd: Int32) -> Result<SuiteMemory, SystemError> { .failure(.notSupported) }
    var landlockABI: Int { 0 }
    func networkNamespace() -> Result<Int32, SystemError> { refuse("network namespace") }
    func sandboxTemplateInBackground(masks: [String], _ done: @escaping (Result<Int32, SystemError>) -> Void) -> SystemError? {
        refused("sandbox template")
    }
    func hasPriorityEvent(fd: Int32) -> Bool { false }
    func waitReadable(fd: Int32, seconds: Double) -> Result<Bool, SystemError> { refuse("poll(\(fd))") }

    var processorCount: Int { 1 }
    func concurrently(_ jobs: [@Sendable () -> Void]) { for job in jobs { job() } }

    func inBackground<T: Sendable>(_ work: @escaping @Sendable (any FileReads) -> T, _ done: @escaping (T) -> Void) -> SystemError? {
        refused("work in the background")
    }

    func prepareSandbox(known: SandboxProbe?) -> (filter: UnsafeRawPointer?, filterError: SystemError?, probe: SandboxProbe) {
        (nil, refused("prepare the sandbox"), SandboxProbe(errors: [], userNamespace: false))
    }

    func executablePath() -> String? {
        unexpected.append("the daemon's executable")
        return nil
    }

    func startChild(_ path: String, arguments: [String], seconds: Double) -> Result<ChildProgram, SystemError> {
        refuse("run \(path)")
    }

    func finish(_ child: ChildProgram, input: [[UInt8]], whileItRuns: () -> Void) -> Result<(status: ExitStatus?, output: String), SystemError> {
        refuse("finish \(child.pid)")
    }

    func abandon(_ child: ChildProgram) { unexpected.append("abandon \(child.pid)") }

    func execute(_ path: String, arguments: [String], keeping: [Int32]) -> SystemError { refused("execve \(path)") }
    func setCloseOnExec(_ fds: [Int32]) -> [(fd: Int32, error: SystemError)] { fds.map { ($0, refused("fcntl(\($0), F_SETFD)")) } }

    // MARK: Kernel: files

    func read(_ path: String) -> Result<[UInt8], SystemError> {
        let parts = path.split(separator: "/").map(String.init)
        switch parts.count {
        case 3 where path == "/proc/self/mountinfo":
            return .success(Array("30 25 0:26 / \(SimulatedKernel.mount) rw,nosuid shared:9 - cgroup2 cgroup2 rw\n".utf8))
        case 3 where path == "/proc/self/cgroup":
            return .success(Array("0::/\n".utf8))
        case 3 where parts[0] == "proc" && parts[2] == "stat":
            return stat(parts[1])
        case 3 where parts[0] == "proc" && parts[2] == "status":
            // The simulated processes share the daemon's pid namespace, and handle no signal.
            guard let pid = Int32(parts[1]), let w = owner(of: pid), w.stateLetter(pid) != nil else { return .failure(SystemError("open", errno: ENOENT)) }
            return .success(Array("Pid:\t\(pid)\nNSpid:\t\(pid)\nSigIgn:\t0000000000000000\nSigCgt:\t0000000000000000\n".utf8))
        case 5 where parts[0] == "proc" && parts[2] == "task" && parts[4] == "stat" && parts[1] == parts[3]:
            return stat(parts[1])
        case 5 where parts[0] == "proc" && parts[2] == "task" && parts[4] == "children" && parts[1] == parts[3]:
            guard let pid = Int32(parts[1]) else { return .failure(SystemError("open", errno: ENOENT)) }
            let children: [Int32]
            if pid == daemon {
                children = worlds.values.flatMap { w in w.children(of: daemon) + (w.isZombie ? [w.leader] : []) }.sorted()
            } else {
                guard let w = owner(of: pid) else { return .failure(SystemError("open", errno: ENOENT)) }
                children = w.children(of: pid)
            }
            return .success(Array(children.map { "\($0) " }.joined().utf8))
        default:
            return refuse("read(\(path))")
        }
    }

    /// /proc/PID/stat of a process (one thread each): its state, parent, process group and session.
    private func stat(_ name: String) -> Result<[UInt8], SystemError> {
        guard let pid = Int32(name), let w = owner(of: pid), let state = w.stateLetter(pid) else {
            return .failure(SystemError("open", errno: ENOENT))
        }
        let p = w.members[pid]
        let parent = p?.parent ?? daemon
        let group = p?.group ?? pid
        return .success(Array("\(pid) (sim) \(state) \(parent) \(group) \(group) 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 0 0 0".utf8))
    }

    func inspectFile(_ path: String, limit: Int64) -> Result<(status: FileStatus, contents: [UInt8]?), SystemError> {
        refuse("inspect(\(path))")
    }

    func isExecutable(_ path: String) -> Bool {
        unexpected.append("access(\(path), X_OK)")
        return false
    }

    func read(fd: Int32) -> Result<[UInt8], SystemError> {
        guard let (w, d) = world(for: fd) else { return .failure(SystemError("pread", errno: EBADF)) }
        switch d {
        case .events:
            w.eventsNotification = false
            return .success(Array(w.eventsText.utf8))
        case .procs:
            return .success(Array(w.members.keys.sorted().map { "\($0)\n" }.joined().utf8))
        default:
            return .failure(SystemError("pread", errno: EINVAL))
        }
    }

    func readToEnd(fd: Int32) -> Result<[UInt8], SystemError> { refuse("read to end(\(fd))") }

    func write(_ path: String, _ text: String) -> SystemError? {
        if path.hasSuffix("/cgroup.kill"), let w = cgroupWorld(String(path.dropLast("/cgroup.kill".count))) {
            if text == "1" { w.killAll() }
            return nil
        }
        if path.hasSuffix("/cgroup.freeze"), let w = cgroupWorld(String(path.dropLast("/cgroup.freeze".count))) {
            w.setFrozen(text == "1", atOnce: chance(0.3))
            return nil
        }
        return refused("write(\(path), \(text))")
    }

    func write(fd: Int32, _ text: String) -> SystemError? {
        guard let (w, d) = world(for: fd) else { return SystemError("pwrite", errno: EBADF) }
        guard case .freeze = d else { return SystemError("pwrite", errno: EINVAL) }
        w.setFrozen(text == "1", atOnce: chance(0.3))
        return nil
    }

    func replaceFile(_ path: String, withParts parts: [[UInt8]], mode: UInt32, durable: Bool) -> SystemError? { refused("replace(\(path))") }
    func memoryFile(_ name: String, withParts parts: [[UInt8]]) -> Result<Int32, SystemError> { .failure(refused("memoryFile(\(name))")) }
    func takePendingSignal(_ signal: Int32) -> Bool { false }

    /// Only the daemon's own subtree is made (`CgroupTree.setUp`, standalone).
    func makeDirectory(_ path: String, mode: UInt32) -> SystemError? {
        if path.hasPrefix(SimulatedKernel.mount + "/extensiond-") { return nil }
        return refused("mkdir(\(path))")
    }

    func removeDirectory(_ path: String) -> SystemError? {
        guard let w = cgroupWorld(path) else { return SystemError("rmdir", errno: ENOENT) }
        return w.isEmpty ? nil : SystemError("rmdir", errno: EBUSY)
    }

    func removeFile(_ path: String) -> SystemError? { refused("unlink(\(path))") }
    func removeTreeInBackground(_ path: String, owner: FileOwner?, _ done: @escaping (SystemError?) -> Void) -> SystemError? {
        refused("rm -r(\(path))")
    }
    func rename(_ path: String, to newPath: String) -> SystemError? { refused("rename(\(path))") }
    func outputPipe() -> Result<(read: Int32, write: Int32), SystemError> { refuse("pipe2") }
    func readSome(fd: Int32, limit: Int) -> Result<[UInt8]?, SystemError> { refuse("read(\(fd))") }
    func setGroupDefaultACL(_ path: String, group: UInt32) -> SystemError? { refused("setfacl(\(path))") }
    func changeOwner(_ path: String, user: UInt32, group: UInt32) -> SystemError? { refused("chown(\(path))") }
    func changeMode(_ path: String, _ mode: UInt32) -> SystemError? { refused("chmod(\(path))") }
    func status(_ path: String, followLinks: Bool) -> Result<FileStatus, SystemError> { refuse("stat(\(path))") }

    func resolvePath(_ path: String) -> String? {
        unexpected.append("realpath(\(path))")
        return nil
    }

    func listDirectory(_ path: String) -> [String]? {
        let parts = path.split(separator: "/").map(String.init)
        if path == "/proc" { return allPIDs.map { "\($0)" } }
        guard parts.count == 3, parts[0] == "proc", parts[2] == "task", let pid = Int32(parts[1]) else {
            unexpected.append("readdir(\(path))")
            return nil
        }
        if pid == daemon || owner(of: pid) != nil { return [parts[1]] }
        return nil
    }

    func readLink(_ path: String) -> Result<String, SystemError> { refuse("readlink(\(path))") }
    func cachedIdentity(_ path: String) -> Result<FileIdentity, SystemError> { refuse("statx(\(path))") }
    func open(_ path: String, directory: Bool) -> Result<Int32, SystemError> { refuse("open(\(path))") }
    func checkConstraintsInBackground(_ done: @escaping (Constraints) -> Void) -> SystemError? { refused("the system bus") }
    func openBus(system: Bool, handler: any BusServiceHandler) -> Result<BusService, SystemError> { .failure(.notSupported) }
    func openPartialFile(_ path: String) -> Result<(fd: Int32, size: UInt64), SystemError> { refuse("open(\(path), O_RDWR)") }
    func truncate(fd: Int32) -> SystemError? { refused("ftruncate(\(fd))") }
    func openBeneath(_ root: String, _ relative: String) -> Result<(fd: Int32, size: UInt64), SystemError> { refuse("openat2(\(relative))") }
    func placeBeneath(_ root: String, _ relative: String, from path: String, group: UInt32?) -> SystemError? { refused("renameat(\(path))") }
    func openForWriting(_ path: String) -> Result<Int32, SystemError> { refuse("open(\(path), O_WRONLY)") }

    func close(_ fd: Int32) {
        if descriptors.removeValue(forKey: fd) == nil { unexpected.append("close(\(fd)) of a descriptor not open") }
    }

    func watchOpens(_ paths: [String]) -> Result<(fd: Int32, watches: [Int32?]), SystemError> { refuse("inotify(\(paths))") }

    func readOpenEvents(fd: Int32) -> [Int32] {
        unexpected.append("read inotify(\(fd))")
        return []
    }

    func waitFor(fd: Int32, events: UInt32, seconds: Double) -> Bool {
        unexpected.append("poll(\(fd))")
        return false
    }

    // MARK: Kernel: the event loop and the service manager

    func addTimer(at: Instant, priority: Int64, _ handler: @escaping () -> Void) -> Result<any Cancellable, SystemError> {
        let timer = Timer(at: at, handler: handler, kernel: self)
        armed.append(timer)
        return .success(timer)
    }

    func watch(fd: Int32, events: UInt32, _ handler: @escaping (UInt32) -> Void) -> Result<any Watch, SystemError> {
        refuse("watch(\(fd))")
    }

    func watchSignal(_ signal: Int32, priority: Int64, _ handler: @escaping (Int32, Int32) -> Void) -> SystemError? {
        refused("signalfd(\(signal))")
    }

    func setDeadline(_ at: Instant?, _ handler: @escaping () -> Void) -> SystemError? {
        unexpected.append("deadline")
        return SystemError("the simulation has no loop", errno: ENOTSUP)
    }

    func runLoop() -> Int32 {
        unexpected.append("run the loop")
        return 1
    }

    func exitLoop(_ code: Int32) { unexpected.append("exit the loop") }
    func notifyServiceManager(_ state: String) { unexpected.append("sd_notify(\(state))") }
    func watchdogInterval() -> UInt64? { nil }
    func enableWatchdog() -> Bool { false }
}
