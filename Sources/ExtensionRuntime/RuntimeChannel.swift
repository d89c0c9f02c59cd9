import Dispatch
import ExtensionProtocol
import ExtensionTransport
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The extension's end of its private channel to the supervisor (inherited at fd 3).
///
/// Runtime threads receive every message, one of them at a time (the read role, see
/// `Followers`), so requests and *expire* messages are delivered even while the extension's
/// main thread or its queues are blocked. Sends are single datagrams on a SOCK_SEQPACKET
/// socket, atomic from any thread.
final class RuntimeChannel: Sendable {
    /// The channel, when this process was launched by extensiond: `EXTENSIOND_CHANNEL_FD` names
    /// an AF_UNIX SOCK_SEQPACKET socket. The variable is removed whatever it names, and the
    /// channel made close-on-exec, so that programs the extension executes inherit neither.
    static let shared: RuntimeChannel? = {
        guard let raw = getenv("EXTENSIOND_CHANNEL_FD") else { return nil }
        let value = String(cString: raw)
        unsetenv("EXTENSIOND_CHANNEL_FD")
        guard let fd = Int32(value), fd >= 0, isChannel(fd) else { return nil }
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        return RuntimeChannel(channel: MessageChannel(socket: PacketSocket(fd: fd)))
    }()

    /// Whether `fd` is an open AF_UNIX SOCK_SEQPACKET socket, as the channel extensiond passes
    /// is (not a file or another socket that a stray variable names).
    static func isChannel(_ fd: Int32) -> Bool {
        var value: Int32 = 0
        var size = socklen_t(MemoryLayout<Int32>.size)
        guard getsockopt(fd, SOL_SOCKET, SO_TYPE, &value, &size) == 0, value == Int32(SOCK_SEQPACKET.rawValue) else { return false }
        size = socklen_t(MemoryLayout<Int32>.size)
        return getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &value, &size) == 0 && value == AF_UNIX
    }

    let channel: MessageChannel
    let followers = Followers()

    struct State: ~Copyable {
        var nextTag: UInt32 = 1
        var pending: [UInt32: AssertionWaiter] = [:]
        var expiryHandlers: [UInt64: AssertionWaiter] = [:]
        var onRequest: (@Sendable (ExtensionRequest) -> Void)?
        var onEnd: (@Sendable (UInt64) -> Void)?
        var observers: [String: [@Sendable (String) -> Void]] = [:]
        var onRefresh: (@Sendable (UInt64) -> Void)?
        /// The calls to the system (`openURL`, `suiteOpen`, `suiteWrite`) awaiting their `answer`.
        var calls: [UInt32: @Sendable (Answer) -> Void] = [:]
        /// Handlers of each open suite's changes.
        var suiteObservers: [String: [@Sendable (String) -> Void]] = [:]
        /// Each background session's handler, by `group/identifier`.
        var transferHandlers: [String: @Sendable ([TransferEvent]) -> Void] = [:]
        var readerStarted = false
        var started = false
        var closed = false
    }

    let state = Mutex(State())

    init(channel: MessageChannel) { self.channel = channel }

    /// Installs the request handlers and starts the runtime threads. Stops the process when
    /// called a second time (`ExtensionMain.start`).
    func start(onRequest: @escaping @Sendable (ExtensionRequest) -> Void, onEnd: @escaping @Sendable (UInt64) -> Void) {
        let (again, startReader) = state.withLock { s -> (Bool, Bool) in
            if s.started { return (true, false) }
            s.started = true
            s.onRequest = onRequest
            s.onEnd = onEnd
            defer { s.readerStarted = true }
            return (false, !s.readerStarted)
        }
        precondition(!again, "ExtensionMain.start: the runtime was started already")
        if startReader { startThreads() }
    }

    /// Starts the runtime threads without request handlers (assertions only).
    func ensureReader() {
        let startReader = state.withLock { s -> Bool in
            defer { s.readerStarted = true }
            return !s.readerStarted
        }
        if startReader { startThreads() }
    }

    /// Starts the first reader, and one parked follower so that the first request or activity
    /// does not wait for a thread to be created (for a prewarmed extension, that would happen
    /// after its resume). Returns once the follower is parked.
    private func startThreads() {
        let warm = DispatchSemaphore(value: 0)
        let spare = RuntimeThread.spawn { [self] in
            serve(Followers.Follower(), holdingRole: false, parked: { warm.signal() })
        }
        if spare { warm.wait() }
        if !RuntimeThread.spawn({ [self] in serve(Followers.Follower(), holdingRole: true) }) {
            fatalError("extensiond runtime: cannot create the channel's reader thread")
        }
    }

    func send(_ message: Message) {
        try? channel.send(message)
    }

    /// Sends `message`; false when the channel is closed or the send failed.
    func trySend(_ message: Message) -> Bool {
        do {
            try channel.send(message)
            return true
        } catch {
            return false
        }
    }

    /// Asks for an assertion for `waiter`, which is answered (granted or denied) on a runtime
    /// thread, or denied at once when the supervisor is gone.
    func acquire(reason: String, for waiter: AssertionWaiter) {
        ensureReader()
        let tag: UInt32? = state.withLock { s in
            if s.closed { return nil }
            let tag = s.nextTag
            s.nextTag &+= 1
            s.pending[tag] = waiter
            return tag
        }
        guard let tag else { return waiter.deniedElsewhere() }
        do {
            try channel.send(.acquire(tag: tag, reason: reason))
        } catch {
            let waiter = state.withLock { $0.pending.removeValue(forKey: tag) }
            waiter?.deniedElsewhere()
        }
    }

    /// Adds `handler` for the notification hint `name`, telling the supervisor on the first
    /// handler for that name. Throws `.tooManyNames` for a new name when
    /// `WireLimits.maxObservedHints` names are observed already (nothing is added), and
    /// `.supervisorGone` when the supervisor is gone.
    func observe(_ name: String, _ handler: @escaping @Sendable (String) -> Void) throws(HintError) {
        ensureReader()
        let first = state.withLock { s -> Result<Bool, HintError> in
            if s.closed { return .failure(.supervisorGone) }
            let first = s.observers[name] == nil
            if first && s.observers.count >= WireLimits.maxObservedHints { return .failure(.tooManyNames) }
            s.observers[name, default: []].append(handler)
            return .success(first)
        }
        guard try first.get() else { return }
        guard trySend(.observe(name: name)) else { throw .supervisorGone }
    }

    /// The daemon's answer to a call (`answer`): `failure` nil on success; a descriptor attached
    /// (a suite's mapping), which the receiver owns.
    struct Answer: Sendable {
        var failure: FailureCode?
        var text: String
        var descriptor: Int32?
        /// The items of a `secretItems` answer.
        var items: [SecretItem] = []
        /// The task of a `transferCreated` answer.
        var task: UInt64 = 0
    }

    /// Sends the message `make` builds with a fresh tag; `answered` gets the daemon's answer on
    /// the reading thread (it must be quick), or `.interrupted` when the supervisor is gone.
    func call(_ make: (UInt32) -> Message, answered: @escaping @Sendable (Answer) -> Void) {
        ensureReader()
        let tag: UInt32? = state.withLock { s in
            if s.closed { return nil }
            let tag = s.nextTag
            s.nextTag &+= 1
            s.calls[tag] = answered
            return tag
        }
        let gone = Answer(failure: .interrupted, text: "the channel to extensiond is closed", descriptor: nil)
        guard let tag else { return answered(gone) }
        if !trySend(make(tag)), let handler = state.withLock({ $0.calls.removeValue(forKey: tag) }) { handler(gone) }
    }

    /// Sends the message `make` builds and waits for the daemon's answer.
    func call(_ make: (UInt32) -> Message) -> Answer {
        let box = Mutex<Answer?>(nil)
        let done = DispatchSemaphore(value: 0)
        call(make) { answer in
            box.withLock { $0 = answer }
            done.signal()
        }
        done.wait()
        return box.withLock { $0! }
    }

    /// Adds `handler` for changes other members make to the suite `suite`.
    func observeSuite(_ suite: String, _ handler: @escaping @Sendable (String) -> Void) {
        state.withLock { $0.suiteObservers[suite, default: []].append(handler) }
    }

    /// Sets the handler of the background session `group/identifier`'s events (nil removes it).
    func setTransferHandler(_ key: String, _ handler: (@Sendable ([TransferEvent]) -> Void)?) {
        state.withLock { $0.transferHandlers[key] = handler }
        ensureReader()
    }

    /// Installs the background-refresh handler, which gets each refresh's id.
    func setRefreshHandler(_ handler: @escaping @Sendable (UInt64) -> Void) {
        state.withLock { $0.onRefresh = handler }
        ensureReader()
    }

    /// Releases an assertion. Releasing twice, or after expiry, is harmless.
    func release(_ id: UInt64) {
        state.withLock { _ = $0.expiryHandlers.removeValue(forKey: id) }
        send(.release(assertionID: id))
    }

    /// The life of one runtime thread: hold the read role (now, or once a holder hands it on),
    /// read until a message asks for work, hand the role on, do the work, park; until the
    /// channel closes.
    private func serve(_ me: Followers.Follower, holdingRole: Bool, parked: (() -> Void)? = nil) {
        let buffer = ReceiveBuffer()
        var holding = holdingRole
        var parked = parked
        while true {
            if !holding {
                guard followers.park(me, parked: parked) else { return }
                parked = nil
            }
            holding = false
            guard let work = readUntilWork(buffer) else { return followers.close() }
            let handedOff = followers.handOff { [self] follower in serve(follower, holdingRole: true) }
            if handedOff {
                work.perform()
            } else {
                // No thread to take the role: keep reading here, the work goes to Dispatch.
                DispatchQueue(label: "extensiond.runtime-work").async { work.perform() }
                holding = true
            }
        }
    }

    /// Reads and handles messages until one asks for work (returned), or until the channel
    /// closes (nil, after `closeDown`). Runs on the thread holding the read role.
    private func readUntilWork(_ buffer: ReceiveBuffer) -> RuntimeWork? {
        while true {
            let message: Message
            let descriptor: Int32?
            do {
                (message, descriptor) = try channel.receive(into: buffer)
            } catch {
                closeDown()
                return nil
            }
            if let work = handle(message, descriptor) { return work }
        }
    }

    /// Handles one message on the reading thread: bookkeeping and acknowledgements here, in
    /// order; what may take long is returned as work.
    private func handle(_ message: Message, _ descriptor: Int32?) -> RuntimeWork? {
        switch message {
        case .deliver(let requestID):
            guard let fd = descriptor else { return nil }
            let handler = state.withLock { $0.onRequest }
            guard let handler else {
                close(fd)
                return nil
            }
            return .request(handler, ExtensionRequest(id: requestID, channel: RequestChannel(fd: fd)))
        case .ended(let requestID):
            if let descriptor { close(descriptor) }
            let handler = state.withLock { $0.onEnd }
            guard let handler else { return nil }
            return .ended(handler, requestID)
        case .refresh(let refreshID):
            if let descriptor { close(descriptor) }
            guard let handler = state.withLock({ $0.onRefresh }) else {
                send(.refreshDone(refreshID: refreshID, answer: .unsupported))
                return nil
            }
            return .refresh(handler, refreshID)
        case .notify(let name):
            if let descriptor { close(descriptor) }
            let handlers = state.withLock { $0.observers[name] ?? [] }
            return handlers.isEmpty ? nil : .notified(handlers, name)
        case .suiteChanged(let suite):
            if let descriptor { close(descriptor) }
            let handlers = state.withLock { $0.suiteObservers[suite] ?? [] }
            return handlers.isEmpty ? nil : .notified(handlers, suite)
        case .transferCreated(let tag, let task):
            if let descriptor { close(descriptor) }
            state.withLock { $0.calls.removeValue(forKey: tag) }?(Answer(failure: nil, text: "", descriptor: nil, task: task))
            return nil
        case .transferEvents(let session, let group, let events):
            if let descriptor { close(descriptor) }
            guard let handler = state.withLock({ $0.transferHandlers[group + "/" + session] }) else { return nil }
            return .transferEvents { handler(events) }
        case .secretItems(let tag, let items):
            if let descriptor { close(descriptor) }
            state.withLock { $0.calls.removeValue(forKey: tag) }?(Answer(failure: nil, text: "", descriptor: nil, items: items))
            return nil
        case .answer(let tag, let failure, let text):
            guard let handler = state.withLock({ $0.calls.removeValue(forKey: tag) }) else {
                if let descriptor { close(descriptor) }
                return nil
            }
            handler(Answer(failure: failure, text: text, descriptor: descriptor))
            return nil
        case .granted(let tag, let assertionID):
            if let descriptor { close(descriptor) }
            let waiter = state.withLock { s -> AssertionWaiter? in
                guard let waiter = s.pending.removeValue(forKey: tag) else { return nil }
                s.expiryHandlers[assertionID] = waiter
                return waiter
            }
            switch waiter {
            case .activity(let activity):
                activity.granted(assertionID)
                return .granted(activity)
            case .task(let continuation, _):
                continuation.resume(returning: assertionID)
                return nil
            case nil:
                return nil
            }
        case .denied(let tag, _):
            if let descriptor { close(descriptor) }
            switch state.withLock({ $0.pending.removeValue(forKey: tag) }) {
            case .activity(let activity): return .denied(activity)
            case .task(let continuation, _):
                continuation.resume(returning: nil)
                return nil
            case nil: return nil
            }
        case .expire(let assertionID):
            if let descriptor { close(descriptor) }
            // Acknowledge first: the supervisor checks the message was read before it stops us.
            send(.expireReceived(assertionID: assertionID))
            switch state.withLock({ $0.expiryHandlers.removeValue(forKey: assertionID) }) {
            case .activity(let activity): return activity.expire() ? .expired(activity) : nil
            case .task(_, let latch):
                latch.fire()
                return nil
            case nil: return nil
            }
        default:
            if let descriptor { close(descriptor) }
            return nil
        }
    }

    /// The supervisor is gone: every waiting acquire is denied, every live assertion expires.
    private func closeDown() {
        let (pending, live, calls) = state.withLock { s in
            s.closed = true
            defer { s.pending.removeAll(); s.expiryHandlers.removeAll(); s.calls.removeAll() }
            return (Array(s.pending.values), Array(s.expiryHandlers.values), Array(s.calls.values))
        }
        for call in calls { call(Answer(failure: .interrupted, text: "the channel to extensiond closed", descriptor: nil)) }
        for waiter in pending { waiter.deniedElsewhere() }
        for waiter in live {
            switch waiter {
            case .activity(let activity):
                if activity.expire() { DispatchQueue(label: "extensiond.expiring-activity.expired").async { activity.runExpired() } }
            case .task(_, let latch):
                latch.fire()
            }
        }
    }
}

extension AssertionWaiter {
    /// Denies the waiter off the reading path: the block (on a queue of its own) or the task.
    func deniedElsewhere() {
        switch self {
        case .activity(let activity): ExpiringActivity.deny(activity.block, onFinished: activity.onFinished)
        case .task(let continuation, _): continuation.resume(returning: nil)
        }
    }
}
