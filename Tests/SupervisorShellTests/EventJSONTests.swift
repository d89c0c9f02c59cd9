import Foundation  // the tests only: JSONSerialization is the reference, and extctl parses with it
import SupervisorCore
import SupervisorKernel
import Testing

@testable import SupervisorShell

/// `EventJSON` writes the event object of docs/json.md as `StatusDocument.event` and
/// JSONSerialization did, and `status` embeds the same bytes in `recentEvents`.
struct EventJSONTests {
    static let events = [
        LifecycleEvent(
            at: Instant(nanoseconds: 793_259_880_000), kind: .launch, extensionID: "org.example.test", pid: 17816,
            state: .launching, detail: "/tmp/extd/.build/debug/test-extension"),
        LifecycleEvent(
            at: Instant(nanoseconds: 793_270_737_000), kind: .acquire, extensionID: "org.example.test", pid: 17816,
            state: .active, assertionID: 1, detail: "upload \"photos\"\n\ttab/\u{1}"),
        LifecycleEvent(
            at: Instant(nanoseconds: 795_252_156_000), kind: .end, extensionID: "org.example.test", pid: 17816,
            state: .active, requestID: 1),
        LifecycleEvent(
            at: Instant(nanoseconds: 5_000_000_000), kind: .launchFailed, extensionID: "é.x", pid: nil, state: .notRunning,
            detail: "No such file or directory"),
    ]

    /// The dictionary the daemon serialized with JSONSerialization before (StatusDocument.event).
    func legacy(_ e: LifecycleEvent, time: String) throws -> String {
        var o: [String: Any] = [
            "time": time, "monotonic": Double(e.at.nanoseconds) / 1e9, "event": e.kind.rawValue,
            "id": e.extensionID, "state": e.state.rawValue, "pid": e.pid.map { Int($0) as Any } ?? NSNull(),
        ]
        if let a = e.assertionID { o["assertion"] = Int(a) }
        if let r = e.requestID { o["request"] = Int(r) }
        if let d = e.detail { o["detail"] = d }
        return String(decoding: try JSONSerialization.data(withJSONObject: o, options: [.sortedKeys]), as: UTF8.self)
    }

    @Test func sameBytesAsJSONSerialization() throws {
        for e in Self.events {
            let time = "2026-11-21T02:56:53.576Z"
            #expect(String(decoding: EventJSON.encode(e, time: time), as: UTF8.self) == (try legacy(e, time: time)))
        }
    }

    @Test func documentedExample() {
        let e = Self.events[2]
        #expect(
            String(decoding: EventJSON.encode(e, time: "2026-11-21T02:56:55.569Z"), as: UTF8.self)
                == #"{"event":"end","id":"org.example.test","monotonic":795.252156,"pid":17816,"request":1,"state":"active","time":"2026-11-21T02:56:55.569Z"}"#
        )
        let failed = Self.events[3]
        #expect(
            String(decoding: EventJSON.encode(failed, time: "t"), as: UTF8.self)
                == #"{"detail":"No such file or directory","event":"launch-failed","id":"é.x","monotonic":5,"pid":null,"state":"not-running","time":"t"}"#)
    }

    @Test func statusEmbedsTheSameEventObject() throws {
        let clock = StatusDocument.Clock(monotonicNow: Instant(nanoseconds: 800_000_000_000), wallClock: Date().timeIntervalSince1970)
        for e in Self.events {
            let embedded = JSONWriter.encode(.array([StatusDocument.event(e, clock)]))
            #expect(embedded == Array("[".utf8) + EventJSON.encode(e, time: clock.iso(e.at)) + Array("]".utf8))
            let parsed = try #require(try JSONSerialization.jsonObject(with: Data(embedded)) as? [[String: Any]])
            #expect(parsed.first?["id"] as? String == e.extensionID)
            #expect(parsed.first?["detail"] as? String == e.detail)
        }
    }
}
