import Foundation
import SupervisorCore

/// The JSON documents of `extctl list --json`, `status --json` and `monitor --json`.
/// A stable interface, documented in docs/json.md: fields may be added, never renamed or removed.
enum StatusDocument {
    /// Converts monotonic instants to wall-clock ISO 8601 text.
    struct Clock {
        let offset: Double  // realtime − monotonic, seconds

        init(monotonicNow: Instant) {
            var ts = timespec()
            clock_gettime(CLOCK_REALTIME, &ts)
            let real = Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
            offset = real - Double(monotonicNow.nanoseconds) / 1e9
        }

        func iso(_ t: Instant) -> String {
            let date = Date(timeIntervalSince1970: Double(t.nanoseconds) / 1e9 + offset)
            return date.formatted(.iso8601.year().month().day().time(includingFractionalSeconds: true).timeZone(separator: .omitted))
        }
    }

    static func exitObject(_ e: ExitRecord?, _ clock: Clock) -> Any {
        guard let e else { return NSNull() }
        var o: [String: Any] = ["reason": e.reason.rawValue, "time": clock.iso(e.at)]
        switch e.status {
        case .exited(let code)?: o["status"] = "exited"; o["code"] = Int(code)
        case .signaled(let sig)?: o["status"] = "signaled"; o["signal"] = Int(sig)
        case nil: o["status"] = "not-started"
        }
        o["pid"] = e.pid.map { Int($0) as Any } ?? NSNull()
        return o
    }

    static func event(_ e: LifecycleEvent, _ clock: Clock) -> [String: Any] {
        var o: [String: Any] = [
            "time": clock.iso(e.at), "monotonic": Double(e.at.nanoseconds) / 1e9, "event": e.kind.rawValue,
            "id": e.extensionID, "state": e.state.rawValue,
            "pid": e.pid.map { Int($0) as Any } ?? NSNull(),
        ]
        if let a = e.assertionID { o["assertion"] = Int(a) }
        if let r = e.requestID { o["request"] = Int(r) }
        if let d = e.detail { o["detail"] = d }
        return o
    }

    static func list(_ records: [ExtensionRecord], _ clock: Clock) -> [String: Any] {
        ["extensions": records.map { r -> [String: Any] in
            [
                "id": r.manifest.id, "point": r.manifest.point, "state": r.state.rawValue, "since": clock.iso(r.since),
                "pid": r.pid.map { Int($0) as Any } ?? NSNull(), "requests": r.requests.count,
                "assertions": r.assertions.count, "lastExit": exitObject(r.lastExit, clock),
            ]
        }]
    }

    static func status(_ records: [ExtensionRecord], now: Instant, _ clock: Clock) -> [String: Any] {
        let groups = ProcessTable.members(ofGroups: Set(records.compactMap(\.pid)))
        return ["extensions": records.map { r -> [String: Any] in
            var o: [String: Any] = [
                "id": r.manifest.id, "point": r.manifest.point, "state": r.state.rawValue, "since": clock.iso(r.since),
                "pid": r.pid.map { Int($0) as Any } ?? NSNull(), "requests": r.requests.count,
                "executable": r.manifest.executable, "manifest": r.manifest.source,
                "readiness": r.manifest.readiness.rawValue,
                "lastExit": exitObject(r.lastExit, clock),
                "consecutiveCrashes": r.consecutiveCrashes,
                "throttledUntil": r.throttledUntil.flatMap { $0 > now ? clock.iso($0) as Any : nil } ?? NSNull(),
                "assertionOverruns": r.overruns, "expiryUnacknowledged": r.unacknowledgedExpiries,
                "policy": [
                    "backgroundSeconds": r.manifest.policy.backgroundSeconds,
                    "expiryGraceSeconds": r.manifest.policy.expiryGraceSeconds,
                    "assertionMaxSeconds": r.manifest.policy.assertionMaxSeconds,
                    "launchTimeoutSeconds": r.manifest.policy.launchTimeoutSeconds,
                    "suspendedLifetimeSeconds": r.manifest.policy.suspendedLifetimeSeconds,
                    "suspend": r.manifest.policy.suspend.rawValue,
                ] as [String: Any],
            ]
            o["openRequests"] = r.requests.map { q -> [String: Any] in
                ["id": Int(q.id), "hostPID": Int(q.peer.pid), "hostUID": Int(q.peer.uid), "ageSeconds": now.seconds(since: q.begunAt)]
            }
            o["assertions"] = r.assertions.assertions.map { a -> [String: Any] in
                let deadline: Instant
                switch r.phase {
                case .background(_, let stopAt?), .expiring(let stopAt): deadline = min(stopAt, a.hardDeadline)
                default: deadline = a.hardDeadline
                }
                return [
                    "id": Int(a.id), "reason": a.reason, "ageSeconds": now.seconds(since: a.grantedAt),
                    "remainingSeconds": max(0, deadline.seconds(since: now)), "expireSent": a.expireSentAt != nil,
                    "expireAcknowledged": a.expireAcknowledged,
                ]
            }
            var members: [[String: Any]] = []
            var rss: Int64 = 0
            var cpu: UInt64 = 0
            if let pid = r.pid {
                for m in (groups[pid] ?? []).sorted(by: { $0.pid < $1.pid }) {
                    members.append(["pid": Int(m.pid), "state": String(m.state)])
                    rss += m.rssPages * ProcessTable.pageSize
                    cpu += m.cpuTicks
                }
            }
            o["processGroup"] = members
            o["memoryBytes"] = r.pid == nil ? NSNull() : Int(rss)
            o["cpuSeconds"] = r.pid == nil ? NSNull() : Double(cpu) / ProcessTable.ticksPerSecond
            o["recentEvents"] = r.recentEvents.map { event($0, clock) }
            return o
        }]
    }

    static func encode(_ object: Any) -> [UInt8] {
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data("{}".utf8)
        return [UInt8](data)
    }
}
