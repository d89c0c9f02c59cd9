import ExtensionProtocol
import ExtensionTransport
import SupervisorKernel

/// One socket the daemon exchanges messages over: a control connection (a host or `extctl`) or
/// an extension's runtime channel. It owns the socket, the loop's watch on it and a bounded
/// outbound queue, so neither reading nor writing ever blocks the loop. Owned by the daemon's loop.
final class Peer {
    /// Why `read` stopped before the socket was drained.
    enum ReadEnd: Equatable {
        /// The other side closed the socket.
        case closed
        /// Receiving failed; the error's description.
        case failed(String)
        /// The other side broke the protocol: an oversized or undecodable message, or a
        /// descriptor where none is accepted.
        case violation(String)
    }

    /// What became of a message handed to `send`.
    enum SendResult: Equatable {
        /// Written at once or queued behind earlier messages.
        case accepted
        /// The queue is over its limit: the other side does not read; the caller ends the peer.
        case overflow
        /// The socket failed (the other side is gone or broken), or its writability cannot be
        /// watched for what is queued; the caller ends the peer.
        case failed(SystemError)
        /// The message cannot be encoded (a programming error); nothing was sent.
        case unencodable(String)
        /// The peer is closed; nothing was sent.
        case closed
    }

    let socket: PacketSocket
    /// Whether a received descriptor breaks the protocol (true) or is closed and ignored.
    let refusesDescriptors: Bool
    private var source: (any Watch)?
    private var outbound: OutboundQueue
    private(set) var isClosed = false
    /// While held, messages are queued instead of written; `release` writes them, in order.
    private(set) var isHeld = false

    init(socket: PacketSocket, queueLimit: Int, descriptorLimit: Int = OutboundQueue.defaultDescriptorLimit, refusesDescriptors: Bool) {
        self.socket = socket
        self.outbound = OutboundQueue(byteLimit: queueLimit, descriptorLimit: descriptorLimit)
        self.refusesDescriptors = refusesDescriptors
    }

    /// Starts watching the socket: `handler` gets the poll events each time it is readable
    /// (or, while messages are queued, writable).
    func watch(through kernel: any Kernel, _ handler: @escaping (UInt32) -> Void) -> SystemError? {
        switch kernel.watch(fd: socket.fd, events: Poll.input, handler) {
        case .success(let watch):
            source = watch
            return nil
        case .failure(let e): return e
        }
    }

    /// On a writable event, sends what is queued; the socket's error when writing failed (the
    /// caller ends the peer). Stops asking for writability once the queue is empty.
    func flush(_ events: UInt32) -> SystemError? {
        guard events & Poll.output != 0 else { return nil }
        if let e = outbound.flush(on: socket) { return e }
        if outbound.isEmpty, let e = source?.setEvents(Poll.input) { return e }
        return nil
    }

    /// Receives and decodes up to `budget` messages, handing each to `handle`, which returns
    /// false to stop reading (it ended this peer). Returns nil when the socket is drained, the
    /// budget is spent or `handle` stopped, else why reading must end.
    ///
    /// `buffer` holds slots of `WireLimits.maxMessageSize` bytes, and each system call
    /// (recvmmsg) receives as many datagrams as there are slots: a burst costs one call per
    /// batch, and a batch that does not fill the slots shows the socket drained without a
    /// further call. A batch is decoded whole before its first message is handled, so that
    /// handling may read other peers into the same buffer.
    func read(into buffer: UnsafeMutableRawBufferPointer, budget: Int, _ handle: (Message) -> Bool) -> ReadEnd? {
        let slotSize = WireLimits.maxMessageSize
        var left = budget
        while left > 0 {
            guard !isClosed else { return nil }
            let slots = min(buffer.count / slotSize, left, PacketSocket.maxReceiveBatch)
            var messages: [Message] = []
            var end: ReadEnd?
            var datagramsSeen = 0
            let arrived: Int
            do {
                arrived = try socket.receive(batchInto: UnsafeMutableRawBufferPointer(rebasing: buffer[0..<(slots * slotSize)]), slotSize: slotSize) {
                    result in
                    switch result {
                    case .wouldBlock: return
                    case .closed: end = end ?? .closed
                    case .datagram(let count, let descriptor, let truncated):
                        if let descriptor { PacketSocket.closeReceived(descriptor) }
                        let slot = datagramsSeen
                        datagramsSeen += 1
                        let datagram = UnsafeMutableRawBufferPointer(rebasing: buffer[(slot * slotSize)..<(slot * slotSize + count)])
                        // Secret bytes stay only in the message's `SecretData`: the slot is
                        // cleared whether it is decoded, malformed, or left unread.
                        defer { if count > 1, MessageKind.carriesSecrets(datagram[1]) { datagram.initializeMemory(as: UInt8.self, repeating: 0) } }
                        guard end == nil else { return }
                        if truncated { return end = .violation("message over \(WireLimits.maxMessageSize) bytes") }
                        if descriptor != nil && refusesDescriptors { return end = .violation("sent a descriptor, which is not accepted here") }
                        do {
                            messages.append(try WireDecoder.decode(UnsafeRawBufferPointer(datagram)))
                        } catch {
                            end = .violation("malformed message: \(error)")
                        }
                    }
                }
            } catch {
                return .failed("\(error)")
            }
            for message in messages {
                guard !isClosed, handle(message) else { return nil }
            }
            if let end { return end }
            if arrived < slots { return nil }
            left -= arrived
        }
        return nil
    }

    /// Encodes `message` with `encoder` (reused for its buffer) and sends it, with `descriptor`
    /// attached, or queues it. `key` lets a queued message be withdrawn (`cancel`). The
    /// descriptor is always consumed: sent, queued, or closed on failure.
    func send(_ message: Message, encoder: inout WireEncoder, descriptor: Int32? = nil, key: UInt64? = nil) -> SendResult {
        guard !isClosed else {
            if let descriptor { PacketSocket.closeReceived(descriptor) }
            return .closed
        }
        do { try encoder.encode(message) } catch {
            if let descriptor { PacketSocket.closeReceived(descriptor) }
            return .unencodable("cannot encode \(message.kind): \(error)")
        }
        // A message carrying a descriptor is never held (each queued one is an open file, and
        // the queue takes only its `descriptorLimit`): what was held goes first.
        if isHeld && descriptor != nil, let e = outbound.flush(on: socket) {
            PacketSocket.closeReceived(descriptor!)
            return .failed(e)
        }
        switch outbound.send(encoder.bytes, descriptor: descriptor, key: key, on: socket, holding: isHeld && descriptor == nil) {
        case .sent: return .accepted
        case .queued:
            // A socket whose writability cannot be watched would never send what is queued.
            if !isHeld, let e = source?.setEvents(Poll.input | Poll.output) { return .failed(e) }
            return .accepted
        case .overflow: return .overflow
        case .failed(let e): return .failed(e)
        }
    }

    /// Holds what is sent from now on until `release`: a burst of messages is written
    /// together, so the reader is woken once for it rather than once per message.
    func hold() { isHeld = true }

    /// Writes what was held, in order; the socket's error when writing failed (the caller ends
    /// the peer). What the socket does not take now stays queued until it is writable.
    func release() -> SystemError? {
        isHeld = false
        guard !isClosed else { return nil }
        if let e = outbound.flush(on: socket) { return e }
        if !outbound.isEmpty, let e = source?.setEvents(Poll.input | Poll.output) { return e }
        return nil
    }

    /// Whether messages wait to be written (the socket did not take them yet).
    var hasUnsent: Bool { !outbound.isEmpty }

    /// Withdraws the queued message sent with `key`; false if it was already written.
    func cancel(key: UInt64) -> Bool { outbound.cancel(key: key) }

    /// Stops watching and closes the socket, discarding anything unsent (and its descriptors).
    func close() {
        guard !isClosed else { return }
        isClosed = true
        source?.cancel()
        source = nil
        outbound.discard()
        socket.close()
    }
}
