/// Reads a `Codable` value from the binary form `BinaryEncoder` writes (`BinaryFormat`).
///
/// Guarantees: every read is checked against the bytes' bounds, so truncated or corrupt bytes
/// throw `BinaryDecodingError`, naming the value at fault by its path from the top and what is
/// wrong with it, never crash or read outside them. Numbers read as JSON's do: an integer as a
/// double it fits exactly, a whole double as an integer; one that does not fit the type asked
/// for is an error, not a truncation or a rounding. Only the values a type asks for are read: the others
/// are skipped by their lengths.
public struct BinaryDecoder {
    /// Whether `BinaryDirectCodable` types read themselves directly (always, but in the tests
    /// that compare the two paths).
    var directCoding = true

    /// A decoder.
    public init() {}

    /// The value of type `T` in `bytes`, which must start with `signature`.
    public func decode<T: Decodable>(_ type: T.Type, from bytes: [UInt8], signature: [UInt8] = []) throws -> T {
        guard bytes.count >= signature.count, bytes[0..<signature.count].elementsEqual(signature) else {
            throw BinaryDecodingError(problem: "not in the expected form: it does not start with its signature")
        }
        guard signature.count < bytes.count else { throw BinaryDecodingError(problem: "no value: the bytes end after the signature") }
        return try decode(type, from: bytes[signature.count...])
    }

    /// The value of type `T` that `bytes` hold exactly: one of several values written one after
    /// another (`end(ofContainerIn:at:)` tells where each ends), or a whole document without its
    /// signature.
    public func decode<T: Decodable>(_ type: T.Type, from bytes: ArraySlice<UInt8>) throws -> T {
        guard !bytes.isEmpty else { throw BinaryDecodingError(problem: "no value: no bytes") }
        return try BinaryInput.reading(bytes, directCoding: directCoding) { input in
            let end = try input.skip(0, within: bytes.count)
            guard end == bytes.count else { throw BinaryDecodingError(problem: "\(bytes.count - end) byte(s) after the value") }
            return try BinaryDecoding.value(T.self, input, at: 0, within: end)
        }
    }

    /// The offset right after the container (keyed or unkeyed) that starts at `offset` in
    /// `bytes`, read from its header alone; throws when there is no container there or it
    /// runs past the end.
    public func end(ofContainerIn bytes: [UInt8], at offset: Int) throws(BinaryDecodingError) -> Int {
        guard offset >= 0, offset + 5 <= bytes.count else { throw BinaryInput.truncated }
        let tag = bytes[offset]
        guard tag == BinaryFormat.keyed || tag == BinaryFormat.unkeyed else {
            throw BinaryDecodingError(problem: "expected a container, found \(BinaryFormat.name(of: tag))")
        }
        let length = bytes[(offset + 1)..<(offset + 5)].reversed().reduce(0) { $0 << 8 | Int($1) }
        guard length >= 4, length <= bytes.count - offset - 5 else { throw BinaryInput.truncated }
        return offset + 5 + length
    }
}

/// The bytes being read, with bounds-checked reads: the caller's bytes themselves, borrowed
/// by one decode (`reading`).
package final class BinaryInput {
    private let base: UnsafeRawBufferPointer
    /// Whether `BinaryDirectCodable` types read themselves directly.
    let directCoding: Bool

    private init(borrowing bytes: UnsafeRawBufferPointer, directCoding: Bool) {
        self.directCoding = directCoding
        base = bytes
    }

    /// `read` over an input that borrows `bytes` rather than copying them (a document of
    /// megabytes is read without a copy of it). Every value read from it is a copy, so nothing
    /// read needs `bytes` afterwards; an input (or a `Decoder` holding one) kept past `read`
    /// would read freed memory, so that stops the program rather than go unnoticed.
    static func reading<T>(_ bytes: ArraySlice<UInt8>, directCoding: Bool, _ read: (BinaryInput) throws -> T) throws -> T {
        try bytes.withUnsafeBytes { raw in
            var input = BinaryInput(borrowing: raw, directCoding: directCoding)
            defer { precondition(isKnownUniquelyReferenced(&input), "a BinaryInput outlived the decode that borrowed its bytes") }
            return try read(input)
        }
    }

    static let truncated = BinaryDecodingError(problem: "truncated: a value runs past the end of its container")

    func byte(_ offset: Int, within end: Int) throws(BinaryDecodingError) -> UInt8 {
        guard offset < end else { throw Self.truncated }
        return base[offset]
    }

    func uint32(_ offset: Int, within end: Int) throws(BinaryDecodingError) -> Int {
        guard offset + 4 <= end else { throw Self.truncated }
        return Int(UInt32(littleEndian: base.loadUnaligned(fromByteOffset: offset, as: UInt32.self)))
    }

    /// The LEB128 number at `offset` and the offset after it.
    func leb128(_ offset: Int, within end: Int) throws(BinaryDecodingError) -> (value: UInt64, next: Int) {
        // Most numbers (lengths, counts, small integers) are below 128: one byte.
        let first = try byte(offset, within: end)
        if first < 0x80 { return (UInt64(first), offset + 1) }
        var value: UInt64 = 0
        var shift: UInt64 = 0
        var at = offset
        while true {
            let b = try byte(at, within: end)
            at += 1
            guard shift < 64, shift < 63 || b & 0x7F <= 1 else { throw BinaryDecodingError(problem: "an integer longer than 64 bits") }
            value |= UInt64(b & 0x7F) << shift
            if b & 0x80 == 0 { return (value, at) }
            shift += 7
        }
    }

    /// The range of a length-prefixed UTF-8 text at `offset` (a string's payload, a key).
    func text(_ offset: Int, within end: Int) throws(BinaryDecodingError) -> Range<Int> {
        let (length, start) = try leb128(offset, within: end)
        guard length <= UInt64(end - start) else { throw Self.truncated }
        return start..<(start + Int(length))
    }

    func string(_ range: Range<Int>) -> String {
        String(decoding: UnsafeRawBufferPointer(rebasing: base[range]), as: UTF8.self)
    }

    /// Whether the bytes in `range` are the UTF-8 of `key`.
    func matches(_ range: Range<Int>, _ key: String) -> Bool {
        var key = key
        return key.withUTF8 { matches(range, UnsafeRawBufferPointer($0)) }
    }

    /// Whether the bytes in `range` are `bytes`.
    func matches(_ range: Range<Int>, _ bytes: UnsafeRawBufferPointer) -> Bool {
        guard bytes.count == range.count else { return false }
        var i = range.lowerBound
        for b in bytes {
            if base[i] != b { return false }
            i += 1
        }
        return true
    }

    /// The key of a keyed container (whose entries start at `entries`, `count` of them, ending at
    /// `end`) for which `isKey` holds, looked for from the entry at `offset` (the `index`th),
    /// around once: its value's offset, and the offset and index of the entry after it.
    func find(
        from offset: Int, index: Int, entries: Int, count: Int, end: Int, _ isKey: (Range<Int>) -> Bool
    ) throws(BinaryDecodingError) -> (value: Int, next: Int, nextIndex: Int)? {
        var offset = offset
        var index = index
        for _ in 0..<count {
            if index == count {
                index = 0
                offset = entries
            }
            let keyRange = try text(offset, within: end)
            let value = keyRange.upperBound
            let next = try skip(value, within: end)
            index += 1
            if isKey(keyRange) { return (value, next, index) }
            offset = next
        }
        return nil
    }

    /// The offset right after the value at `offset`.
    func skip(_ offset: Int, within end: Int) throws(BinaryDecodingError) -> Int {
        let tag = try byte(offset, within: end)
        switch tag {
        case BinaryFormat.null, BinaryFormat.falseValue, BinaryFormat.trueValue: return offset + 1
        case BinaryFormat.unsigned, BinaryFormat.negative: return try leb128(offset + 1, within: end).next
        case BinaryFormat.double:
            guard offset + 9 <= end else { throw Self.truncated }
            return offset + 9
        case BinaryFormat.string: return try text(offset + 1, within: end).upperBound
        case BinaryFormat.keyed, BinaryFormat.unkeyed:
            let length = try uint32(offset + 1, within: end)
            guard length >= 4, offset + 5 + length <= end else { throw Self.truncated }
            return offset + 5 + length
        default: throw BinaryDecodingError(problem: "unknown tag \(tag)")
        }
    }

    /// The container with `tag` at `offset`: where its entries start, how many, where it ends.
    func container(_ tag: UInt8, at offset: Int, within end: Int) throws(BinaryDecodingError) -> (entries: Int, count: Int, end: Int) {
        let found = try byte(offset, within: end)
        guard found == tag else { throw BinaryDecodingError(problem: "expected \(BinaryFormat.name(of: tag)), found \(BinaryFormat.name(of: found))") }
        let length = try uint32(offset + 1, within: end)
        guard length >= 4, offset + 5 + length <= end else { throw Self.truncated }
        // Every entry takes a byte at least (a value's tag): a count the bytes cannot hold is
        // refused here, before a reader reserves room for that many.
        let count = try uint32(offset + 5, within: end)
        guard count <= length - 4 else { throw BinaryDecodingError(problem: "a container of \(length - 4) byte(s) cannot hold \(count) entries") }
        return (offset + BinaryFormat.containerHeader, count, offset + 5 + length)
    }

    // MARK: Single values

    func null(_ offset: Int, within end: Int) throws(BinaryDecodingError) -> Bool {
        try byte(offset, within: end) == BinaryFormat.null
    }

    func bool(_ offset: Int, within end: Int) throws(BinaryDecodingError) -> Bool {
        switch try byte(offset, within: end) {
        case BinaryFormat.falseValue: return false
        case BinaryFormat.trueValue: return true
        case let tag: throw BinaryDecodingError(problem: "expected a boolean, found \(BinaryFormat.name(of: tag))")
        }
    }

    func string(_ offset: Int, within end: Int) throws(BinaryDecodingError) -> String {
        string(try stringBytes(offset, within: end))
    }

    /// Where the UTF-8 bytes of the string value at `offset` lie (which is also where the value
    /// ends); throws when there is no string there.
    func stringBytes(_ offset: Int, within end: Int) throws(BinaryDecodingError) -> Range<Int> {
        let tag = try byte(offset, within: end)
        guard tag == BinaryFormat.string else { throw BinaryDecodingError(problem: "expected a string, found \(BinaryFormat.name(of: tag))") }
        return try text(offset + 1, within: end)
    }

    /// A floating-point number, or an integer a double holds exactly (a type may write a
    /// whole number as an integer and read it back as a double, as JSON allows).
    func double(_ offset: Int, within end: Int) throws(BinaryDecodingError) -> Double {
        let tag = try byte(offset, within: end)
        switch tag {
        case BinaryFormat.double:
            guard offset + 9 <= end else { throw Self.truncated }
            return Double(bitPattern: UInt64(littleEndian: base.loadUnaligned(fromByteOffset: offset + 1, as: UInt64.self)))
        case BinaryFormat.unsigned, BinaryFormat.negative:
            let n = try integer(Int64.self, offset, within: end)
            guard let value = Double(exactly: n) else { throw BinaryDecodingError(problem: "\(n) is not exactly a Double") }
            return value
        default:
            throw BinaryDecodingError(problem: "expected a floating-point number, found \(BinaryFormat.name(of: tag))")
        }
    }

    func integer<T: FixedWidthInteger>(_ type: T.Type, _ offset: Int, within end: Int) throws(BinaryDecodingError) -> T {
        let tag = try byte(offset, within: end)
        switch tag {
        case BinaryFormat.unsigned:
            let n = try leb128(offset + 1, within: end).value
            guard let value = T(exactly: n) else { throw BinaryDecodingError(problem: "\(n) does not fit \(T.self)") }
            return value
        case BinaryFormat.negative:
            let n = try leb128(offset + 1, within: end).value
            guard n <= UInt64(Int64.max) else { throw BinaryDecodingError(problem: "an integer below \(Int64.min)") }
            let negative = -1 - Int64(n)
            guard let value = T(exactly: negative) else { throw BinaryDecodingError(problem: "\(negative) does not fit \(T.self)") }
            return value
        case BinaryFormat.double:
            let d = try double(offset, within: end)
            guard let value = T(exactly: d) else { throw BinaryDecodingError(problem: "\(d) does not fit \(T.self)") }
            return value
        default:
            throw BinaryDecodingError(problem: "expected an integer, found \(BinaryFormat.name(of: tag))")
        }
    }
}

/// The `Decoder` handed to each value's `init(from:)`: the value at `offset`. Its `codingPath`
/// is empty; errors get their path as they are thrown out through each container
/// (`BinaryDecodingError.inside`).
struct BinaryDecoding: Decoder, SingleValueDecodingContainer {
    let input: BinaryInput
    let offset: Int
    /// The end of the container the value is in.
    let end: Int
    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        KeyedDecodingContainer(try BinaryKeyedDecoding<Key>(input: input, at: offset, within: end))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        try BinaryUnkeyedDecoding(input: input, at: offset, within: end)
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer { self }

    func decodeNil() -> Bool { (try? input.null(offset, within: end)) ?? false }
    func decode(_ type: Bool.Type) throws -> Bool { try input.bool(offset, within: end) }
    func decode(_ type: String.Type) throws -> String { try input.string(offset, within: end) }
    func decode(_ type: Double.Type) throws -> Double { try input.double(offset, within: end) }
    func decode(_ type: Float.Type) throws -> Float { Float(try input.double(offset, within: end)) }
    func decode(_ type: Int.Type) throws -> Int { try input.integer(type, offset, within: end) }
    func decode(_ type: Int8.Type) throws -> Int8 { try input.integer(type, offset, within: end) }
    func decode(_ type: Int16.Type) throws -> Int16 { try input.integer(type, offset, within: end) }
    func decode(_ type: Int32.Type) throws -> Int32 { try input.integer(type, offset, within: end) }
    func decode(_ type: Int64.Type) throws -> Int64 { try input.integer(type, offset, within: end) }
    func decode(_ type: UInt.Type) throws -> UInt { try input.integer(type, offset, within: end) }
    func decode(_ type: UInt8.Type) throws -> UInt8 { try input.integer(type, offset, within: end) }
    func decode(_ type: UInt16.Type) throws -> UInt16 { try input.integer(type, offset, within: end) }
    func decode(_ type: UInt32.Type) throws -> UInt32 { try input.integer(type, offset, within: end) }
    func decode(_ type: UInt64.Type) throws -> UInt64 { try input.integer(type, offset, within: end) }
    func decode<T: Decodable>(_ type: T.Type) throws -> T { try Self.value(T.self, input, at: offset, within: end) }
}

extension BinaryDecoding {
    /// The value of type `T` at `offset`: read directly when `T` is `BinaryDirectCodable` and
    /// `input` reads directly (the same value or error, by that protocol's contract), else by
    /// `init(from:)`. Every nested value is read through here.
    static func value<T: Decodable>(_ type: T.Type, _ input: BinaryInput, at offset: Int, within end: Int) throws -> T {
        if input.directCoding, let direct = T.self as? any BinaryDirectCodable.Type {
            // The cast cannot fail: `direct` is `T.self`.
            return try direct.init(binary: input, at: offset, within: end) as! T
        }
        return try T(from: BinaryDecoding(input: input, offset: offset, end: end))
    }

    /// The keys of the keyed container this value is that are not in `known`.
    func keys(notIn known: Set<String>) throws(BinaryDecodingError) -> [String] {
        let (entries, count, end) = try input.container(BinaryFormat.keyed, at: offset, within: self.end)
        var unknown: [String] = []
        var at = entries
        for _ in 0..<count {
            let key = try input.text(at, within: end)
            if !known.contains(where: { input.matches(key, $0) }) { unknown.append(input.string(key)) }
            at = try input.skip(key.upperBound, within: end)
        }
        return unknown
    }
}

/// Where a keyed container looks for the next key: the entry after the last one found.
private final class KeyCursor {
    var offset: Int
    var index = 0
    init(offset: Int) { self.offset = offset }
}

struct BinaryKeyedDecoding<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let input: BinaryInput
    let entries: Int
    let count: Int
    let end: Int
    private let cursor: KeyCursor
    var codingPath: [any CodingKey] { [] }

    init(input: BinaryInput, at offset: Int, within limit: Int) throws(BinaryDecodingError) {
        self.input = input
        (entries, count, end) = try input.container(BinaryFormat.keyed, at: offset, within: limit)
        cursor = KeyCursor(offset: entries)
    }

    /// The offset of `key`'s value, or nil when the container has no such key. Looks from the
    /// entry after the last one found, around once.
    private func find(_ key: Key) throws -> Int? {
        let name = key.stringValue
        guard let found = try input.find(from: cursor.offset, index: cursor.index, entries: entries, count: count, end: end, { input.matches($0, name) })
        else { return nil }
        cursor.offset = found.next
        cursor.index = found.nextIndex
        return found.value
    }

    private func value(_ key: Key) throws -> Int {
        guard let offset = try find(key) else { throw BinaryDecodingError(path: [key.stringValue], problem: "missing") }
        return offset
    }

    private func read<T>(_ key: Key, _ body: (Int) throws -> T) throws -> T {
        let offset = try value(key)
        do {
            return try body(offset)
        } catch {
            throw BinaryDecodingError.inside(key.stringValue, error)
        }
    }

    var allKeys: [Key] {
        var keys: [Key] = []
        var offset = entries
        for _ in 0..<count {
            guard let range = try? input.text(offset, within: end), let next = try? input.skip(range.upperBound, within: end) else { break }
            if let key = Key(stringValue: input.string(range)) { keys.append(key) }
            offset = next
        }
        return keys
    }

    func contains(_ key: Key) -> Bool { ((try? find(key)) ?? nil) != nil }

    func decodeNil(forKey key: Key) throws -> Bool { try read(key) { try input.null($0, within: end) } }
    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try read(key) { try input.bool($0, within: end) } }
    func decode(_ type: String.Type, forKey key: Key) throws -> String { try read(key) { try input.string($0, within: end) } }
    func decode(_ type: Double.Type, forKey key: Key) throws -> Double { try read(key) { try input.double($0, within: end) } }
    func decode(_ type: Float.Type, forKey key: Key) throws -> Float { try read(key) { Float(try input.double($0, within: end)) } }
    func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try read(key) { try input.integer(type, $0, within: end) } }
    func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try read(key) { try input.integer(type, $0, within: end) } }
    func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try read(key) { try input.integer(type, $0, within: end) } }
    func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try read(key) { try input.integer(type, $0, within: end) } }
    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try read(key) { try input.integer(type, $0, within: end) } }
    func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try read(key) { try input.integer(type, $0, within: end) } }
    func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try read(key) { try input.integer(type, $0, within: end) } }
    func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try read(key) { try input.integer(type, $0, within: end) } }
    func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try read(key) { try input.integer(type, $0, within: end) } }
    func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try read(key) { try input.integer(type, $0, within: end) } }
    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
        try read(key) { try BinaryDecoding.value(T.self, input, at: $0, within: end) }
    }

    /// The value of `key` read by `body`, or nil when the key is absent or its value is nil:
    /// one look for it, where the protocol's defaults look three times (`contains`,
    /// `decodeNil`, `decode`).
    private func present<T>(_ key: Key, _ body: (Int) throws -> T) throws -> T? {
        guard let offset = try find(key), try !input.null(offset, within: end) else { return nil }
        do {
            return try body(offset)
        } catch {
            throw BinaryDecodingError.inside(key.stringValue, error)
        }
    }

    func decodeIfPresent(_ type: Bool.Type, forKey key: Key) throws -> Bool? { try present(key) { try input.bool($0, within: end) } }
    func decodeIfPresent(_ type: String.Type, forKey key: Key) throws -> String? { try present(key) { try input.string($0, within: end) } }
    func decodeIfPresent(_ type: Double.Type, forKey key: Key) throws -> Double? { try present(key) { try input.double($0, within: end) } }
    func decodeIfPresent(_ type: Float.Type, forKey key: Key) throws -> Float? { try present(key) { Float(try input.double($0, within: end)) } }
    func decodeIfPresent(_ type: Int.Type, forKey key: Key) throws -> Int? { try present(key) { try input.integer(type, $0, within: end) } }
    func decodeIfPresent(_ type: Int8.Type, forKey key: Key) throws -> Int8? { try present(key) { try input.integer(type, $0, within: end) } }
    func decodeIfPresent(_ type: Int16.Type, forKey key: Key) throws -> Int16? { try present(key) { try input.integer(type, $0, within: end) } }
    func decodeIfPresent(_ type: Int32.Type, forKey key: Key) throws -> Int32? { try present(key) { try input.integer(type, $0, within: end) } }
    func decodeIfPresent(_ type: Int64.Type, forKey key: Key) throws -> Int64? { try present(key) { try input.integer(type, $0, within: end) } }
    func decodeIfPresent(_ type: UInt.Type, forKey key: Key) throws -> UInt? { try present(key) { try input.integer(type, $0, within: end) } }
    func decodeIfPresent(_ type: UInt8.Type, forKey key: Key) throws -> UInt8? { try present(key) { try input.integer(type, $0, within: end) } }
    func decodeIfPresent(_ type: UInt16.Type, forKey key: Key) throws -> UInt16? { try present(key) { try input.integer(type, $0, within: end) } }
    func decodeIfPresent(_ type: UInt32.Type, forKey key: Key) throws -> UInt32? { try present(key) { try input.integer(type, $0, within: end) } }
    func decodeIfPresent(_ type: UInt64.Type, forKey key: Key) throws -> UInt64? { try present(key) { try input.integer(type, $0, within: end) } }
    func decodeIfPresent<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T? {
        try present(key) { try BinaryDecoding.value(T.self, input, at: $0, within: end) }
    }

    func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws -> KeyedDecodingContainer<NestedKey> {
        try read(key) { KeyedDecodingContainer(try BinaryKeyedDecoding<NestedKey>(input: input, at: $0, within: end)) }
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        try read(key) { try BinaryUnkeyedDecoding(input: input, at: $0, within: end) }
    }

    func superDecoder() throws -> any Decoder {
        guard let key = Key(stringValue: "super") else { throw BinaryDecodingError(problem: "no key 'super' for a super decoder") }
        return try superDecoder(forKey: key)
    }

    func superDecoder(forKey key: Key) throws -> any Decoder {
        BinaryDecoding(input: input, offset: try value(key), end: end)
    }
}

struct BinaryUnkeyedDecoding: UnkeyedDecodingContainer {
    let input: BinaryInput
    let end: Int
    let count: Int?
    private(set) var currentIndex = 0
    private var offset: Int
    var codingPath: [any CodingKey] { [] }
    var isAtEnd: Bool { currentIndex >= (count ?? 0) }

    init(input: BinaryInput, at start: Int, within limit: Int) throws(BinaryDecodingError) {
        self.input = input
        let container = try input.container(BinaryFormat.unkeyed, at: start, within: limit)
        offset = container.entries
        count = container.count
        end = container.end
    }

    /// Reads the next element with `body` and moves past it.
    private mutating func next<T>(_ body: (_ input: BinaryInput, _ offset: Int, _ end: Int) throws -> T) throws -> T {
        let index = currentIndex
        guard !isAtEnd else { throw BinaryDecodingError(path: ["[\(index)]"], problem: "missing: the container has \(count ?? 0) element(s)") }
        do {
            let value = try body(input, offset, end)
            offset = try input.skip(offset, within: end)
            currentIndex += 1
            return value
        } catch {
            throw BinaryDecodingError.inside("[\(index)]", error)
        }
    }

    mutating func decodeNil() throws -> Bool {
        guard !isAtEnd, try input.null(offset, within: end) else { return false }
        offset += 1
        currentIndex += 1
        return true
    }

    mutating func decode(_ type: Bool.Type) throws -> Bool { try next { try $0.bool($1, within: $2) } }
    mutating func decode(_ type: String.Type) throws -> String { try next { try $0.string($1, within: $2) } }
    mutating func decode(_ type: Double.Type) throws -> Double { try next { try $0.double($1, within: $2) } }
    mutating func decode(_ type: Float.Type) throws -> Float { try next { Float(try $0.double($1, within: $2)) } }
    mutating func decode(_ type: Int.Type) throws -> Int { try next { try $0.integer(type, $1, within: $2) } }
    mutating func decode(_ type: Int8.Type) throws -> Int8 { try next { try $0.integer(type, $1, within: $2) } }
    mutating func decode(_ type: Int16.Type) throws -> Int16 { try next { try $0.integer(type, $1, within: $2) } }
    mutating func decode(_ type: Int32.Type) throws -> Int32 { try next { try $0.integer(type, $1, within: $2) } }
    mutating func decode(_ type: Int64.Type) throws -> Int64 { try next { try $0.integer(type, $1, within: $2) } }
    mutating func decode(_ type: UInt.Type) throws -> UInt { try next { try $0.integer(type, $1, within: $2) } }
    mutating func decode(_ type: UInt8.Type) throws -> UInt8 { try next { try $0.integer(type, $1, within: $2) } }
    mutating func decode(_ type: UInt16.Type) throws -> UInt16 { try next { try $0.integer(type, $1, within: $2) } }
    mutating func decode(_ type: UInt32.Type) throws -> UInt32 { try next { try $0.integer(type, $1, within: $2) } }
    mutating func decode(_ type: UInt64.Type) throws -> UInt64 { try next { try $0.integer(type, $1, within: $2) } }
    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T {
        try next { try BinaryDecoding.value(T.self, $0, at: $1, within: $2) }
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws -> KeyedDecodingContainer<NestedKey> {
        try next { KeyedDecodingContainer(try BinaryKeyedDecoding<NestedKey>(input: $0, at: $1, within: $2)) }
    }

    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
        try next { try BinaryUnkeyedDecoding(input: $0, at: $1, within: $2) }
    }

    mutating func superDecoder() throws -> any Decoder {
        try next { BinaryDecoding(input: $0, offset: $1, end: $2) }
    }
}
