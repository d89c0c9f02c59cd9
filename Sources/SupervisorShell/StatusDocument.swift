import ExtensionStatus
import SupervisorCore

/// Builds the documents of `extctl list --json`, `status --json` and `monitor --json` from the
/// supervisor's state. The documents themselves, their fields and their JSON, are the types of
/// `ExtensionStatus` (docs/json.md), which extctl decodes; this is how the core's records fill
/// them in.
enum StatusDocument {
    /// Converts monotonic instants to wall-clock ISO 8601 text.
    typealias Clock = WallClock

    static func exitInfo(_ e: ExitRecord?, _ clock: Clock) -> ExitInfo? {
        guard let e else { return nil }
        var info = ExitInfo(reason: e.reason.rawValue, time: clock.iso(e.at), status: "not-started", pid: e.pid)
        switch e.status {
        case .exited(let code)?: info.status = "exited"; info.code = code
        case .signaled(let sig)?: info.status = "signaled"; info.signal = sig
        case nil: break
        }
        return info
    }

    /// An event object (docs/json.md, "Events") as a JSON value: the bytes `EventJSON` writes.
    static func event(_ e: LifecycleEvent, _ clock: Clock) -> JSONValue {
        .encoded(EventJSON.encode(e, time: clock.iso(e.at)))
    }

    /// The list of `records`, and of `apps` with their extensions' ids (`members`, by app id).
    static func list(_ records: [ExtensionRecord], _ clock: Clock, apps: [AppManifest] = [], members: [String: [String]] = [:]) -> ListDocument {
        ListDocument(
            apps: apps.map { a in
                let launch: String
                switch a.launch {
                case .dbusActivatable: launch = "dbus-activation"
                case .executable: launch = "executable"
                }
                return ListDocument.App(
                    id: a.id, displayName: a.displayName, groups: a.groups, urlSchemes: a.urlSchemes, launch: launch,
                    extensions: (members[a.id] ?? []).sorted(), uid: a.uid)
            },
            extensions: records.map { r in
                var e = ListDocument.Extension(
                    id: r.manifest.id, point: r.manifest.point, state: r.state.rawValue, since: clock.iso(r.since), pid: r.pid,
                    requests: r.requests.count, assertions: r.assertions.count, lastExit: exitInfo(r.lastExit, clock))
                e.app = r.manifest.app
                return e
            })
    }

    /// One process of an extension, as `status` shows it.
    struct ProcessEntry {
        var pid: Int32
        var state: Character
        var command: String
        var rssBytes: Int64
        var cpuSeconds: Double
    }

    /// How the extensions' processes are held together, for `status`.
    typealias Containment = StatusReport.Containment

    /// The processes of one running extension, and its cgroup's own counters where it has them.
    struct ProcessesOfExtension {
        var entries: [ProcessEntry] = []
        var cgroup: String?
        /// `memory.current` (with the memory controller).
        var cgroupMemoryBytes: Int64?
        /// `usage_usec` of `cpu.stat`, in seconds (every cgroup v2 has it).
        var cgroupCPUSeconds: Double?
    }

    /// `processes(record)` gives the processes of a running extension and its cgroup path
    /// (nil on the process-group fallback).
    static func status(
        _ records: [ExtensionRecord], now: Instant, _ clock: Clock, containment: Containment,
        processes: (ExtensionRecord) -> ProcessesOfExtension,
        limits: (Manifest) -> [LimitEnforcement] = { _ in [] },
        container: (Manifest) -> String? = { _ in nil },
        sandbox: (Manifest) -> Result<SandboxDecision, SandboxRefusal>? = { _ in nil }
    ) -> StatusReport {
        StatusReport(
            containment: containment,
            extensions: records.map { r in
                let policy = r.manifest.policy
                var limitsByName: [String: StatusReport.Limit] = [:]
                for l in limits(r.manifest) {
                    limitsByName[l.key] = StatusReport.Limit(value: l.value, enforcedBy: l.by.rawValue, enforcedWith: l.control)
                }
                let refresh = r.refresh.map { refresh in
                    StatusReport.Refresh(
                        lastResult: refresh.lastOutcome?.rawValue, lastAt: refresh.lastAt.map(clock.iso), nextAt: refresh.nextAt.map(clock.iso),
                        budgetLeft: refresh.budgetLeft(at: now), dailyBudget: refresh.schedule.dailyBudget,
                        minimumIntervalSeconds: refresh.schedule.minimumIntervalSeconds, inFlight: refresh.inFlight != nil)
                }
                let assertions = r.assertions.assertions.map { a in
                    let deadline: Instant
                    switch r.phase {
                    case .background(_, let stopAt?), .expiring(let stopAt): deadline = min(stopAt, a.hardDeadline)
                    default: deadline = a.hardDeadline
                    }
                    return StatusReport.Assertion(
                        id: a.id, reason: a.reason, ageSeconds: now.seconds(since: a.grantedAt), remainingSeconds: max(0, deadline.seconds(since: now)),
                        expireSent: a.expireSentAt != nil, expireAcknowledged: a.expireAcknowledged)
                }
                let found = r.pid == nil ? ProcessesOfExtension() : processes(r)
                let rss = found.cgroupMemoryBytes ?? found.entries.reduce(Int64(0)) { $0 + $1.rssBytes }
                let cpu = found.cgroupCPUSeconds ?? found.entries.reduce(0.0) { $0 + $1.cpuSeconds }
                return StatusReport.Extension(
                    id: r.manifest.id, point: r.manifest.point, state: r.state.rawValue, since: clock.iso(r.since), pid: r.pid,
                    requests: r.requests.count, lastExit: exitInfo(r.lastExit, clock), executable: r.manifest.executable,
                    manifest: r.manifest.source, readiness: r.manifest.readiness.rawValue,
                    policy: StatusReport.Policy(
                        assertionMaxSeconds: policy.assertionMaxSeconds, backgroundSeconds: policy.backgroundSeconds,
                        expiryGraceSeconds: policy.expiryGraceSeconds, launchTimeoutSeconds: policy.launchTimeoutSeconds,
                        lockedWhileSuspended: policy.lockedWhileSuspended.rawValue, refreshSeconds: policy.refreshSeconds,
                        suspend: policy.suspend.rawValue, suspendedLifetimeSeconds: policy.suspendedLifetimeSeconds),
                    refresh: refresh,
                    openRequests: r.requests.map { q in
                        StatusReport.OpenRequest(
                            id: q.id, hostPID: q.peer.pid, hostUID: q.peer.uid, ageSeconds: now.seconds(since: q.begunAt), hostApp: q.peer.app)
                    },
                    assertions: assertions, consecutiveCrashes: r.consecutiveCrashes,
                    throttledUntil: r.throttledUntil.flatMap { $0 > now ? clock.iso($0) : nil },
                    assertionOverruns: r.overruns, locksHeldAtSuspend: r.locksHeldAtSuspend, expiryUnacknowledged: r.unacknowledgedExpiries,
                    processes: found.entries.map { StatusReport.Process(pid: $0.pid, state: String($0.state), command: $0.command) },
                    cgroup: found.cgroup, memoryBytes: r.pid == nil ? nil : rss, cpuSeconds: r.pid == nil ? nil : cpu,
                    recentEvents: r.recentEvents.map { EventJSON.object($0, time: clock.iso($0.at)) },
                    limits: limitsByName,
                    credentials: r.manifest.credentials.map { c in
                        StatusReport.Credentials(uid: c.uid, gid: c.gid, groups: c.groups, ownUID: c.ownUID)
                    },
                    container: container(r.manifest), sandbox: sandbox(r.manifest).map(sandboxObject), app: r.manifest.app)
            })
    }

    /// The `sandbox` object of `status` (docs/json.md): what is enforced, what is not and why,
    /// and, when a part its point requires cannot be built, why it is not launched.
    static func sandboxObject(_ result: Result<SandboxDecision, SandboxRefusal>) -> StatusReport.Sandbox {
        switch result {
        case .success(let d):
            return StatusReport.Sandbox(
                enabled: d.enabled, network: d.network, enforced: d.enforced.map(\.rawValue),
                notEnforced: d.notEnforced.map { StatusReport.Sandbox.Missing(part: $0.part.rawValue, reason: $0.reason) },
                summary: d.summary, launchRefused: nil)
        case .failure(let refusal):
            return StatusReport.Sandbox(
                enabled: true, network: nil, enforced: [],
                notEnforced: [StatusReport.Sandbox.Missing(part: refusal.part.rawValue, reason: refusal.reason)],
                summary: "cannot launch: \(refusal)", launchRefused: refusal.description)
        }
    }
}

extension WallClock {
    /// The clock at `monotonicNow`, when the wall clock read `wallClock` (seconds since 1970).
    init(monotonicNow: Instant, wallClock: Double) {
        self.init(monotonicNanoseconds: monotonicNow.nanoseconds, wallClock: wallClock)
    }

    /// `t` as wall-clock ISO 8601 text.
    func iso(_ t: Instant) -> String {
        iso(monotonicNanoseconds: t.nanoseconds)
    }
}
