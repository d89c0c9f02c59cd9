import ExtensionStatus
import SupervisorCore

/// One lifecycle event as the event object of docs/json.md ("Events", `ExtensionEvent`): what a
/// monitor receives, and what `recentEvents` in `status` holds. It runs for every event while a
/// monitor is attached: the object is written straight into one buffer (`JSONWriter`), without
/// Foundation.
enum EventJSON {
    /// The event object of `e`, which happened at wall-clock time `time`.
    static func object(_ e: LifecycleEvent, time: String) -> ExtensionEvent {
        ExtensionEvent(
            time: time, monotonic: Double(e.at.nanoseconds) / 1e9, event: e.kind.rawValue, id: e.extensionID,
            state: e.state.rawValue, pid: e.pid, assertion: e.assertionID, request: e.requestID, detail: e.detail,
            lock: e.lock.map { ExtensionEvent.Lock(decision: $0.decision.rawValue, kind: $0.kind.rawValue, path: $0.path) })
    }

    /// Its JSON text.
    static func encode(_ e: LifecycleEvent, time: String) -> [UInt8] {
        object(e, time: time).jsonBytes()
    }
}
