extension Message {
    /// The `events` messages that carry `objects` (each one event's JSON), in order: as many
    /// consecutive objects in each as fit one datagram of `WireLimits.maxMessageSize` bytes, so a
    /// monitor gets one datagram per loop iteration unless that iteration's events exceed it. An
    /// object over `WireLimits.maxChunk` bytes travels alone, and the encoder refuses that
    /// message. No message for no objects.
    public static func events(carrying objects: [[UInt8]]) -> [Message] {
        // Header, then the count; each object adds its 4-byte length.
        let empty = WireLimits.headerSize + 2
        var messages: [Message] = []
        var batch: [[UInt8]] = []
        var size = empty
        func flush() {
            guard !batch.isEmpty else { return }
            messages.append(.events(json: batch))
            batch.removeAll(keepingCapacity: true)
            size = empty
        }
        for json in objects {
            if json.count > WireLimits.maxChunk {
                flush()
                messages.append(.events(json: [json]))
                continue
            }
            let added = 4 + json.count
            if size + added > WireLimits.maxMessageSize || batch.count == Int(UInt16.max) { flush() }
            batch.append(json)
            size += added
        }
        flush()
        if !batch.isEmpty { messages.append(.events(json: batch)) }
        return messages
    }

    /// Appends the events of the encoded `events` message `next` to the encoded `events`
    /// message `batch`, as one message carrying both lists in order, when both are well-formed
    /// `events` messages and the result fits one datagram (`WireLimits.maxMessageSize`, at most
    /// 65,535 events). Returns false, leaving `batch` unchanged, otherwise. A sender whose
    /// reader lags uses it on what waits to be written: the reader then wakes once for many
    /// loop iterations' events.
    public static func appendEvents(_ next: [UInt8], to batch: inout [UInt8]) -> Bool {
        let header = WireLimits.headerSize
        func count(_ m: [UInt8]) -> Int? {
            guard m.count >= header + 2, m[0] == WireLimits.version, m[1] == MessageKind.events.rawValue,
                Int(m[4]) | Int(m[5]) << 8 | Int(m[6]) << 16 | Int(m[7]) << 24 == m.count - header
            else { return nil }
            return Int(m[header]) | Int(m[header + 1]) << 8
        }
        guard let first = count(batch), let second = count(next), first + second <= Int(UInt16.max),
            batch.count + next.count - header - 2 <= WireLimits.maxMessageSize
        else { return false }
        batch.append(contentsOf: next[(header + 2)...])
        let payload = UInt32(batch.count - header), total = UInt16(first + second)
        batch[4] = UInt8(truncatingIfNeeded: payload)
        batch[5] = UInt8(truncatingIfNeeded: payload >> 8)
        batch[6] = UInt8(truncatingIfNeeded: payload >> 16)
        batch[7] = UInt8(truncatingIfNeeded: payload >> 24)
        batch[header] = UInt8(truncatingIfNeeded: total)
        batch[header + 1] = UInt8(truncatingIfNeeded: total >> 8)
        return true
    }
}
