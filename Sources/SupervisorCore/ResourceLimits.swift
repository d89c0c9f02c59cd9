/// The resource limits of an extension (`limits` in manifests and in the configuration's
/// extension points), resolved like `policy`: built-in point, then the configuration's point,
/// then the manifest. A nil field sets no limit. See docs/policies.md for the defaults.
public struct ResourceLimits: Equatable, Sendable, Encodable {
    /// Memory of the whole extension: `memory.max` of its cgroup, or else `RLIMIT_AS` (address
    /// space, per process).
    public var memoryMaxBytes: UInt64?
    /// Processes and threads of the whole extension: `pids.max`, or else `RLIMIT_NPROC` of its
    /// own uid (only when that uid is the extension's alone).
    public var tasksMax: UInt64?
    /// Open descriptors per process: always `RLIMIT_NOFILE`.
    public var openFilesMax: UInt64?
    /// Relative CPU share against other extensions: `cpu.weight` (1–10000, 100 is the kernel's
    /// default); nothing enforces it without the cpu controller.
    public var cpuWeight: UInt64?

    public init(memoryMaxBytes: UInt64? = nil, tasksMax: UInt64? = nil, openFilesMax: UInt64? = nil, cpuWeight: UInt64? = nil) {
        self.memoryMaxBytes = memoryMaxBytes
        self.tasksMax = tasksMax
        self.openFilesMax = openFilesMax
        self.cpuWeight = cpuWeight
    }

    /// The exact keys, in the order they are reported.
    public static let keys = ["memoryMaxBytes", "tasksMax", "openFilesMax", "cpuWeight"]

    /// The accepted range of each key.
    public static let ranges: [String: ClosedRange<UInt64>] = [
        "memoryMaxBytes": 1 << 20...1 << 50,
        "tasksMax": 1...4_194_304,
        "openFilesMax": 16...1_048_576,
        "cpuWeight": 1...10_000,
    ]

    /// The value of a key, by name.
    public func value(_ key: String) -> UInt64? {
        switch key {
        case "memoryMaxBytes": return memoryMaxBytes
        case "tasksMax": return tasksMax
        case "openFilesMax": return openFilesMax
        case "cpuWeight": return cpuWeight
        default: return nil
        }
    }

    /// `base` with every non-nil field of `self` applied.
    public func applied(to base: ResourceLimits) -> ResourceLimits {
        ResourceLimits(
            memoryMaxBytes: memoryMaxBytes ?? base.memoryMaxBytes, tasksMax: tasksMax ?? base.tasksMax,
            openFilesMax: openFilesMax ?? base.openFilesMax, cpuWeight: cpuWeight ?? base.cpuWeight)
    }

    /// How each limit that is set is enforced, given the controllers of the extension's cgroup
    /// (empty without one) and whether the extension runs under a uid of its own.
    public func enforcement(controllers: Set<String>, ownUID: Bool) -> [LimitEnforcement] {
        var out: [LimitEnforcement] = []
        if let v = memoryMaxBytes {
            out.append(LimitEnforcement(key: "memoryMaxBytes", value: v, by: controllers.contains("memory") ? .cgroup : .rlimit))
        }
        if let v = tasksMax {
            out.append(LimitEnforcement(key: "tasksMax", value: v, by: controllers.contains("pids") ? .cgroup : ownUID ? .rlimit : .none))
        }
        if let v = openFilesMax { out.append(LimitEnforcement(key: "openFilesMax", value: v, by: .rlimit)) }
        if let v = cpuWeight { out.append(LimitEnforcement(key: "cpuWeight", value: v, by: controllers.contains("cpu") ? .cgroup : .none)) }
        return out
    }
}

/// How one limit is applied to an extension.
public struct LimitEnforcement: Equatable, Sendable {
    /// What applies it (`enforcedBy` in `status --json`).
    public enum Mechanism: String, Sendable, Equatable {
        case cgroup, rlimit, none
    }

    public var key: String
    public var value: UInt64
    public var by: Mechanism

    public init(key: String, value: UInt64, by: Mechanism) {
        self.key = key
        self.value = value
        self.by = by
    }

    /// Why it cannot be enforced, for the warning at load; nil when it is.
    public var unenforcedReason: String? {
        guard by == .none else { return nil }
        switch key {
        case "tasksMax": return "limits.tasksMax (\(value)) cannot be enforced: no pids controller in the extension's cgroup, and RLIMIT_NPROC counts every process of a uid, which this extension shares"
        case "cpuWeight": return "limits.cpuWeight (\(value)) cannot be enforced: no cpu controller in the extension's cgroup"
        default: return "limits.\(key) (\(value)) cannot be enforced"
        }
    }
}
