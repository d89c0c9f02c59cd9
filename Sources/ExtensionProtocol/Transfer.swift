/// What a background transfer task does (docs/transfers.md): a download (`GET`) to a file the
/// system names, moved into the app group's shared container on success, or an upload (`PUT` or
/// `POST`) of a file in that container.
public enum TransferMethod: UInt8, Sendable, Equatable, Codable {
    /// Download with `GET`.
    case download = 1
    /// Upload with `PUT`.
    case uploadPut = 2
    /// Upload with `POST`.
    case uploadPost = 3

    /// Whether this is an upload.
    public var isUpload: Bool { self != .download }
}

/// A background transfer task as its creator asks for it (`transferCreate`).
public struct TransferRequest: Sendable, Equatable {
    /// The session's identifier, chosen by its creator (at most `WireLimits.maxIdentifier` bytes).
    public var session: String
    /// The app group whose shared container holds the files: a group of the caller's app.
    public var group: String
    /// Download or upload.
    public var method: TransferMethod
    /// The `http:` or `https:` URL (at most `WireLimits.maxTransferURL` bytes).
    public var url: String
    /// A relative path in the group's shared container: the upload's source, or where a
    /// download is moved on success (empty for a download: `transfers/SESSION/TASK`).
    public var path: String
    /// A discretionary task waits while the connection is metered or the machine is on battery.
    public var discretionary: Bool

    /// A request of these values, stored as given (the daemon checks them).
    public init(session: String, group: String, method: TransferMethod, url: String, path: String, discretionary: Bool = false) {
        self.session = session
        self.group = group
        self.method = method
        self.url = url
        self.path = path
        self.discretionary = discretionary
    }
}

/// One event of a background session, delivered to the extension that created the task while it
/// runs, or else to the containing app once it claims the session.
public struct TransferEvent: Sendable, Equatable, Codable {
    /// What happened.
    public enum Kind: UInt8, Sendable, Equatable, Codable {
        /// `bytes` of `total` done (coalesced: a few a second at most; never queued for later).
        case progress = 1
        /// The server answered: `status`, and for a download with a 2xx status, `path`.
        case completed = 2
        /// The task ended without an answer: `domain`, `code` and `text` say why.
        case failed = 3
    }

    /// The session's sequence number of a completion or failure, which `transferHandled`
    /// acknowledges; 0 for progress, which is never queued.
    public var sequence: UInt64
    /// The task.
    public var task: UInt64
    /// What happened.
    public var kind: Kind
    /// Bytes done (received for a download, sent for an upload).
    public var bytes: UInt64
    /// Bytes expected in all, or -1 if unknown.
    public var total: Int64
    /// The HTTP status of the final answer (0 if none).
    public var status: UInt16
    /// The final file's absolute path (a completed download with a 2xx status), else empty.
    public var path: String
    /// The error's domain for `failed`: `http` (too many 5xx answers), `curl` (libcurl's
    /// `CURLcode`), `posix` (`errno`), or `extensiond` (`TransferError`); else empty.
    public var domain: String
    /// The error's code in `domain`.
    public var code: Int32
    /// The error, said for people; else empty.
    public var text: String

    /// An event of these values.
    public init(
        sequence: UInt64, task: UInt64, kind: Kind, bytes: UInt64, total: Int64, status: UInt16 = 0, path: String = "", domain: String = "",
        code: Int32 = 0, text: String = ""
    ) {
        self.sequence = sequence
        self.task = task
        self.kind = kind
        self.bytes = bytes
        self.total = total
        self.status = status
        self.path = path
        self.domain = domain
        self.code = code
        self.text = text
    }
}

/// The codes of the `extensiond` error domain of a failed transfer.
public enum TransferError: Int32, Sendable {
    /// Cancelled (`transferCancel`, `extctl transfer cancel`).
    case cancelled = 1
    /// Older than its 7-day resource timeout.
    case timedOut = 2
    /// The server's answer cannot be kept (the file could not be moved into the container).
    case cannotStore = 3
    /// The worker could not perform it (the upload's source cannot be read, the answer's range
    /// is not the one asked for).
    case cannotPerform = 4
    /// The app group, or the app, is no longer declared.
    case groupGone = 5
}

/// What a client of a background session has handed to its code: the highest sequence number
/// delivered in this process. Each batch of `transferEvents` goes through `deliver`, which
/// passes on progress and each completion or failure not delivered before, and returns the
/// sequence number to acknowledge (`transferHandled`), 0 when there is none. Not thread-safe:
/// the owner serializes calls (one reading thread).
public struct TransferDeliveries: Sendable {
    /// The highest sequence number handed on.
    public private(set) var delivered: UInt64 = 0

    /// Nothing delivered yet.
    public init() {}

    /// Hands each event of `events` to `body` unless it is a completion or failure already
    /// delivered; returns the highest sequence number of the batch (0: progress only).
    public mutating func deliver(_ events: [TransferEvent], _ body: (TransferEvent) -> Void) -> UInt64 {
        var last: UInt64 = 0
        for event in events {
            if event.sequence != 0 {
                last = max(last, event.sequence)
                guard event.sequence > delivered else { continue }
                delivered = event.sequence
            }
            body(event)
        }
        return last
    }
}
