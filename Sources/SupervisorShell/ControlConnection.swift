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

    /// Made by the daemon for a caller another party vouches for (the D-Bus front end), not
    /// accepted on the socket: never handed over.
    let isAdopted: Bool
    /// Administrative requests polkit allowed that have not come yet (`grantAdministration`).
    private var adminGrants = 0

    init(id: HostID, socket: PacketSocket, identity: PeerIdentity, queueLimit: Int, descriptorLimit: Int, isAdopted: Bool = false) {
        self.isAdopted = isAdopted
        self.id = id
        self.endpoint = Peer(socket: socket, queueLimit: queueLimit, descriptorLimit: descriptorLimit, refusesDescriptors: false)
        self.identity = identity
    }

    /// From now on the connection receives every lifecycle event.
    func startMonitoring() { isMonitor = true }

    /// Lets the next administrative request on this connection through although its peer is
    /// not an administrator: polkit allowed it (docs/dbus.md, "Access").
    func grantAdministration() { adminGrants += 1 }

    /// Whether a grant of `grantAdministration` waits.
    var hasAdministrationGrant: Bool { adminGrants > 0 }

    /// Takes one grant of `grantAdministration`, if there is one.
    func takeAdministrationGrant() -> Bool {
        guard adminGrants > 0 else { return false }
        adminGrants -= 1
        return true
    }

    /// Whether a notification-hint post at `now` is within the connection's rate.
    func admitPost(at now: Instant) -> Bool { posts.admit(at: now) }

    /// Stops watching and closes the socket, discarding anything unsent.
    func close() { endpoint.close() }
}
