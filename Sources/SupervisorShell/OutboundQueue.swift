import ExtensionTransport
#if canImport(Glibc)
import Glibc
#endif

/// Messages waiting for a non-blocking peer to become writable. Bounded: when a peer stops
/// reading, the queue fills up and the caller cuts the peer off instead of buffering forever.
struct OutboundQueue {
    private var items: [(bytes: [UInt8], descriptor: Int32?)] = []
    private var head = 0
    private(set) var queuedBytes = 0
    let byteLimit: Int

    init(byteLimit: Int) { self.byteLimit = byteLimit }

    var isEmpty: Bool { head == items.count }

    /// The result of offering a message.
    enum Outcome { case sent, queued, overflow }

    /// Sends at once if nothing is queued and the socket takes it, otherwise queues it.
    /// The descriptor (if any) is closed once sent, or when the queue is discarded.
    mutating func send(_ bytes: [UInt8], descriptor: Int32?, on socket: PacketSocket) -> Outcome {
        if isEmpty {
            switch try? socket.send(bytes, descriptor: descriptor) {
            case .sent?:
                if let descriptor { close(descriptor) }
                return .sent
            case .wouldBlock?:
                break
            case nil:
                if let descriptor { close(descriptor) }
                return .overflow  // the peer is gone or broken
            }
        }
        if queuedBytes + bytes.count > byteLimit {
            if let descriptor { close(descriptor) }
            return .overflow
        }
        items.append((bytes, descriptor))
        queuedBytes += bytes.count
        return .queued
    }

    /// Sends what the socket takes now. Returns false if the peer failed.
    mutating func flush(on socket: PacketSocket) -> Bool {
        while head < items.count {
            let item = items[head]
            switch try? socket.send(item.bytes, descriptor: item.descriptor) {
            case .sent?:
                if let d = item.descriptor { close(d) }
                queuedBytes -= item.bytes.count
                head += 1
            case .wouldBlock?:
                compact()
                return true
            case nil:
                return false
            }
        }
        items.removeAll(keepingCapacity: false)
        head = 0
        return true
    }

    private mutating func compact() {
        if head > 64 && head * 2 > items.count {
            items.removeFirst(head)
            head = 0
        }
    }

    /// Drops everything queued, closing attached descriptors.
    mutating func discard() {
        for item in items[head...] { if let d = item.descriptor { close(d) } }
        items.removeAll()
        head = 0
        queuedBytes = 0
    }
}
