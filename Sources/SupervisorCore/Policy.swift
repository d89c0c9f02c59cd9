/// Whether an extension is suspended when it goes to the background.
public enum SuspendMode: String, Sendable, Codable, Equatable {
    /// SIGSTOP to every process once the last request ends and no assertion is held (the default).
    case stop
    /// The cgroup v2 freezer instead of SIGSTOP: the processes cannot observe the suspension
    /// (no SIGCHLD to their parent, no job-control change). Needs a cgroup per extension.
    case freeze
    /// Never suspended: the escape hatch for extensions that must keep running.
    case never
}

/// What happens when a suspended extension holds a file lock another process waits for
/// (what iOS reports as 0xdead10cc).
public enum LockContentionPolicy: String, Sendable, Codable, Equatable {
    /// Kill it: it already had its chance to release the lock (the default, as on iOS).
    case terminate
    /// Resume it for its background time so it can release the lock, then suspend it again.
    case resume
}

/// The timing policy of an extension, resolved from its extension point and its manifest.
public struct Policy: Equatable, Sendable, Codable {
    /// How long an extension with live assertions may run after its last request ends.
    public var backgroundSeconds: Double
    /// How long before a deadline the extension is told to expire its assertions.
    public var expiryGraceSeconds: Double
    /// The longest any single assertion may live, even while a request is open (leak guard).
    public var assertionMaxSeconds: Double
    /// How long a launch may take to become ready before it is killed.
    public var launchTimeoutSeconds: Double
    /// How long a suspended extension may stay unused before it is reclaimed (killed).
    public var suspendedLifetimeSeconds: Double
    /// Whether the extension is suspended at all.
    public var suspend: SuspendMode
    /// What to do when it holds a lock someone waits for while suspended.
    public var lockedWhileSuspended: LockContentionPolicy = .terminate
    /// How long a background refresh may take to answer, under the expire-before-stop rule of
    /// assertions (*expire* at `refreshSeconds - expiryGraceSeconds`).
    public var refreshSeconds: Double = 10
    /// Background refresh, if on (the manifest's `refresh`, or the point's default).
    public var refresh: RefreshSchedule?
    /// Resource limits (the manifest's `limits` over the point's).
    public var limits = ResourceLimits()
    /// Whether its extensions have the host's network; without it, each gets a network
    /// namespace of its own with loopback only. A point's `network`, which a manifest may turn
    /// off, never on.
    public var network = true
    /// How many URLs one extension process may open a minute (`ExtensionContext.open`); 0: its
    /// point does not allow opening URLs. A point's `openURLsPerMinute`.
    public var openURLsPerMinute = 10
    /// How many unfinished background transfer tasks one app may have (its extensions' of this
    /// point included); 0: the point does not allow background transfers. A point's
    /// `transferTasksPerApp`.
    public var transferTasksPerApp = Policy.defaultTransferTasksPerApp
    /// How many bytes one app's background transfers may move a day (UTC); a point's
    /// `transferBytesPerDay`.
    public var transferBytesPerDay = Policy.defaultTransferBytesPerDay
    /// `transferTasksPerApp` of a point that names none, and the limit of an app's own tasks.
    public static let defaultTransferTasksPerApp = 20
    /// `transferBytesPerDay` of a point that names none, and the limit of an app's own tasks: 4 GiB.
    public static let defaultTransferBytesPerDay: Int64 = 4 << 30
    /// The sandbox parts (docs/security.md) without which its extensions are not launched; nil:
    /// the daemon's default, every part under a root daemon and none under another.
    public var sandboxRequires: [SandboxPart]?

    /// A policy with these times, suspended by `suspend` (SIGSTOP by default). The other fields
    /// take their declared defaults: terminate on lock contention, refresh off, no resource limits,
    /// the host's network, and the daemon's default sandbox requirement.
    public init(
        backgroundSeconds: Double, expiryGraceSeconds: Double, assertionMaxSeconds: Double,
        launchTimeoutSeconds: Double, suspendedLifetimeSeconds: Double, suspend: SuspendMode = .stop
    ) {
        self.backgroundSeconds = backgroundSeconds
        self.expiryGraceSeconds = expiryGraceSeconds
        self.assertionMaxSeconds = assertionMaxSeconds
        self.launchTimeoutSeconds = launchTimeoutSeconds
        self.suspendedLifetimeSeconds = suspendedLifetimeSeconds
        self.suspend = suspend
    }

    /// This policy with `limits`.
    public func limited(_ limits: ResourceLimits) -> Policy {
        var p = self
        p.limits = limits
        return p
    }

    /// The longest duration any policy field accepts (one day).
    public static let maximumSeconds: Double = 86_400

    /// Checks the relations between fields. Returns the offending field and why, or nil.
    public func violation() -> (field: String, problem: String)? {
        let fields: [(String, Double)] = [
            ("backgroundSeconds", backgroundSeconds), ("expiryGraceSeconds", expiryGraceSeconds),
            ("assertionMaxSeconds", assertionMaxSeconds), ("launchTimeoutSeconds", launchTimeoutSeconds),
            ("suspendedLifetimeSeconds", suspendedLifetimeSeconds), ("refreshSeconds", refreshSeconds),
        ]
        for (name, value) in fields {
            if !value.isFinite || value < 0 { return (name, "must be a non-negative number of seconds, got \(value)") }
            if value > Policy.maximumSeconds { return (name, "must be at most \(Int(Policy.maximumSeconds)) seconds, got \(value)") }
        }
        if launchTimeoutSeconds <= 0 { return ("launchTimeoutSeconds", "must be greater than 0") }
        if expiryGraceSeconds > backgroundSeconds {
            return ("expiryGraceSeconds", "must not exceed backgroundSeconds (\(backgroundSeconds))")
        }
        if expiryGraceSeconds > assertionMaxSeconds {
            return ("expiryGraceSeconds", "must not exceed assertionMaxSeconds (\(assertionMaxSeconds))")
        }
        if let refresh {
            if refreshSeconds <= expiryGraceSeconds {
                return ("refreshSeconds", "must exceed expiryGraceSeconds (\(expiryGraceSeconds)) when refresh is on")
            }
            if let (field, problem) = refresh.violation() { return ("refresh.\(field)", problem) }
        }
        return nil
    }
}

/// Per-manifest (or per-config) overrides of a policy; nil fields keep the base value.
public struct PolicyOverrides: Equatable, Sendable {
    /// Replaces `Policy.backgroundSeconds`; nil keeps the base value.
    public var backgroundSeconds: Double?
    /// Replaces `Policy.expiryGraceSeconds`; nil keeps the base value.
    public var expiryGraceSeconds: Double?
    /// Replaces `Policy.assertionMaxSeconds`; nil keeps the base value.
    public var assertionMaxSeconds: Double?
    /// Replaces `Policy.launchTimeoutSeconds`; nil keeps the base value.
    public var launchTimeoutSeconds: Double?
    /// Replaces `Policy.suspendedLifetimeSeconds`; nil keeps the base value.
    public var suspendedLifetimeSeconds: Double?
    /// Replaces `Policy.suspend`; nil keeps the base value.
    public var suspend: SuspendMode?
    /// Replaces `Policy.lockedWhileSuspended`; nil keeps the base value.
    public var lockedWhileSuspended: LockContentionPolicy?
    /// Replaces `Policy.refreshSeconds`; nil keeps the base value.
    public var refreshSeconds: Double?
    /// Turns refresh on with this schedule, replacing the base one; nil keeps the base value.
    public var refresh: RefreshSchedule?
    /// Limit overrides, key by key (`limits` in a manifest or in a configured point).
    public var limits: ResourceLimits?
    /// A configured point's `network`.
    public var network: Bool?
    /// A configured point's `openURLsPerMinute`.
    public var openURLsPerMinute: Int?
    /// A configured point's `transferTasksPerApp`.
    public var transferTasksPerApp: Int?
    /// A configured point's `transferBytesPerDay`.
    public var transferBytesPerDay: Int64?
    /// A configured point's `sandboxRequires`.
    public var sandboxRequires: [SandboxPart]?

    /// Overrides that change nothing.
    public init() {}

    /// `base` with every non-nil field of these overrides applied.
    public func applied(to base: Policy) -> Policy {
        var p = base
        if let v = backgroundSeconds { p.backgroundSeconds = v }
        if let v = expiryGraceSeconds { p.expiryGraceSeconds = v }
        if let v = assertionMaxSeconds { p.assertionMaxSeconds = v }
        if let v = launchTimeoutSeconds { p.launchTimeoutSeconds = v }
        if let v = suspendedLifetimeSeconds { p.suspendedLifetimeSeconds = v }
        if let v = suspend { p.suspend = v }
        if let v = lockedWhileSuspended { p.lockedWhileSuspended = v }
        if let v = refreshSeconds { p.refreshSeconds = v }
        if let v = refresh { p.refresh = v }
        if let v = limits { p.limits = v.applied(to: p.limits) }
        if let v = network { p.network = v }
        if let v = openURLsPerMinute { p.openURLsPerMinute = v }
        if let v = transferTasksPerApp { p.transferTasksPerApp = v }
        if let v = transferBytesPerDay { p.transferBytesPerDay = v }
        if let v = sandboxRequires { p.sandboxRequires = v }
        return p
    }
}

/// The extension points the daemon knows, each with its default policy.
public struct ExtensionPoints: Equatable, Sendable {
    /// Each point's default policy, by point name.
    public var policies: [String: Policy]

    /// The points named by `policies`, each with its policy.
    public init(policies: [String: Policy]) { self.policies = policies }

    /// The built-in points, usable with no configuration file (see docs/policies.md):
    /// - `widget`: on screen briefly and often; short background time, kept suspended 10 minutes.
    /// - `share`: finishes an upload after the sheet closes; long background time, rarely reused.
    /// - `action`: quick transformations; moderate background time.
    /// - `default`: for anything else.
    public static let builtIn = ExtensionPoints(policies: [
        "widget": Policy(
            backgroundSeconds: 5, expiryGraceSeconds: 2, assertionMaxSeconds: 30,
            launchTimeoutSeconds: 10, suspendedLifetimeSeconds: 600
        ).limited(ResourceLimits(memoryMaxBytes: 2 << 30, tasksMax: 64, openFilesMax: 1024, cpuWeight: 50)),
        "share": Policy(
            backgroundSeconds: 30, expiryGraceSeconds: 5, assertionMaxSeconds: 180,
            launchTimeoutSeconds: 15, suspendedLifetimeSeconds: 120
        ).limited(ResourceLimits(memoryMaxBytes: 4 << 30, tasksMax: 256, openFilesMax: 4096, cpuWeight: 100)),
        "action": Policy(
            backgroundSeconds: 10, expiryGraceSeconds: 3, assertionMaxSeconds: 60,
            launchTimeoutSeconds: 10, suspendedLifetimeSeconds: 300
        ).limited(ResourceLimits(memoryMaxBytes: 3 << 30, tasksMax: 128, openFilesMax: 2048, cpuWeight: 100)),
        "default": Policy(
            backgroundSeconds: 10, expiryGraceSeconds: 3, assertionMaxSeconds: 60,
            launchTimeoutSeconds: 10, suspendedLifetimeSeconds: 600
        ).limited(ResourceLimits(memoryMaxBytes: 4 << 30, tasksMax: 512, openFilesMax: 4096, cpuWeight: 100)),
    ])
}
