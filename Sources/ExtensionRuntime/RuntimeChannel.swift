import Dispatch
import ExtensionProtocol
import ExtensionTransport
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The extension's end of its private channel to the supervisor (inherited at fd 3).
///
/// One dedicated reader thread receives every message, so requests and *expire* messages are
/// delivered even while the extension's main thread or its queues are blocked. Sends are
/// single datagrams on a SOCK_SEQPACKET socket, atomic from any thread.
final class RuntimeChannel: Sendable {
    /// The channel, when this process was launched by extensiond.
    static let shared: RuntimeChannel? = {
        guard let raw = getenv("EXTENSIOND_CHANNEL_FD"), let fd = Int32(String(cString: raw)), fd >= 0 else { return nil }
        // Keep the channel out of programs the extension itself executes.
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        unsetenv("EXTENSIOND_CHANNEL_FD")
        return RuntimeChannel(channel: MessageChannel(socket: PacketSocket(fd: fd)))
    }()

    let channel: MessageChannel

    struct Pending: Sendable {
        var onReply: @Sendable (UInt64?) -> Void
        var onExpire: @Sendable () -> Void
    }

    struct State: ~Copyable {
        var nextTag: UInt32 = 1
        var pending: [UInt32: Pending] = [:]
        var expiryHandlers: [UInt64: @Sendable () -> Void] = [:]
        var onRequest: (@Sendable (ExtensionRequest) -> Void)?
        var onEnd: (@Sendable (UInt64) -> Void)?
        var readerStarted = false
        var closed = false
    }

    let state = Mutex(State())

    /// A queue for one request handler (or one `ended` notification). Serial queues get an
    /// overcommitting thread from libdispatch, so a handler that blocks (reading its channel)
    /// has a thread of its own instead of starving the width-limited global queues that Swift
    /// concurrency and the extension's own work use.
    static func handlerQueue() -> DispatchQueue { DispatchQueue(label: "extensiond.request") }

    init(channel: MessageChannel) { self.channel = channel }

    /// Installs the request handlers and starts the reader thread (once).
    func start(onRequest: @escaping @Sendable (ExtensionRequest) -> Void, onEnd: @escaping @Sendable (UInt64) -> Void) {
        let startReader = state.withLock { s -> Bool in
            s.onRequest = onRequest
            s.onEnd = onEnd
            defer { s.readerStarted = true }
            return !s.readerStarted
        }
        if startReader { startReaderThread() }
    }

    /// Starts the reader without request handlers (assertions only).
    func ensureReader() {
        let startReader = state.withLock { s -> Bool in
            defer { s.readerStarted = true }
            return !s.readerStarted
        }
        if startReader { startReaderThread() }
    }

    private func startReaderThread() {
        let thread = ReaderThread(channel: self)
        thread.start()
    }

    func send(_ message: Message) {
        try? channel.send(message)
    }

    /// Asks for an assertion. `onReply` gets the assertion id, or nil when denied (or when the
    /// supervisor is gone); `onExpire` is called at most once, on the reader thread, when the
    /// supervisor sends *expire* for it.
    func acquire(reason: String, onReply: @escaping @Sendable (UInt64?) -> Void, onExpire: @escaping @Sendable () -> Void) {
        ensureReader()
        let tag: UInt32? = state.withLock { s in
            if s.closed { return nil }
            let tag = s.nextTag
            s.nextTag &+= 1
            s.pending[tag] = Pending(onReply: onReply, onExpire: onExpire)
            return tag
        }
        guard let tag else { return onReply(nil) }
        do {
            try channel.send(.acquire(tag: tag, reason: reason))
        } catch {
            let p = state.withLock { $0.pending.removeValue(forKey: tag) }
            p?.onReply(nil)
        }
    }

    /// Releases an assertion. Releasing twice, or after expiry, is harmless.
    func release(_ id: UInt64) {
        state.withLock { _ = $0.expiryHandlers.removeValue(forKey: id) }
        send(.release(assertionID: id))
    }

    /// Runs on the reader thread until the channel closes.
    func readLoop() {
        while true {
            let message: Message
            let descriptor: Int32?
            do {
                (message, descriptor) = try channel.receive()
            } catch {
                return closeDown()
            }
            switch message {
            case .deliver(let requestID):
                guard let fd = descriptor else { continue }
                let handler = state.withLock { $0.onRequest }
                if let handler {
                    let request = ExtensionRequest(id: requestID, channel: RequestChannel(fd: fd))
                    RuntimeChannel.handlerQueue().async { handler(request) }
                } else {
                    close(fd)
                }
            case .ended(let requestID):
                if let descriptor { close(descriptor) }
                let handler = state.withLock { $0.onEnd }
                if let handler { RuntimeChannel.handlerQueue().async { handler(requestID) } }
            case .granted(let tag, let assertionID):
                if let descriptor { close(descriptor) }
                let p = state.withLock { s -> Pending? in
                    guard let p = s.pending.removeValue(forKey: tag) else { return nil }
                    s.expiryHandlers[assertionID] = p.onExpire
                    return p
                }
                p?.onReply(assertionID)
            case .denied(let tag, _):
                if let descriptor { close(descriptor) }
                let p = state.withLock { $0.pending.removeValue(forKey: tag) }
                p?.onReply(nil)
            case .expire(let assertionID):
                if let descriptor { close(descriptor) }
                // Acknowledge first: the supervisor checks the message was read before it stops us.
                send(.expireReceived(assertionID: assertionID))
                let handler = state.withLock { $0.expiryHandlers.removeValue(forKey: assertionID) }
                handler?()
            default:
                if let descriptor { close(descriptor) }
            }
        }
    }

    /// The supervisor is gone: every waiting acquire is denied, every live assertion expires.
    private func closeDown() {
        let (pending, handlers) = state.withLock { s in
            s.closed = true
            defer { s.pending.removeAll(); s.expiryHandlers.removeAll() }
            return (Array(s.pending.values), Array(s.expiryHandlers.values))
        }
        for p in pending { p.onReply(nil) }
        for h in handlers { h() }
    }
}

/// The runtime's dedicated reader thread (a plain pthread: it blocks in recvmsg).
final class ReaderThread: Sendable {
    let channel: RuntimeChannel

    init(channel: RuntimeChannel) { self.channel = channel }

    func start() {
        let box = Unmanaged.passRetained(self)
        var thread = pthread_t()
        let rc = pthread_create(&thread, nil, { raw in
            let me = Unmanaged<ReaderThread>.fromOpaque(raw!).takeRetainedValue()
            me.channel.readLoop()
            return nil
        }, box.toOpaque())
        if rc == 0 {
            pthread_detach(thread)
        } else {
            box.release()
        }
    }
}
