import ExtensionProtocol

/// A buffer that holds the largest datagram the protocol allows (`WireLimits.maxMessageSize`),
/// allocated once and reused for every message one receiver reads.
///
/// The memory is not zeroed: a receive only reads the bytes the kernel wrote. Not `Sendable`:
/// each receiving thread owns its own.
public final class ReceiveBuffer {
    /// The memory, `WireLimits.maxMessageSize` bytes.
    public let bytes: UnsafeMutableRawBufferPointer

    /// Allocates `WireLimits.maxMessageSize` bytes, not zeroed; they are freed with the buffer.
    public init() {
        bytes = .allocate(byteCount: WireLimits.maxMessageSize, alignment: 16)
    }

    deinit { bytes.deallocate() }
}
