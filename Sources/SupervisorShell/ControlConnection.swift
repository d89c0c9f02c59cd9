import ExtensionProtocol
import ExtensionTransport
import SupervisorCore
import SupervisorKernel

/// One accepted control-socket connection (a host or `extctl`). Owned by the daemon's loop.
final class ControlConnection {
    let id: HostID
    /// The socket, its watch and its outbound queue. Descriptors a host sends are closed and ignored.
    let channel: Peer
    /// Who connected, per SO_PEERCRED at accept time.
    let peer: PeerIdentity
    /// Streams lifecycle events (after `monitor`).
    var isMonitor = false
    /// Admits notification-hint posts; over the rate they are refused with `limitReached`.
    var posts = MessageRate(perSecond: MessageRate.postsPerSecond, burst: MessageRate.postBurst)

    init(id: HostID, socket: PacketSocket, peer: PeerIdentity, queueLimit: Int) {
        self.id = id
        self.channel = Peer(socket: socket, queueLimit: queueLimit, refusesDescriptors: false)
        self.peer = peer
    }

    /// Stops watching and closes the socket, discarding anything unsent.
    func close() { channel.close() }
}
