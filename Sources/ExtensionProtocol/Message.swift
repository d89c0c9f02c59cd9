/// Every message exchanged on extensiond's sockets: the control socket (hosts, `extctl`)
/// and the private channel between the daemon and an extension's runtime.
///
/// Messages are datagrams on `SOCK_SEQPACKET` sockets, one message per datagram.
/// A descriptor travels beside a message with `SCM_RIGHTS` where noted.
/// See docs/protocol.md for the byte layout.
public enum Message: Equatable, Sendable {
    // MARK: Host or extctl → daemon (control socket)

    /// Begin a request on an extension. Answered by `begun` (with the host's end of a fresh
    /// socketpair attached, unless the extension has `exec` readiness) or `failure`.
    case begin(tag: UInt32, extensionID: String)
    /// End (dismiss) a request this connection began. Answered by `ok` or `failure`.
    case end(tag: UInt32, requestID: UInt64)
    /// Ask for `list` or `status` of the named extensions (all when empty). Answered by `json` chunks.
    case query(tag: UInt32, kind: QueryKind, extensionIDs: [String])
    /// Send a signal to an extension's process group (SIGCONT follows for a stopped one).
    case kill(tag: UInt32, extensionID: String, signal: Int32)
    /// Re-read the manifests. Answered by `json` (the reload report) or `failure`.
    case reload(tag: UInt32)
    /// Subscribe this connection to lifecycle events, streamed as `events` messages.
    case monitor(tag: UInt32)
    /// Hint that the named extensions will soon be opened. Answered by `ok`.
    case prewarm(tag: UInt32, extensionIDs: [String])
    /// Find the extensions of `point` (any point when empty) that this connection may open and
    /// whose activation rule accepts `content` (with empty content: every one of the point).
    /// Answered by `discovered` messages, or `failure`.
    case discover(tag: UInt32, point: String, content: ActivationContent)
    /// Post the notification hint `name` (Darwin's notify center): running observers are told,
    /// suspended ones once when next resumed. Answered by `ok` or `failure`.
    case post(tag: UInt32, name: String)
    /// Refresh the extension now (`extctl refresh`), whatever its schedule and budget.
    /// Answered by `refreshed` once it answers, or `failure`.
    case forceRefresh(tag: UInt32, extensionID: String)
    /// Be told (`newData`) whenever a background refresh of these extensions brings new data.
    /// Answered by `ok` or `failure`.
    case subscribe(tag: UInt32, extensionIDs: [String])
    /// Streams the output lines of one extension (exactly one id) to this connection from now
    /// on, as `output` messages (`extctl logs -f`). Answered with the lines kept so far (the
    /// `OutputLog` document of a `logs` query), or a failure naming an unknown id.
    case follow(tag: UInt32, extensionIDs: [String])
    /// End the extension if it runs and empty its own container (`extctl reset`, administrators
    /// only). Answered by `ok` once the container is empty, or `failure`.
    case reset(tag: UInt32, extensionID: String)
    /// Replace the daemon's program in place, keeping every extension and connection
    /// (`extctl reexec`, administrators only). Answered by the new daemon with `json`
    /// (`previousVersion`, `version`, `pid`, `extensions`), or by the old one with `failure`.
    case reexec(tag: UInt32)
    /// Open the shared defaults suite `suite` (an app group's settings) to read it without a
    /// round trip: answered by `defaultsOpened` with the suite's mapping attached (read-only),
    /// or `failure`. The connection is then told of other members' changes (`defaultsChanged`).
    /// For the group's app and administrators (`extctl defaults`).
    case defaultsOpen(tag: UInt32, suite: String)
    /// Set (`value` is a defaults value's encoding, docs/defaults.md) or remove (`value` nil)
    /// `key` of the suite. Answered by `ok` once every reader of the mapping sees it, or `failure`.
    case defaultsWrite(tag: UInt32, suite: String, key: String, value: [UInt8]?)

    // MARK: Daemon → host or extctl

    /// A request began. `pid` is the extension's process; the channel descriptor is attached
    /// when `hasChannel` is true.
    case begun(tag: UInt32, requestID: UInt64, pid: Int32, hasChannel: Bool)
    /// The operation with this tag succeeded.
    case ok(tag: UInt32)
    /// The operation with this tag failed.
    case failure(tag: UInt32, code: FailureCode, text: String)
    /// One chunk of a JSON document answering `tag`; the last chunk has `final` set.
    case json(tag: UInt32, final: Bool, chunk: [UInt8])
    /// An open request was interrupted (the extension exited, crashed or was killed).
    case interrupted(requestID: UInt64, reason: String)
    /// Lifecycle events for a `monitor` subscriber, in the order they were recorded: every event of
    /// one iteration of the daemon's loop, each a JSON object (docs/json.md, "Events"). At least
    /// one; the events of an iteration that do not fit one datagram follow in more `events`
    /// messages (`Message.events(carrying:)`).
    case events(json: [[UInt8]])
    /// Output lines of followed extensions (after `follow`), in the order they were read: each a
    /// JSON object `{"id", "time", "text"}` (docs/json.md, "Output lines").
    case output(json: [[UInt8]])
    /// The extension completed the request, returning `payload` (`completeRequest`); the
    /// request is over: no `end` is needed, and a later one is answered `ok`.
    case completed(requestID: UInt64, payload: [UInt8])
    /// The extension cancelled the request, saying why (`cancelRequest`); the request is over.
    case cancelled(requestID: UInt64, reason: String)
    /// The answer to `forceRefresh`: how the extension answered.
    case refreshed(tag: UInt32, answer: RefreshAnswer)
    /// A refresh of an extension this connection subscribed to brought new data.
    case newData(extensionID: String)
    /// Part of the answer to `discover`, sorted by id; the last part has `final` set.
    case discovered(tag: UInt32, final: Bool, extensions: [DiscoveredExtension])
    /// The suite asked for with `defaultsOpen` is open: its mapping is attached (read-only).
    case defaultsOpened(tag: UInt32)
    /// Another member changed the suite `suite`, which this connection opened.
    case defaultsChanged(suite: String)

    // MARK: Extension runtime → daemon (private channel)

    /// The runtime is initialised and accepts requests.
    case ready
    /// Ask for a task assertion. Answered by `granted` or `denied`.
    case acquire(tag: UInt32, reason: String)
    /// Release an assertion. Releasing twice, or after expiry, is harmless.
    case release(assertionID: UInt64)
    /// The runtime's reader thread has read the `expire` for this assertion.
    case expireReceived(assertionID: UInt64)
    /// The extension ends a request it was given, returning at most `WireLimits.maxPayload`
    /// bytes to its host.
    case complete(requestID: UInt64, payload: [UInt8])
    /// The extension ends a request it was given without a result, saying why.
    case cancel(requestID: UInt64, reason: String)
    /// The extension observes the notification hint `name` from now on (this process only).
    case observe(name: String)
    /// The extension's answer to `refresh`.
    case refreshDone(refreshID: UInt64, answer: RefreshAnswer)
    /// Ask the system to open `url` (`ExtensionContext.open`): the app that declares its
    /// scheme, or the session's handler for it. Answered by `answer` (success: opened).
    case openURL(tag: UInt32, url: String)
    /// Open the shared defaults suite `suite` (a group of the extension's app). Answered by
    /// `answer`; on success the suite's mapping is attached (read-only).
    case suiteOpen(tag: UInt32, suite: String)
    /// Set (`value`: a defaults value's encoding) or remove (nil) `key` of `suite`, which the
    /// process opened. Answered by `answer` once every reader of the mapping sees it.
    case suiteWrite(tag: UInt32, suite: String, key: String, value: [UInt8]?)

    // MARK: Daemon → extension runtime

    /// A host began a request; the extension's end of the host channel is attached.
    case deliver(requestID: UInt64)
    /// The host ended the request (dismissed, closed or exited).
    case ended(requestID: UInt64)
    /// The assertion asked for with `tag` was granted.
    case granted(tag: UInt32, assertionID: UInt64)
    /// The assertion asked for with `tag` was not granted.
    case denied(tag: UInt32, reason: String)
    /// The assertion will expire: the extension has its grace period to release it.
    case expire(assertionID: UInt64)
    /// A notification hint the extension observes was posted (once per name for all the
    /// posts made while it was suspended).
    case notify(name: String)
    /// Refresh now (a background refresh, `widgetPerformUpdate`); answer with `refreshDone`
    /// within the policy's `refreshSeconds` (*expire* for `refreshID` comes first).
    case refresh(refreshID: UInt64)

    // MARK: Secrets: runtime or host → daemon, on either socket (docs/secrets.md)

    /// Add an item with `data`. Answered by `answer` (runtime channel) or `ok`/`failure`.
    case secretAdd(tag: UInt32, attributes: SecretAttributes, data: SecretData)
    /// Find the items matching `query` in the groups the caller may use: the first with its data
    /// (`returnData`), or every one's attributes. Answered by `secretItems`, or a failure
    /// (`itemNotFound`).
    case secretCopy(tag: UInt32, query: SecretAttributes, returnData: Bool, all: Bool)
    /// Change every match's label and/or data. Answered as `secretAdd`.
    case secretUpdate(tag: UInt32, query: SecretAttributes, label: String?, data: SecretData?)
    /// Delete every match. Answered as `secretAdd`.
    case secretDelete(tag: UInt32, query: SecretAttributes)
    /// The items a `secretCopy` found (at least one).
    case secretItems(tag: UInt32, items: [SecretItem])

    // MARK: Background transfers: runtime or host → daemon, on either socket (docs/transfers.md)

    /// Create a task in the session `request.session` of the group `request.group`. Answered by
    /// `transferCreated`, or a failure (`answer` on the runtime channel).
    case transferCreate(tag: UInt32, request: TransferRequest)
    /// Cancel a task of the caller's app. Answered by `answer` (runtime channel) or `ok`/`failure`.
    case transferCancel(tag: UInt32, task: UInt64)
    /// Become the consumer of the session's events: its queued completions follow as
    /// `transferEvents`, and new events as they happen. Answered as `transferCancel` (first).
    case transferClaim(tag: UInt32, session: String, group: String)
    /// The caller has handled the session's events up to and including `through` (the model's
    /// *did finish events*): they are forgotten, never delivered again. Answered as `transferCancel`.
    case transferHandled(tag: UInt32, session: String, group: String, through: UInt64)

    /// The task `transferCreate` with this tag made.
    case transferCreated(tag: UInt32, task: UInt64)
    /// Events of a session the receiver created a task in, or claimed (at least one).
    case transferEvents(session: String, group: String, events: [TransferEvent])

    /// The answer to `openURL`, `suiteOpen` or `suiteWrite` with this tag: `failure` nil on
    /// success (for `openURL`: the URL was opened), otherwise why not; `text` says it for people.
    case answer(tag: UInt32, failure: FailureCode?, text: String)
    /// Another member changed the suite `suite`, which this process opened (once for all the
    /// changes made while it was suspended, when it is resumed).
    case suiteChanged(suite: String)
}

/// What a `query` asks for.
public enum QueryKind: UInt8, Sendable {
    /// The list document (docs/json.md): one summary entry per extension.
    case list = 1
    /// The status document (docs/json.md): each extension in detail.
    case status = 2
    /// The shared container named by the single entry of `extensionIDs` (a container name):
    /// answered with JSON `{"name", "path", "gid"}` to root, the daemon's uid, the
    /// administrator group, and members of the container's group.
    case container = 3
    /// The secret items of the group named by the single entry of `extensionIDs` (every group
    /// when empty), administrators only: JSON with each item's class, group and label, never
    /// its data or other attributes (`extctl secrets list`).
    case secrets = 4
    /// The background transfer tasks of the extension or app named by the single entry of
    /// `extensionIDs` (every one the caller may see when empty): JSON (docs/json.md,
    /// "Transfers"). Administrators see every task, an app's processes their app's.
    case transfers = 5
    /// The output lines an extension wrote lately (`extctl logs`): `OutputLog` (docs/json.md).
    /// Exactly one id.
    case logs = 6
}

/// Why an operation failed, for programs; the accompanying text is for people.
public enum FailureCode: UInt16, Sendable, Equatable {
    /// No extension has this id (or no loaded manifest names this shared container).
    case unknownExtension = 1
    /// The extension could not be spawned, or it exited before it became ready.
    case launchFailed = 2
    /// The extension did not become ready within its `launchTimeoutSeconds`.
    case launchTimeout = 3
    /// The extension is in crash-loop backoff; the text says when the next launch is allowed.
    case throttled = 4
    /// The peer may not do this: the manifest's `hosts` does not admit it, or the operation is
    /// for administrators only.
    case notPermitted = 5
    /// The request is invalid as asked: an invalid id or signal, an unknown extension point, a
    /// refresh of an extension that has no refresh. With tag 0: a protocol error, after which the
    /// daemon closes the connection.
    case badRequest = 6
    /// No request with this id is open on this connection.
    case unknownRequest = 7
    /// The connection is over a limit: `maxRequestsPerHost` requests, or the rate of posts.
    case limitReached = 8
    /// The daemon is shutting down, or the extension is going away, and starts nothing new.
    case shuttingDown = 9
    /// The operation needs a process, and the extension has none.
    case notRunning = 10
    /// The daemon failed at its own part of the operation.
    case internalError = 11
    /// The operation was cut short: the request's channel could not be handed to the
    /// extension, or a forced refresh went unanswered.
    case interrupted = 12
    /// A secret item with the same identity exists already (the model's errSecDuplicateItem).
    case duplicateItem = 13
    /// No secret item matches, in the groups the caller may use (errSecItemNotFound): an item of
    /// another group is never revealed.
    case itemNotFound = 14
}

extension Message {
    /// The wire type number of this message.
    public var kind: MessageKind {
        switch self {
        case .begin: .begin
        case .end: .end
        case .query: .query
        case .kill: .kill
        case .reload: .reload
        case .monitor: .monitor
        case .prewarm: .prewarm
        case .discover: .discover
        case .post: .post
        case .forceRefresh: .forceRefresh
        case .subscribe: .subscribe
        case .follow: .follow
        case .output: .output
        case .reset: .reset
        case .reexec: .reexec
        case .refreshed: .refreshed
        case .newData: .newData
        case .refreshDone: .refreshDone
        case .refresh: .refresh
        case .defaultsOpen: .defaultsOpen
        case .defaultsWrite: .defaultsWrite
        case .defaultsOpened: .defaultsOpened
        case .defaultsChanged: .defaultsChanged
        case .openURL: .openURL
        case .suiteOpen: .suiteOpen
        case .suiteWrite: .suiteWrite
        case .answer: .answer
        case .suiteChanged: .suiteChanged
        case .secretAdd: .secretAdd
        case .secretCopy: .secretCopy
        case .secretUpdate: .secretUpdate
        case .secretDelete: .secretDelete
        case .secretItems: .secretItems
        case .transferCreate: .transferCreate
        case .transferCancel: .transferCancel
        case .transferClaim: .transferClaim
        case .transferHandled: .transferHandled
        case .transferCreated: .transferCreated
        case .transferEvents: .transferEvents
        case .observe: .observe
        case .notify: .notify
        case .begun: .begun
        case .ok: .ok
        case .failure: .failure
        case .json: .json
        case .interrupted: .interrupted
        case .events: .events
        case .discovered: .discovered
        case .completed: .completed
        case .cancelled: .cancelled
        case .complete: .complete
        case .cancel: .cancel
        case .ready: .ready
        case .acquire: .acquire
        case .release: .release
        case .expireReceived: .expireReceived
        case .deliver: .deliver
        case .ended: .ended
        case .granted: .granted
        case .denied: .denied
        case .expire: .expire
        }
    }
}

/// Wire type numbers. Stable: new messages get new numbers, old numbers are never reused.
public enum MessageKind: UInt8, Sendable {
    /// Each case is the type of the `Message` case of the same name. These: host or `extctl`
    /// to daemon, on the control socket, numbered from 1.
    case begin = 1, end = 2, query = 3, kill = 4, reload = 5, monitor = 6, prewarm = 7, discover = 8, post = 9, forceRefresh = 10, subscribe = 11, reset = 12,
        reexec = 13, defaultsOpen = 14, defaultsWrite = 15, follow = 16
    /// Daemon to host or `extctl`, on the control socket, numbered from 32. 37 is not
    /// assigned: it is reserved, never to be reused.
    case begun = 32, ok = 33, failure = 34, json = 35, interrupted = 36, discovered = 38, completed = 39, cancelled = 40, refreshed = 41, newData = 42
    /// Daemon to a monitor, on the control socket (numbered from 32, after the others).
    case events = 43
    /// Daemon to host or `extctl`, shared defaults (numbered after the others).
    case defaultsOpened = 44, defaultsChanged = 45
    /// Extension runtime to daemon, on its private channel, numbered from 64.
    case ready = 64, acquire = 65, release = 66, expireReceived = 67, complete = 68, cancel = 69, observe = 70, refreshDone = 71, openURL = 72, suiteOpen = 73,
        suiteWrite = 74
    /// Secrets, client (an extension's runtime or a host) to daemon, on either socket.
    case secretAdd = 75, secretCopy = 76, secretUpdate = 77, secretDelete = 78
    /// Background transfers, client to daemon, on either socket.
    case transferCreate = 79, transferCancel = 80, transferClaim = 81, transferHandled = 82
    /// Daemon to extension runtime, on its private channel, numbered from 96.
    case deliver = 96, ended = 97, granted = 98, denied = 99, expire = 100, notify = 101, refresh = 102, answer = 103, suiteChanged = 104
    /// Daemon to client, on either socket: the items a `secretCopy` found.
    case secretItems = 105
    /// Daemon to client, on either socket: background transfers.
    case transferCreated = 106, transferEvents = 107
    /// Daemon to a follower, on the control socket: output lines.
    case output = 108
}

extension MessageKind {
    /// Whether messages of this kind can carry secret bytes, which their buffers must not keep.
    public var carriesSecrets: Bool {
        switch self {
        case .secretAdd, .secretUpdate, .secretItems: true
        default: false
        }
    }

    /// Whether the raw kind `raw` is one that carries secret bytes.
    public static func carriesSecrets(_ raw: UInt8) -> Bool { MessageKind(rawValue: raw)?.carriesSecrets ?? false }
}

/// How an extension answered a background refresh (`widgetPerformUpdate`'s result).
public enum RefreshAnswer: UInt8, Sendable, Equatable {
    /// The extension has new data to show.
    case newData = 0
    /// The extension had nothing new.
    case noData = 1
    /// The refresh failed.
    case failed = 2
    /// The extension registered no refresh handler (sent by the runtime, never by a host).
    case unsupported = 3
}
