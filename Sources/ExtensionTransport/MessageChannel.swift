import ExtensionProtocol

#if canImport(Glibc)
import Glibc
#endif

/// A blocking, message-level view of a `PacketSocket` for clients (hosts, `extctl`, the
/// runtime's reader thread). Decodes every datagram with `WireDecoder`.
///
/// Not thread-safe by itself: use one sender and one receiver at a time.
public struct MessageChannel: Sendable {
    /// The socket the channel sends and receives on. The channel never closes it: its owner does.
    public let socket: PacketSocket

    /// A channel over `socket`, which stays the caller's.
    public init(socket: PacketSocket) { self.socket = socket }

    /// Errors a client sees.
    public enum Failure: Error, CustomStringConvertible, Sendable {
        /// A send or receive system call failed.
        case system(SystemError)
        /// A message could not be encoded, or a datagram received was truncated (`.tooLarge`) or
        /// could not be decoded; a descriptor received with that datagram has been closed.
        case wire(WireError)
        /// The peer closed the connection (end of file, ECONNRESET or ENOTCONN on a receive).
        case closed

        /// A sentence for a person: the system error's text, "malformed message: …", or "the other
        /// side closed the connection".
        public var description: String {
            switch self {
            case .system(let e): e.description
            case .wire(let e): "malformed message: \(e)"
            case .closed: "the other side closed the connection"
            }
        }
    }

    /// Encodes and sends a message (blocking), with a descriptor when given.
    public func send(_ message: Message, descriptor: Int32? = nil) throws(Failure) {
        let bytes: [UInt8]
        do { bytes = try WireEncoder.encoded(message) } catch { throw .wire(error) }
        do { _ = try socket.send(bytes, descriptor: descriptor) } catch { throw .system(error) }
    }

    /// Receives and decodes one message (blocking). A descriptor that came with it is returned;
    /// the caller owns it. Uses a temporary buffer: receivers that read many messages should
    /// keep a `ReceiveBuffer` and call `receive(into:)`.
    public func receive() throws(Failure) -> (Message, Int32?) {
        try receive(into: ReceiveBuffer())
    }

    /// Receives and decodes one message (blocking) into `buffer`, which the caller reuses for
    /// every message. A descriptor that came with it is returned; the caller owns it.
    public func receive(into buffer: ReceiveBuffer) throws(Failure) -> (Message, Int32?) {
        let raw = buffer.bytes
        while true {
            let result: PacketSocket.ReceiveResult
            do {
                result = try socket.receive(into: raw)
            } catch {
                throw .system(error)
            }
            switch result {
            case .closed: throw .closed
            case .wouldBlock: continue
            case .datagram(let count, let descriptor, let truncated):
                if truncated {
                    if let descriptor { close(descriptor) }
                    throw .wire(.tooLarge(count))
                }
                do {
                    let message = try WireDecoder.decode(UnsafeRawBufferPointer(rebasing: raw[0..<count]))
                    if message.kind.carriesSecrets { UnsafeMutableRawBufferPointer(rebasing: raw[0..<count]).initializeMemory(as: UInt8.self, repeating: 0) }
                    return (message, descriptor)
                } catch {
                    if let descriptor { close(descriptor) }
                    throw .wire(error)
                }
            }
        }
    }
}
