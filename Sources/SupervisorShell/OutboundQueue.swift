import ExtensionProtocol
import ExtensionTransport
import SupervisorKernel

/// Messages waiting for a non-blocking peer to become writable. Bounded: when a peer stops
/// reading, the queue fills up and the caller cuts the peer off instead of buffering forever.
struct OutboundQueue {
    private var items: [(bytes: [UInt8], descriptor: Int32?, key: UInt64?)] = []
    private var head = 0
    private(set) var queuedBytes = 0
    private(set) var queuedDescriptors = 0
    let byteLimit: Int
    /// Most descriptors held for a peer that does not read: each is an open file in the daemon.
    let descriptorLimit: Int
    /// The descriptor limit of a queue given none.
    static let defaultDescriptorLimit = 64

    init(byteLimit: Int, descriptorLimit: Int = OutboundQueue.defaultDescriptorLimit) {
        self.byteLimit = byteLimit
        self.descriptorLimit = descriptorLimit
    }

    var isEmpty: Bool { head == items.count }

    /// The result of offering a message.
    enum Outcome: Equatable {
        case sent, queued
        /// The queue is over its limits: the peer does not read.
        case overflow
        /// The socket failed (the peer is gone or broken).
        case failed(SystemError)
    }

    /// Sends at once if nothing is queued and the socket takes it, otherwise queues it; with
    /// `holding` it is queued in any case (within the limits), for a later `flush`.
    /// The descriptor (if any) is closed once sent, or when the queue is discarded.
    /// `key` names the message for `cancel(key:)` (the request id of a `deliver`).
    mutating func send(_ bytes: [UInt8], descriptor: Int32?, key: UInt64? = nil, on socket: PacketSocket, holding: Bool = false) -> Outcome {
        if isEmpty && !holding {
            do {
                switch try socket.send(bytes, descriptor: descriptor) {
                case .sent:
                    if let descriptor { PacketSocket.closeReceived(descriptor) }
                    return .sent
                case .wouldBlock:
                    break
                }
            } catch {
                if let descriptor { PacketSocket.closeReceived(descriptor) }
                return .failed(error)
            }
        }
        if queuedBytes + bytes.count > byteLimit || (descriptor != nil && queuedDescriptors >= descriptorLimit) {
            if let descriptor { PacketSocket.closeReceived(descriptor) }
            return .overflow
        }
        // An `events` message joins an `events` message waiting last, when one datagram holds
        // both: a monitor that lags then reads the events of many loop iterations per wake-up.
        if descriptor == nil, key == nil, head < items.count, items[items.count - 1].descriptor == nil, items[items.count - 1].key == nil {
            let before = items[items.count - 1].bytes.count
            if Message.appendEvents(bytes, to: &items[items.count - 1].bytes) {
                queuedBytes += items[items.count - 1].bytes.count - before
                return .queued
            }
        }
        // A copy of exactly its size: `bytes` is usually the caller's reused encoding buffer,
        // whose capacity (grown by its largest message) the queue would otherwise keep alive
        // for as long as the message waits, e.g. a stopped extension's `ended`.
        items.append((bytes.withUnsafeBufferPointer { Array($0) }, descriptor, key))
        queuedBytes += bytes.count
        if descriptor != nil { queuedDescriptors += 1 }
        return .queued
    }

    /// Sends what the socket takes now: a run of messages without descriptors goes out in one
    /// system call. Returns the socket's error if the peer failed, nil otherwise.
    mutating func flush(on socket: PacketSocket) -> SystemError? {
        while head < items.count {
            switch sendRun(on: socket) {
            case .sent: continue
            case .wouldBlock:
                compact()
                return nil
            case .failed(let error): return error
            case .single: break
            }
            let item = items[head]
            let result: PacketSocket.SendResult
            do { result = try socket.send(item.bytes, descriptor: item.descriptor) } catch { return error }
            switch result {
            case .sent:
                if let d = item.descriptor {
                    PacketSocket.closeReceived(d)
                    queuedDescriptors -= 1
                }
                queuedBytes -= item.bytes.count
                head += 1
            case .wouldBlock:
                compact()
                return nil
            }
        }
        items.removeAll(keepingCapacity: false)
        head = 0
        return nil
    }

    private enum RunOutcome { case sent, wouldBlock, failed(SystemError), single }

    /// Sends the run of queued messages without descriptors that starts at `head` (two or more,
    /// up to `PacketSocket.maxBatch`) with one sendmmsg, laid end to end in one buffer for the
    /// call. `.single`: the run is shorter, send the head alone.
    private mutating func sendRun(on socket: PacketSocket) -> RunOutcome {
        var end = head
        while end < items.count && end - head < PacketSocket.maxBatch && items[end].descriptor == nil { end += 1 }
        let count = end - head
        guard count >= 2 else { return .single }
        var scratch: [UInt8] = []
        scratch.reserveCapacity(items[head..<end].reduce(0) { $0 + $1.bytes.count })
        var lengths: [Int] = []
        lengths.reserveCapacity(count)
        for item in items[head..<end] {
            scratch.append(contentsOf: item.bytes)
            lengths.append(item.bytes.count)
        }
        let outcome = scratch.withUnsafeBytes { raw in Result { () throws(SystemError) in try socket.send(batch: raw, lengths: lengths) } }
        let sent: Int
        switch outcome {
        case .success(let n): sent = n
        case .failure(let error): return .failed(error)
        }
        for item in items[head..<(head + sent)] { queuedBytes -= item.bytes.count }
        head += sent
        return sent == count ? .sent : .wouldBlock
    }

    private mutating func compact() {
        if head > 64 && head * 2 > items.count {
            items.removeFirst(head)
            head = 0
        }
    }

    /// Removes a queued, unsent message by its key (closing its descriptor). Returns false when
    /// no such message waits (it was sent already, or never queued).
    mutating func cancel(key: UInt64) -> Bool {
        guard let i = items[head...].firstIndex(where: { $0.key == key }) else { return false }
        let item = items.remove(at: i)
        queuedBytes -= item.bytes.count
        if let d = item.descriptor {
            PacketSocket.closeReceived(d)
            queuedDescriptors -= 1
        }
        return true
    }

    /// Drops everything queued, closing attached descriptors.
    mutating func discard() {
        for item in items[head...] { if let d = item.descriptor { PacketSocket.closeReceived(d) } }
        items.removeAll()
        head = 0
        queuedBytes = 0
        queuedDescriptors = 0
    }
}
