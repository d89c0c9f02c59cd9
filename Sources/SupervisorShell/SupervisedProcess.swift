import ExtensionTransport
#if canImport(Glibc)
import Glibc
#endif
import SupervisorCore

/// The shell's handle on one running extension (one generation): its leader's pidfd, its
/// cgroup (or process group), the pure `GroupControl` that decides how it is stopped, resumed,
/// signalled and when it has exited, and its runtime channel. Owned by the daemon's loop.
final class SupervisedProcess {
    let extensionID: String
    let generation: UInt64
    /// The leader: the process that was spawned.
    let pid: Int32
    /// The leader's process group (it leads its own session, so it equals `pid`).
    var processGroup: Int32 { pid }
    /// The extension's cgroup, nil on the process-group fallback.
    let cgroup: ExtensionCgroup?
    /// The extension's cgroup v1 memory cgroup (hosts whose memory controller is on v1), or nil.
    var memoryCgroupV1: MemoryCgroupV1?
    var control: GroupControl
    /// The runtime channel (nil without one, or once closed). Extensions may not send descriptors.
    private(set) var channel: Peer?
    /// The leader's pidfd (owned here), and the source watching it become readable (exit).
    let pidfd: Int32
    private var pidfdOpen = true
    var exitSource: (any Cancellable)?
    /// The watch on `cgroup.events` (POLLPRI): `populated` and `frozen` changes.
    var eventsSource: (any Cancellable)?
    /// The pending check of an in-flight stop (`GroupAction.checkAgain`).
    var check: (any Cancellable)?
    /// The grace timer after the runtime channel closed while the process lived.
    var channelGrace: (any Cancellable)?
    /// Members of the stopped group that hold file locks: watched while suspended.
    var lockHolders: Set<Int32> = []
    /// The locks the suspended group holds, by the inotify watch descriptor of their file.
    var lockedFiles: [Int32: [HeldLock]] = [:]
    /// The inotify watch for opens of the files the suspended group holds locks on.
    var openWatch: OpenWatch?
    /// The periodic /proc/locks check for blocked waiters, armed only while a suspended group
    /// holds a lock on a file another process has opened.
    var lockWatch: (any Cancellable)?
    /// Admits runtime-channel messages at a sustained rate; a flood cuts the channel off.
    var admission = MessageRate()

    init(
        extensionID: String, generation: UInt64, pid: Int32, pidfd: Int32, cgroup: ExtensionCgroup?, mechanism: SuspendMode,
        channel: PacketSocket?, queueLimit: Int
    ) {
        self.extensionID = extensionID
        self.generation = generation
        self.pid = pid
        self.pidfd = pidfd
        self.cgroup = cgroup
        self.control = GroupControl(leader: pid, containment: cgroup == nil ? .processGroup : .cgroup, mechanism: mechanism)
        self.channel = channel.map { Peer(socket: $0, queueLimit: queueLimit, refusesDescriptors: true) }
    }

    /// Closes the runtime channel and its grace timer.
    func closeChannel() {
        channel?.close()
        channel = nil
        channelGrace?.cancel()
        channelGrace = nil
    }

    /// Stops watching the group's locks.
    func stopLockWatch() {
        lockWatch?.cancel()
        lockWatch = nil
        openWatch?.cancel()
        openWatch = nil
        lockHolders = []
        lockedFiles = [:]
    }

    /// Releases every watch, timer and descriptor (the cgroup directory is removed by the caller).
    func tearDown(_ kernel: any Kernel) {
        stopLockWatch()
        closeChannel()
        check?.cancel()
        check = nil
        exitSource?.cancel()
        exitSource = nil
        eventsSource?.cancel()
        eventsSource = nil
        cgroup?.closeFiles(kernel)
        if pidfdOpen {
            kernel.close(pidfd)
            pidfdOpen = false
        }
    }
}
