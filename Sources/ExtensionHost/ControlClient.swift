import Dispatch
import ExtensionProtocol
import ExtensionTransport
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A failure reported by extensiond, or a failure to reach it.
public struct HostError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The daemon's failure code, when the daemon answered.
    public var code: FailureCode?
    /// What went wrong, for people.
    public var message: String

    public init(code: FailureCode? = nil, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { message }
}

/// A reply to one tagged operation.
public enum Reply: Sendable {
    case begun(requestID: UInt64, pid: Int32, channel: Int32?)
    case ok
    case json([UInt8])
}

/// A connection to extensiond's control socket, shared by `ExtensionHostConnection` and
/// `extctl`. Calls block the calling thread until the daemon answers; a dedicated reader thread
/// matches replies to calls by tag and delivers interruptions and monitor events.
/// Safe to use from several threads at once.
public final class ControlClient: Sendable {
    /// The default control socket: `$XDG_RUNTIME_DIR/extensiond/control.sock`, or
    /// `/run/extensiond/control.sock` without XDG_RUNTIME_DIR.
    public static var defaultSocketPath: String {
        if let v = getenv("XDG_RUNTIME_DIR"), v.pointee != 0 { return String(cString: v) + "/extensiond/control.sock" }
        return "/run/extensiond/control.sock"
    }

    let channel: MessageChannel

    final class Waiter: Sendable {
        let semaphore = DispatchSemaphore(value: 0)
        let result = Mutex<Result<Reply, HostError>?>(nil)
        let json = Mutex<[UInt8]>([])
    }

    struct State: ~Copyable {
        var nextTag: UInt32 = 1
        var waiters: [UInt32: Waiter] = [:]
        var closed: HostError?
        var onInterruption: (@Sendable (UInt64, String) -> Void)?
        var onEvent: (@Sendable ([UInt8]) -> Void)?
        var onClose: (@Sendable (HostError) -> Void)?
        var unmatchedReplies = 0
    }

    /// Replies that matched no waiting call (a reply after its call timed out, or a duplicate).
    /// Zero on a healthy connection; the load tests check it.
    public var unmatchedReplies: Int { state.withLock { $0.unmatchedReplies } }

    let state = Mutex(State())

    /// Connects to the daemon. Throws a `HostError` naming the socket when it is unreachable.
    public init(socketPath: String = ControlClient.defaultSocketPath) throws(HostError) {
        do {
            channel = MessageChannel(socket: try PacketSocket.connect(path: socketPath))
        } catch {
            throw HostError("cannot reach extensiond at \(socketPath): \(String(cString: strerror(error.errno)))")
        }
        let box = Unmanaged.passRetained(self)
        var thread = pthread_t()
        let rc = pthread_create(&thread, nil, { raw in
            let me = Unmanaged<ControlClient>.fromOpaque(raw!).takeRetainedValue()
            me.readLoop()
            return nil
        }, box.toOpaque())
        if rc == 0 { pthread_detach(thread) } else { box.release() }
    }

    /// Called (on the reader thread) when the daemon interrupts a request: the extension
    /// exited, crashed or was killed.
    public func setInterruptionHandler(_ handler: @escaping @Sendable (UInt64, String) -> Void) {
        state.withLock { $0.onInterruption = handler }
    }

    /// Called (on the reader thread) for each monitor event (a JSON object).
    public func setEventHandler(_ handler: @escaping @Sendable ([UInt8]) -> Void) {
        state.withLock { $0.onEvent = handler }
    }

    /// Called (on the reader thread) once when the connection to the daemon is lost.
    public func setCloseHandler(_ handler: @escaping @Sendable (HostError) -> Void) {
        state.withLock { $0.onClose = handler }
    }

    /// Sends a tagged operation built by `make` and waits for its reply.
    public func call(timeout: Double = 60, _ make: (UInt32) -> Message) throws(HostError) -> Reply {
        let waiter = Waiter()
        let tag: UInt32 = try state.withLock { (s: inout State) throws(HostError) -> UInt32 in
            if let closed = s.closed { throw closed }
            let tag = s.nextTag
            s.nextTag &+= 1
            if s.nextTag == 0 { s.nextTag = 1 }
            s.waiters[tag] = waiter
            return tag
        }
        do {
            try channel.send(make(tag))
        } catch {
            // The daemon may have refused the connection (and closed it) with a reason that the
            // reader thread delivers to waiters: wait briefly for it rather than report EPIPE.
            if waiter.semaphore.wait(timeout: .now() + 1) == .success, let result = waiter.result.withLock({ $0 }) {
                return try result.get()
            }
            _ = state.withLock { $0.waiters.removeValue(forKey: tag) }
            throw HostError("cannot send to extensiond: \(error)")
        }
        if waiter.semaphore.wait(timeout: .now() + timeout) == .timedOut {
            _ = state.withLock { $0.waiters.removeValue(forKey: tag) }
            throw HostError("extensiond did not answer within \(Int(timeout))s")
        }
        return try waiter.result.withLock { $0! }.get()
    }

    /// Closes the connection; every open request on it ends as if dismissed.
    public func close() {
        shutdown(channel.socket.fd, Int32(SHUT_RDWR))
    }

    private func readLoop() {
        while true {
            let message: Message
            let descriptor: Int32?
            do {
                (message, descriptor) = try channel.receive()
            } catch {
                let why: HostError
                if case .closed = error { why = HostError("extensiond closed the connection") } else { why = HostError("connection to extensiond failed: \(error)") }
                return closeDown(why)
            }
            switch message {
            case let .begun(tag, requestID, pid, hasChannel):
                let channelFD = hasChannel ? descriptor : nil
                if !resolve(tag, .success(.begun(requestID: requestID, pid: pid, channel: channelFD))), let channelFD { Glibc.close(channelFD) }
                if !hasChannel, let descriptor { Glibc.close(descriptor) }
            case let .ok(tag):
                if let descriptor { Glibc.close(descriptor) }
                resolve(tag, .success(.ok))
            case let .failure(tag, code, text):
                if let descriptor { Glibc.close(descriptor) }
                if tag == 0 { return closeDown(HostError(code: code, text)) }  // about the connection itself
                resolve(tag, .failure(HostError(code: code, text)))
            case let .json(tag, final, chunk):
                if let descriptor { Glibc.close(descriptor) }
                let waiter = state.withLock { $0.waiters[tag] }
                guard let waiter else { continue }
                waiter.json.withLock { $0.append(contentsOf: chunk) }
                if final { resolve(tag, .success(.json(waiter.json.withLock { $0 }))) }
            case let .interrupted(requestID, reason):
                if let descriptor { Glibc.close(descriptor) }
                let handler = state.withLock { $0.onInterruption }
                handler?(requestID, reason)
            case let .event(json):
                if let descriptor { Glibc.close(descriptor) }
                let handler = state.withLock { $0.onEvent }
                handler?(json)
            default:
                if let descriptor { Glibc.close(descriptor) }
            }
        }
    }

    @discardableResult
    private func resolve(_ tag: UInt32, _ result: Result<Reply, HostError>) -> Bool {
        let waiter = state.withLock { s -> Waiter? in
            let w = s.waiters.removeValue(forKey: tag)
            if w == nil { s.unmatchedReplies += 1 }
            return w
        }
        guard let waiter else { return false }
        waiter.result.withLock { $0 = result }
        waiter.semaphore.signal()
        return true
    }

    private func closeDown(_ why: HostError) {
        let (waiters, onClose) = state.withLock { s in
            s.closed = why
            defer { s.waiters.removeAll() }
            return (Array(s.waiters.values), s.onClose)
        }
        for w in waiters {
            w.result.withLock { $0 = .failure(why) }
            w.semaphore.signal()
        }
        onClose?(why)
        Glibc.close(channel.socket.fd)
    }
}
