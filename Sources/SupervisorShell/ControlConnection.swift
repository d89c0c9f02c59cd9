import ExtensionProtocol
import ExtensionTransport
import SupervisorCore
import SupervisorKernel

/// One accepted control-socket connection (a host or `extctl`). Owned by the daemon's loop.
final class ControlConnection {
    let id: HostID
    /// The socket, its watch and its outbound queue. Descriptors a host sends are closed and ignored.
    let endpoint: Peer
    /// Who connected, per SO_PEERCRED at accept time.
    let identity: PeerIdentity
    /// Streams lifecycle events (after `monitor`).
    private(set) var isMonitor = false
    /// Admits notification-hint posts; over the rate they are refused with `limitReached`.
    private var posts = MessageRate(perSecond: MessageRate.postsPerSecond, burst: MessageRate.postBurst)

    init(id: HostID, socket: PacketSocket, identity: PeerIdentity, queueLimit: Int, descriptorLimit: Int) {
        self.id = id
        self.endpoint = Peer(socket: socket, queueLimit: queueLimit, descriptorLimit: descriptorLimit, refusesDescriptors: false)
        self.identity = identity
    }

    /// From now on the connection receives every lifecycle event.
    func startMonitoring() { isMonitor = true }

    /// Whether a notification-hint post at `now` is within the connection's rate.
    func admitPost(at now: Instant) -> Bool { posts.admit(at: now) }

    /// Stops watching and closes the socket, discarding anything unsent.
    func close() { endpoint.close() }
}
