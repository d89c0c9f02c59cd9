import ExtensionProtocol
import SupervisorKernel

/// The daemon's two message buffers, shared by every socket it serves: the encoder whose
/// buffer each outgoing message is encoded into, and the buffer each datagram is received
/// into. One of each serves the whole loop: a message is encoded, sent or copied into its
/// queue, and a datagram decoded, before the next one. Owned by the daemon's loop.
final class WireBuffers {
    private var encoder = WireEncoder()
    /// How many datagrams `Peer.read` receives with one system call.
    static let receiveSlots = 8
    /// Where `Peer.read` receives datagrams: `receiveSlots` slots of the largest message. Only
    /// the pages a datagram was written to are resident: a slot holding small messages costs
    /// one page.
    let receive = UnsafeMutableRawBufferPointer.allocate(byteCount: WireBuffers.receiveSlots * WireLimits.maxMessageSize, alignment: 8)

    deinit { receive.deallocate() }

    /// Encodes `message` and sends it on `peer` (see `Peer.send`).
    func send(_ message: Message, on peer: Peer, descriptor: Int32? = nil, key: UInt64? = nil) -> Peer.SendResult {
        let result = peer.send(message, encoder: &encoder, descriptor: descriptor, key: key)
        if message.kind.carriesSecrets { encoder.clear() }
        return result
    }
}
