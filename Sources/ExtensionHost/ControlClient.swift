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

    /// Whether the daemon did not answer in time (no reply within the call's timeout).
    public var timedOut: Bool

    public init(code: FailureCode? = nil, _ message: String, timedOut: Bool = false) {
        self.code = code
        self.message = message
        self.timedOut = timedOut
    }

    /// `seconds` as people write it: `60`, `0.3`.
    static func seconds(_ seconds: Double) -> String {
        seconds == seconds.rounded() && abs(seconds) < 1e15 ? String(Int(seconds)) : String(seconds)
    }

    public var description: String { message }
}

/// How an extension ended a request itself.
public enum RequestResult: Equatable, Sendable {
    /// It completed the request, returning these bytes (`completeRequest(returningItems:)`).
    case completed([UInt8])
    /// It cancelled the request, for this reason (`cancelRequest(withError:)`).
    case cancelled(String)
}

/// A reply to one tagged operation.
public enum Reply: Sendable {
    case begun(requestID: UInt64, pid: Int32, channel: Int32?)
    case ok
    case json([UInt8])
    /// The answer to `discover`, every part gathered.
    case extensions([DiscoveredExtension])
    /// The answer to `forceRefresh`.
    case refreshed(RefreshAnswer)
    /// The answer to `defaultsOpen`: the suite's mapping (nil if the daemon attached none),
    /// which the caller owns.
    case suite(Int32?)
    /// The answer to `secretCopy`.
    case secrets([SecretItem])
    /// The answer to `transferCreate`: the task's id.
    case transferCreated(UInt64)
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
        if let v = getenv("EXTENSIOND_SOCKET"), v.pointee != 0 { return String(cString: v) }
        if let v = getenv("XDG_RUNTIME_DIR"), v.pointee != 0 { return String(cString: v) + "/extensiond/control.sock" }
        return "/run/extensiond/control.sock"
    }

    let channel: MessageChannel

    /// One call waiting for its reply, or for the read role.
    final class Waiter: Sendable {
        let semaphore = DispatchSemaphore(value: 0)
        let result = Mutex<Result<Reply, HostError>?>(nil)
        let json = Mutex<[UInt8]>([])
        let discovered = Mutex<[DiscoveredExtension]>([])
    }

    struct State: ~Copyable {
        var nextTag: UInt32 = 1
        var waiters: [UInt32: Waiter] = [:]
        var closed: HostError?
        var onInterruption: (@Sendable (UInt64, String) -> Void)?
        var onResult: (@Sendable (UInt64, RequestResult) -> Void)?
        var onNewData: (@Sendable (String) -> Void)?
        var onSuiteChange: [String: [@Sendable (String) -> Void]] = [:]
        var onEvent: (@Sendable ([UInt8]) -> Void)?
        var onTransferEvents: [String: @Sendable ([TransferEvent]) -> Void] = [:]
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

    /// Called (on the thread reading the connection) when an extension completes or cancels a
    /// request of this connection. The request is then over; dismissing it is harmless.
    public func setResultHandler(_ handler: @escaping @Sendable (UInt64, RequestResult) -> Void) {
        state.withLock { $0.onResult = handler }
        startReader()
    }

    /// Called (on the thread reading the connection) when a background refresh of an extension
    /// this connection subscribed to (`subscribe`) brought new data, with the extension's id.
    public func setNewDataHandler(_ handler: @escaping @Sendable (String) -> Void) {
        state.withLock { $0.onNewData = handler }
        startReader()
    }

    /// Called (on the thread reading the connection) when another member changes the shared
    /// defaults suite `suite`, which this connection opened.
    public func addSuiteChangeHandler(_ suite: String, _ handler: @escaping @Sendable (String) -> Void) {
        state.withLock { $0.onSuiteChange[suite, default: []].append(handler) }
        startReader()
    }

    /// Called (on the thread reading the connection) for each monitor event (a JSON object of
    /// docs/json.md, "Events", which `ExtensionStatus.ExtensionEvent` decodes), once per event and
    /// in order, however many events each `events` message carries; and, after a `follow`, for
    /// each output line (`OutputLog.Line`, with its `id`) of the `output` messages.
    public func setEventHandler(_ handler: @escaping @Sendable ([UInt8]) -> Void) {
        state.withLock { $0.onEvent = handler }
        startReader()
    }

    /// Called (on the thread reading the connection) with the events of the background session
    /// `group/identifier` (`key`) that this connection created a task in or claimed.
    public func setTransferHandler(_ key: String, _ handler: @escaping @Sendable ([TransferEvent]) -> Void) {
        state.withLock { $0.onTransferEvents[key] = handler }
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
            throw HostError("extensiond did not answer within \(HostError.seconds(timeout))s", timedOut: true)
        }
        return try result.get()
    }

    /// Closes the connection; every open request on it ends as if dismissed.
    public func close() {
        shutdown(channel.socket.fd, Int32(SHUT_RDWR))
        // Nobody reading: read what is left, up to the end of the connection, here.
        if takeRole() { drain() }
    }
}
