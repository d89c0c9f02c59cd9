import ExtensionProtocol
import ExtensionTransport
import SupervisorCore
import SupervisorKernel

/// One bus connection that called the D-Bus interface (docs/dbus.md): a control client inside
/// the daemon. Its calls become control messages on a socket pair whose other end the control
/// server adopted with the identity the bus vouched for, so every rule and effect of the control
/// socket applies to it unchanged; the answers coming back become D-Bus replies and signals.
/// Owned by `BusInterface`, on the loop.
final class BusClient {
    /// What a control message sent for a call waits for.
    enum Pending {
        /// `begun` (or a failure): the reply is the request's object and its channel.
        case begin(BusCall, extensionID: String)
        /// `ok` (or a failure): an empty reply.
        case empty(BusCall)
        /// A JSON document (or a failure): the reply is its text.
        case json(BusCall, [UInt8])
        /// `Reexec`: answered (empty) when the re-exec begins, which closes this client; a
        /// failure before that is the reply.
        case reexec(BusCall)
        /// Nothing: the call was answered already.
        case none
    }

    /// An administrative call waiting for polkit's answer: the message to send, and what it waits for.
    struct Administrative {
        var make: (UInt32) -> Message
        var waiting: Pending
    }

    /// How many administrative calls may wait for polkit on one connection; more are refused
    /// with `LimitReached`.
    static let administrativeLimit = 8

    /// The caller's unique name on the bus.
    let name: String
    /// Its control connection's host id.
    let host: HostID
    /// Its effective uid, as the bus gave it.
    let uid: UInt32
    /// This process's end of the socket pair.
    private let socket: PacketSocket
    private var watch: (any Watch)?
    private var nextTag: UInt32 = 1
    private var pending: [UInt32: Pending] = [:]
    private(set) var isClosed = false
    /// Administrative calls waiting for polkit, oldest first: the first is being asked about.
    private var administrative: [Administrative] = []
    /// The question to polkit in flight, about `administrative.first`.
    var polkit: PolkitQuery?

    init(name: String, host: HostID, uid: UInt32, socket: PacketSocket) {
        self.name = name
        self.host = host
        self.uid = uid
        self.socket = socket
    }

    /// Starts reading the answers: `handle` gets each message and the descriptor that came with it.
    func start(_ kernel: any Kernel, _ readable: @escaping () -> Void) -> SystemError? {
        switch kernel.watch(fd: socket.fd, events: Poll.input, { _ in readable() }) {
        case .success(let w):
            watch = w
            return nil
        case .failure(let e): return e
        }
    }

    /// Sends `message` for `call`, recording what its answer means. A message the socket does
    /// not take (the daemon reads it on the same loop: only a caller far ahead of it) is refused
    /// with `LimitReached`. With `granting`, the message's tag is granted administration on that
    /// connection (polkit allowed this call), and the grant is withdrawn if it is not sent.
    @discardableResult
    func send(_ make: (UInt32) -> Message, waiting: Pending, granting: ControlConnection? = nil) -> Bool {
        let tag = nextTag
        nextTag = nextTag == UInt32.max ? 1 : nextTag + 1
        let message = make(tag)
        granting?.grantAdministration(tag: tag)
        let sent: Bool
        do { sent = try socket.send(WireEncoder.encoded(message)) == .sent } catch { sent = false }
        guard sent else {
            granting?.withdrawAdministrationGrant(tag: tag)
            BusClient.fail(waiting, "org.extensiond1.Error.LimitReached", "too many calls in flight on this bus connection")
            return false
        }
        pending[tag] = waiting
        return true
    }

    /// Queues an administrative call for polkit; false (the call answered `LimitReached`) when
    /// `administrativeLimit` wait already.
    func queueAdministrative(_ call: Administrative) -> Bool {
        guard administrative.count < Self.administrativeLimit else {
            BusClient.fail(call.waiting, "org.extensiond1.Error.LimitReached", "too many administrative calls wait for polkit on this bus connection")
            return false
        }
        administrative.append(call)
        return true
    }

    /// The administrative call polkit is to be asked about next.
    var nextAdministrative: Administrative? { administrative.first }

    /// Takes the call polkit answered.
    func takeAdministrative() -> Administrative? { administrative.isEmpty ? nil : administrative.removeFirst() }

    /// What waited for `tag`, taken.
    func take(_ tag: UInt32) -> Pending? { pending.removeValue(forKey: tag) }

    /// Adds a chunk to the JSON document `tag` waits for.
    func append(_ chunk: [UInt8], to tag: UInt32) {
        guard case .json(let call, var bytes)? = pending[tag] else { return }
        bytes += chunk
        pending[tag] = .json(call, bytes)
    }

    /// Receives what waits on the socket: each message with its descriptor, until it is drained;
    /// `.closed` when the control server closed its end.
    func receive(into buffer: UnsafeMutableRawBufferPointer, _ handle: (Message, Int32?) -> Void) -> Bool {
        while !isClosed {
            let result: PacketSocket.ReceiveResult
            do { result = try socket.receive(into: buffer) } catch { return false }
            switch result {
            case .wouldBlock: return true
            case .closed: return false
            case .datagram(let count, let descriptor, let truncated):
                guard !truncated, let message = try? WireDecoder.decode(UnsafeRawBufferPointer(rebasing: buffer[0..<count])) else {
                    if let descriptor { PacketSocket.closeReceived(descriptor) }
                    continue
                }
                handle(message, descriptor)
            }
        }
        return false
    }

    /// Closes this end (the control server then sees the connection close: its requests end as
    /// if dismissed), cancels the question to polkit, and fails every call still waiting; with
    /// `reexecuting`, a waiting `Reexec` is answered: the re-exec begins.
    func close(_ why: String, reexecuting: Bool = false) {
        guard !isClosed else { return }
        isClosed = true
        watch?.cancel()
        watch = nil
        socket.close()
        polkit?.cancel()
        polkit = nil
        for (_, waiting) in pending {
            if reexecuting, case .reexec(let call) = waiting { call.reply() } else { BusClient.fail(waiting, "org.extensiond1.Error.ShuttingDown", why) }
        }
        pending.removeAll()
        for a in administrative { BusClient.fail(a.waiting, "org.extensiond1.Error.ShuttingDown", why) }
        administrative.removeAll()
    }

    /// Answers a waiting call with an error.
    static func fail(_ waiting: Pending, _ name: String, _ text: String) {
        switch waiting {
        case .begin(let call, _), .empty(let call), .json(let call, _), .reexec(let call): call.reply(error: name, text)
        case .none: break
        }
    }
}
