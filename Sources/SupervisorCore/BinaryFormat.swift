/// The compact binary form of a `Codable` value written by `BinaryEncoder` and read by
/// `BinaryDecoder`: what the hand-over document is made of. It keeps the shape `Codable` gives
/// a value (keyed containers with their keys, unkeyed containers, single values), so a type
/// reads back whatever it wrote, and a value is found by its key, not by its position.
///
/// ```
/// value   = tag payload
/// tag 0   nil
/// tag 1   false            tag 2   true
/// tag 3   unsigned integer n: n as LEB128
/// tag 4   negative integer n: -(n + 1) as LEB128
/// tag 5   floating point: the IEEE 754 double's bits, 8 bytes little-endian
/// tag 6   string: its UTF-8 length as LEB128, then the bytes
/// tag 7   keyed container: L (UInt32 LE), then L bytes: count (UInt32 LE), then count entries,
///         each the key (UTF-8 length as LEB128, the bytes) followed by its value
/// tag 8   unkeyed container: L (UInt32 LE), then L bytes: count (UInt32 LE), then count values
/// ```
///
/// Every container says its length, so a reader skips a value it does not ask for in constant
/// time, and finds a key by looking from the entry after the last one it read (the order the
/// encoder wrote them in, which a synthesized `init(from:)` asks for them in).
enum BinaryFormat {
    static let null: UInt8 = 0
    static let falseValue: UInt8 = 1
    static let trueValue: UInt8 = 2
    static let unsigned: UInt8 = 3
    static let negative: UInt8 = 4
    static let double: UInt8 = 5
    static let string: UInt8 = 6
    static let keyed: UInt8 = 7
    static let unkeyed: UInt8 = 8

    /// The bytes of a container's header: its tag, its length and its count.
    static let containerHeader = 9

    /// What a tag is, for error messages.
    static func name(of tag: UInt8) -> String {
        switch tag {
        case null: "nil"
        case falseValue, trueValue: "a boolean"
        case unsigned, negative: "an integer"
        case double: "a floating-point number"
        case string: "a string"
        case keyed: "a keyed container"
        case unkeyed: "an unkeyed container"
        default: "an unknown tag \(tag)"
        }
    }
}

/// A value `BinaryDecoder` could not read: where, by its path from the top
/// (`records[3].phase.deadline`), and what is wrong there.
public struct BinaryDecodingError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The keys and indexes from the top to the value, outermost first (`records`, `[3]`).
    public var path: [String]
    /// What is wrong with the value.
    public var problem: String

    /// An error at `path` for `problem`.
    public init(path: [String] = [], problem: String) {
        self.path = path
        self.problem = problem
    }

    /// `path: problem`, the path written as `records[3].phase` (`the top level` when empty).
    public var description: String {
        var text = ""
        for part in path {
            text += part.hasPrefix("[") || text.isEmpty ? part : "." + part
        }
        return "\(text.isEmpty ? "the top level" : text): \(problem)"
    }

    /// `error`, thrown while reading the value at `part`, with `part` put in front of its path.
    /// A `DecodingError` thrown by a type's own `init(from:)` keeps its coding path and its
    /// description; errors of other kinds that are not about a place (`HandoverError`) pass
    /// through unchanged.
    public static func inside(_ part: String, _ error: any Error) -> any Error {
        switch error {
        case var e as BinaryDecodingError:
            e.path.insert(part, at: 0)
            return e
        case let e as DecodingError:
            return BinaryDecodingError(path: [part] + e.pathNames, problem: e.problem)
        case is HandoverError:
            return error
        default:
            return BinaryDecodingError(path: [part], problem: "\(error)")
        }
    }
}

extension DecodingError {
    /// The coding path of the error, each key as `BinaryDecodingError` writes it.
    var pathNames: [String] {
        let keys: [any CodingKey]
        switch self {
        case .keyNotFound(let key, let context): keys = context.codingPath + [key]
        case .typeMismatch(_, let context), .valueNotFound(_, let context), .dataCorrupted(let context): keys = context.codingPath
        @unknown default: keys = []
        }
        return keys.map { key in key.intValue.map { "[\($0)]" } ?? key.stringValue }
    }

    /// What is wrong, without the path.
    var problem: String {
        switch self {
        case .keyNotFound: "missing"
        case .typeMismatch(let type, _): "expected \(type)"
        case .valueNotFound(let type, _): "expected \(type), found nil"
        case .dataCorrupted(let context): context.debugDescription
        @unknown default: "\(self)"
        }
    }
}
