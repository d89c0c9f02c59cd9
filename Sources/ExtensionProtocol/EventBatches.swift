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
}
