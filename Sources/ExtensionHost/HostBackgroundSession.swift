import Dispatch
import ExtensionProtocol
import Synchronization

/// A background session of the calling app (docs/transfers.md), over the control socket: the
/// same tasks, events and semantics as `BackgroundSession` in extensions. An app brought up for
/// its sessions' events (`EXTENSIOND_TRANSFER_SESSION` and `EXTENSIOND_TRANSFER_GROUP` in its
/// environment, or the `background-transfers` action with `GROUP/SESSION`) makes the session
/// and calls `claim()`: the completions queued for it arrive at `onEvent`, and once the handler
/// has returned for them, the session tells extensiond they were handled (*did finish events*).
public final class HostBackgroundSession: Sendable {
    /// The session's identifier.
    public let identifier: String
    /// The app group whose shared container holds the files.
    public let group: String
    private let client: ControlClient
    private let onEvent: @Sendable (TransferEvent) -> Void
    private let deliveries = Mutex(TransferDeliveries())
    private let acknowledged: @Sendable (UInt64, HostError?) -> Void

    /// The session `identifier` in `group` over `connection`; events go to `onEvent` (on the
    /// connection's reading thread), and each acknowledgement's outcome to `acknowledged`.
    public init(
        identifier: String, group: String, connection: ExtensionHostConnection, onEvent: @escaping @Sendable (TransferEvent) -> Void,
        acknowledged: @escaping @Sendable (UInt64, HostError?) -> Void = { _, _ in }
    ) {
        self.identifier = identifier
        self.group = group
        self.client = connection.client
        self.onEvent = onEvent
        self.acknowledged = acknowledged
        client.setTransferHandler(group + "/" + identifier) { [weak self] events in self?.handle(events) }
    }

    /// Downloads `url` into the group's shared container (see `BackgroundSession.download`).
    public func download(_ url: String, to path: String = "", discretionary: Bool = false) throws(HostError) -> UInt64 {
        try create(TransferRequest(session: identifier, group: group, method: .download, url: url, path: path, discretionary: discretionary))
    }

    /// Uploads a file of the group's shared container (see `BackgroundSession.upload`).
    public func upload(_ path: String, to url: String, post: Bool = false, discretionary: Bool = false) throws(HostError) -> UInt64 {
        try create(
            TransferRequest(session: identifier, group: group, method: post ? .uploadPost : .uploadPut, url: url, path: path, discretionary: discretionary))
    }

    /// Cancels task `task` of the app.
    public func cancel(_ task: UInt64) throws(HostError) {
        _ = try client.call { .transferCancel(tag: $0, task: task) }
    }

    /// Becomes the session's consumer: its queued completions follow, then its new events.
    public func claim() throws(HostError) {
        let (session, group) = (identifier, group)
        _ = try client.call { .transferClaim(tag: $0, session: session, group: group) }
    }

    private func create(_ request: TransferRequest) throws(HostError) -> UInt64 {
        guard case .transferCreated(let task) = try client.call({ .transferCreate(tag: $0, request: request) }) else {
            throw HostError("unexpected reply to a transfer")
        }
        return task
    }

    private func handle(_ events: [TransferEvent]) {
        let last = deliveries.withLock { $0.deliver(events, onEvent) }
        guard last > 0 else { return }
        // On another thread: this one reads the connection, and the answer comes through it.
        let (client, session, group, acknowledged, through) = (client, identifier, group, acknowledged, last)
        DispatchQueue.global().async {
            let outcome = Result { () throws(HostError) in
                _ = try client.call { .transferHandled(tag: $0, session: session, group: group, through: through) }
            }
            if case .failure(let e) = outcome { acknowledged(through, e) } else { acknowledged(through, nil) }
        }
    }
}
