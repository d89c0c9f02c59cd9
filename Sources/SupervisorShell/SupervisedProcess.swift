import ExtensionTransport
#if canImport(Glibc)
import Glibc
#endif
import SupervisorCore

/// The shell's handle on one running extension process (one generation): its pidfd watch,
/// its runtime channel and the bookkeeping of an in-flight stop. Owned by the daemon's loop.
final class SupervisedProcess {
    let extensionID: String
    let generation: UInt64
    let pid: Int32
    /// The process group (the process leads its own session, so it equals `pid`).
    var processGroup: Int32 { pid }
    var channel: PacketSocket?
    var channelSource: EventSource?
    /// The process's pidfd (owned here), and the source watching it become readable (exit).
    let pidfd: Int32
    private var pidfdOpen = true
    var exitSource: EventSource?
    var outbound: OutboundQueue

    /// A stop was requested and is not confirmed yet.
    var stopPending = false
    /// The kernel reported CLD_STOPPED for the leader since the stop was requested: its whole
    /// thread group is stopped.
    var leaderStopReported = false
    /// Group members seen by the last stop verification.
    var lastMembers: Set<Int32> = []
    /// Members that had a thread in uninterruptible sleep (D) at the last verification.
    var lastUninterruptible: Set<Int32> = []
    /// When the stop was requested (for the slow-stop warning).
    var stopRequestedAt: Instant?
    var stopRetry: EventSource?
    var stopRetryDelay: Double = 0.001
    /// The grace timer after the runtime channel closed while the process lived.
    var channelGrace: EventSource?
    /// Members of the stopped group that hold file locks: watched while suspended.
    var lockHolders: Set<Int32> = []
    /// The periodic /proc/locks check, armed only while a suspended group holds a lock.
    var lockWatch: EventSource?
    /// Admits runtime-channel messages at a sustained rate; a flood cuts the channel off.
    var admission = MessageRate()

    init(extensionID: String, generation: UInt64, pid: Int32, pidfd: Int32, channel: PacketSocket?, queueLimit: Int) {
        self.extensionID = extensionID
        self.generation = generation
        self.pid = pid
        self.pidfd = pidfd
        self.channel = channel
        self.outbound = OutboundQueue(byteLimit: queueLimit)
    }

    /// Closes the runtime channel and cancels every watch except the child source.
    func closeChannel() {
        channelSource?.cancel()
        channelSource = nil
        outbound.discard()
        channel?.close()
        channel = nil
        channelGrace?.cancel()
        channelGrace = nil
    }

    /// Stops watching the group's locks.
    func stopLockWatch() {
        lockWatch?.cancel()
        lockWatch = nil
        lockHolders = []
    }

    /// Releases everything.
    func tearDown() {
        stopLockWatch()
        closeChannel()
        stopRetry?.cancel()
        stopRetry = nil
        exitSource?.cancel()
        exitSource = nil
        if pidfdOpen {
            close(pidfd)
            pidfdOpen = false
        }
    }
}
