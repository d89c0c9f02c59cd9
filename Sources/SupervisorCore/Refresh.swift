/// How often a widget may be refreshed in the background: the manifest's `refresh` key, or its
/// extension point's default (the built-in points have none: refresh is off unless asked for).
public struct RefreshSchedule: Equatable, Sendable, Encodable {
    /// The shortest time between two scheduled refreshes.
    public var minimumIntervalSeconds: Double
    /// The most scheduled refreshes in any 24 hours (0: refresh off).
    public var dailyBudget: Int

    /// A schedule with this interval and budget; by default refreshes at least 900 seconds
    /// apart, at most 48 a day.
    public init(minimumIntervalSeconds: Double = 900, dailyBudget: Int = 48) {
        self.minimumIntervalSeconds = minimumIntervalSeconds
        self.dailyBudget = dailyBudget
    }

    /// Bounds: 1 s to one day, and a budget from 0 to 1,440 (one a minute).
    public func violation() -> (field: String, problem: String)? {
        if !minimumIntervalSeconds.isFinite || minimumIntervalSeconds < 1 || minimumIntervalSeconds > Policy.maximumSeconds {
            return ("minimumIntervalSeconds", "must be from 1 to \(Int(Policy.maximumSeconds)) seconds, got \(minimumIntervalSeconds)")
        }
        if dailyBudget < 0 || dailyBudget > 1_440 { return ("dailyBudget", "must be from 0 to 1440, got \(dailyBudget)") }
        return nil
    }
}

/// How a refresh ended, as the extension answered (`RefreshResult` in the runtime).
public enum RefreshOutcome: String, Equatable, Sendable, Codable {
    /// The extension has new data to show.
    case newData = "new-data"
    /// The extension had nothing new.
    case noData = "no-data"
    /// The refresh failed; the supervisor also counts an unanswered refresh as this.
    case failed
}

/// The background-refresh schedule of one extension: when the next refresh is due, the
/// budget left, and how the last answers stretch the interval. Pure; owned by the record.
///
/// The interval after a refresh is `minimumIntervalSeconds × max(unseen, noData) × backoff`,
/// at most a day, where each factor is a power of two:
/// - `noData` doubles after each `no-data` answer (up to 8) and is 1 again after `new-data`;
/// - `unseen` doubles after each answered refresh whose previous result no host looked at
///   (no request was open on the extension when it came, and none began before this one
///   came; up to 8), and is 1 after one a host saw: a widget people look at is refreshed more
///   often than one nobody shows;
/// - `backoff` doubles after each `failed` answer or unanswered refresh (up to 32) and is 1
///   after any other answer.
/// Due times are rounded up to a whole `batchSeconds` of the monotonic clock, so widgets that
/// fall due close together are refreshed on one wakeup. Scheduled refreshes spend the daily
/// budget (a 24-hour window opened by the first refresh in it); once it is spent the next is
/// due when the window ends. Forced refreshes (`extctl refresh`) spend nothing.
public struct RefreshState: Equatable, Sendable, Codable {
    /// Refreshes due within the same `batchSeconds` run on one wakeup.
    public static let batchSeconds: Double = 60
    /// The budget window.
    public static let daySeconds: Double = 86_400

    /// The schedule in force (the manifest's, or its point's).
    public private(set) var schedule: RefreshSchedule
    /// When the next scheduled refresh is due (nil: refresh is off).
    public private(set) var nextAt: Instant?
    /// How the last refresh ended (`failed` when it went unanswered); nil until one ended.
    public private(set) var lastOutcome: RefreshOutcome?
    /// When the last refresh ended; nil until one ended.
    public private(set) var lastAt: Instant?
    /// The assertion id of the refresh in flight.
    public internal(set) var inFlight: UInt64?
    /// A refresh is wanted but the extension was not in a phase to start it: it starts at the
    /// next transition that allows it.
    public internal(set) var wanted = false
    /// Hosts waiting for the answer of a forced refresh (`extctl refresh`), with their tags.
    public internal(set) var waiters: [Waiter] = []
    /// A host has looked at the last refresh's result: a request was open when it came, or
    /// began since.
    public internal(set) var seen = false
    private var windowStart: Instant?
    private var used = 0
    private var unseenFactor: Double = 1
    private var noDataFactor: Double = 1
    private var backoff: Double = 1

    /// The state of a new record at `now`: nothing run yet, the first refresh due one
    /// `minimumIntervalSeconds` later (rounded up to `batchSeconds`), or none when the budget is 0.
    public init(schedule: RefreshSchedule, now: Instant) {
        self.schedule = schedule
        if schedule.dailyBudget > 0 { nextAt = Self.aligned(now.adding(seconds: schedule.minimumIntervalSeconds)) }
    }

    /// A host waiting for a forced refresh's answer.
    public struct Waiter: Equatable, Sendable, Codable {
        /// The host connection waiting.
        public var host: HostID
        /// The tag of its `forceRefresh`, answered with `refreshed` or `failure`.
        public var tag: UInt32
    }

    /// Scheduled refreshes left in the current window at `now`.
    public func budgetLeft(at now: Instant) -> Int {
        guard let start = windowStart, now < start.adding(seconds: Self.daySeconds) else { return schedule.dailyBudget }
        return max(0, schedule.dailyBudget - used)
    }

    /// Whether a scheduled refresh is due at `now` (and none is in flight or waiting).
    func isDue(at now: Instant) -> Bool {
        guard let nextAt, inFlight == nil, !wanted else { return false }
        return now >= nextAt
    }

    /// A manifest reload changed the schedule: keeps the history, recomputes the next due time.
    mutating func reschedule(_ new: RefreshSchedule, now: Instant) {
        guard new != schedule else { return }
        schedule = new
        if new.dailyBudget == 0 {
            nextAt = nil
        } else {
            nextAt = Self.aligned((lastAt ?? now).adding(seconds: interval))
        }
    }

    /// A due refresh cannot run (the daemon is shutting down, the manifest was removed): the
    /// next is scheduled one interval later, so the due time never stays in the past.
    mutating func skip(at now: Instant) {
        if schedule.dailyBudget > 0 { nextAt = Self.aligned(now.adding(seconds: interval)) }
    }

    /// A scheduled refresh is starting at `now`: spends one unit of the budget. Returns false
    /// (and moves `nextAt` to the end of the window) when the budget is spent.
    mutating func spend(at now: Instant) -> Bool {
        if let start = windowStart, now < start.adding(seconds: Self.daySeconds) {
            guard used < schedule.dailyBudget else {
                nextAt = Self.aligned(start.adding(seconds: Self.daySeconds))
                return false
            }
        } else {
            windowStart = now
            used = 0
        }
        used += 1
        return true
    }

    /// The refresh `inFlight` ended at `now`: answered with `outcome`, or unanswered (nil);
    /// `watched` tells whether a host has the extension open now. Schedules the next one.
    mutating func ended(_ outcome: RefreshOutcome?, at now: Instant, watched: Bool) {
        inFlight = nil
        lastAt = now
        lastOutcome = outcome ?? .failed
        switch outcome {
        case .newData?:
            noDataFactor = 1
            backoff = 1
        case .noData?:
            noDataFactor = min(noDataFactor * 2, 8)
            backoff = 1
        case .failed?, nil:
            backoff = min(backoff * 2, 32)
        }
        if outcome != nil && outcome != .failed {
            unseenFactor = seen ? 1 : min(unseenFactor * 2, 8)
            seen = watched
        }
        if schedule.dailyBudget > 0 { nextAt = Self.aligned(now.adding(seconds: interval)) }
    }

    /// The current interval between scheduled refreshes, in seconds.
    public var interval: Double {
        min(schedule.minimumIntervalSeconds * max(unseenFactor, noDataFactor) * backoff, Self.daySeconds)
    }

    /// `t` rounded up to a whole `batchSeconds`.
    static func aligned(_ t: Instant) -> Instant {
        let step = UInt64(batchSeconds * 1e9)
        let n = t.nanoseconds
        return Instant(nanoseconds: (n + step - 1) / step * step)
    }
}

/// Written and read directly in a hand-over document (`BinaryDirectCodable`, see
/// RecordDirectCoding.swift): the members its synthesized `Codable` conformance gives, its
/// private ones included.
extension RefreshState: BinaryDirectCodable {
    package func write(to output: BinaryOutput, level: Int) throws {
        let w = BinaryFieldWriter(output, level: level)
        try w.value(schedule, "schedule")
        w.optional(nextAt, "nextAt") { w.instant($0, $1) }
        w.optional(lastOutcome, "lastOutcome") { w.string($0.rawValue, $1) }
        w.optional(lastAt, "lastAt") { w.instant($0, $1) }
        w.optional(inFlight, "inFlight") { w.integer($0, $1) }
        w.bool(wanted, "wanted")
        try w.list(waiters, "waiters")
        w.bool(seen, "seen")
        w.optional(windowStart, "windowStart") { w.instant($0, $1) }
        w.integer(used, "used")
        w.double(unseenFactor, "unseenFactor")
        w.double(noDataFactor, "noDataFactor")
        w.double(backoff, "backoff")
    }

    package init(binary input: BinaryInput, at offset: Int, within end: Int) throws {
        var r = try BinaryFields(input, at: offset, within: end)
        schedule = try r.canonical(RefreshSchedule.self, "schedule")
        nextAt = try r.instantIfPresent("nextAt")
        lastOutcome = try r.canonicalIfPresent(RefreshOutcome.self, "lastOutcome")
        lastAt = try r.instantIfPresent("lastAt")
        inFlight = try r.integerIfPresent(UInt64.self, "inFlight")
        wanted = try r.bool("wanted")
        waiters = try r.list(Waiter.self, "waiters")
        seen = try r.bool("seen")
        windowStart = try r.instantIfPresent("windowStart")
        used = try r.integer(Int.self, "used")
        unseenFactor = try r.double("unseenFactor")
        noDataFactor = try r.double("noDataFactor")
        backoff = try r.double("backoff")
    }
}
