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
    /// The tags of administrative requests polkit allowed that have not come yet
    /// (`grantAdministration`).
    private var adminGrants: Set<UInt32> = []

    init(id: HostID, socket: PacketSocket, identity: PeerIdentity, queueLimit: Int, descriptorLimit: Int, isAdopted: Bool = false) {
        self.isAdopted = isAdopted
        self.id = id
        self.endpoint = Peer(socket: socket, queueLimit: queueLimit, descriptorLimit: descriptorLimit, refusesDescriptors: false)
        self.identity = identity
    }

    /// From now on the connection receives every lifecycle event.
    func startMonitoring() { isMonitor = true }

    /// Lets the administrative request tagged `tag` on this connection through although its
    /// peer is not an administrator: polkit allowed that call (docs/dbus.md, "Access"). Only the
    /// message carrying that tag takes it; no other request, refused or queued, can.
    func grantAdministration(tag: UInt32) { adminGrants.insert(tag) }

    /// Withdraws the grant for `tag`: its message was never sent.
    func withdrawAdministrationGrant(tag: UInt32) { adminGrants.remove(tag) }

    /// Takes the grant for `tag`, if there is one.
    func takeAdministrationGrant(tag: UInt32) -> Bool { adminGrants.remove(tag) != nil }

    /// Whether a notification-hint post at `now` is within the connection's rate.
    func admitPost(at now: Instant) -> Bool { posts.admit(at: now) }

    /// Stops watching and closes the socket, discarding anything unsent.
    func close() { endpoint.close() }
}
