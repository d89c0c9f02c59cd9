import Dispatch
import ExtensionProtocol
import ExtensionTransport

#if canImport(Glibc)
import Glibc
#endif

/// The read role of a `ControlClient`: one thread at a time reads the socket, a calling thread
/// when it finds the role free (it reads its own reply), else the thread that holds it passes
/// replies on and hands the role to a call still waiting.
extension ControlClient {
    /// Waits for `waiter`'s reply until `deadline`, reading the socket itself whenever it holds
    /// the read role. On timeout: nil, and the waiter is no longer registered.
    func wait(for waiter: Waiter, tag: UInt32, deadline: DispatchTime) -> Result<Reply, HostError>? {
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
    func giveUp(_ waiter: Waiter, tag: UInt32) -> Result<Reply, HostError>? {
        state.withLock { s in
            if s.waiters[tag] === waiter { s.waiters.removeValue(forKey: tag) }
        }
        releaseRole()
        return waiter.result.withLock { $0 }
    }

    /// Takes the read role if it is free (or was handed to `waiter`). False once closed.
    func takeRole(handedTo waiter: Waiter? = nil) -> Bool {
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
    func releaseRole() {
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
    func read(until waiter: Waiter, deadline: DispatchTime) -> Bool {
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
    func drain() {
        let buffer = ReceiveBuffer()
        while receiveOne(buffer) {}
        releaseRole()
    }

    /// The dedicated reader thread, started once a handler is installed: it holds the read
    /// role whenever no caller does, until the connection closes.
    func startReader() {
        let semaphore = DispatchSemaphore(value: 0)
        let start = state.withLock { s -> Bool in
            guard s.reader == nil, s.closed == nil else { return false }
            s.reader = semaphore
            return true
        }
        guard start else { return }
        let box = Unmanaged.passRetained(self)
        var thread = pthread_t()
        let rc = pthread_create(
            &thread, nil,
            { raw in
                let me = Unmanaged<ControlClient>.fromOpaque(raw!).takeRetainedValue()
                me.readerLoop()
                return nil
            }, box.toOpaque())
        if rc == 0 { pthread_detach(thread) } else { box.release() }
    }

    func readerLoop() {
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
    func receiveOne(_ buffer: ReceiveBuffer) -> Bool {
        let message: Message
        let descriptor: Int32?
        do {
            (message, descriptor) = try channel.receive(into: buffer)
        } catch {
            let why: HostError
            if case .closed = error {
                why = HostError("extensiond closed the connection")
            } else {
                why = HostError("connection to extensiond failed: \(error)")
            }
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
        case let .discovered(tag, final, extensions):
            if let descriptor { Glibc.close(descriptor) }
            let waiter = state.withLock { $0.waiters[tag] }
            guard let waiter else { break }
            waiter.discovered.withLock { $0.append(contentsOf: extensions) }
            if final { resolve(tag, .success(.extensions(waiter.discovered.withLock { $0 }))) }
        case let .refreshed(tag, answer):
            if let descriptor { Glibc.close(descriptor) }
            resolve(tag, .success(.refreshed(answer)))
        case let .newData(id):
            if let descriptor { Glibc.close(descriptor) }
            let handler = state.withLock { $0.onNewData }
            handler?(id)
        case let .secretItems(tag, items):
            if let descriptor { Glibc.close(descriptor) }
            resolve(tag, .success(.secrets(items)))
        case let .transferCreated(tag, task):
            if let descriptor { Glibc.close(descriptor) }
            resolve(tag, .success(.transferCreated(task)))
        case let .transferEvents(session, group, events):
            if let descriptor { Glibc.close(descriptor) }
            let handler = state.withLock { $0.onTransferEvents[group + "/" + session] }
            handler?(events)
        case let .defaultsOpened(tag):
            if !resolve(tag, .success(.suite(descriptor))), let descriptor { Glibc.close(descriptor) }
        case let .defaultsChanged(suite):
            if let descriptor { Glibc.close(descriptor) }
            let handlers = state.withLock { $0.onSuiteChange[suite] ?? [] }
            for handler in handlers { handler(suite) }
        case let .completed(requestID, payload):
            if let descriptor { Glibc.close(descriptor) }
            let handler = state.withLock { $0.onResult }
            handler?(requestID, .completed(payload))
        case let .cancelled(requestID, reason):
            if let descriptor { Glibc.close(descriptor) }
            let handler = state.withLock { $0.onResult }
            handler?(requestID, .cancelled(reason))
        case let .interrupted(requestID, reason):
            if let descriptor { Glibc.close(descriptor) }
            let handler = state.withLock { $0.onInterruption }
            handler?(requestID, reason)
        case let .events(objects), let .output(objects):
            if let descriptor { Glibc.close(descriptor) }
            let handler = state.withLock { $0.onEvent }
            if let handler { for json in objects { handler(json) } }
        default:
            if let descriptor { Glibc.close(descriptor) }
        }
        return true
    }

    @discardableResult
    func resolve(_ tag: UInt32, _ result: Result<Reply, HostError>) -> Bool {
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
    func closeDown(_ why: HostError) {
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
