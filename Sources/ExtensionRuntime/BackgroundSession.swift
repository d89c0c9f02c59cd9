import ExtensionProtocol
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A background session (docs/transfers.md): downloads and uploads that extensiond performs in
/// its own process, whatever happens to the extension. A session is an identifier plus an app
/// group of the extension's app, whose shared container holds the files.
///
/// Events (`TransferEvent`: progress, completion, failure) reach `onEvent` on a runtime thread
/// for as long as this process runs and is not suspended; once the handler has returned for a
/// completion or failure, the session tells extensiond it was handled (the model's *did finish
/// events*), and it is never delivered again. If the extension is suspended or ends first, the
/// completions wait for the containing app, which extensiond brings up to claim the session.
/// A suspended extension is never woken for progress.
public final class BackgroundSession: Sendable {
    /// The session's identifier.
    public let identifier: String
    /// The app group whose shared container holds the files.
    public let group: String
    private let onEvent: @Sendable (TransferEvent) -> Void
    /// What was handed to `onEvent`: a completion arrives once per process.
    private let deliveries = Mutex(TransferDeliveries())

    /// The session `identifier` in `group`, whose events go to `onEvent`.
    public init(identifier: String, group: String, onEvent: @escaping @Sendable (TransferEvent) -> Void) {
        self.identifier = identifier
        self.group = group
        self.onEvent = onEvent
        RuntimeChannel.shared?.setTransferHandler(group + "/" + identifier) { [weak self] events in self?.handle(events) }
    }

    /// Downloads `url` (`http:` or `https:`) into the group's shared container, at `path`
    /// (relative to it), or at `transfers/IDENTIFIER/TASK` when empty. The file appears there
    /// whole, once complete. A `discretionary` task waits while the network is metered or the
    /// machine on battery. Returns the task's id.
    public func download(_ url: String, to path: String = "", discretionary: Bool = false) throws(TransferFailure) -> UInt64 {
        try create(TransferRequest(session: identifier, group: group, method: .download, url: url, path: path, discretionary: discretionary))
    }

    /// Uploads the file at `path` in the group's shared container to `url`, with `PUT` (or
    /// `POST` when `post`). Returns the task's id.
    public func upload(_ path: String, to url: String, post: Bool = false, discretionary: Bool = false) throws(TransferFailure) -> UInt64 {
        try create(
            TransferRequest(session: identifier, group: group, method: post ? .uploadPost : .uploadPut, url: url, path: path, discretionary: discretionary))
    }

    /// Cancels task `task`: it ends with a failure event (`extensiond` domain, code 1).
    public func cancel(_ task: UInt64) throws(TransferFailure) {
        try check(call { .transferCancel(tag: $0, task: task) })
    }

    /// Becomes the session's consumer: completions queued for it arrive at `onEvent` (after a
    /// relaunch, say). Creating a task does this too.
    public func claim() throws(TransferFailure) {
        try check(call { .transferClaim(tag: $0, session: identifier, group: group) })
    }

    private func create(_ request: TransferRequest) throws(TransferFailure) -> UInt64 {
        let answer = try call { .transferCreate(tag: $0, request: request) }
        try check(answer)
        return answer.task
    }

    private func handle(_ events: [TransferEvent]) {
        let last = deliveries.withLock { $0.deliver(events, onEvent) }
        guard last > 0, let channel = RuntimeChannel.shared else { return }
        let (session, group) = (identifier, group)
        channel.call({ .transferHandled(tag: $0, session: session, group: group, through: last) }, answered: { _ in })
    }

    private func call(_ make: (UInt32) -> Message) throws(TransferFailure) -> RuntimeChannel.Answer {
        guard let channel = RuntimeChannel.shared else { throw TransferFailure(code: nil, "the process was not launched by extensiond") }
        return channel.call(make)
    }

    private func check(_ answer: RuntimeChannel.Answer) throws(TransferFailure) {
        if let fd = answer.descriptor { close(fd) }
        if let failure = answer.failure { throw TransferFailure(code: failure, answer.text) }
    }
}

/// Why extensiond refused a background transfer call: `code` (`notPermitted`: the group is not
/// the app's, or the point allows no transfers; `badRequest`: the URL or path; `limitReached`:
/// the app's tasks), and what it said.
public struct TransferFailure: Error, Equatable, Sendable, CustomStringConvertible {
    /// The daemon's failure code; nil when the process is not supervised.
    public var code: FailureCode?
    /// What it said.
    public var text: String
    init(code: FailureCode?, _ text: String) {
        self.code = code
        self.text = text
    }
    /// The text.
    public var description: String { text }
}
