/// Prints the JSON of docs/json.md: byte for byte what Foundation's `JSONSerialization` with
/// `.sortedKeys` prints for the same values (`JSONWriterTests` compares them), without Foundation:
///
/// * compact: no whitespace anywhere;
/// * object keys sorted by `keyOrder` (ASCII case-insensitive, then by code unit);
/// * strings escaped as `\"`, `\\`, `\/`, `\b`, `\f`, `\n`, `\r`, `\t`, other control characters as
///   `\u00xx` (lower-case hex); everything else, non-ASCII included, is copied as UTF-8;
/// * integers in decimal; doubles in Swift's shortest round-trip form without a trailing `.0`
///   (`5`, `0.5`, `59.003843`, `1e-05`, `1e+16`, `-0`); a non-finite double, which JSON cannot
///   express, is printed as `null`.
///
/// The documents of this module are `Encodable` and written with `write(_:)` of an `Encodable`
/// value, which writes each object's members in the order its `encode(to:)` gives them (sorted,
/// for these documents). Code that needs no type (the daemon's process registry) writes objects
/// member by member with `member(_:)`, and is then responsible for writing keys in sorted order.
public struct JSONWriter: Sendable {
    /// What has been written so far.
    public private(set) var bytes: [UInt8] = []

    /// An empty writer whose buffer holds `capacity` bytes before it grows.
    public init(capacity: Int = 0) {
        bytes.reserveCapacity(capacity)
    }

    /// `value` as JSON text.
    public static func encode(_ value: JSONValue) -> [UInt8] {
        var writer = JSONWriter(capacity: 1024)
        writer.write(value)
        return writer.bytes
    }

    /// Appends `value`, its objects' members in `keyOrder`.
    public mutating func write(_ value: JSONValue) {
        switch value {
        case .null: null()
        case .bool(let b): bool(b)
        case .integer(let i): integer(i)
        case .number(let d): number(d)
        case .string(let s): string(s)
        case .encoded(let raw): bytes.append(contentsOf: raw)
        case .array(let elements):
            bytes.append(UInt8(ascii: "["))
            for (i, e) in elements.enumerated() {
                if i > 0 { bytes.append(UInt8(ascii: ",")) }
                write(e)
            }
            bytes.append(UInt8(ascii: "]"))
        case .object(let members):
            bytes.append(UInt8(ascii: "{"))
            for (i, key) in members.keys.sorted(by: JSONWriter.keyOrder).enumerated() {
                if i > 0 { bytes.append(UInt8(ascii: ",")) }
                string(key)
                bytes.append(UInt8(ascii: ":"))
                write(members[key]!)
            }
            bytes.append(UInt8(ascii: "}"))
        }
    }

    /// The order of object keys: by UTF-8 code unit with ASCII letters folded to lower case
    /// (`"_" < "aa" < "B"`); keys equal but for case put lower case first, at the first letter
    /// that differs (`"id" < "iD" < "Id" < "ID"`). This is the order `JSONSerialization`'s
    /// `.sortedKeys` gave keys without digits (it also compared runs of digits as numbers, which
    /// the daemon's keys, ASCII identifiers, never contain).
    public static func keyOrder(_ a: String, _ b: String) -> Bool {
        func folded(_ c: UInt8) -> UInt8 { c >= UInt8(ascii: "A") && c <= UInt8(ascii: "Z") ? c | 0x20 : c }
        var tie: Bool?
        var i = a.utf8.makeIterator(), j = b.utf8.makeIterator()
        while true {
            switch (i.next(), j.next()) {
            case (nil, nil): return tie ?? false
            case (nil, _): return true
            case (_, nil): return false
            case (let x?, let y?):
                if folded(x) != folded(y) { return folded(x) < folded(y) }
                if tie == nil && x != y { tie = x > y }  // the lower-case letter, whose code is higher, first
            }
        }
    }

    // MARK: Scalars

    /// `null`.
    public mutating func null() {
        bytes.append(contentsOf: "null".utf8)
    }

    /// `true` or `false`.
    public mutating func bool(_ b: Bool) {
        bytes.append(contentsOf: (b ? "true" : "false").utf8)
    }

    /// Decimal digits, with a `-` for negative values.
    @inlinable
    public mutating func integer(_ value: some BinaryInteger) {
        // Inlinable: the caller's concrete type is specialized here, and what follows is not generic.
        if let magnitude = UInt64(exactly: value.magnitude) {
            digits(negative: value < 0, magnitude)
        } else {
            decimal(String(value))  // wider than 64 bits: unused by the daemon
        }
    }

    /// `magnitude` in decimal, after a `-` when `negative`.
    @usableFromInline
    mutating func digits(negative: Bool, _ magnitude: UInt64) {
        if negative { bytes.append(UInt8(ascii: "-")) }
        var magnitude = magnitude
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { digits in
            var start = digits.count
            repeat {
                start -= 1
                digits[start] = UInt8(ascii: "0") + UInt8(truncatingIfNeeded: magnitude % 10)
                magnitude /= 10
            } while magnitude != 0
            bytes.append(contentsOf: digits[start...])
        }
    }

    /// A number already written in decimal.
    @usableFromInline
    mutating func decimal(_ text: String) {
        bytes.append(contentsOf: text.utf8)
    }

    /// Swift's shortest round-trip form without a trailing `.0`: `5`, `0.5`, `1e-05`, `1e+16`.
    /// `null` when not finite.
    public mutating func number(_ value: Double) {
        guard value.isFinite else { return null() }
        var text = value.description
        text.withUTF8 { utf8 in
            let whole = utf8.count >= 2 && utf8[utf8.count - 2] == UInt8(ascii: ".") && utf8[utf8.count - 1] == UInt8(ascii: "0")
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[..<(whole ? utf8.count - 2 : utf8.count)]))
        }
    }

    /// A string literal, escaped as described on the type.
    public mutating func string(_ s: String) {
        bytes.append(UInt8(ascii: "\""))
        var text = s
        text.withUTF8 { utf8 in
            // Runs that need no escaping, the usual case, are copied whole.
            var start = 0
            for i in 0..<utf8.count {
                let b = utf8[i]
                guard b < 0x20 || b == UInt8(ascii: "\"") || b == UInt8(ascii: "\\") || b == UInt8(ascii: "/") else { continue }
                bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[start..<i]))
                escape(b)
                start = i + 1
            }
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[start...]))
        }
        bytes.append(UInt8(ascii: "\""))
    }

    /// The escape of one byte that cannot appear in a string literal as it is.
    private mutating func escape(_ b: UInt8) {
        switch b {
        case UInt8(ascii: "\""): bytes.append(contentsOf: #"\""#.utf8)
        case UInt8(ascii: "\\"): bytes.append(contentsOf: #"\\"#.utf8)
        case UInt8(ascii: "/"): bytes.append(contentsOf: #"\/"#.utf8)
        case 0x08: bytes.append(contentsOf: #"\b"#.utf8)
        case 0x0C: bytes.append(contentsOf: #"\f"#.utf8)
        case UInt8(ascii: "\n"): bytes.append(contentsOf: #"\n"#.utf8)
        case UInt8(ascii: "\r"): bytes.append(contentsOf: #"\r"#.utf8)
        case UInt8(ascii: "\t"): bytes.append(contentsOf: #"\t"#.utf8)
        default:
            let hex: StaticString = "0123456789abcdef"
            bytes.append(contentsOf: #"\u00"#.utf8)
            hex.withUTF8Buffer { digits in
                bytes.append(digits[Int(b >> 4)])
                bytes.append(digits[Int(b & 0xF)])
            }
        }
    }

    // MARK: Objects and arrays written piece by piece

    /// Starts an object; end it with `endObject()`.
    public mutating func beginObject() {
        bytes.append(UInt8(ascii: "{"))
    }

    /// Writes `"name":`, after a comma unless it is the first member of the object being written.
    /// The value must follow. `name` is written as it is (it must need no escaping), and the caller
    /// writes members in `keyOrder`.
    public mutating func member(_ name: StaticString) {
        if bytes.last != UInt8(ascii: "{") { bytes.append(UInt8(ascii: ",")) }
        bytes.append(UInt8(ascii: "\""))
        name.withUTF8Buffer { bytes.append(contentsOf: $0) }
        bytes.append(UInt8(ascii: "\""))
        bytes.append(UInt8(ascii: ":"))
    }

    /// Writes `"name":` for a name known only at run time (an `Encodable` value's coding key),
    /// escaped as `string(_:)` escapes, after a comma unless it is the first member of the object
    /// being written. The value must follow.
    mutating func member(key name: String) {
        if bytes.last != UInt8(ascii: "{") { bytes.append(UInt8(ascii: ",")) }
        string(name)
        bytes.append(UInt8(ascii: ":"))
    }

    /// Puts the members of the object being written, which start at `start` (right after its
    /// `{`), in `keyOrder`: `members` holds each one's key and where it starts (at the comma that
    /// precedes it, after the first). Members with equal keys keep their order.
    mutating func sortMembers(from start: Int, _ members: [(name: String, offset: Int)]) {
        let end = bytes.count
        let segments = members.indices.map { i in
            (name: members[i].name, bytes: (members[i].offset + (i == 0 ? 0 : 1))..<(i + 1 < members.count ? members[i + 1].offset : end))
        }
        let ordered = segments.indices.sorted { a, b in
            JSONWriter.keyOrder(segments[a].name, segments[b].name)
                || (!JSONWriter.keyOrder(segments[b].name, segments[a].name) && a < b)
        }
        var sorted: [UInt8] = []
        sorted.reserveCapacity(end - start)
        for (n, i) in ordered.enumerated() {
            if n > 0 { sorted.append(UInt8(ascii: ",")) }
            sorted.append(contentsOf: bytes[segments[i].bytes])
        }
        bytes.replaceSubrange(start..<end, with: sorted)
    }

    /// Ends the object begun last.
    public mutating func endObject() {
        bytes.append(UInt8(ascii: "}"))
    }

    /// Starts an array; end it with `endArray()`.
    public mutating func beginArray() {
        bytes.append(UInt8(ascii: "["))
    }

    /// A comma, unless the next value is the first element of the array being written.
    public mutating func element() {
        if bytes.last != UInt8(ascii: "[") { bytes.append(UInt8(ascii: ",")) }
    }

    /// Ends the array begun last.
    public mutating func endArray() {
        bytes.append(UInt8(ascii: "]"))
    }

    /// A newline (`\n`), as after a document or a JSON Lines record.
    public mutating func newline() {
        bytes.append(UInt8(ascii: "\n"))
    }
}
