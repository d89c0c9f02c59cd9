/// One value of a shared defaults suite (docs/defaults.md), as every runtime encodes it: a
/// type byte, then the value, little-endian.
///
/// | type | value |
/// |---|---|
/// | 1 bool | 1 byte, 0 or 1 |
/// | 2 integer | int64 |
/// | 3 double | IEEE-754 binary64 |
/// | 4 string | u32 length, UTF-8 |
/// | 5 bytes | u32 length, bytes |
/// | 6 array | u32 count, values |
/// | 7 dictionary | u32 count, then each: u32 key length, UTF-8 key, value (keys unique, sorted bytewise) |
///
/// At most `maxDepth` levels deep (a scalar alone is one level).
public enum DefaultsValue: Equatable, Sendable {
    /// True or false.
    case bool(Bool)
    /// A signed 64-bit integer.
    case integer(Int64)
    /// A double (IEEE-754 binary64).
    case double(Double)
    /// UTF-8 text.
    case string(String)
    /// Bytes.
    case bytes([UInt8])
    /// Values in order.
    case array([DefaultsValue])
    /// Values by string key.
    case dictionary([String: DefaultsValue])

    /// The deepest nesting a value may have.
    public static let maxDepth = 32

    /// The value's encoding.
    public var encoded: [UInt8] {
        var out: [UInt8] = []
        append(to: &out)
        return out
    }

    /// Decodes a whole encoding; throws naming what is malformed.
    public init(decoding bytes: [UInt8]) throws(DefaultsValueError) {
        let decoded = bytes.withUnsafeBytes { raw in Result { () throws(DefaultsValueError) in try DefaultsValue(decoding: raw) } }
        self = try decoded.get()
    }

    /// Decodes a whole encoding; throws naming what is malformed.
    public init(decoding raw: UnsafeRawBufferPointer) throws(DefaultsValueError) {
        var cursor = 0
        self = try Self.read(raw, &cursor, depth: 1)
        guard cursor == raw.count else { throw DefaultsValueError("\(raw.count - cursor) bytes after the value") }
    }

    /// What is malformed in `bytes` as a defaults value, or nil when it is one.
    public static func problem(_ bytes: [UInt8]) -> String? {
        do {
            _ = try DefaultsValue(decoding: bytes)
            return nil
        } catch {
            return error.description
        }
    }

    private func append(to out: inout [UInt8]) {
        func put32(_ v: Int) { withUnsafeBytes(of: UInt32(v).littleEndian) { out.append(contentsOf: $0) } }
        switch self {
        case .bool(let b): out.append(1); out.append(b ? 1 : 0)
        case .integer(let i): out.append(2); withUnsafeBytes(of: i.littleEndian) { out.append(contentsOf: $0) }
        case .double(let d): out.append(3); withUnsafeBytes(of: d.bitPattern.littleEndian) { out.append(contentsOf: $0) }
        case .string(let s): out.append(4); put32(s.utf8.count); out.append(contentsOf: s.utf8)
        case .bytes(let b): out.append(5); put32(b.count); out.append(contentsOf: b)
        case .array(let values):
            out.append(6); put32(values.count)
            for v in values { v.append(to: &out) }
        case .dictionary(let entries):
            out.append(7); put32(entries.count)
            for (key, v) in entries.sorted(by: { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }) {
                put32(key.utf8.count); out.append(contentsOf: key.utf8)
                v.append(to: &out)
            }
        }
    }

    private static func read(_ raw: UnsafeRawBufferPointer, _ cursor: inout Int, depth: Int) throws(DefaultsValueError) -> DefaultsValue {
        guard depth <= maxDepth else { throw DefaultsValueError("nested deeper than \(maxDepth) levels") }
        func take(_ n: Int, _ what: String) throws(DefaultsValueError) -> UnsafeRawBufferPointer {
            guard n >= 0, raw.count - cursor >= n else { throw DefaultsValueError("\(what) runs past the end") }
            defer { cursor += n }
            return UnsafeRawBufferPointer(rebasing: raw[cursor..<cursor + n])
        }
        func u32(_ what: String) throws(DefaultsValueError) -> Int { Int(try take(4, what).loadUnaligned(as: UInt32.self).littleEndian) }
        func text(_ what: String) throws(DefaultsValueError) -> String {
            let count = try u32(what)
            let bytes = try take(count, what)
            guard let s = String(validating: bytes, as: UTF8.self) else { throw DefaultsValueError("\(what) is not valid UTF-8") }
            return s
        }
        let type = try take(1, "the type")[0]
        switch type {
        case 1:
            let b = try take(1, "a bool")[0]
            guard b <= 1 else { throw DefaultsValueError("a bool is \(b), not 0 or 1") }
            return .bool(b == 1)
        case 2: return .integer(Int64(littleEndian: try take(8, "an integer").loadUnaligned(as: Int64.self)))
        case 3: return .double(Double(bitPattern: UInt64(littleEndian: try take(8, "a double").loadUnaligned(as: UInt64.self))))
        case 4: return .string(try text("a string"))
        case 5:
            let count = try u32("bytes")
            return .bytes(Array(try take(count, "bytes")))
        case 6:
            let count = try u32("an array")
            // Each element takes at least two bytes: a count the rest cannot hold is refused before any allocation.
            guard count <= (raw.count - cursor) / 2 else { throw DefaultsValueError("an array of \(count) values runs past the end") }
            var values: [DefaultsValue] = []
            values.reserveCapacity(count)
            for _ in 0..<count { values.append(try read(raw, &cursor, depth: depth + 1)) }
            return .array(values)
        case 7:
            let count = try u32("a dictionary")
            guard count <= (raw.count - cursor) / 6 else { throw DefaultsValueError("a dictionary of \(count) entries runs past the end") }
            var entries: [String: DefaultsValue] = [:]
            entries.reserveCapacity(count)
            var previous: String?
            for _ in 0..<count {
                let key = try text("a dictionary key")
                if let previous, !previous.utf8.lexicographicallyPrecedes(key.utf8) {
                    throw DefaultsValueError("dictionary key '\(key)' is out of order or repeated")
                }
                previous = key
                entries[key] = try read(raw, &cursor, depth: depth + 1)
            }
            return .dictionary(entries)
        default:
            throw DefaultsValueError("unknown type \(type)")
        }
    }
}

/// What is malformed in a defaults value or suite.
public struct DefaultsValueError: Error, CustomStringConvertible, Equatable {
    /// What is wrong, for people.
    public var description: String
    /// An error saying `description`.
    public init(_ description: String) { self.description = description }
}
