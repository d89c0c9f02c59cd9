import ExtensionProtocol

/// The decisions about background transfers (docs/transfers.md), pure and in wall-clock time:
/// whether a request is acceptable, where an attempt resumes, what an attempt's end means
/// (done, retry after a backoff, start again from zero, fail), and who is told of an event.
public enum TransferPlanner {
    /// How long a request may go without progress before the attempt fails (the model's
    /// `timeoutIntervalForRequest`).
    public static let stallSeconds: UInt32 = 60
    /// How long a task may live before it fails (`timeoutIntervalForResource`): 7 days.
    public static let resourceSeconds: Double = 7 * 24 * 3600
    /// The first backoff; each failure in a row doubles it, up to `maxBackoffSeconds`.
    public static let firstBackoffSeconds: Double = 1
    /// The longest backoff.
    public static let maxBackoffSeconds: Double = 600
    /// Most tasks the worker performs at once; the others wait their turn.
    public static let maxRunning = 16
    /// The shortest interval between two progress events of one task.
    public static let progressInterval: Double = 0.25

    /// What is wrong with `request`, or nil. The URL must be `http:` or `https:` with a host,
    /// and the path relative, inside the container: no `..`, no empty component, no leading `/`.
    public static func problem(_ request: TransferRequest) -> String? {
        if let p = Identifier.problem(request.session) { return "the session identifier '\(request.session)' is not valid: \(p)" }
        let url = request.url
        if url.utf8.count > WireLimits.maxTransferURL { return "the URL is longer than \(WireLimits.maxTransferURL) bytes" }
        if url.utf8.contains(where: { $0 <= 0x20 || $0 == 0x7f }) { return "the URL contains a space or a control character" }
        let lower = url.lowercased()
        let rest: Substring
        if lower.hasPrefix("https://") {
            rest = url.dropFirst(8)
        } else if lower.hasPrefix("http://") {
            rest = url.dropFirst(7)
        } else {
            return "the URL '\(url)' is not http: or https:"
        }
        if rest.isEmpty || rest.first == "/" { return "the URL '\(url)' names no host" }
        if let p = pathProblem(request.path, required: request.method.isUpload) { return p }
        return nil
    }

    /// What is wrong with a path relative to a shared container, or nil.
    public static func pathProblem(_ path: String, required: Bool) -> String? {
        if path.isEmpty { return required ? "an upload names its file in the shared container (path)" : nil }
        if path.utf8.count > WireLimits.maxTransferPath { return "the path is longer than \(WireLimits.maxTransferPath) bytes" }
        if path.hasPrefix("/") { return "the path '\(path)' is not relative to the shared container" }
        if path.utf8.contains(where: { $0 < 0x20 || $0 == 0x7f }) { return "the path contains a control character" }
        for part in path.split(separator: "/", omittingEmptySubsequences: false) {
            if part.isEmpty || part == "." || part == ".." { return "the path '\(path)' has an empty, '.' or '..' component" }
        }
        return nil
    }

    /// Where a download's file goes when its creator names none.
    public static func defaultPath(session: String, task: UInt64) -> String { "transfers/\(session)/\(task)" }

    /// The next backoff after `failures` failures in a row.
    public static func backoff(failures: Int) -> Double {
        guard failures > 0 else { return 0 }
        var s = firstBackoffSeconds
        for _ in 1..<min(failures, 30) { s *= 2 }
        return min(s, maxBackoffSeconds)
    }

    /// Where an attempt at `task` starts: for a download with `partialBytes` on disk and a
    /// validator, at that byte with `If-Range`; otherwise at 0 (the partial file is emptied).
    public static func start(_ task: TransferTask, partialBytes: UInt64) -> (offset: UInt64, ifRange: String) {
        guard task.method == .download, partialBytes > 0, let v = task.validator, !v.isEmpty else { return (0, "") }
        return (partialBytes, v)
    }

    /// The validator a response gives for later resumes: its ETag (a strong one: a weak ETag
    /// cannot validate a range), else its Last-Modified; nil when it has neither.
    public static func validator(etag: String, lastModified: String) -> String? {
        if !etag.isEmpty && !etag.hasPrefix("W/") { return etag }
        if !lastModified.isEmpty { return lastModified }
        return nil
    }

    /// How an attempt ended, as the worker reports it.
    public struct AttemptEnd: Equatable, Sendable {
        /// The final answer's HTTP status, 0 if none.
        public var status: UInt16
        /// libcurl's `CURLcode` (0: the exchange completed, whatever the status); -1: the worker
        /// refused the task.
        public var curlCode: Int32
        /// The worker's or libcurl's error text.
        public var text: String
        /// An end of these values.
        public init(status: UInt16, curlCode: Int32, text: String) {
            self.status = status
            self.curlCode = curlCode
            self.text = text
        }
    }

    /// What follows an attempt.
    public enum Next: Equatable, Sendable {
        /// The server answered `status`: the task is completed (a download's file is moved into
        /// the container when the status is 2xx).
        case completed(status: UInt16)
        /// Try again at `at` (wall clock), after a network error or a 5xx answer.
        case retry(at: Double, why: String)
        /// Start the download again from byte 0 (the server cannot satisfy the range), after a
        /// backoff: a server that answers 416 to every range is not asked in a loop.
        case restart(why: String)
        /// The task fails.
        case failed(domain: String, code: Int32, text: String)
    }

    /// libcurl codes of errors a later attempt may not have: the network, the peer, a timeout.
    static let transientCurlCodes: Set<Int32> = [
        5, 6, 7,  // couldn't resolve proxy / host, couldn't connect
        16,  // HTTP/2 framing
        18,  // partial file
        28,  // operation timed out (no progress for stallSeconds)
        35,  // TLS connect error
        52, 55, 56,  // got nothing, send error, receive error
        92,  // HTTP/2 stream error
        95,  // HTTP/3
    ]

    /// What follows the attempt at `task` that ended with `end`, at `now` (wall clock).
    public static func next(_ task: TransferTask, after end: AttemptEnd, now: Double) -> Next {
        if end.curlCode == -1 { return .failed(domain: "extensiond", code: TransferError.cannotPerform.rawValue, text: end.text) }
        if end.curlCode == 0 {
            if end.status == 416 && task.method == .download {
                return .restart(why: "the server cannot satisfy the range (416)")
            }
            if task.method == .download && (200..<300).contains(end.status) && task.total >= 0 && task.bytes < UInt64(task.total) {
                // An answer that ended short of the resource (a 206 of part of the rest): resumed.
                return retryOrFail(
                    task, now: now, why: "the answer ended at byte \(task.bytes) of \(task.total)", domain: "http", code: Int32(end.status))
            }
            if end.status >= 500 || end.status == 408 || end.status == 429 {
                return retryOrFail(task, now: now, why: "HTTP \(end.status)", domain: "http", code: Int32(end.status))
            }
            return .completed(status: end.status)
        }
        if transientCurlCodes.contains(end.curlCode) {
            return retryOrFail(task, now: now, why: end.text.isEmpty ? "curl error \(end.curlCode)" : end.text, domain: "curl", code: end.curlCode)
        }
        return .failed(domain: "curl", code: end.curlCode, text: end.text.isEmpty ? "curl error \(end.curlCode)" : end.text)
    }

    private static func retryOrFail(_ task: TransferTask, now: Double, why: String, domain: String, code: Int32) -> Next {
        let at = now + backoff(failures: task.failures + 1)
        if at - task.createdAt > resourceSeconds {
            return .failed(domain: domain, code: code, text: "no answer within 7 days (its resource timeout); the last attempt: \(why)")
        }
        return .retry(at: at, why: why)
    }

    /// Whether `task` has outlived its resource timeout at `now`.
    public static func expired(_ task: TransferTask, now: Double) -> Bool {
        !task.state.isFinal && now - task.createdAt > resourceSeconds
    }

    /// Whether a waiting `task` may start at `now`: its backoff over, and for a discretionary
    /// one, the network not metered and the machine not on battery.
    public static func mayStart(_ task: TransferTask, now: Double, constrained: Bool) -> Bool {
        guard task.state == .waiting else { return false }
        if let at = task.retryAt, at > now { return false }
        if task.discretionary && constrained { return false }
        return true
    }

    /// Who is told of a session's event.
    public enum Recipient: Equatable, Sendable {
        /// The session's consumer: the extension process that created a task in it or claimed
        /// it (while it runs, not suspended), or the app's connection that claimed it.
        case consumer
        /// Nobody now; a completion or failure stays queued, and the app is brought up in the
        /// background to claim the session (`wakeApp`).
        case queued(wakeApp: Bool)
        /// Nobody: a progress event with no consumer is dropped (a suspended extension is never
        /// woken for progress).
        case dropped
    }

    /// Who gets an event of `kind` for a session whose consumer is `consumerReady` (present,
    /// and running if it is an extension), and whose app was already brought up for it
    /// (`appWoken`) since it was last claimed.
    public static func recipient(_ kind: TransferEvent.Kind, consumerReady: Bool, appWoken: Bool) -> Recipient {
        if consumerReady { return .consumer }
        if kind == .progress { return .dropped }
        return .queued(wakeApp: !appWoken)
    }
}

/// The point's limits on background transfers (`transferTasksPerApp`, `transferBytesPerDay`),
/// counted per app over its sessions, its extensions' included.
public struct TransferBudget: Sendable, Codable, Equatable {
    /// The day counted (days since the epoch, UTC).
    public var day: Int64 = 0
    /// Bytes transferred today, by app.
    public var bytes: [String: UInt64] = [:]

    /// An empty budget.
    public init() {}

    /// Counts `n` more bytes of `app` at `now` (wall clock).
    public mutating func add(_ n: UInt64, app: String, now: Double) {
        roll(now)
        bytes[app, default: 0] += n
    }

    /// Bytes of `app` today at `now`.
    public mutating func used(app: String, now: Double) -> UInt64 {
        roll(now)
        return bytes[app] ?? 0
    }

    /// The start of the next day (wall clock), when an app over its bytes may go on.
    public func nextDay() -> Double { Double(day + 1) * 86_400 }

    private mutating func roll(_ now: Double) {
        let today = Int64((now / 86_400).rounded(.down))
        if today != day {
            day = today
            bytes = [:]
        }
    }
}
