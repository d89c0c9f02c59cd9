/// The resource limits of an extension (`limits` in manifests and in the configuration's
/// extension points), resolved like `policy`: built-in point, then the configuration's point,
/// then the manifest. A nil field sets no limit. See docs/policies.md for the defaults.
public struct ResourceLimits: Equatable, Sendable, Encodable {
    /// Memory of the whole extension: `memory.max` of its cgroup, or else `memory.limit_in_bytes`
    /// of its cgroup v1 memory cgroup, or else `RLIMIT_DATA` (writable private memory, per
    /// process).
    public var memoryMaxBytes: UInt64?
    /// Processes and threads of the whole extension: `pids.max`, or else `RLIMIT_NPROC` of its
    /// own uid (only when that uid is the extension's alone).
    public var tasksMax: UInt64?
    /// Open descriptors per process: always `RLIMIT_NOFILE`.
    public var openFilesMax: UInt64?
    /// Relative CPU share against other extensions: `cpu.weight` (1–10000, 100 is the kernel's
    /// default); nothing enforces it without the cpu controller.
    public var cpuWeight: UInt64?
    /// The size of its own container (its `HOME`): measured while it runs and at each
    /// suspension, and the extension ended (`disk-limit`) once it holds more.
    public var diskMaxBytes: UInt64?

    /// Limits with these values; a key left out sets no limit.
    public init(
        memoryMaxBytes: UInt64? = nil, tasksMax: UInt64? = nil, openFilesMax: UInt64? = nil, cpuWeight: UInt64? = nil, diskMaxBytes: UInt64? = nil
    ) {
        self.memoryMaxBytes = memoryMaxBytes
        self.tasksMax = tasksMax
        self.openFilesMax = openFilesMax
        self.cpuWeight = cpuWeight
        self.diskMaxBytes = diskMaxBytes
    }

    /// The exact keys, in the order they are reported.
    public static let keys = ["memoryMaxBytes", "tasksMax", "openFilesMax", "cpuWeight", "diskMaxBytes"]

    /// The accepted range of each key.
    public static let ranges: [String: ClosedRange<UInt64>] = [
        "memoryMaxBytes": 1 << 20...1 << 50,
        "tasksMax": 1...4_194_304,
        "openFilesMax": 16...1_048_576,
        "cpuWeight": 1...10_000,
        "diskMaxBytes": 1 << 20...1 << 50,
    ]

    /// The value of a key, by name.
    public func value(_ key: String) -> UInt64? {
        switch key {
        case "memoryMaxBytes": return memoryMaxBytes
        case "tasksMax": return tasksMax
        case "openFilesMax": return openFilesMax
        case "cpuWeight": return cpuWeight
        case "diskMaxBytes": return diskMaxBytes
        default: return nil
        }
    }

    /// `base` with every non-nil field of `self` applied.
    public func applied(to base: ResourceLimits) -> ResourceLimits {
        ResourceLimits(
            memoryMaxBytes: memoryMaxBytes ?? base.memoryMaxBytes, tasksMax: tasksMax ?? base.tasksMax,
            openFilesMax: openFilesMax ?? base.openFilesMax, cpuWeight: cpuWeight ?? base.cpuWeight, diskMaxBytes: diskMaxBytes ?? base.diskMaxBytes)
    }

    /// How each limit that is set is enforced, given the controllers of the extension's cgroup
    /// (empty without one), whether a cgroup v1 memory cgroup of its own can be made for it
    /// (`memoryCgroupV1`: used only without the v2 memory controller), and whether the
    /// extension runs under a uid of its own.
    public func enforcement(controllers: Set<String>, memoryCgroupV1: Bool = false, ownUID: Bool) -> [LimitEnforcement] {
        var out: [LimitEnforcement] = []
        if let v = memoryMaxBytes {
            if controllers.contains("memory") {
                out.append(LimitEnforcement(key: "memoryMaxBytes", value: v, by: .cgroup, control: "memory.max"))
            } else if memoryCgroupV1 {
                out.append(LimitEnforcement(key: "memoryMaxBytes", value: v, by: .cgroup, control: LimitEnforcement.memoryV1Control))
            } else {
                out.append(LimitEnforcement(key: "memoryMaxBytes", value: v, by: .rlimit, control: "RLIMIT_DATA"))
            }
        }
        if let v = tasksMax {
            if controllers.contains("pids") {
                out.append(LimitEnforcement(key: "tasksMax", value: v, by: .cgroup, control: "pids.max"))
            } else {
                out.append(LimitEnforcement(key: "tasksMax", value: v, by: ownUID ? .rlimit : .none, control: ownUID ? "RLIMIT_NPROC" : nil))
            }
        }
        if let v = openFilesMax { out.append(LimitEnforcement(key: "openFilesMax", value: v, by: .rlimit, control: "RLIMIT_NOFILE")) }
        if let v = cpuWeight {
            let cpu = controllers.contains("cpu")
            out.append(LimitEnforcement(key: "cpuWeight", value: v, by: cpu ? .cgroup : .none, control: cpu ? "cpu.weight" : nil))
        }
        if let v = diskMaxBytes { out.append(LimitEnforcement(key: "diskMaxBytes", value: v, by: .measured, control: LimitEnforcement.diskControl)) }
        return out
    }
}

/// How one limit is applied to an extension.
public struct LimitEnforcement: Equatable, Sendable {
    /// What applies it (`enforcedBy` in `status --json`).
    public enum Mechanism: String, Sendable, Equatable {
        /// A cgroup control file (`cgroup`), a resource limit of each process (`rlimit`), the
        /// daemon's measurement (`measured`: the container's size), or nothing: the limit is not
        /// enforced (`none`).
        case cgroup, rlimit, measured, none
    }

    /// The limit's key, one of `ResourceLimits.keys`.
    public var key: String
    /// The limit's value, in the key's unit (bytes, tasks, descriptors or a CPU weight).
    public var value: UInt64
    /// What applies it.
    public var by: Mechanism
    /// The exact control that applies it (`enforcedWith` in `status --json`): a cgroup file
    /// (`memory.max`, `memory.limit_in_bytes` of a cgroup v1 memory cgroup, `pids.max`,
    /// `cpu.weight`) or an rlimit (`RLIMIT_DATA`, `RLIMIT_NPROC`, `RLIMIT_NOFILE`); nil for `none`.
    public var control: String?

    /// The control of `memoryMaxBytes` in a cgroup v1 memory cgroup.
    public static let memoryV1Control = "memory.limit_in_bytes"
    /// The control of `diskMaxBytes`: the container's size, as the daemon measures it.
    public static let diskControl = "container size"

    /// An enforcement of `key` at `value` by `by`, through `control` (nil for `none`).
    public init(key: String, value: UInt64, by: Mechanism, control: String? = nil) {
        self.key = key
        self.value = value
        self.by = by
        self.control = control
    }

    /// Whether it is applied by the extension's cgroup v1 memory cgroup rather than its v2 cgroup.
    public var byMemoryCgroupV1: Bool { by == .cgroup && control == LimitEnforcement.memoryV1Control }

    /// Why it cannot be enforced, for the warning at load; nil when it is.
    public var unenforcedReason: String? {
        guard by == .none else { return nil }
        switch key {
        case "tasksMax":
            return
                "limits.tasksMax (\(value)) cannot be enforced: no pids controller in the extension's cgroup, and RLIMIT_NPROC counts every process of a uid, which this extension shares"
        case "cpuWeight": return "limits.cpuWeight (\(value)) cannot be enforced: no cpu controller in the extension's cgroup"
        default: return "limits.\(key) (\(value)) cannot be enforced"
        }
    }
}
