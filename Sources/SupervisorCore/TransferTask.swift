import ExtensionProtocol

/// A background session's identity (docs/transfers.md): the app it belongs to, the app group
/// whose shared container holds its files, and the identifier its creator chose.
public struct TransferSessionKey: Hashable, Sendable, Codable, CustomStringConvertible {
    /// The app whose session it is (the creator's app).
    public var app: String
    /// The app group whose shared container holds the files.
    public var group: String
    /// The identifier the creator chose.
    public var identifier: String

    /// The key of these values.
    public init(app: String, group: String, identifier: String) {
        self.app = app
        self.group = group
        self.identifier = identifier
    }

    /// `group/identifier`, as `extctl transfers` shows it.
    public var description: String { group + "/" + identifier }
}

/// Where a task is in its life.
public enum TransferState: String, Sendable, Codable, Equatable {
    /// Waiting to start: new, between attempts (`retryAt`), or for its conditions (a
    /// discretionary task on a metered network or on battery, an app over its bytes a day).
    case waiting
    /// The worker is performing it.
    case running
    /// The server answered (any status): over.
    case completed
    /// It ended without an answer: over.
    case failed
    /// Cancelled: over.
    case cancelled

    /// Whether the task is over.
    public var isFinal: Bool { self == .completed || self == .failed || self == .cancelled }
}

/// One background transfer task, as kept on disk in the state directory: everything needed to
/// resume it after the extension's end, a daemon restart, a re-exec or a reboot.
public struct TransferTask: Sendable, Codable, Equatable {
    /// Its id, unique for the daemon's state directory.
    public var id: UInt64
    /// Its session.
    public var session: TransferSessionKey
    /// The extension that created it, or nil for its app.
    public var creator: String?
    /// Download or upload.
    public var method: TransferMethod
    /// The URL.
    public var url: String
    /// Its file's path relative to the group's shared container.
    public var path: String
    /// Whether it waits while the network is metered or the machine on battery.
    public var discretionary: Bool
    /// When it was created (wall clock, seconds since the epoch).
    public var createdAt: Double
    /// Where it is.
    public var state: TransferState = .waiting
    /// Failed attempts in a row (network errors, 5xx answers): the next backoff's exponent. An
    /// attempt that moved bytes starts a new row.
    public var failures: Int = 0
    /// When it may be tried again (wall clock), if it waits for a backoff.
    public var retryAt: Double?
    /// Bytes done: of the file for a download (resumed ones included), sent for an upload.
    public var bytes: UInt64 = 0
    /// Bytes in all, -1 if unknown.
    public var total: Int64 = -1
    /// The validator of the partial download (the ETag, else Last-Modified), which a resume
    /// sends as `If-Range`; nil: it cannot be resumed.
    public var validator: String?
    /// The final answer's HTTP status, 0 until there is one.
    public var status: UInt16 = 0
    /// The last error, for `extctl transfers`.
    public var lastError: String?
    /// How many times a download started again from zero (the server refused `Range`, or the
    /// resource changed).
    public var restarts: Int = 0
    /// When it ended (wall clock).
    public var finishedAt: Double?
    /// The bytes a day its app may move, as its creator's point said (`transferBytesPerDay`).
    public var bytesPerDay: Int64?

    /// A new waiting task.
    public init(
        id: UInt64, session: TransferSessionKey, creator: String?, method: TransferMethod, url: String, path: String, discretionary: Bool,
        createdAt: Double
    ) {
        self.id = id
        self.session = session
        self.creator = creator
        self.method = method
        self.url = url
        self.path = path
        self.discretionary = discretionary
        self.createdAt = createdAt
    }
}

/// A session as kept on disk: its completions and failures not yet handled, numbered.
public struct TransferSession: Sendable, Codable, Equatable {
    /// Its key.
    public var key: TransferSessionKey
    /// The sequence number the next queued event gets (from 1).
    public var nextSequence: UInt64 = 1
    /// Completions and failures not yet acknowledged (`transferHandled`), oldest first.
    public var queued: [TransferEvent] = []

    /// A session with nothing queued.
    public init(key: TransferSessionKey) { self.key = key }

    /// Queues `event` with the next sequence number, and returns it numbered.
    public mutating func enqueue(_ event: TransferEvent) -> TransferEvent {
        var e = event
        e.sequence = nextSequence
        nextSequence += 1
        queued.append(e)
        return e
    }

    /// Forgets the queued events up to and including `through`; whether any was.
    public mutating func handled(through: UInt64) -> Bool {
        let before = queued.count
        queued.removeAll { $0.sequence <= through }
        return queued.count != before
    }
}
