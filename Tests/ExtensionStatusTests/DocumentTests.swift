import ExtensionStatus
import Foundation  // the tests only: JSONSerialization and JSONDecoder are the references
import Testing

/// Samples of every document, once with every field that can be left out or `null` set, once
/// with none of them.
enum Samples {
    static let event = ExtensionEvent(
        time: "2026-11-21T02:56:53.587Z", monotonic: 793.270737, event: "lock-held-at-suspend", id: "org.example.test", state: "active",
        pid: 17816, assertion: 1, request: 7, detail: "upload \"photos\"\n\ttab/\u{1}",
        lock: .init(decision: "terminate", kind: "ofd", path: "/var/lib/x.db"))
    static let bareEvent = ExtensionEvent(
        time: "2026-11-21T02:56:55.569Z", monotonic: 5, event: "launch-failed", id: "é.x", state: "not-running", pid: nil)

    static let exit = ExitInfo(reason: "crashed", time: "2026-11-21T02:51:11.090Z", status: "signaled", signal: 6, pid: 8723)
    static let exited = ExitInfo(reason: "exited", time: "2026-11-21T02:51:11.090Z", status: "exited", code: 0, pid: 1)
    static let notStarted = ExitInfo(reason: "launch-failed", time: "2026-11-21T02:51:11.090Z", status: "not-started", pid: nil)

    static let list = ListDocument(extensions: [
        .init(
            id: "com.example.stocks.widget", point: "widget", state: "not-running", since: "2026-11-21T02:56:52.776Z", pid: nil,
            requests: 0, assertions: 0, lastExit: nil),
        .init(
            id: "org.example.test", point: "action", state: "active", since: "2026-11-21T02:56:53.584Z", pid: 17816,
            requests: 1, assertions: 1, lastExit: exit),
    ])

    static let policy = StatusReport.Policy(
        assertionMaxSeconds: 60, backgroundSeconds: 6, expiryGraceSeconds: 2.5, launchTimeoutSeconds: 10, lockedWhileSuspended: "terminate",
        refreshSeconds: 10, suspend: "stop", suspendedLifetimeSeconds: 120)

    static let full = StatusReport.Extension(
        id: "org.example.test", point: "action", state: "active", since: "2026-11-21T02:56:53.584Z", pid: 17816, requests: 1,
        lastExit: exited, executable: "/usr/lib/x/test-extension", manifest: "/etc/extensiond/extensions/test.json", readiness: "runtime",
        policy: policy,
        refresh: .init(
            lastResult: "new-data", lastAt: "2026-11-21T02:56:50.000Z", nextAt: "2026-11-21T03:56:50.000Z", budgetLeft: 47, dailyBudget: 48,
            minimumIntervalSeconds: 1800, inFlight: true),
        openRequests: [.init(id: 1, hostPID: 17813, hostUID: 0, ageSeconds: 0.999556)],
        assertions: [.init(id: 1, reason: "upload photos", ageSeconds: 0.996157, remainingSeconds: 59.003843, expireSent: true, expireAcknowledged: false)],
        consecutiveCrashes: 2, throttledUntil: "2026-11-21T02:57:00.000Z", assertionOverruns: 3, locksHeldAtSuspend: 4, expiryUnacknowledged: 5,
        processes: [.init(pid: 17816, state: "S", command: "test-extension"), .init(pid: 17823, state: "T", command: "sleep")],
        cgroup: "/sys/fs/cgroup/unified/extensiond-cc7eba7f145d14d0/org.example.test", memoryBytes: 23_085_056, cpuSeconds: 0.02,
        recentEvents: [event, bareEvent],
        limits: [
            "tasksMax": .init(value: 64, enforcedBy: "rlimit", enforcedWith: "RLIMIT_NPROC"),
            "cpuWeight": .init(value: 50, enforcedBy: "none", enforcedWith: nil),
            "memoryMaxBytes": .init(value: 2_147_483_648, enforcedBy: "cgroup", enforcedWith: "memory.limit_in_bytes"),
            "openFilesMax": .init(value: 1024, enforcedBy: "rlimit", enforcedWith: "RLIMIT_NOFILE"),
        ],
        credentials: .init(uid: 61_000, gid: 61_000, groups: [61_000, 900], ownUID: true),
        container: "/var/lib/extensiond/extensions/org.example.test",
        sandbox: .init(
            enabled: true, network: false, enforced: ["filesystem", "proc", "network"],
            notEnforced: [.init(part: "syscalls", reason: "no seccomp here")], summary: "filesystem, proc, network; syscalls not enforced",
            launchRefused: nil))

    static let bare = StatusReport.Extension(
        id: "org.example.sleeper", point: "default", state: "not-running", since: "2026-11-21T02:56:52.776Z", pid: nil, requests: 0,
        lastExit: nil, executable: "/bin/sleep", manifest: "/tmp/sleeper.json", readiness: "exec", policy: policy, refresh: nil,
        openRequests: [], assertions: [], consecutiveCrashes: 0, throttledUntil: nil, assertionOverruns: 0, locksHeldAtSuspend: 0,
        expiryUnacknowledged: 0, processes: [], cgroup: nil, memoryBytes: nil, cpuSeconds: nil, recentEvents: [], limits: [:],
        credentials: nil, container: nil,
        sandbox: .init(
            enabled: true, network: nil, enforced: [], notEnforced: [.init(part: "network", reason: "no")], summary: "cannot launch: no",
            launchRefused: "network: no"))

    static let status = StatusReport(containment: .init(mode: "cgroup", reason: nil), extensions: [full, bare])
    static let fallbackStatus = StatusReport(containment: .init(mode: "process-group", reason: "no cgroup v2"), extensions: [])

    static let reload = ReloadReport(
        loaded: 3, errors: ["/etc/extensiond/extensions/test.json: invalid JSON: …"],
        kept: [.init(id: "org.example.test", file: "/etc/extensiond/extensions/test.json")])
    static let container = SharedContainerInfo(name: "group.com.example.stocks", path: "/var/lib/extensiond/containers/group.com.example.stocks", gid: 900)
    static let discovery = DiscoveryList(extensions: [
        .init(id: "com.example.notes.share", point: "share", displayName: "Notes"), .init(id: "com.example.x", point: "share", displayName: nil),
    ])
}

/// The documents are written as docs/json.md shows them, and read back by `JSONDecoder` as the
/// same values: their `encode(to:)` and their decoding are one definition.
@Suite("Status documents: JSON")
struct DocumentTests {
    func text(_ document: some JSONDocument) -> String { String(decoding: document.jsonBytes(), as: UTF8.self) }

    /// What JSONSerialization with `.sortedKeys` prints for the same JSON: the bytes are equal
    /// only if every object's keys are sorted and every value is written as it writes them.
    func reference(_ bytes: [UInt8]) throws -> String {
        let object = try JSONSerialization.jsonObject(with: Data(bytes), options: [.fragmentsAllowed])
        return String(decoding: try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .fragmentsAllowed]), as: UTF8.self)
    }

    func roundTrip<D: JSONDocument & Equatable>(_ document: D) throws {
        let bytes = document.jsonBytes()
        #expect(String(decoding: bytes, as: UTF8.self) == (try reference(bytes)))
        #expect(try JSONDecoder().decode(D.self, from: Data(bytes)) == document)
    }

    @Test func everyDocumentIsSortedCompactAndDecodesToItself() throws {
        try roundTrip(Samples.event)
        try roundTrip(Samples.bareEvent)
        try roundTrip(Samples.list)
        try roundTrip(Samples.status)
        try roundTrip(Samples.fallbackStatus)
        try roundTrip(Samples.reload)
        try roundTrip(Samples.container)
        try roundTrip(SharedContainerInfo(name: "n", path: "/p", gid: nil))
        try roundTrip(Samples.discovery)
        try roundTrip(ListDocument(extensions: []))
        try roundTrip(ReexecReport(previousVersion: "0.1.0", version: "0.2.0", pid: 412, extensions: 7))
    }

    @Test func anEventsOwnWriterAndItsKeyedEncodingAgree() throws {
        // `jsonBytes()` writes the event member by member; any other encoder gets the keyed
        // container. Both say the same.
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        for e in [Samples.event, Samples.bareEvent] {
            let keyed = try JSONSerialization.jsonObject(with: try encoder.encode(e)) as? NSDictionary
            let own = try JSONSerialization.jsonObject(with: Data(e.jsonBytes())) as? NSDictionary
            #expect(keyed != nil && keyed == own, "\(String(describing: keyed)) vs \(String(describing: own))")
            var writer = JSONWriter()
            try writer.write([e])
            #expect(writer.bytes == [UInt8(ascii: "[")] + e.jsonBytes() + [UInt8(ascii: "]")], "inside a document, the same bytes")
        }
    }

    @Test func theDocumentedEventLines() {
        // docs/json.md, "Events".
        let end = ExtensionEvent(
            time: "2026-11-21T02:56:55.569Z", monotonic: 795.252156, event: "end", id: "org.example.test", state: "active", pid: 17816, request: 1)
        #expect(
            text(end)
                == #"{"event":"end","id":"org.example.test","monotonic":795.252156,"pid":17816,"request":1,"state":"active","time":"2026-11-21T02:56:55.569Z"}"#
        )
        #expect(
            text(Samples.bareEvent) == #"{"event":"launch-failed","id":"é.x","monotonic":5,"pid":null,"state":"not-running","time":"2026-11-21T02:56:55.569Z"}"#
        )
        #expect(
            text(Samples.event)
                == #"{"assertion":1,"detail":"upload \"photos\"\n\ttab\/\u0001","event":"lock-held-at-suspend","id":"org.example.test","lock":{"decision":"terminate","kind":"ofd","path":"\/var\/lib\/x.db"},"monotonic":793.270737,"pid":17816,"request":7,"state":"active","time":"2026-11-21T02:56:53.587Z"}"#
        )
    }

    @Test func nullableFieldsAreAlwaysWrittenOptionalOnesOnlyWhenTheyApply() throws {
        func keys(_ bytes: [UInt8], _ path: [Any] = []) throws -> [String: Any] {
            var value: Any = try JSONSerialization.jsonObject(with: Data(bytes))
            for step in path {
                if let key = step as? String { value = (value as! [String: Any])[key]! } else { value = (value as! [Any])[step as! Int] }
            }
            return value as! [String: Any]
        }
        let list = try keys(Samples.list.jsonBytes(), ["extensions", 0])
        #expect(list["pid"] is NSNull && list["lastExit"] is NSNull)
        let bare = try keys(Samples.status.jsonBytes(), ["extensions", 1])
        for key in ["pid", "lastExit", "throttledUntil", "cgroup", "memoryBytes", "cpuSeconds", "credentials", "container"] {
            #expect(bare[key] is NSNull, "\(key)")
        }
        #expect(bare["refresh"] == nil, "refresh only for an extension with background refresh")
        #expect((bare["sandbox"] as? [String: Any])?["network"] is NSNull)
        #expect(try keys(Samples.status.jsonBytes(), ["containment"])["reason"] is NSNull)
        let event = try keys(Samples.bareEvent.jsonBytes())
        #expect(event["pid"] is NSNull)
        for key in ["assertion", "request", "detail", "lock"] { #expect(event[key] == nil, "\(key)") }
        let exit = try keys(Samples.notStarted.jsonBytesOfExit())
        #expect(exit["pid"] is NSNull && exit["code"] == nil && exit["signal"] == nil)
        let limits = try keys(Samples.status.jsonBytes(), ["extensions", 0, "limits"])
        #expect((limits["cpuWeight"] as? [String: Any])?.keys.sorted() == ["enforcedBy", "value"])
    }

    @Test func limitsAreWrittenInKeyOrderWhateverTheDictionarysOrder() throws {
        let full = text(Samples.status)
        let limits = try #require(full.firstRange(of: #""limits":{"#)).upperBound
        #expect(full[limits...].hasPrefix(#""cpuWeight":{"enforcedBy":"none","value":50},"memoryMaxBytes""#), "\(full)")
    }

    @Test func theStatusExampleOfTheDocsDecodes() throws {
        // The pretty-printed example of docs/json.md ("status"), with what it leaves out.
        let example = #"""
            {"containment": {"mode": "cgroup", "reason": null}, "extensions": [{"assertionOverruns": 0,
             "assertions": [{"ageSeconds": 0.996157, "expireAcknowledged": false, "expireSent": false, "id": 1, "reason": "upload photos", "remainingSeconds": 59.003843}],
             "cgroup": "/sys/fs/cgroup/unified/extensiond-cc7eba7f145d14d0/org.example.test", "consecutiveCrashes": 0, "cpuSeconds": 0.02,
             "executable": "/tmp/extd/.build/x86_64-unknown-linux-gnu/debug/test-extension", "expiryUnacknowledged": 0, "id": "org.example.test",
             "lastExit": null, "limits": {}, "locksHeldAtSuspend": 0, "manifest": "/tmp/demo/ext/test.json", "memoryBytes": 23085056,
             "openRequests": [{"ageSeconds": 0.999556, "hostPID": 17813, "hostUID": 0, "id": 1}], "pid": 17816, "point": "action",
             "policy": {"assertionMaxSeconds": 60, "backgroundSeconds": 6, "expiryGraceSeconds": 2, "launchTimeoutSeconds": 10, "lockedWhileSuspended": "terminate",
                        "refreshSeconds": 10, "suspend": "stop", "suspendedLifetimeSeconds": 120},
             "processes": [{"command": "test-extension", "pid": 17816, "state": "S"}], "readiness": "runtime",
             "recentEvents": [{"event": "ready", "id": "org.example.test", "monotonic": 793.267338, "pid": 17816, "state": "active", "time": "2026-11-21T02:56:53.584Z"}],
             "requests": 1, "since": "2026-11-21T02:56:53.584Z", "state": "active", "throttledUntil": null, "future": [1, 2]}]}
            """#
        let report = try JSONDecoder().decode(StatusReport.self, from: Data(example.utf8))
        #expect(report.extensions.first?.memoryBytes == 23_085_056)
        #expect(report.extensions.first?.credentials == nil && report.extensions.first?.sandbox == nil && report.extensions.first?.container == nil)
        #expect(report.extensions.first?.recentEvents.first?.event == "ready")
    }
}

extension ExitInfo {
    func jsonBytesOfExit() throws -> [UInt8] {
        var writer = JSONWriter()
        try writer.write(self)
        return writer.bytes
    }
}
