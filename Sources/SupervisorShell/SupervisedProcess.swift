import ExtensionTransport
import SupervisorCore
import SupervisorKernel

/// The shell's handle on one running extension (one generation): its leader's pidfd, its
/// cgroup (or process group), the pure `GroupControl` that decides how it is stopped, resumed,
/// signalled and when it has exited, its runtime channel, and the watch on the locks it holds
/// while suspended. Owned by the daemon's loop.
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
    let memoryCgroupV1: MemoryCgroupV1?
    /// The decisions about its processes; changed only through `decide`.
    private(set) var group: GroupControl
    /// The runtime channel (nil without one, or once closed). Extensions may not send descriptors.
    private(set) var channel: Peer?
    /// The leader's pidfd (owned here), and the watch of it becoming readable (exit).
    let pidfd: Int32
    private var pidfdOpen = true
    private(set) var exitWatch: (any Cancellable)?
    /// The watch on `cgroup.events` (POLLPRI): `populated` and `frozen` changes.
    private var eventsWatch: (any Cancellable)?
    /// The pending check of an in-flight stop (`GroupAction.checkAgain`).
    private(set) var check: (any Cancellable)?
    /// The grace timer after the runtime channel closed while the process lived, and when it ends.
    private var channelGrace: (any Cancellable)?
    private(set) var channelGraceUntil: Instant?
    /// Admits runtime-channel messages at a sustained rate; a flood cuts the channel off.
    private var admission = MessageRate()
    /// The locks the group holds while suspended, and their watch (`LockWatch`).
    let locks = SuspendedLocks()
    /// Its stdout and stderr, read and logged (nil: none, as with the recording kernel).
    var output: ExtensionOutput?

    init(
        extensionID: String, generation: UInt64, pid: Int32, pidfd: Int32, cgroup: ExtensionCgroup?, memoryCgroupV1: MemoryCgroupV1? = nil,
        mechanism: SuspendMode, channel: PacketSocket?, queueLimit: Int, group: GroupControl? = nil
    ) {
        self.extensionID = extensionID
        self.generation = generation
        self.pid = pid
        self.pidfd = pidfd
        self.cgroup = cgroup
        self.memoryCgroupV1 = memoryCgroupV1
        self.group = group ?? GroupControl(leader: pid, containment: cgroup == nil ? .processGroup : .cgroup, mechanism: mechanism)
        self.channel = channel.map { Peer(socket: $0, queueLimit: queueLimit, refusesDescriptors: true) }
    }

    /// Lets `change` decide on `group` (an observation, a suspension, a signal): the actions it
    /// returned, for the caller to carry out.
    func decide(_ change: (inout GroupControl) -> [GroupAction]) -> [GroupAction] { change(&group) }

    /// Keeps `timer` as the pending check of an in-flight stop, cancelling the one before (nil:
    /// none is pending).
    func keepCheck(_ timer: (any Cancellable)?) {
        check?.cancel()
        check = timer
    }

    /// Forgets the pending check once it has fired (its timer is spent).
    func checkFired() { check = nil }

    /// Keeps the watches of the leader's exit and of `cgroup.events`, cancelled at `tearDown`.
    /// Stops watching `cgroup.events`: its cgroup was removed under it (a read fails with
    /// ENODEV, and the watch would report it again at every turn of the loop).
    func stopWatchingEvents() {
        eventsWatch?.cancel()
        eventsWatch = nil
    }

    func keep(exitWatch: (any Cancellable)?, eventsWatch: (any Cancellable)?) {
        self.exitWatch = exitWatch
        self.eventsWatch = eventsWatch
    }

    /// Ends the watch of the leader's pidfd (its exit has been seen).
    func stopExitWatch() {
        exitWatch?.cancel()
        exitWatch = nil
    }

    /// Whether a runtime-channel message at `now` is within the extension's rate.
    func admitMessage(at now: Instant) -> Bool { admission.admit(at: now) }

    /// The URLs it opened in the last minute (`ExtensionContext.open`), against its point's rate.
    var openURLRate = OpenURLRate()

    /// Closes the runtime channel and its grace timer.
    func closeChannel() {
        channel?.close()
        channel = nil
        endChannelGrace()
    }

    /// Keeps the grace timer that ends the process at `until`, some time after its channel closed.
    func startChannelGrace(_ timer: any Cancellable, until: Instant) {
        channelGrace?.cancel()
        channelGrace = timer
        channelGraceUntil = until
    }

    /// Cancels the grace timer (it fired, or the process is gone).
    func endChannelGrace() {
        channelGrace?.cancel()
        channelGrace = nil
        channelGraceUntil = nil
    }

    /// Releases every watch, timer and descriptor (the cgroup directory is removed by the caller).
    func tearDown(_ kernel: any Kernel) {
        locks.stop()
        output?.finish()
        output = nil
        closeChannel()
        check?.cancel()
        check = nil
        stopExitWatch()
        eventsWatch?.cancel()
        eventsWatch = nil
        cgroup?.closeFiles(kernel)
        if pidfdOpen {
            kernel.close(pidfd)
            pidfdOpen = false
        }
    }
}
