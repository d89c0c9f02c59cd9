#if canImport(Glibc)
import Glibc
#endif
import ExtensionProtocol
import ExtensionTransport
@testable import SupervisorShell
import Testing

/// A held peer writes nothing until it is released, then everything it held, in order.
struct PeerTests {
    func received(_ socket: PacketSocket) throws -> [Message] {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: WireLimits.maxMessageSize, alignment: 8)
        defer { buffer.deallocate() }
        var messages: [Message] = []
        while case .datagram(let count, let descriptor, _) = try socket.receive(into: buffer) {
            if let descriptor { close(descriptor) }
            messages.append(try WireDecoder.decode(UnsafeRawBufferPointer(rebasing: buffer[0..<count])))
        }
        return messages
    }

    @Test func heldMessagesAreWrittenInOrderOnRelease() throws {
        let (mine, theirs) = try PacketSocket.pair(nonBlocking: true)
        defer { theirs.close() }
        let peer = Peer(socket: mine, queueLimit: 1 << 20, refusesDescriptors: false)
        defer { peer.close() }
        var encoder = WireEncoder()
        #expect(peer.send(.ok(tag: 1), encoder: &encoder) == .accepted)
        #expect(try received(theirs) == [.ok(tag: 1)], "not held: written at once")
        peer.hold()
        #expect(peer.send(.ok(tag: 2), encoder: &encoder) == .accepted)
        #expect(peer.send(.ok(tag: 3), encoder: &encoder) == .accepted)
        #expect(try received(theirs).isEmpty, "held: nothing written yet")
        #expect(peer.release())
        #expect(!peer.isHeld)
        #expect(try received(theirs) == [.ok(tag: 2), .ok(tag: 3)])
        #expect(peer.send(.ok(tag: 4), encoder: &encoder) == .accepted)
        #expect(try received(theirs) == [.ok(tag: 4)], "released: written at once again")
    }

    @Test func aMessageWithADescriptorIsNeverHeldAndGoesAfterWhatWasHeld() throws {
        let (mine, theirs) = try PacketSocket.pair(nonBlocking: true)
        defer { theirs.close() }
        let peer = Peer(socket: mine, queueLimit: 1 << 20, refusesDescriptors: false)
        defer { peer.close() }
        var encoder = WireEncoder()
        peer.hold()
        #expect(peer.send(.ok(tag: 1), encoder: &encoder) == .accepted)
        let descriptor = open("/dev/null", O_RDONLY | O_CLOEXEC)
        #expect(descriptor >= 0)
        #expect(peer.send(.begun(tag: 2, requestID: 7, pid: 1, hasChannel: true), encoder: &encoder, descriptor: descriptor) == .accepted)
        #expect(peer.send(.ok(tag: 3), encoder: &encoder) == .accepted)
        #expect(try received(theirs) == [.ok(tag: 1), .begun(tag: 2, requestID: 7, pid: 1, hasChannel: true)], "written at once, after the held one")
        #expect(peer.release())
        #expect(try received(theirs) == [.ok(tag: 3)])
    }
}
