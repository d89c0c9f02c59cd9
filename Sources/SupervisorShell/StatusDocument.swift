import SupervisorCore
import SupervisorKernel

/// The JSON documents of `extctl list --json`, `status --json` and `monitor --json`.
/// A stable interface, documented in docs/json.md: fields may be added, never renamed or removed.
/// Built as `JSONValue`s and printed by `JSONWriter` (events by `EventJSON`), without Foundation.
enum StatusDocument {
    /// Converts monotonic instants to wall-clock ISO 8601 text.
    struct Clock {
        let offset: Double  // realtime − monotonic, seconds

        /// The clock at `monotonicNow`, when the wall clock read `wallClock` (seconds since 1970).
        init(monotonicNow: Instant, wallClock: Double) {
            offset = wallClock - Double(monotonicNow.nanoseconds) / 1e9
        }

        func iso(_ t: Instant) -> String {
            Clock.iso8601(secondsSince1970: Double(t.nanoseconds) / 1e9 + offset)
        }

        /// `2026-11-21T02:50:49.512Z`: UTC, milliseconds, no time zone separator. The same text,
        /// character for character, as Foundation's
        /// `Date(timeIntervalSince1970: s).formatted(.iso8601.year().month().day()
        /// .time(includingFractionalSeconds: true).timeZone(separator: .omitted))`, which the
        /// daemon used before, for every instant from 1583 to 9999 (Foundation switches to the
        /// Julian calendar before the Gregorian reform; the daemon's clock is never there).
        ///
        /// The milliseconds are truncated, not rounded, and split off the way Foundation splits
        /// them: whole seconds since its reference date (2001-01-01) rounded down, then the
        /// fraction's milliseconds truncated. Rounding `s * 1000` instead would differ by 1 ms
        /// for about 6% of instants. The date is computed from the day count with integer
        /// arithmetic (H. Hinnant's civil-from-days).
        static func iso8601(secondsSince1970 s: Double) -> String {
            let referenceDate = 978_307_200.0  // 2001-01-01T00:00:00Z, seconds since 1970
            // Within years 1 to 9999, and no trap on nonsense.
            let sinceReference = s.isFinite ? min(max(s - referenceDate, -63_000_000_000), 253_000_000_000) : 0
            let wholeSeconds = sinceReference.rounded(.down)
            let millisecond = min(Int64((sinceReference - wholeSeconds) * 1000), 999)
            let seconds = Int64(wholeSeconds) + Int64(referenceDate)  // since 1970, integer from here on

            let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400  // rounded down
            let secondOfDay = seconds - days * 86_400
            // Civil from days: eras of 400 years (146,097 days) starting on March 1st, year 0.
            let z = days + 719_468
            let era = (z >= 0 ? z : z - 146_096) / 146_097
            let dayOfEra = z - era * 146_097  // 0...146096
            let yearOfEra = (dayOfEra - dayOfEra / 1_460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365  // 0...399
            let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)  // 0...365, from March 1st
            let shiftedMonth = (5 * dayOfYear + 2) / 153  // 0...11, March is 0
            let day = dayOfYear - (153 * shiftedMonth + 2) / 5 + 1
            let month = shiftedMonth < 10 ? shiftedMonth + 3 : shiftedMonth - 9
            let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)

            var text: [UInt8] = []
            text.reserveCapacity(24)
            func digits(_ value: Int64, _ count: Int) {
                var divisor: Int64 = 1
                for _ in 1..<count { divisor *= 10 }
                var v = value
                while divisor > 0 {
                    text.append(UInt8(ascii: "0") + UInt8(truncatingIfNeeded: v / divisor % 10))
                    v %= divisor
                    divisor /= 10
                }
            }
            digits(year, 4); text.append(UInt8(ascii: "-"))
            digits(month, 2); text.append(UInt8(ascii: "-"))
            digits(day, 2); text.append(UInt8(ascii: "T"))
            digits(secondOfDay / 3_600, 2); text.append(UInt8(ascii: ":"))
            digits(secondOfDay / 60 % 60, 2); text.append(UInt8(ascii: ":"))
            digits(secondOfDay % 60, 2); text.append(UInt8(ascii: "."))
            digits(millisecond, 3); text.append(UInt8(ascii: "Z"))
            return String(decoding: text, as: UTF8.self)
        }
    }

    static func exitObject(_ e: ExitRecord?, _ clock: Clock) -> JSONValue {
        guard let e else { return .null }
        var o: [String: JSONValue] = ["reason": .string(e.reason.rawValue), "time": .string(clock.iso(e.at))]
        switch e.status {
        case .exited(let code)?: o["status"] = .string("exited"); o["code"] = .integer(Int(code))
        case .signaled(let sig)?: o["status"] = .string("signaled"); o["signal"] = .integer(Int(sig))
        case nil: o["status"] = .string("not-started")
        }
        o["pid"] = .integerOrNull(e.pid)
        return .object(o)
    }

    /// An event object (docs/json.md, "Events"), as `EventJSON` writes it for `monitor`.
    static func event(_ e: LifecycleEvent, _ clock: Clock) -> JSONValue {
        .encoded(EventJSON.encode(e, time: clock.iso(e.at)))
    }

    static func list(_ records: [ExtensionRecord], _ clock: Clock) -> JSONValue {
        .object(["extensions": .array(records.map { r -> JSONValue in
            .object([
                "id": .string(r.manifest.id), "point": .string(r.manifest.point), "state": .string(r.state.rawValue),
                "since": .string(clock.iso(r.since)), "pid": .integerOrNull(r.pid), "requests": .integer(r.requests.count),
                "assertions": .integer(r.assertions.count), "lastExit": exitObject(r.lastExit, clock),
            ])
        })])
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
    struct Containment {
        /// `cgroup` or `process-group`.
        var mode: String
        /// Why there is no cgroup per extension (nil with cgroups).
        var reason: String?
    }

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
    ) -> JSONValue {
        .object([
            "containment": .object(["mode": .string(containment.mode), "reason": .stringOrNull(containment.reason)]),
            "extensions": .array(records.map { r -> JSONValue in
            let policy = r.manifest.policy
            var o: [String: JSONValue] = [
                "id": .string(r.manifest.id), "point": .string(r.manifest.point), "state": .string(r.state.rawValue),
                "since": .string(clock.iso(r.since)), "pid": .integerOrNull(r.pid), "requests": .integer(r.requests.count),
                "executable": .string(r.manifest.executable), "manifest": .string(r.manifest.source),
                "readiness": .string(r.manifest.readiness.rawValue),
                "lastExit": exitObject(r.lastExit, clock),
                "consecutiveCrashes": .integer(r.consecutiveCrashes),
                "throttledUntil": .stringOrNull(r.throttledUntil.flatMap { $0 > now ? clock.iso($0) : nil }),
                "assertionOverruns": .integer(r.overruns), "expiryUnacknowledged": .integer(r.unacknowledgedExpiries),
                "locksHeldAtSuspend": .integer(r.locksHeldAtSuspend),
                "policy": .object([
                    "backgroundSeconds": .number(policy.backgroundSeconds),
                    "expiryGraceSeconds": .number(policy.expiryGraceSeconds),
                    "assertionMaxSeconds": .number(policy.assertionMaxSeconds),
                    "launchTimeoutSeconds": .number(policy.launchTimeoutSeconds),
                    "suspendedLifetimeSeconds": .number(policy.suspendedLifetimeSeconds),
                    "suspend": .string(policy.suspend.rawValue),
                    "lockedWhileSuspended": .string(policy.lockedWhileSuspended.rawValue),
                    "refreshSeconds": .number(policy.refreshSeconds),
                ]),
            ]
            var limitObject: [String: JSONValue] = [:]
            for l in limits(r.manifest) {
                var entry: [String: JSONValue] = ["value": .integer(Int(l.value)), "enforcedBy": .string(l.by.rawValue)]
                if let control = l.control { entry["enforcedWith"] = .string(control) }
                limitObject[l.key] = .object(entry)
            }
            o["limits"] = .object(limitObject)
            o["container"] = .stringOrNull(container(r.manifest))
            o["sandbox"] = sandbox(r.manifest).map(sandboxObject) ?? .null
            o["credentials"] = r.manifest.credentials.map { c in
                .object([
                    "uid": .integer(Int(c.uid)), "gid": .integer(Int(c.gid)), "groups": .array(c.groups.map { .integer(Int($0)) }),
                    "ownUID": .bool(c.ownUID),
                ])
            } ?? .null
            if let refresh = r.refresh {
                o["refresh"] = .object([
                    "lastResult": .stringOrNull(refresh.lastOutcome?.rawValue),
                    "lastAt": .stringOrNull(refresh.lastAt.map(clock.iso)),
                    "nextAt": .stringOrNull(refresh.nextAt.map(clock.iso)),
                    "budgetLeft": .integer(refresh.budgetLeft(at: now)),
                    "dailyBudget": .integer(refresh.schedule.dailyBudget),
                    "minimumIntervalSeconds": .number(refresh.schedule.minimumIntervalSeconds),
                    "inFlight": .bool(refresh.inFlight != nil),
                ])
            }
            o["openRequests"] = .array(r.requests.map { q -> JSONValue in
                .object([
                    "id": .integer(Int(q.id)), "hostPID": .integer(Int(q.peer.pid)), "hostUID": .integer(Int(q.peer.uid)),
                    "ageSeconds": .number(now.seconds(since: q.begunAt)),
                ])
            })
            o["assertions"] = .array(r.assertions.assertions.map { a -> JSONValue in
                let deadline: Instant
                switch r.phase {
                case .background(_, let stopAt?), .expiring(let stopAt): deadline = min(stopAt, a.hardDeadline)
                default: deadline = a.hardDeadline
                }
                return .object([
                    "id": .integer(Int(a.id)), "reason": .string(a.reason), "ageSeconds": .number(now.seconds(since: a.grantedAt)),
                    "remainingSeconds": .number(max(0, deadline.seconds(since: now))), "expireSent": .bool(a.expireSentAt != nil),
                    "expireAcknowledged": .bool(a.expireAcknowledged),
                ])
            })
            let found = r.pid == nil ? ProcessesOfExtension() : processes(r)
            o["processes"] = .array(found.entries.map { m in
                .object(["pid": .integer(Int(m.pid)), "state": .string(String(m.state)), "command": .string(m.command)])
            })
            o["cgroup"] = .stringOrNull(found.cgroup)
            let rss = found.cgroupMemoryBytes ?? found.entries.reduce(Int64(0)) { $0 + $1.rssBytes }
            let cpu = found.cgroupCPUSeconds ?? found.entries.reduce(0.0) { $0 + $1.cpuSeconds }
            o["memoryBytes"] = r.pid == nil ? .null : .integer(Int(rss))
            o["cpuSeconds"] = r.pid == nil ? .null : .number(cpu)
            o["recentEvents"] = .array(r.recentEvents.map { event($0, clock) })
            return .object(o)
        }),
        ])
    }

    /// The `sandbox` object of `status` (docs/json.md): what is enforced, what is not and why,
    /// and, when a part its point requires cannot be built, why it is not launched.
    static func sandboxObject(_ result: Result<SandboxDecision, SandboxRefusal>) -> JSONValue {
        switch result {
        case .success(let d):
            return .object([
                "enabled": .bool(d.enabled), "network": .bool(d.network),
                "enforced": .array(d.enforced.map { .string($0.rawValue) }),
                "notEnforced": .array(d.notEnforced.map { .object(["part": .string($0.part.rawValue), "reason": .string($0.reason)]) }),
                "summary": .string(d.summary), "launchRefused": .null,
            ])
        case .failure(let refusal):
            return .object([
                "enabled": .bool(true), "network": .null, "enforced": .array([]),
                "notEnforced": .array([.object(["part": .string(refusal.part.rawValue), "reason": .string(refusal.reason)])]),
                "summary": .string("cannot launch: \(refusal)"), "launchRefused": .string(refusal.description),
            ])
        }
    }

    static func encode(_ document: JSONValue) -> [UInt8] {
        JSONWriter.encode(document)
    }
}
