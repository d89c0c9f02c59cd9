import ExtensionProtocol
import Testing

/// `Message.events(carrying:)`: the events of one loop iteration in as few datagrams as fit.
@Suite("Monitor events: batches")
struct EventBatchesTests {
    func object(_ i: Int, size: Int) -> [UInt8] {
        let prefix = Array("{\"n\":\(i),\"pad\":\"".utf8)
        return prefix + [UInt8](repeating: UInt8(ascii: "x"), count: max(0, size - prefix.count - 2)) + Array("\"}".utf8)
    }

    @Test func noEventsNoMessage() {
        #expect(Message.events(carrying: []).isEmpty)
    }

    @Test func anIterationsEventsTravelInOneDatagram() throws {
        let objects = (0..<40).map { object($0, size: 220) }
        let messages = Message.events(carrying: objects)
        #expect(messages == [.events(json: objects)])
        let bytes = try WireEncoder.encoded(messages[0])
        #expect(try WireDecoder.decode(bytes) == messages[0])
    }

    @Test func eventsBeyondOneDatagramFollowInOrderEachDatagramWithinTheLimit() throws {
        let objects = (0..<1_000).map { object($0, size: 150 + $0 % 97) }
        let messages = Message.events(carrying: objects)
        #expect(messages.count > 1)
        var carried: [[UInt8]] = []
        for m in messages {
            let bytes = try WireEncoder.encoded(m)
            #expect(bytes.count <= WireLimits.maxMessageSize)
            guard case .events(let batch) = try WireDecoder.decode(bytes) else {
                Issue.record("not an events message: \(m.kind)")
                continue
            }
            carried += batch
        }
        #expect(carried == objects, "every event, once, in order")
        // Each datagram but the last was full: the next event would not have fitted.
        for (m, next) in zip(messages, messages.dropFirst()) {
            guard case .events(let batch) = m, case .events(let following) = next else { continue }
            let size = try WireEncoder.encoded(m).count
            #expect(size + 4 + following[0].count > WireLimits.maxMessageSize, "\(batch.count) events in \(size) bytes")
        }
    }

    @Test func exactlyOneDatagramFull() throws {
        // Header 8 + count 2, then 4 bytes of length per event: two events of 32,759 bytes fill 65,536.
        let objects = [object(0, size: 32_759), object(1, size: 32_759)]
        let messages = Message.events(carrying: objects)
        #expect(messages.count == 1)
        #expect(try WireEncoder.encoded(messages[0]).count == WireLimits.maxMessageSize)
        #expect(Message.events(carrying: objects + [object(2, size: 1)]).count == 2)
    }

    @Test func anEventOverTheChunkLimitTravelsAloneAndIsRefusedByTheEncoder() throws {
        let big = [UInt8](repeating: UInt8(ascii: "x"), count: WireLimits.maxChunk + 1)
        let messages = Message.events(carrying: [object(0, size: 100), big, object(1, size: 100)])
        // Compared as counts: a failure message would print every byte of `big`.
        #expect(
            messages.map { m -> [Int] in if case .events(let batch) = m { batch.map(\.count) } else { [] } }
                == [[100], [WireLimits.maxChunk + 1], [100]])
        #expect(messages.first == .events(json: [object(0, size: 100)]) && messages.last == .events(json: [object(1, size: 100)]))
        #expect(throws: WireError.fieldTooLong("events", WireLimits.maxChunk + 1)) { try WireEncoder.encoded(messages[1]) }
    }

    @Test func queuedEventsMessagesJoinInOrderWhileOneDatagramHoldsThem() throws {
        let first = (0..<3).map { object($0, size: 200) }, second = (3..<5).map { object($0, size: 200) }
        var batch = try WireEncoder.encoded(.events(json: first))
        #expect(Message.appendEvents(try WireEncoder.encoded(.events(json: second)), to: &batch))
        #expect(try WireDecoder.decode(batch) == .events(json: first + second))

        // Not an `events` message, on either side: nothing changes.
        let before = batch
        #expect(!Message.appendEvents(try WireEncoder.encoded(.ok(tag: 1)), to: &batch))
        var ok = try WireEncoder.encoded(.ok(tag: 1))
        #expect(!Message.appendEvents(try WireEncoder.encoded(.events(json: second)), to: &ok))
        let plainOK = try WireEncoder.encoded(.ok(tag: 1))
        #expect(batch == before && ok == plainOK)

        // Past one datagram: refused, the batch unchanged.
        var full = try WireEncoder.encoded(.events(json: (0..<300).map { object($0, size: 200) }))
        let large = try WireEncoder.encoded(.events(json: (0..<30).map { object($0, size: 200) }))
        let fullBefore = full
        #expect(full.count + large.count - WireLimits.headerSize - 2 > WireLimits.maxMessageSize)
        #expect(!Message.appendEvents(large, to: &full))
        #expect(full == fullBefore)
    }
}
