import SupervisorCore
import SupervisorKernel

/// Writes one lifecycle event as the JSON object of docs/json.md ("Events"): what
/// `extctl monitor --json` streams and what `recentEvents` in `status` holds. The one definition
/// of that object. Written member by member, in sorted key order, with `JSONWriter`'s escaping
/// and number format, without Foundation's serializer: it runs for every event while a monitor
/// is attached.
enum EventJSON {
    static func encode(_ e: LifecycleEvent, time: String) -> [UInt8] {
        var out = JSONWriter(capacity: 256)
        write(e, time: time, into: &out)
        return out.bytes
    }

    /// Appends the event object to `out`.
    static func write(_ e: LifecycleEvent, time: String, into out: inout JSONWriter) {
        out.beginObject()
        if let a = e.assertionID { out.member("assertion"); out.integer(a) }
        if let d = e.detail { out.member("detail"); out.string(d) }
        out.member("event"); out.string(e.kind.rawValue)
        out.member("id"); out.string(e.extensionID)
        if let lock = e.lock {
            out.member("lock")
            out.beginObject()
            out.member("decision"); out.string(lock.decision.rawValue)
            out.member("kind"); out.string(lock.kind.rawValue)
            out.member("path"); out.string(lock.path)
            out.endObject()
        }
        out.member("monotonic"); out.number(Double(e.at.nanoseconds) / 1e9)
        out.member("pid")
        if let pid = e.pid { out.integer(pid) } else { out.null() }
        if let r = e.requestID { out.member("request"); out.integer(r) }
        out.member("state"); out.string(e.state.rawValue)
        out.member("time"); out.string(time)
        out.endObject()
    }
}
