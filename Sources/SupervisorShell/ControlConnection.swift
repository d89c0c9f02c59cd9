import ExtensionProtocol
import ExtensionTransport
import SupervisorCore

/// One accepted control-socket connection (a host or `extctl`). Owned by the daemon's loop.
final class ControlConnection {
    let id: HostID
    let socket: PacketSocket
    /// Who connected, per SO_PEERCRED at accept time.
    let peer: PeerIdentity
    var source: EventSource?
    var outbound: OutboundQueue
    /// Streams lifecycle events (after `monitor`).
    var isMonitor = false

    init(id: HostID, socket: PacketSocket, peer: PeerIdentity, queueLimit: Int) {
        self.id = id
        self.socket = socket
        self.peer = peer
        self.outbound = OutboundQueue(byteLimit: queueLimit)
    }

    /// Stops watching and closes the socket, discarding anything unsent.
    func close() {
        source?.cancel()
        source = nil
        outbound.discard()
        socket.close()
    }
}
