/// The document of `extctl status --json`, the answer to a `query` of kind 2 (docs/json.md,
/// "status"): how the daemon contains its extensions, and each extension asked for in detail.
public struct StatusReport: JSONDocument, Equatable {
    /// How the daemon holds the processes of its extensions together.
    public struct Containment: Codable, Sendable, Equatable {
        /// `cgroup` (one cgroup per running extension) or `process-group` (the fallback).
        public var mode: String
        /// Why there is no cgroup per extension; always written, `null` with `cgroup`.
        public var reason: String?

        /// A containment with the fields given.
        public init(mode: String, reason: String?) {
            self.mode = mode
            self.reason = reason
        }

        enum CodingKeys: String, CodingKey {
            case mode, reason
        }

        /// Writes the members in `JSONWriter.keyOrder`: the always-written ones (`null` when empty), and the optional ones when they apply.
        public func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(mode, forKey: .mode)
            if let reason { try c.encode(reason, forKey: .reason) } else { try c.encodeNil(forKey: .reason) }
        }
    }

    /// The resolved policy of an extension (docs/policies.md).
    public struct Policy: Codable, Sendable, Equatable {
        /// Longest an assertion may be held.
        public var assertionMaxSeconds: Double
        /// How long an extension without requests runs on in `background`.
        public var backgroundSeconds: Double
        /// How long before the stop *expire* is sent.
        public var expiryGraceSeconds: Double
        /// How long a launch may take to become ready.
        public var launchTimeoutSeconds: Double
        /// `terminate` or `resume`.
        public var lockedWhileSuspended: String
        /// How long a background refresh may take to answer.
        public var refreshSeconds: Double
        /// `stop`, `freeze` or `never`.
        public var suspend: String
        /// How long an extension may stay suspended before it is reclaimed.
        public var suspendedLifetimeSeconds: Double

        /// A policy with the fields given.
        public init(
            assertionMaxSeconds: Double, backgroundSeconds: Double, expiryGraceSeconds: Double, launchTimeoutSeconds: Double,
            lockedWhileSuspended: String, refreshSeconds: Double, suspend: String, suspendedLifetimeSeconds: Double
        ) {
            self.assertionMaxSeconds = assertionMaxSeconds
            self.backgroundSeconds = backgroundSeconds
            self.expiryGraceSeconds = expiryGraceSeconds
            self.launchTimeoutSeconds = launchTimeoutSeconds
            self.lockedWhileSuspended = lockedWhileSuspended
            self.refreshSeconds = refreshSeconds
            self.suspend = suspend
            self.suspendedLifetimeSeconds = suspendedLifetimeSeconds
        }

        enum CodingKeys: String, CodingKey {
            case assertionMaxSeconds, backgroundSeconds, expiryGraceSeconds, launchTimeoutSeconds, lockedWhileSuspended
            case refreshSeconds, suspend, suspendedLifetimeSeconds
        }

        /// Writes the members in `JSONWriter.keyOrder`: the always-written ones (`null` when empty), and the optional ones when they apply.
        public func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(assertionMaxSeconds, forKey: .assertionMaxSeconds)
            try c.encode(backgroundSeconds, forKey: .backgroundSeconds)
            try c.encode(expiryGraceSeconds, forKey: .expiryGraceSeconds)
            try c.encode(launchTimeoutSeconds, forKey: .launchTimeoutSeconds)
            try c.encode(lockedWhileSuspended, forKey: .lockedWhileSuspended)
            try c.encode(refreshSeconds, forKey: .refreshSeconds)
            try c.encode(suspend, forKey: .suspend)
            try c.encode(suspendedLifetimeSeconds, forKey: .suspendedLifetimeSeconds)
        }
    }

    /// A resource limit that is set, and how it is enforced here.
    public struct Limit: Codable, Sendable, Equatable {
        /// The limit.
        public var value: UInt64
        /// `cgroup`, `rlimit` or `none`.
        public var enforcedBy: String
        /// The cgroup file or rlimit that enforces it; left out for `none`.
        public var enforcedWith: String?

        /// A limit with the fields given.
        public init(value: UInt64, enforcedBy: String, enforcedWith: String?) {
            self.value = value
            self.enforcedBy = enforcedBy
            self.enforcedWith = enforcedWith
        }

        enum CodingKeys: String, CodingKey {
            case enforcedBy, enforcedWith, value
        }

        /// Writes the members in `JSONWriter.keyOrder`: the always-written ones (`null` when empty), and the optional ones when they apply.
        public func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(enforcedBy, forKey: .enforcedBy)
            try c.encodeIfPresent(enforcedWith, forKey: .enforcedWith)
            try c.encode(value, forKey: .value)
        }
    }

    /// What an extension runs as.
    public struct Credentials: Codable, Sendable, Equatable {
        /// The user id it runs as.
        public var uid: UInt32
        /// Its primary group id.
        public var gid: UInt32
        /// Supplementary groups, shared containers' included.
        public var groups: [UInt32]
        /// Whether `uid` was allocated to this extension alone.
        public var ownUID: Bool

        /// Credentials with the fields given.
        public init(uid: UInt32, gid: UInt32, groups: [UInt32], ownUID: Bool) {
            self.uid = uid
            self.gid = gid
            self.groups = groups
            self.ownUID = ownUID
        }

        enum CodingKeys: String, CodingKey {
            case gid, groups, ownUID, uid
        }

        /// Writes the members in `JSONWriter.keyOrder`: the always-written ones (`null` when empty), and the optional ones when they apply.
        public func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(gid, forKey: .gid)
            try c.encode(groups, forKey: .groups)
            try c.encode(ownUID, forKey: .ownUID)
            try c.encode(uid, forKey: .uid)
        }
    }

    /// An extension's sandbox as its next launch gets it.
    public struct Sandbox: Codable, Sendable, Equatable {
        /// A part of the sandbox that this daemon cannot build, and why.
        public struct Missing: Codable, Sendable, Equatable {
            /// `filesystem`, `proc`, `network` or `syscalls`.
            public var part: String
            /// Why it cannot be built here.
            public var reason: String

            /// A missing part with the fields given.
            public init(part: String, reason: String) {
                self.part = part
                self.reason = reason
            }

            enum CodingKeys: String, CodingKey {
                case part, reason
            }

            /// Writes the members in `JSONWriter.keyOrder`: the always-written ones (`null` when empty), and the optional ones when they apply.
            public func encode(to encoder: any Encoder) throws {
                var c = encoder.container(keyedBy: CodingKeys.self)
                try c.encode(part, forKey: .part)
                try c.encode(reason, forKey: .reason)
            }
        }

        /// False for `"sandbox": "none"`.
        public var enabled: Bool
        /// Whether it has the host's network; always written, `null` when it cannot launch.
        public var network: Bool?
        /// The parts built, in the order `filesystem`, `proc`, `network`, `syscalls`.
        public var enforced: [String]
        /// The parts it would get that cannot be built here.
        public var notEnforced: [Missing]
        /// The `Sandbox:` line of `extctl status`.
        public var summary: String
        /// Why it is not launched; always written, `null` when it can be.
        public var launchRefused: String?

        /// A sandbox with the fields given.
        public init(enabled: Bool, network: Bool?, enforced: [String], notEnforced: [Missing], summary: String, launchRefused: String?) {
            self.enabled = enabled
            self.network = network
            self.enforced = enforced
            self.notEnforced = notEnforced
            self.summary = summary
            self.launchRefused = launchRefused
        }

        enum CodingKeys: String, CodingKey {
            case enabled, enforced, launchRefused, network, notEnforced, summary
        }

        /// Writes the members in `JSONWriter.keyOrder`: the always-written ones (`null` when empty), and the optional ones when they apply.
        public func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(enabled, forKey: .enabled)
            try c.encode(enforced, forKey: .enforced)
            if let launchRefused { try c.encode(launchRefused, forKey: .launchRefused) } else { try c.encodeNil(forKey: .launchRefused) }
            if let network { try c.encode(network, forKey: .network) } else { try c.encodeNil(forKey: .network) }
            try c.encode(notEnforced, forKey: .notEnforced)
            try c.encode(summary, forKey: .summary)
        }
    }

    /// The background refresh of an extension that has one.
    public struct Refresh: Codable, Sendable, Equatable {
        /// `new-data`, `no-data` or `failed`; always written, `null` when never refreshed.
        public var lastResult: String?
        /// When it was last refreshed; always written, `null` when never.
        public var lastAt: String?
        /// The next scheduled refresh; always written, `null` when none is scheduled.
        public var nextAt: String?
        /// Scheduled refreshes left in the current 24-hour window.
        public var budgetLeft: Int
        /// Scheduled refreshes a day.
        public var dailyBudget: Int
        /// Least time between two scheduled refreshes.
        public var minimumIntervalSeconds: Double
        /// A refresh is running.
        public var inFlight: Bool

        /// A refresh with the fields given.
        public init(
            lastResult: String?, lastAt: String?, nextAt: String?, budgetLeft: Int, dailyBudget: Int, minimumIntervalSeconds: Double,
            inFlight: Bool
        ) {
            self.lastResult = lastResult
            self.lastAt = lastAt
            self.nextAt = nextAt
            self.budgetLeft = budgetLeft
            self.dailyBudget = dailyBudget
            self.minimumIntervalSeconds = minimumIntervalSeconds
            self.inFlight = inFlight
        }

        enum CodingKeys: String, CodingKey {
            case budgetLeft, dailyBudget, inFlight, lastAt, lastResult, minimumIntervalSeconds, nextAt
        }

        /// Writes the members in `JSONWriter.keyOrder`: the always-written ones (`null` when empty), and the optional ones when they apply.
        public func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(budgetLeft, forKey: .budgetLeft)
            try c.encode(dailyBudget, forKey: .dailyBudget)
            try c.encode(inFlight, forKey: .inFlight)
            if let lastAt { try c.encode(lastAt, forKey: .lastAt) } else { try c.encodeNil(forKey: .lastAt) }
            if let lastResult { try c.encode(lastResult, forKey: .lastResult) } else { try c.encodeNil(forKey: .lastResult) }
            try c.encode(minimumIntervalSeconds, forKey: .minimumIntervalSeconds)
            if let nextAt { try c.encode(nextAt, forKey: .nextAt) } else { try c.encodeNil(forKey: .nextAt) }
        }
    }

    /// An open request.
    public struct OpenRequest: Codable, Sendable, Equatable {
        /// The request id.
        public var id: UInt64
        /// The host connection's pid (`SO_PEERCRED`).
        public var hostPID: Int32
        /// The host connection's uid (`SO_PEERCRED`).
        public var hostUID: UInt32
        /// Time since it was begun.
        public var ageSeconds: Double
        /// The declared app the host process belongs to (its systemd scope); left out when it
        /// belongs to none.
        public var hostApp: String? = nil

        /// A request with the fields given.
        public init(id: UInt64, hostPID: Int32, hostUID: UInt32, ageSeconds: Double, hostApp: String? = nil) {
            self.id = id
            self.hostPID = hostPID
            self.hostUID = hostUID
            self.ageSeconds = ageSeconds
            self.hostApp = hostApp
        }

        enum CodingKeys: String, CodingKey {
            case ageSeconds, hostApp, hostPID, hostUID, id
        }

        /// Writes the members in `JSONWriter.keyOrder`: the always-written ones (`null` when empty), and the optional ones when they apply.
        public func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(ageSeconds, forKey: .ageSeconds)
            try c.encodeIfPresent(hostApp, forKey: .hostApp)
            try c.encode(hostPID, forKey: .hostPID)
            try c.encode(hostUID, forKey: .hostUID)
            try c.encode(id, forKey: .id)
        }
    }

    /// A live assertion.
    public struct Assertion: Codable, Sendable, Equatable {
        /// Unique for the daemon's lifetime.
        public var id: UInt64
        /// The reason the extension gave.
        public var reason: String
        /// Time since it was granted.
        public var ageSeconds: Double
        /// Time until it can be revoked, never negative.
        public var remainingSeconds: Double
        /// Whether *expire* was sent for it.
        public var expireSent: Bool
        /// Whether the runtime confirmed it read the *expire*.
        public var expireAcknowledged: Bool

        /// An assertion with the fields given.
        public init(id: UInt64, reason: String, ageSeconds: Double, remainingSeconds: Double, expireSent: Bool, expireAcknowledged: Bool) {
            self.id = id
            self.reason = reason
            self.ageSeconds = ageSeconds
            self.remainingSeconds = remainingSeconds
            self.expireSent = expireSent
            self.expireAcknowledged = expireAcknowledged
        }

        enum CodingKeys: String, CodingKey {
            case ageSeconds, expireAcknowledged, expireSent, id, reason, remainingSeconds
        }

        /// Writes the members in `JSONWriter.keyOrder`: the always-written ones (`null` when empty), and the optional ones when they apply.
        public func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(ageSeconds, forKey: .ageSeconds)
            try c.encode(expireAcknowledged, forKey: .expireAcknowledged)
            try c.encode(expireSent, forKey: .expireSent)
            try c.encode(id, forKey: .id)
            try c.encode(reason, forKey: .reason)
            try c.encode(remainingSeconds, forKey: .remainingSeconds)
        }
    }

    /// A live process of an extension.
    public struct Process: Codable, Sendable, Equatable {
        /// Its process id.
        public var pid: Int32
        /// The one-letter state of `/proc/PID/stat` (`R`, `S`, `D`, `T`, …).
        public var state: String
        /// The process's name (`/proc/PID/comm`).
        public var command: String

        /// A process with the fields given.
        public init(pid: Int32, state: String, command: String) {
            self.pid = pid
            self.state = state
            self.command = command
        }

        enum CodingKeys: String, CodingKey {
            case command, pid, state
        }

        /// Writes the members in `JSONWriter.keyOrder`: the always-written ones (`null` when empty), and the optional ones when they apply.
        public func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(command, forKey: .command)
            try c.encode(pid, forKey: .pid)
            try c.encode(state, forKey: .state)
        }
    }

    /// One extension in detail. The fields `list` has mean the same here.
    public struct Extension: Codable, Sendable, Equatable {
        /// The manifest's id.
        public var id: String
        /// Its extension point.
        public var point: String
        /// Its public state (docs/json.md, "States").
        public var state: String
        /// When the public state last changed.
        public var since: String
        /// Always written, `null` when it has no process.
        public var pid: Int32?
        /// Open requests.
        public var requests: Int
        /// Always written, `null` when no process has ended.
        public var lastExit: ExitInfo?
        /// The program, as resolved from the manifest.
        public var executable: String
        /// The manifest file.
        public var manifest: String
        /// `runtime` or `exec`.
        public var readiness: String
        /// Its resolved policy.
        public var policy: Policy
        /// Written only for an extension with background refresh.
        public var refresh: Refresh?
        /// Its open requests.
        public var openRequests: [OpenRequest]
        /// Its live assertions.
        public var assertions: [Assertion]
        /// Crashes since the last stable run.
        public var consecutiveCrashes: Int
        /// No launch before this time; always written, `null` when no delay is pending.
        public var throttledUntil: String?
        /// Assertions dropped by the leak guard or revoked at a hard stop, over the daemon's lifetime.
        public var assertionOverruns: Int
        /// Stops at which it held a lock that blocks others, over the daemon's lifetime.
        public var locksHeldAtSuspend: Int
        /// Assertions revoked at a stop whose *expire* was never acknowledged, over the daemon's lifetime.
        public var expiryUnacknowledged: Int
        /// Every live process of the extension, sorted by pid.
        public var processes: [Process]
        /// Its cgroup directory; always written, `null` without one.
        public var cgroup: String?
        /// Always written, `null` without a pid.
        public var memoryBytes: Int64?
        /// Always written, `null` without a pid.
        public var cpuSeconds: Double?
        /// Its most recent events, oldest first.
        public var recentEvents: [ExtensionEvent]
        /// Each resource limit that is set, by name (`memoryMaxBytes`, `tasksMax`, …).
        public var limits: [String: Limit]
        /// Always written, `null` where none were resolved.
        public var credentials: Credentials?
        /// Its own container; always written, `null` when it has none.
        public var container: String?
        /// Always written, `null` when it is not known.
        public var sandbox: Sandbox?
        /// The id of the app that contains it; always written, `null` when it names none.
        public var app: String? = nil

        /// An extension with the fields given.
        public init(
            id: String, point: String, state: String, since: String, pid: Int32?, requests: Int, lastExit: ExitInfo?,
            executable: String, manifest: String, readiness: String, policy: Policy, refresh: Refresh?,
            openRequests: [OpenRequest], assertions: [Assertion], consecutiveCrashes: Int, throttledUntil: String?,
            assertionOverruns: Int, locksHeldAtSuspend: Int, expiryUnacknowledged: Int, processes: [Process], cgroup: String?,
            memoryBytes: Int64?, cpuSeconds: Double?, recentEvents: [ExtensionEvent], limits: [String: Limit],
            credentials: Credentials?, container: String?, sandbox: Sandbox?, app: String? = nil
        ) {
            self.id = id
            self.point = point
            self.state = state
            self.since = since
            self.pid = pid
            self.requests = requests
            self.lastExit = lastExit
            self.executable = executable
            self.manifest = manifest
            self.readiness = readiness
            self.policy = policy
            self.refresh = refresh
            self.openRequests = openRequests
            self.assertions = assertions
            self.consecutiveCrashes = consecutiveCrashes
            self.throttledUntil = throttledUntil
            self.assertionOverruns = assertionOverruns
            self.locksHeldAtSuspend = locksHeldAtSuspend
            self.expiryUnacknowledged = expiryUnacknowledged
            self.processes = processes
            self.cgroup = cgroup
            self.memoryBytes = memoryBytes
            self.cpuSeconds = cpuSeconds
            self.recentEvents = recentEvents
            self.limits = limits
            self.credentials = credentials
            self.container = container
            self.sandbox = sandbox
            self.app = app
        }

        enum CodingKeys: String, CodingKey {
            case app, assertionOverruns, assertions, cgroup, consecutiveCrashes, container, cpuSeconds, credentials, executable
            case expiryUnacknowledged, id, lastExit, limits, locksHeldAtSuspend, manifest, memoryBytes, openRequests, pid
            case point, policy, processes, readiness, recentEvents, refresh, requests, sandbox, since, state, throttledUntil
        }

        /// Writes the members in `JSONWriter.keyOrder`: the always-written ones (`null` when empty), and the optional ones when they apply.
        public func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            /// `value`, or `null`.
            func nullable<T: Encodable>(_ value: T?, _ key: CodingKeys) throws {
                if let value { try c.encode(value, forKey: key) } else { try c.encodeNil(forKey: key) }
            }
            try nullable(app, .app)
            try c.encode(assertionOverruns, forKey: .assertionOverruns)
            try c.encode(assertions, forKey: .assertions)
            try nullable(cgroup, .cgroup)
            try c.encode(consecutiveCrashes, forKey: .consecutiveCrashes)
            try nullable(container, .container)
            try nullable(cpuSeconds, .cpuSeconds)
            try nullable(credentials, .credentials)
            try c.encode(executable, forKey: .executable)
            try c.encode(expiryUnacknowledged, forKey: .expiryUnacknowledged)
            try c.encode(id, forKey: .id)
            try nullable(lastExit, .lastExit)
            try c.encode(limits, forKey: .limits)
            try c.encode(locksHeldAtSuspend, forKey: .locksHeldAtSuspend)
            try c.encode(manifest, forKey: .manifest)
            try nullable(memoryBytes, .memoryBytes)
            try c.encode(openRequests, forKey: .openRequests)
            try nullable(pid, .pid)
            try c.encode(point, forKey: .point)
            try c.encode(policy, forKey: .policy)
            try c.encode(processes, forKey: .processes)
            try c.encode(readiness, forKey: .readiness)
            try c.encode(recentEvents, forKey: .recentEvents)
            try c.encodeIfPresent(refresh, forKey: .refresh)
            try c.encode(requests, forKey: .requests)
            try nullable(sandbox, .sandbox)
            try c.encode(since, forKey: .since)
            try c.encode(state, forKey: .state)
            try nullable(throttledUntil, .throttledUntil)
        }
    }

    /// How the daemon holds the processes of its extensions together.
    public var containment: Containment
    /// One entry per extension asked for: in the order named, or all sorted by id.
    public var extensions: [Extension]

    /// A report with the fields given.
    public init(containment: Containment, extensions: [Extension]) {
        self.containment = containment
        self.extensions = extensions
    }
}
