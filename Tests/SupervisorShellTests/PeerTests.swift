import ExtensionProtocol
import ExtensionTransport
import SupervisorCore
import SupervisorKernel
import Testing

@testable import SupervisorShell

#if canImport(Glibc)
import Glibc
#endif

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

    /// A peer on one end of a non-blocking socketpair, and the other end to read from.
    func connectedPeer(queueLimit: Int) throws -> (Peer, PacketSocket) {
        let (mine, theirs) = try PacketSocket.pair(nonBlocking: true)
        return (Peer(socket: mine, queueLimit: queueLimit, refusesDescriptors: false), theirs)
    }

    @Test func heldMessagesAreWrittenInOrderOnRelease() throws {
        let (peer, theirs) = try connectedPeer(queueLimit: 1 << 20)
        defer { peer.close(); theirs.close() }
        var encoder = WireEncoder()
        #expect(peer.send(.ok(tag: 1), encoder: &encoder) == .accepted)
        #expect(try received(theirs) == [.ok(tag: 1)], "not held: written at once")
        peer.hold()
        #expect(peer.send(.ok(tag: 2), encoder: &encoder) == .accepted)
        #expect(peer.send(.ok(tag: 3), encoder: &encoder) == .accepted)
        #expect(try received(theirs).isEmpty, "held: nothing written yet")
        #expect(peer.release() == nil)
        #expect(!peer.isHeld)
        #expect(try received(theirs) == [.ok(tag: 2), .ok(tag: 3)])
        #expect(peer.send(.ok(tag: 4), encoder: &encoder) == .accepted)
        #expect(try received(theirs) == [.ok(tag: 4)], "released: written at once again")
    }

    @Test func aHeldBurstLargerThanOneBatchArrivesWholeAndInOrder() throws {
        let (peer, theirs) = try connectedPeer(queueLimit: 1 << 20)
        defer { peer.close(); theirs.close() }
        var encoder = WireEncoder()
        peer.hold()
        let count = PacketSocket.maxBatch * 2 + 5
        for tag in 1...count { #expect(peer.send(.ok(tag: UInt32(tag)), encoder: &encoder) == .accepted) }
        #expect(peer.release() == nil)
        #expect(try received(theirs) == (1...count).map { .ok(tag: UInt32($0)) }, "each message its own datagram, none lost or merged")
    }

    @Test func aSocketWhoseWritabilityCannotBeWatchedFailsRatherThanKeepingItsQueue() throws {
        let (peer, theirs) = try connectedPeer(queueLimit: 1 << 22)
        defer { peer.close(); theirs.close() }
        let kernel = RecordingKernel()
        kernel.refusedEventChanges = ENOMEM
        #expect(peer.watch(through: kernel) { _ in } == nil)
        var encoder = WireEncoder()
        let payload = [UInt8](repeating: 7, count: 4000)
        var outcome = Peer.SendResult.accepted
        for r in 1...400 where outcome == .accepted {
            outcome = peer.send(.completed(requestID: UInt64(r), payload: payload), encoder: &encoder)
        }
        #expect(outcome == .failed(SystemError(errno: ENOMEM)), "what the socket could not take would never be sent")
    }

    @Test func aBurstTheSocketCannotTakeWholeWaitsForWritability() throws {
        let (peer, theirs) = try connectedPeer(queueLimit: 1 << 22)
        defer { peer.close(); theirs.close() }
        var encoder = WireEncoder()
        peer.hold()
        // Far more than a socket buffer holds: the batch is cut short, the rest stays queued.
        let payload = [UInt8](repeating: 7, count: 4000)
        let count = 400
        for r in 1...count { #expect(peer.send(.completed(requestID: UInt64(r), payload: payload), encoder: &encoder) == .accepted) }
        #expect(peer.release() == nil)
        var got: [Message] = try received(theirs)
        #expect(got.count < count, "the socket buffer filled")
        while got.count < count {
            #expect(peer.flush(Poll.output) == nil)
            let more = try received(theirs)
            #expect(!more.isEmpty, "each writable turn moves the queue on")
            if more.isEmpty { break }
            got += more
        }
        #expect(got == (1...count).map { .completed(requestID: UInt64($0), payload: payload) })
    }

    @Test func aMessageWithADescriptorIsNeverHeldAndGoesAfterWhatWasHeld() throws {
        let (peer, theirs) = try connectedPeer(queueLimit: 1 << 20)
        defer { peer.close(); theirs.close() }
        var encoder = WireEncoder()
        peer.hold()
        #expect(peer.send(.ok(tag: 1), encoder: &encoder) == .accepted)
        let descriptor = open("/dev/null", O_RDONLY | O_CLOEXEC)
        #expect(descriptor >= 0)
        #expect(peer.send(.begun(tag: 2, requestID: 7, pid: 1, hasChannel: true), encoder: &encoder, descriptor: descriptor) == .accepted)
        #expect(peer.send(.ok(tag: 3), encoder: &encoder) == .accepted)
        #expect(try received(theirs) == [.ok(tag: 1), .begun(tag: 2, requestID: 7, pid: 1, hasChannel: true)], "written at once, after the held one")
        #expect(peer.release() == nil)
        #expect(try received(theirs) == [.ok(tag: 3)])
    }

    /// Answers carrying descriptors to a reader that lags are queued up to the peer's
    /// descriptor limit, then the peer overflows; the control server's limit is one per request
    /// a host may hold, so a host that pipelines its begins within its limit is not cut off.
    @Test func descriptorsQueueUpToTheLimitAndTheServersLimitFollowsTheRequestLimit() throws {
        let (mine, theirs) = try PacketSocket.pair(nonBlocking: true)
        let peer = Peer(socket: mine, queueLimit: 1 << 20, descriptorLimit: 100, refusesDescriptors: false)
        defer { peer.close(); theirs.close() }
        var encoder = WireEncoder()
        var results: [Peer.SendResult] = []
        for r in 1...2000 {
            let descriptor = open("/dev/null", O_RDONLY | O_CLOEXEC)
            try #require(descriptor >= 0)
            let result = peer.send(.begun(tag: UInt32(r), requestID: UInt64(r), pid: 1, hasChannel: true), encoder: &encoder, descriptor: descriptor)
            results.append(result)
            if result != .accepted { break }
        }
        // The socket takes a few datagrams (net.unix.max_dgram_qlen), then 100 wait in the queue.
        let accepted = results.filter { $0 == .accepted }.count
        #expect(results.last == .overflow)
        #expect(accepted > 100 && accepted < 2000, "\(accepted) accepted")
        #expect(ControlServer.descriptorLimit(SupervisorLimits()) == 256, "maxRequestsPerHost by default")
        var few = SupervisorLimits()
        few.maxRequestsPerHost = 8
        #expect(ControlServer.descriptorLimit(few) == OutboundQueue.defaultDescriptorLimit)
    }

    /// Reads `theirs` through `peer.read` with slots for `slots` datagrams.
    func read(_ peer: Peer, slots: Int, budget: Int = 64) -> (messages: [Message], end: Peer.ReadEnd?) {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: slots * WireLimits.maxMessageSize, alignment: 8)
        defer { buffer.deallocate() }
        var messages: [Message] = []
        let end = peer.read(into: buffer, budget: budget) { message in
            messages.append(message)
            return true
        }
        return (messages, end)
    }

    @Test func aBurstIsReadInBatchesInOrderThenTheCloseAfterIt() throws {
        let (mine, theirs) = try PacketSocket.pair(nonBlocking: true)
        let peer = Peer(socket: mine, queueLimit: 1 << 20, refusesDescriptors: false)
        defer { peer.close() }
        for tag in 1...11 { _ = try theirs.send(try WireEncoder.encoded(.ok(tag: UInt32(tag)))) }
        let descriptor = open("/dev/null", O_RDONLY | O_CLOEXEC)
        try #require(descriptor >= 0)
        _ = try theirs.send(try WireEncoder.encoded(.ok(tag: 12)), descriptor: descriptor)
        close(descriptor)
        theirs.close()
        // 12 datagrams through 4 slots: three full batches, then the end of the stream.
        let (messages, end) = read(peer, slots: 4)
        #expect(messages == (1...12).map { .ok(tag: UInt32($0)) })
        #expect(end == .closed)
    }

    @Test func aBatchStopsAtTheBudgetAndAtAnEmptySocket() throws {
        let (peer, theirs) = try connectedPeer(queueLimit: 1 << 20)
        defer { peer.close(); theirs.close() }
        #expect(read(peer, slots: 4).messages.isEmpty, "nothing waiting")
        for tag in 1...6 { _ = try theirs.send(try WireEncoder.encoded(.ok(tag: UInt32(tag)))) }
        let first = read(peer, slots: 4, budget: 5)
        #expect(first.messages == (1...5).map { .ok(tag: UInt32($0)) }, "the budget, over two batches")
        #expect(first.end == nil)
        let rest = read(peer, slots: 4)
        #expect(rest.messages == [.ok(tag: 6)])
        #expect(rest.end == nil, "drained, still open")
    }

    @Test func aBadMessageInABatchEndsTheReadAfterTheMessagesBeforeIt() throws {
        let (mine, theirs) = try PacketSocket.pair(nonBlocking: true)
        let peer = Peer(socket: mine, queueLimit: 1 << 20, refusesDescriptors: true)
        defer { peer.close(); theirs.close() }
        _ = try theirs.send(try WireEncoder.encoded(.ok(tag: 1)))
        _ = try theirs.send([0xFF, 0x00, 0x01])
        _ = try theirs.send(try WireEncoder.encoded(.ok(tag: 3)))
        let (messages, end) = read(peer, slots: 8)
        #expect(messages == [.ok(tag: 1)])
        guard case .violation(let why) = end else { Issue.record("not a violation: \(String(describing: end))"); return }
        #expect(why.hasPrefix("malformed message"), "\(why)")

        let descriptor = open("/dev/null", O_RDONLY | O_CLOEXEC)
        try #require(descriptor >= 0)
        defer { close(descriptor) }
        _ = try theirs.send(try WireEncoder.encoded(.ok(tag: 4)))
        _ = try theirs.send(try WireEncoder.encoded(.ok(tag: 5)), descriptor: descriptor)
        let refused = read(peer, slots: 8)
        #expect(refused.messages == [.ok(tag: 4)])
        #expect(refused.end == .violation("sent a descriptor, which is not accepted here"))
    }

    @Test func eventsWaitingForALaggingReaderJoinIntoFewerDatagramsInOrder() throws {
        let (peer, theirs) = try connectedPeer(queueLimit: 1 << 22)
        defer { peer.close(); theirs.close() }
        var encoder = WireEncoder()
        func event(_ n: Int) -> [UInt8] { Array("{\"n\":\(n),\"pad\":\"\(String(repeating: "x", count: 180))\"}".utf8) }
        // One `events` message per loop iteration, as the daemon sends them, far more than the
        // socket holds; an answer in the middle keeps its place.
        var sent = 0
        for iteration in 0..<2_000 {
            let objects = (0..<3).map { event(iteration * 3 + $0) }
            sent += 1
            #expect(peer.send(.events(json: objects), encoder: &encoder) == .accepted)
            if iteration == 1_500 { #expect(peer.send(.ok(tag: 9), encoder: &encoder) == .accepted) }
        }
        var got: [Message] = try received(theirs)
        while peer.hasUnsent {
            #expect(peer.flush(Poll.output) == nil)
            let more = try received(theirs)
            if more.isEmpty { break }
            got += more
        }
        let events = got.flatMap { m -> [[UInt8]] in if case .events(let objects) = m { objects } else { [] } }
        #expect(events == (0..<6_000).map(event), "every event, once, in order")
        #expect(got.count < sent, "\(got.count) datagrams for \(sent) messages: the queued ones joined")
        let answer = try #require(got.firstIndex(of: .ok(tag: 9)))
        let before = got[..<answer].flatMap { m -> [[UInt8]] in if case .events(let objects) = m { objects } else { [] } }
        #expect(before.count == 1_501 * 3, "the answer comes after the events sent before it and before the rest")
    }
}
