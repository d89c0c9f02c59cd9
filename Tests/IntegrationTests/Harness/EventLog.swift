import Foundation
import Synchronization

/// One lifecycle event as streamed by `monitor` (see docs/json.md).
struct StreamedEvent: Sendable, CustomStringConvertible {
    var kind: String
    var id: String
    var state: String
    var pid: Int?
    var assertion: Int?
    var detail: String?
    /// `lock` of a `lock-held-at-suspend` event: path, kind and decision.
    var lock: [String: String]?
    /// The daemon's monotonic timestamp, in seconds.
    var monotonic: Double

    var description: String { "\(String(format: "%.3f", monotonic)) \(id) \(kind) state=\(state) pid=\(pid.map(String.init) ?? "-") \(detail ?? "")" }
}

/// Every event a daemon streamed, with waiting for an event by condition and deadline.
final class EventLog: Sendable {
    private let events = Mutex<[StreamedEvent]>([])
    private let arrived = DispatchSemaphore(value: 0)

    func append(_ bytes: [UInt8]) {
        guard let o = try? JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any] else { return }
        let e = StreamedEvent(
            kind: o["event"] as? String ?? "", id: o["id"] as? String ?? "", state: o["state"] as? String ?? "",
            pid: o["pid"] as? Int, assertion: o["assertion"] as? Int, detail: o["detail"] as? String,
            lock: o["lock"] as? [String: String],
            monotonic: o["monotonic"] as? Double ?? 0)
        events.withLock { $0.append(e) }
        arrived.signal()
    }

    var all: [StreamedEvent] { events.withLock { $0 } }
    var count: Int { events.withLock { $0.count } }

    /// Waits until an event matching `match` has been streamed (past events count too, after
    /// the first `index`) and returns it; throws after `timeout` seconds listing what was seen.
    @discardableResult
    func wait(timeout: Double = 10, _ what: String, after index: Int = 0, _ match: (StreamedEvent) -> Bool) throws -> StreamedEvent {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            if let e = events.withLock({ $0.dropFirst(index).first(where: match) }) { return e }
            let left = deadline.timeIntervalSinceNow
            if left <= 0 || arrived.wait(timeout: .now() + left) == .timedOut {
                if let e = events.withLock({ $0.dropFirst(index).first(where: match) }) { return e }
                throw HarnessError("timed out waiting for \(what); events:\n" + all.map(\.description).joined(separator: "\n"))
            }
        }
    }

    /// Waits for event `kind` of extension `id` (after the first `index` events).
    @discardableResult
    func wait(_ kind: String, of id: String, after index: Int = 0, timeout: Double = 10) throws -> StreamedEvent {
        try wait(timeout: timeout, "\(kind) of \(id)", after: index) { $0.kind == kind && $0.id == id }
    }
}
