/// A type that writes and reads its values in the binary form (`BinaryFormat`) with its own
/// code, besides going through the `Encoder` and `Decoder` protocols: no existential container,
/// no generic call per member, no metadata lookup per container. For the values a hand-over
/// document holds by the thousands (its records, and in them the manifests and lifecycle
/// events), where those generic calls were most of the cost of reading it.
///
/// The direct path is taken from a parent on the direct path (`BinaryFields.direct`,
/// `BinaryElements.direct`), from `BinaryEncoder.encode(records:)` and
/// `BinaryDecoder.decode(records:)`, and by a type whose `init(from:)` and `encode(to:)` start
/// with `directly(from:)` and `wroteDirectly(to:)` (a lifecycle event).
///
/// A conforming type keeps its `Codable` conformance, and the two must agree: `write(to:level:)`
/// writes exactly the bytes `encode(to:)` writes through `BinaryEncoder`, and
/// `init(binary:at:within:)` accepts exactly what `init(from:)` accepts through `BinaryDecoder`,
/// reading the same value and failing with the same error. So the form of the document does not
/// depend on which path wrote it; `BinaryDirectCodingTests` checks the two paths against each
/// other on records that hold every conforming type.
package protocol BinaryDirectCodable: Codable {
    /// Writes the value at `level` (the level of the containers it opens), as `encode(to:)`
    /// would through `BinaryEncoder`.
    func write(to output: BinaryOutput, level: Int) throws

    /// The value at `offset`, inside a container ending at `end`, as `init(from:)` would read it
    /// through `BinaryDecoder`.
    init(binary input: BinaryInput, at offset: Int, within end: Int) throws
}

extension BinaryDirectCodable {
    /// The value `decoder` holds, read directly when `decoder` is `BinaryDecoder`'s; nil for any
    /// other decoder. A conforming type whose `init(from:)` is written by hand starts with it,
    /// so that a single-value container's `decode` of it is read directly too (the keyed and
    /// unkeyed containers reach every direct type through `BinaryDecoding.value`).
    static func directly(from decoder: any Decoder) throws -> Self? {
        guard let binary = decoder as? BinaryDecoding, binary.input.directCoding else { return nil }
        return try Self(binary: binary.input, at: binary.offset, within: binary.end)
    }

    /// Writes the value directly when `encoder` is `BinaryEncoder`'s, and says whether it did.
    /// A conforming type whose `encode(to:)` is written by hand starts with it, so that a
    /// single-value container's `encode` of it is written directly too (the keyed and unkeyed
    /// containers reach every direct type through `BinaryOutput.value`).
    func wroteDirectly(to encoder: any Encoder) throws -> Bool {
        guard let binary = encoder as? BinaryEncoding, binary.output.directCoding else { return false }
        try write(to: binary.output, level: binary.level)
        return true
    }
}

/// The single values a `BinaryDirectCodable` type reads, each with the offset right after it,
/// so a value is not looked at twice (once to read it, once to skip it). Each reads what the
/// `BinaryDecoder`'s single-value reads of the same type read, and fails where they fail.
extension BinaryInput {
    func integerAndNext<T: FixedWidthInteger>(_ type: T.Type, _ offset: Int, within end: Int) throws(BinaryDecodingError) -> (T, next: Int) {
        if try byte(offset, within: end) == BinaryFormat.unsigned {
            let (n, next) = try leb128(offset + 1, within: end)
            if let value = T(exactly: n) { return (value, next) }
        }
        // Negative, a double, or an error: as `integer` reads it.
        return (try integer(type, offset, within: end), try skip(offset, within: end))
    }

    func stringAndNext(_ offset: Int, within end: Int) throws(BinaryDecodingError) -> (String, next: Int) {
        let range = try stringBytes(offset, within: end)
        return (string(range), range.upperBound)
    }

    // MARK: Plain values: the common form, or nil for a reader to fall back on

    /// The integer at `offset` written as unsigned and fitting `T`, with the offset after it;
    /// nil for anything else (a negative number, a double, another value, a fault).
    func plainUnsigned<T: FixedWidthInteger>(_ type: T.Type, _ offset: Int, within end: Int) -> (T, next: Int)? {
        guard (try? byte(offset, within: end)) == BinaryFormat.unsigned, let (n, next) = try? leb128(offset + 1, within: end),
            let value = T(exactly: n)
        else { return nil }
        return (value, next)
    }

    /// `.some(nil)` with the offset after a nil at `offset`, else `plainUnsigned`.
    func plainUnsignedOrNil<T: FixedWidthInteger>(_ type: T.Type, _ offset: Int, within end: Int) -> (T?, next: Int)? {
        if (try? null(offset, within: end)) == true { return (nil, offset + 1) }
        return plainUnsigned(type, offset, within: end).map { ($0.0, $0.next) }
    }

    /// The string at `offset` with the offset after it; nil when there is none.
    func plainString(_ offset: Int, within end: Int) -> (String, next: Int)? {
        guard let range = try? stringBytes(offset, within: end) else { return nil }
        return (string(range), range.upperBound)
    }

    /// `.some(nil)` with the offset after a nil at `offset`, else `plainString`.
    func plainStringOrNil(_ offset: Int, within end: Int) -> (String?, next: Int)? {
        if (try? null(offset, within: end)) == true { return (nil, offset + 1) }
        return plainString(offset, within: end).map { ($0.0, $0.next) }
    }
}

/// The elements of an unkeyed container, read in order by a `BinaryDirectCodable` type. An
/// error reading an element gets the element's index in front of its path (`[3]`), and reading
/// past the last element is an error naming it, as `BinaryDecoder`'s unkeyed container does.
struct BinaryElements {
    let input: BinaryInput
    /// How many elements the container has.
    let count: Int
    /// Where the container ends.
    let end: Int
    /// Where the next element starts.
    private(set) var offset: Int
    private var index = 0

    /// The elements of the unkeyed container at `offset`, inside a container ending at `limit`.
    init(_ input: BinaryInput, at offset: Int, within limit: Int) throws(BinaryDecodingError) {
        self.input = input
        let container = try input.container(BinaryFormat.unkeyed, at: offset, within: limit)
        self.offset = container.entries
        count = container.count
        end = container.end
    }

    /// The next element, read by `read`, which returns it with the offset after it.
    fileprivate mutating func next<T>(_ read: (_ input: BinaryInput, _ offset: Int, _ end: Int) throws -> (T, next: Int)) throws -> T {
        guard index < count else {
            throw BinaryDecodingError(path: ["[\(index)]"], problem: "missing: the container has \(count) element(s)")
        }
        do {
            let (value, next) = try read(input, offset, end)
            offset = next
            index += 1
            return value
        } catch {
            throw BinaryDecodingError.inside("[\(index)]", error)
        }
    }

    /// Whether the next element is nil; moves past it when it is.
    private mutating func skipNil() throws -> Bool {
        guard index < count, try input.null(offset, within: end) else { return false }
        offset += 1
        index += 1
        return true
    }

    mutating func integer<T: FixedWidthInteger>(_ type: T.Type) throws -> T {
        try next { input, o, e in try input.integerAndNext(type, o, within: e) }
    }
    mutating func integerOrNil<T: FixedWidthInteger>(_ type: T.Type) throws -> T? { try skipNil() ? nil : try integer(type) }
    mutating func string() throws -> String { try next { input, o, e in try input.stringAndNext(o, within: e) } }
    mutating func stringOrNil() throws -> String? { try skipNil() ? nil : try string() }

    /// The value of the next element, a name in `names`, or nil when no name matches.
    mutating func name<Value>(in names: BinaryNames<Value>) throws -> Value? {
        try next { input, o, e in (try names.value(input, at: o, within: e), try input.skip(o, within: e)) }
    }

    /// The next element, of any decodable type, read by its `init(from:)`.
    mutating func value<T: Decodable>(_ type: T.Type) throws -> T {
        try next { input, o, e in (try BinaryDecoding.value(T.self, input, at: o, within: e), try input.skip(o, within: e)) }
    }

    mutating func valueOrNil<T: Decodable>(_ type: T.Type) throws -> T? { try skipNil() ? nil : try value(type) }

    /// The next element, of a `BinaryDirectCodable` type, read directly.
    mutating func direct<T: BinaryDirectCodable>(_ type: T.Type) throws -> T {
        try next { input, o, e in (try T(binary: input, at: o, within: e), try input.skip(o, within: e)) }
    }

    /// Every element, each of a `BinaryDirectCodable` type, read directly: what `[T]`'s
    /// `init(from:)` reads.
    static func list<T: BinaryDirectCodable>(_ type: T.Type, _ input: BinaryInput, at offset: Int, within end: Int) throws -> [T] {
        try all(input, at: offset, within: end) { try $0.direct(type) }
    }

    /// Every element, of a `BinaryCanonicalReadable` type, each read by `read`: what `[T]`'s
    /// `init(from:)` reads.
    static func canonicalValues<T: BinaryCanonicalReadable>(_ type: T.Type, _ input: BinaryInput, at offset: Int, within end: Int) throws -> [T] {
        try all(input, at: offset, within: end) { elements in
            try elements.next { input, o, e in (try T.read(input, at: o, within: e), try input.skip(o, within: e)) }
        }
    }

    /// Every element, of any decodable type, each read by its `init(from:)`: what `[T]`'s
    /// `init(from:)` reads.
    static func values<T: Decodable>(_ type: T.Type, _ input: BinaryInput, at offset: Int, within end: Int) throws -> [T] {
        try all(input, at: offset, within: end) { try $0.value(type) }
    }

    /// Every element of the unkeyed container at `offset`, each read by `next`.
    private static func all<T>(_ input: BinaryInput, at offset: Int, within end: Int, _ next: (inout BinaryElements) throws -> T) throws -> [T] {
        var elements = try BinaryElements(input, at: offset, within: end)
        var list: [T] = []
        list.reserveCapacity(elements.count)
        for _ in 0..<elements.count { list.append(try next(&elements)) }
        return list
    }

    /// Writes `values`, each of a `BinaryDirectCodable` type, directly at `level`: what `[T]`'s
    /// `encode(to:)` writes.
    static func write<T: BinaryDirectCodable>(_ values: [T], to output: BinaryOutput, level: Int) throws {
        try write(values, to: output, level: level) { try $0.write(to: output, level: level + 1) }
    }

    /// Writes an unkeyed container at `level` of `values`, each written by `one` (at
    /// `level + 1`).
    static func write<S: Sequence>(_ values: S, to output: BinaryOutput, level: Int, _ one: (S.Element) throws -> Void) rethrows {
        _ = output.openContainer(BinaryFormat.unkeyed, level: level)
        for value in values {
            output.countEntry(level: level)
            try one(value)
            output.close(above: level)
        }
    }
}

/// The members of a keyed container, found by their keys and read by a `BinaryDirectCodable`
/// type as `BinaryDecoder`'s keyed container reads them: a key is looked for from the member
/// after the last one found, around once; a required member that is absent is `missing`; an
/// optional one absent or nil is nil; an error reading a member gets its key in front of its
/// path.
package struct BinaryFields {
    let input: BinaryInput
    private let entries: Int
    private let count: Int
    /// Where the container ends.
    let end: Int
    private var cursor: Int
    private var cursorIndex = 0

    /// The members of the keyed container at `offset`, inside a container ending at `limit`.
    package init(_ input: BinaryInput, at offset: Int, within limit: Int) throws(BinaryDecodingError) {
        self.input = input
        (entries, count, end) = try input.container(BinaryFormat.keyed, at: offset, within: limit)
        cursor = entries
    }

    /// The offset of `key`'s value, or nil when the container has no such key.
    private mutating func find(_ key: StaticString) throws(BinaryDecodingError) -> Int? {
        let input = input
        guard
            let found = try input.find(
                from: cursor, index: cursorIndex, entries: entries, count: count, end: end,
                { range in key.withUTF8Buffer { input.matches(range, UnsafeRawBufferPointer($0)) } })
        else { return nil }
        cursor = found.next
        cursorIndex = found.nextIndex
        return found.value
    }

    /// `key`'s value, read by `read`; `missing` when there is none.
    mutating func required<T>(_ key: StaticString, _ read: (_ offset: Int) throws -> T) throws -> T {
        guard let offset = try find(key) else { throw BinaryDecodingError(path: ["\(key)"], problem: "missing") }
        do {
            return try read(offset)
        } catch {
            throw BinaryDecodingError.inside("\(key)", error)
        }
    }

    /// `key`'s value, read by `read`; nil when there is none or it is nil.
    mutating func optional<T>(_ key: StaticString, _ read: (_ offset: Int) throws -> T) throws -> T? {
        guard let offset = try find(key), try !input.null(offset, within: end) else { return nil }
        do {
            return try read(offset)
        } catch {
            throw BinaryDecodingError.inside("\(key)", error)
        }
    }

    /// `key`'s boolean; `missing` when there is no such member.
    package mutating func bool(_ key: StaticString) throws -> Bool { try required(key) { [input, end] in try input.bool($0, within: end) } }
    /// `key`'s number as a `Double` (an integer it holds exactly too).
    package mutating func double(_ key: StaticString) throws -> Double { try required(key) { [input, end] in try input.double($0, within: end) } }
    /// `key`'s string.
    package mutating func string(_ key: StaticString) throws -> String { try required(key) { [input, end] in try input.string($0, within: end) } }
    /// `key`'s string, or nil when the member is absent or nil.
    package mutating func stringIfPresent(_ key: StaticString) throws -> String? { try optional(key) { [input, end] in try input.string($0, within: end) } }
    /// `key`'s integer, which must fit `T`.
    package mutating func integer<T: FixedWidthInteger>(_ type: T.Type, _ key: StaticString) throws -> T {
        try required(key) { [input, end] in try input.integer(type, $0, within: end) }
    }
    /// `key`'s integer, which must fit `T`, or nil when the member is absent or nil.
    package mutating func integerIfPresent<T: FixedWidthInteger>(_ type: T.Type, _ key: StaticString) throws -> T? {
        try optional(key) { [input, end] in try input.integer(type, $0, within: end) }
    }
    /// `key`'s integer, which must fit an `Int32`. This and the other concrete integer
    /// overloads are for other modules: a generic method called from another module runs
    /// unspecialized, at several times the cost.
    package mutating func integer(_ type: Int32.Type, _ key: StaticString) throws -> Int32 {
        try required(key) { [input, end] in try input.integer(type, $0, within: end) }
    }
    /// `key`'s integer, which must fit a `UInt64`.
    package mutating func integer(_ type: UInt64.Type, _ key: StaticString) throws -> UInt64 {
        try required(key) { [input, end] in try input.integer(type, $0, within: end) }
    }
    /// `key`'s `Int32`, or nil when the member is absent or nil.
    package mutating func integerIfPresent(_ type: Int32.Type, _ key: StaticString) throws -> Int32? {
        try optional(key) { [input, end] in try input.integer(type, $0, within: end) }
    }
    /// `key`'s `UInt64`, or nil when the member is absent or nil.
    package mutating func integerIfPresent(_ type: UInt64.Type, _ key: StaticString) throws -> UInt64? {
        try optional(key) { [input, end] in try input.integer(type, $0, within: end) }
    }
    /// `key`'s `Int`, or nil when the member is absent or nil.
    package mutating func integerIfPresent(_ type: Int.Type, _ key: StaticString) throws -> Int? {
        try optional(key) { [input, end] in try input.integer(type, $0, within: end) }
    }
    /// `key`'s instant: its nanoseconds, as `Instant` writes itself.
    package mutating func instant(_ key: StaticString) throws -> Instant { Instant(nanoseconds: try integer(UInt64.self, key)) }
    /// `key`'s instant, or nil when the member is absent or nil.
    package mutating func instantIfPresent(_ key: StaticString) throws -> Instant? { try integerIfPresent(UInt64.self, key).map(Instant.init(nanoseconds:)) }

    /// `key`'s value of a `BinaryDirectCodable` type, read directly.
    package mutating func direct<T: BinaryDirectCodable>(_ type: T.Type, _ key: StaticString) throws -> T {
        try required(key) { [input, end] in try T(binary: input, at: $0, within: end) }
    }
    /// `key`'s value read directly, or nil when the member is absent or nil.
    package mutating func directIfPresent<T: BinaryDirectCodable>(_ type: T.Type, _ key: StaticString) throws -> T? {
        try optional(key) { [input, end] in try T(binary: input, at: $0, within: end) }
    }

    /// `key`'s value of any decodable type, read by its `init(from:)`.
    package mutating func value<T: Decodable>(_ type: T.Type, _ key: StaticString) throws -> T {
        try required(key) { [input, end] in try BinaryDecoding.value(T.self, input, at: $0, within: end) }
    }
    /// `key`'s value read by its `init(from:)` (directly for a direct type), or nil when the member is absent or nil.
    package mutating func valueIfPresent<T: Decodable>(_ type: T.Type, _ key: StaticString) throws -> T? {
        try optional(key) { [input, end] in try BinaryDecoding.value(T.self, input, at: $0, within: end) }
    }

    /// `key`'s value of a `BinaryCanonicalReadable` type: read without the generic containers
    /// when its bytes are in its encoder's form, else by its `init(from:)`.
    package mutating func canonical<T: BinaryCanonicalReadable>(_ type: T.Type, _ key: StaticString) throws -> T {
        try required(key) { [input, end] in try T.read(input, at: $0, within: end) }
    }
    /// `key`'s value read canonically, or nil when the member is absent or nil.
    package mutating func canonicalIfPresent<T: BinaryCanonicalReadable>(_ type: T.Type, _ key: StaticString) throws -> T? {
        try optional(key) { [input, end] in try T.read(input, at: $0, within: end) }
    }

    /// `key`'s list of values of a `BinaryCanonicalReadable` type, each read as `canonical`
    /// reads one: what `[T]`'s `init(from:)` reads, without the generic containers.
    package mutating func canonicalList<T: BinaryCanonicalReadable>(_ type: T.Type, _ key: StaticString) throws -> [T] {
        try required(key) { [input, end] in try BinaryElements.canonicalValues(type, input, at: $0, within: end) }
    }
    /// `key`'s list read canonically, element by element, or nil when the member is absent or nil.
    package mutating func canonicalListIfPresent<T: BinaryCanonicalReadable>(_ type: T.Type, _ key: StaticString) throws -> [T]? {
        try optional(key) { [input, end] in try BinaryElements.canonicalValues(type, input, at: $0, within: end) }
    }

    /// `key`'s list of values of any decodable type, each read by its `init(from:)`: what
    /// `[T]`'s `init(from:)` reads, without its generic container.
    package mutating func list<T: Decodable>(_ type: T.Type, _ key: StaticString) throws -> [T] {
        try required(key) { [input, end] in try BinaryElements.values(type, input, at: $0, within: end) }
    }
    /// `key`'s list, each element read by its `init(from:)`, or nil when the member is absent or nil.
    package mutating func listIfPresent<T: Decodable>(_ type: T.Type, _ key: StaticString) throws -> [T]? {
        try optional(key) { [input, end] in try BinaryElements.values(type, input, at: $0, within: end) }
    }

    /// `key`'s list of values of a `BinaryDirectCodable` type, each read directly.
    package mutating func directList<T: BinaryDirectCodable>(_ type: T.Type, _ key: StaticString) throws -> [T] {
        try required(key) { [input, end] in try BinaryElements.list(type, input, at: $0, within: end) }
    }
}

/// Writes the members of one keyed container for a `BinaryDirectCodable` type, as `BinaryEncoder`
/// writes what a synthesized `encode(to:)` asks for: each member's key, then its value; an absent
/// optional as an explicit nil.
package struct BinaryFieldWriter {
    let output: BinaryOutput
    let level: Int

    /// Opens the container at `level`.
    package init(_ output: BinaryOutput, level: Int) {
        self.output = output
        self.level = level
        _ = output.openContainer(BinaryFormat.keyed, level: level)
    }

    func key(_ key: StaticString) {
        output.countEntry(level: level)
        key.withUTF8Buffer { utf8 in
            output.leb128(UInt64(utf8.count))
            output.append(utf8)
        }
    }

    /// Writes `k` with `value`.
    package func bool(_ value: Bool, _ k: StaticString) {
        key(k)
        output.bool(value)
    }
    /// Writes `k` with `value`.
    package func double(_ value: Double, _ k: StaticString) {
        key(k)
        output.double(value)
    }
    /// Writes `k` with `value`.
    package func string(_ value: String, _ k: StaticString) {
        key(k)
        output.string(value)
    }
    /// Writes `k` with `value`, unsigned or negative as its sign says.
    package func integer<T: BinaryInteger>(_ value: T, _ k: StaticString) {
        key(k)
        output.integer(value)
    }
    /// Writes `k` with `value`. This and the other concrete integer overloads are for other
    /// modules (see `BinaryFields.integer(_:_:)`).
    package func integer(_ value: Int32, _ k: StaticString) {
        key(k)
        output.integer(value)
    }
    /// Writes `k` with `value`.
    package func integer(_ value: UInt64, _ k: StaticString) {
        key(k)
        output.integer(value)
    }
    /// Writes `k` with `value`.
    package func integer(_ value: Int, _ k: StaticString) {
        key(k)
        output.integer(value)
    }
    /// Writes `k` with `value`'s nanoseconds.
    package func instant(_ value: Instant, _ k: StaticString) { integer(value.nanoseconds, k) }

    /// Writes `k` with nil when `value` is nil, else `write(value, k)`.
    package func optional<T>(_ value: T?, _ k: StaticString, _ write: (T, StaticString) throws -> Void) rethrows {
        if let value { try write(value, k) } else { null(k) }
    }
    /// Writes `k` with nil.
    package func null(_ k: StaticString) {
        key(k)
        output.null()
    }

    /// A value of a `BinaryDirectCodable` type, written directly.
    package func direct<T: BinaryDirectCodable>(_ value: T, _ k: StaticString) throws {
        key(k)
        try value.write(to: output, level: level + 1)
        output.close(above: level)
    }

    /// A list of values of a `BinaryDirectCodable` type, each written directly.
    package func directList<T: BinaryDirectCodable>(_ values: [T], _ k: StaticString) throws {
        key(k)
        try BinaryElements.write(values, to: output, level: level + 1)
        output.close(above: level)
    }

    /// A list of values of any encodable type, each written by its `encode(to:)`: what `[T]`'s
    /// `encode(to:)` writes, without its generic container.
    package func list<S: Sequence>(_ values: S, _ k: StaticString) throws where S.Element: Encodable {
        key(k)
        try BinaryElements.write(values, to: output, level: level + 1) { [output, level] in try output.value($0, level: level + 2) }
        output.close(above: level)
    }

    /// A value of any encodable type, written by its `encode(to:)`.
    package func value<T: Encodable>(_ value: T, _ k: StaticString) throws {
        key(k)
        try output.value(value, level: level + 1)
    }
}

/// Values found by the UTF-8 bytes of their names, compared where they lie in a `BinaryInput`
/// without making a `String` of them: the names of an enum's cases.
struct BinaryNames<Value>: Sendable where Value: Sendable {
    /// Every name's bytes, one after another.
    private let bytes: [UInt8]
    /// Where each name starts in `bytes`, and where the last one ends.
    private let starts: [Int]
    private let values: [Value]
    /// For each length, the names of that length (their indexes).
    private let byLength: [[Int]]

    /// A table of `pairs`, each a name and the value it stands for.
    init(_ pairs: [(String, Value)]) {
        var bytes: [UInt8] = []
        var starts: [Int] = []
        var byLength: [[Int]] = []
        for (i, (name, _)) in pairs.enumerated() {
            starts.append(bytes.count)
            bytes += Array(name.utf8)
            let length = name.utf8.count
            if byLength.count <= length { byLength += Array(repeating: [], count: length + 1 - byLength.count) }
            byLength[length].append(i)
        }
        starts.append(bytes.count)
        self.bytes = bytes
        self.starts = starts
        self.byLength = byLength
        values = pairs.map(\.1)
    }

    /// The value named by the string at `offset`, nil when no name matches; throws when there is
    /// no string there.
    func value(_ input: BinaryInput, at offset: Int, within end: Int) throws(BinaryDecodingError) -> Value? {
        value(input, in: try input.stringBytes(offset, within: end))
    }

    /// The value named by the bytes in `range`, nil when no name matches.
    func value(_ input: BinaryInput, in range: Range<Int>) -> Value? {
        guard range.count < byLength.count else { return nil }
        return bytes.withUnsafeBytes { names in
            for i in byLength[range.count] where input.matches(range, UnsafeRawBufferPointer(rebasing: names[starts[i]..<starts[i + 1]])) {
                return values[i]
            }
            return nil
        }
    }
}

extension BinaryEncoder {
    /// `records` in the binary form: the bytes `encode(records)` writes, each record written
    /// directly (`BinaryDirectCodable`).
    public func encode(records: [ExtensionRecord]) throws -> [UInt8] {
        guard directCoding else { return try encode(records) }
        let output = BinaryOutput()
        try BinaryElements.write(records, to: output, level: 0)
        output.close(above: -1)
        if let failure = output.failure { throw EncodingError.invalidValue(records, .init(codingPath: [], debugDescription: failure)) }
        return output.bytes
    }
}

extension BinaryDecoder {
    /// The records `encode(records:)` wrote, which `bytes` hold exactly: what
    /// `decode([ExtensionRecord].self, from: bytes)` reads, each record read directly
    /// (`BinaryDirectCodable`), failing with the same errors.
    public func decode(records bytes: ArraySlice<UInt8>) throws -> [ExtensionRecord] {
        guard directCoding else { return try decode([ExtensionRecord].self, from: bytes) }
        guard !bytes.isEmpty else { throw BinaryDecodingError(problem: "no value: no bytes") }
        return try BinaryInput.reading(bytes, directCoding: true) { input in
            let end = try input.skip(0, within: bytes.count)
            guard end == bytes.count else { throw BinaryDecodingError(problem: "\(bytes.count - end) byte(s) after the value") }
            return try BinaryElements.list(ExtensionRecord.self, input, at: 0, within: end)
        }
    }
}
