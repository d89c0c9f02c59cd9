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
/// `extctl`. Calls block the calling thread until the daemon answers. Safe to use from several
/// threads at once.
///
/// One thread at a time reads the socket: it holds the *read role*. A calling thread that finds
/// the role free takes it and reads its own reply off the socket, without a hand-off from
/// another thread; replies for other calls that it reads on the way go to their callers, and
/// when it has its reply it hands the role to a caller still waiting (leader/follower). Once an
/// interruption, event or close handler is installed, a dedicated reader thread takes the role
/// as soon as it is free and keeps it, so that those are delivered as they arrive.
public final class ControlClient: Sendable {
    /// The default control socket: `$XDG_RUNTIME_DIR/extensiond/control.sock`, or
    /// `/run/extensiond/control.sock` without XDG_RUNTIME_DIR.
    public static var defaultSocketPath: String {
        if let v = getenv("XDG_RUNTIME_DIR"), v.pointee != 0 { return String(cString: v) + "/extensiond/control.sock" }
        return "/run/extensiond/control.sock"
    }

    let channel: MessageChannel

    /// One call waiting for its reply, or for the read role.
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
        /// Some thread holds the read role.
        var reading = false
        /// The waiter the role was handed to, which has not taken it up yet.
        var roleHandedTo: ObjectIdentifier?
        /// The dedicated reader thread, once started (see `startReader`).
        var reader: DispatchSemaphore?
        /// The reader thread waits for the role.
        var readerWaiting = false
        /// Keeps the client alive until the connection is closed, as a reader thread would.
        var keepAlive: Unmanaged<ControlClient>?
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
        // Open until closed, even when the caller drops every reference (requests stay open).
        let me = Unmanaged.passRetained(self)
        state.withLock { $0.keepAlive = me }
    }

    /// Called (on the thread reading the connection) when the daemon interrupts a request: the
    /// extension exited, crashed or was killed.
    public func setInterruptionHandler(_ handler: @escaping @Sendable (UInt64, String) -> Void) {
        state.withLock { $0.onInterruption = handler }
        startReader()
    }

    /// Called (on the thread reading the connection) for each monitor event (a JSON object).
    public func setEventHandler(_ handler: @escaping @Sendable ([UInt8]) -> Void) {
        state.withLock { $0.onEvent = handler }
        startReader()
    }

    /// Called (on the thread reading the connection) once when the connection to the daemon is
    /// lost.
    public func setCloseHandler(_ handler: @escaping @Sendable (HostError) -> Void) {
        state.withLock { $0.onClose = handler }
        startReader()
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
            // The daemon may have refused the connection (and closed it) with a reason that
            // arrives on the socket: wait briefly for it rather than report EPIPE.
            if let result = wait(for: waiter, tag: tag, deadline: .now() + 1) { return try result.get() }
            throw HostError("cannot send to extensiond: \(error)")
        }
        guard let result = wait(for: waiter, tag: tag, deadline: .now() + timeout) else {
            throw HostError("extensiond did not answer within \(Int(timeout))s")
        }
        return try result.get()
    }

    /// Closes the connection; every open request on it ends as if dismissed.
    public func close() {
        shutdown(channel.socket.fd, Int32(SHUT_RDWR))
        // Nobody reading: read what is left, up to the end of the connection, here.
        if takeRole() { drain() }
    }

    // MARK: - The read role

    /// Waits for `waiter`'s reply until `deadline`, reading the socket itself whenever it holds
    /// the read role. On timeout: nil, and the waiter is no longer registered.
    private func wait(for waiter: Waiter, tag: UInt32, deadline: DispatchTime) -> Result<Reply, HostError>? {
        while true {
            if let result = waiter.result.withLock({ $0 }) { return result }
            if takeRole(handedTo: waiter) {
                _ = read(until: waiter, deadline: deadline)
                return giveUp(waiter, tag: tag)
            }
            if waiter.semaphore.wait(timeout: deadline) == .timedOut {
                // Unregister, and learn in the same step whether the role was handed to us
                // meanwhile (then pass it on).
                let handed = state.withLock { s -> Bool in
                    if s.waiters[tag] === waiter { s.waiters.removeValue(forKey: tag) }
                    guard s.roleHandedTo == ObjectIdentifier(waiter) else { return false }
                    s.roleHandedTo = nil
                    return true
                }
                if handed { releaseRole() }
                return waiter.result.withLock { $0 }
            }
        }
    }

    /// With the read role held: unregisters `waiter` (if its reply did not come), passes the
    /// role on, and returns the waiter's result, if any.
    private func giveUp(_ waiter: Waiter, tag: UInt32) -> Result<Reply, HostError>? {
        state.withLock { s in
            if s.waiters[tag] === waiter { s.waiters.removeValue(forKey: tag) }
        }
        releaseRole()
        return waiter.result.withLock { $0 }
    }

    /// Takes the read role if it is free (or was handed to `waiter`). False once closed.
    private func takeRole(handedTo waiter: Waiter? = nil) -> Bool {
        state.withLock { s -> Bool in
            if let waiter, s.roleHandedTo == ObjectIdentifier(waiter) {
                s.roleHandedTo = nil
                return true
            }
            guard s.closed == nil, !s.reading else { return false }
            s.reading = true
            return true
        }
    }

    /// Gives up the read role: to the reader thread if it waits for it, else to a call still
    /// waiting for its reply, else nobody (the next caller takes it).
    private func releaseRole() {
        let next = state.withLock { s -> DispatchSemaphore? in
            if s.closed != nil {
                s.reading = false
                return s.readerWaiting ? s.reader : nil
            }
            if s.readerWaiting, let reader = s.reader {
                s.readerWaiting = false
                return reader
            }
            if let waiter = s.waiters.values.first {
                s.roleHandedTo = ObjectIdentifier(waiter)
                return waiter.semaphore
            }
            s.reading = false
            return nil
        }
        next?.signal()
    }

    /// Reads and handles messages until `waiter` has its result (true), the deadline passes or
    /// the connection closes. Runs on the thread holding the read role.
    private func read(until waiter: Waiter, deadline: DispatchTime) -> Bool {
        let buffer = ReceiveBuffer()
        while waiter.result.withLock({ $0 == nil }) {
            let now = DispatchTime.now().uptimeNanoseconds
            guard now < deadline.uptimeNanoseconds else { return false }
            var pfd = pollfd(fd: channel.socket.fd, events: Int16(POLLIN), revents: 0)
            let ms = (deadline.uptimeNanoseconds - now + 999_999) / 1_000_000
            let rc = poll(&pfd, 1, Int32(clamping: ms))
            if rc < 0 && errno != EINTR { return false }
            guard rc > 0 else { continue }
            if !receiveOne(buffer) { break }
        }
        return waiter.result.withLock { $0 != nil }
    }

    /// Reads until the connection closes (after `close()`, with the read role).
    private func drain() {
        let buffer = ReceiveBuffer()
        while receiveOne(buffer) {}
        releaseRole()
    }

    /// The dedicated reader thread, started once a handler is installed: it holds the read
    /// role whenever no caller does, until the connection closes.
    private func startReader() {
        let semaphore = DispatchSemaphore(value: 0)
        let start = state.withLock { s -> Bool in
            guard s.reader == nil, s.closed == nil else { return false }
            s.reader = semaphore
            return true
        }
        guard start else { return }
        let box = Unmanaged.passRetained(self)
        var thread = pthread_t()
        let rc = pthread_create(&thread, nil, { raw in
            let me = Unmanaged<ControlClient>.fromOpaque(raw!).takeRetainedValue()
            me.readerLoop()
            return nil
        }, box.toOpaque())
        if rc == 0 { pthread_detach(thread) } else { box.release() }
    }

    private func readerLoop() {
        let holding = state.withLock { s -> Bool? in
            if s.closed != nil { return nil }
            if s.reading {
                s.readerWaiting = true
                return false
            }
            s.reading = true
            return true
        }
        guard let holding else { return }
        if !holding {
            // Handed the role by the caller that releases it (or woken because it closed).
            state.withLock { $0.reader }?.wait()
            if state.withLock({ $0.closed != nil }) { return }
        }
        let buffer = ReceiveBuffer()
        while receiveOne(buffer) {}
        releaseRole()
    }

    /// Receives and handles one message. False once the connection is closed (`closeDown`
    /// done).
    private func receiveOne(_ buffer: ReceiveBuffer) -> Bool {
        let message: Message
        let descriptor: Int32?
        do {
            (message, descriptor) = try channel.receive(into: buffer)
        } catch {
            let why: HostError
            if case .closed = error { why = HostError("extensiond closed the connection") } else { why = HostError("connection to extensiond failed: \(error)") }
            closeDown(why)
            return false
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
            if tag == 0 {  // about the connection itself
                closeDown(HostError(code: code, text))
                return false
            }
            resolve(tag, .failure(HostError(code: code, text)))
        case let .json(tag, final, chunk):
            if let descriptor { Glibc.close(descriptor) }
            let waiter = state.withLock { $0.waiters[tag] }
            guard let waiter else { break }
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
        return true
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

    /// The connection is gone (read by the thread holding the role): every waiting call fails.
    private func closeDown(_ why: HostError) {
        let (waiters, onClose, keepAlive) = state.withLock { s in
            s.closed = why
            defer { s.waiters.removeAll(); s.keepAlive = nil }
            return (Array(s.waiters.values), s.onClose, s.keepAlive)
        }
        for w in waiters {
            w.result.withLock { $0 = .failure(why) }
            w.semaphore.signal()
        }
        onClose?(why)
        Glibc.close(channel.socket.fd)
        keepAlive?.release()
    }
}
