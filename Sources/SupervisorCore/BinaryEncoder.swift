/// Writes an `Encodable` value in the compact binary form of `BinaryFormat`, in one pass into one
/// buffer: a container's length is filled in when the next write outside it, or the end of the
/// value that made it, closes it.
///
/// Guarantees: what it writes, `BinaryDecoder` reads back as the same value (integers of every
/// width, doubles bit for bit, strings, nil, and the containers of any `Codable` type). It
/// throws `EncodingError.invalidValue` for what it cannot write: a container more than 4 GiB
/// long, a write into a container after a container nested in it was closed by a write to an
/// outer one, or a `superEncoder()`, which it does not support.
public struct BinaryEncoder {
    /// Whether `BinaryDirectCodable` types write themselves directly (always, but in the tests
    /// that compare the two paths).
    var directCoding = true

    /// An encoder.
    public init() {}

    /// `value` in the binary form, after `signature` (which `BinaryDecoder.decode` expects).
    public func encode<T: Encodable>(_ value: T, signature: [UInt8] = []) throws -> [UInt8] {
        let output = BinaryOutput()
        output.directCoding = directCoding
        output.append(signature)
        let start = output.count
        try value.encode(to: BinaryEncoding(output: output, level: 0))
        output.close(above: -1)
        if output.count == start { output.writeEmptyContainer() }
        if let failure = output.failure { throw EncodingError.invalidValue(value, .init(codingPath: [], debugDescription: failure)) }
        return output.bytes
    }
}

/// The buffer the containers of one `encode` write into, and the containers still open in it:
/// `open[i].header` is the offset of the header of the open container at nesting level `i`,
/// and `open[i].count` how many entries it has so far (a stack in memory of its own: it changes at
/// every container, and an `Array` checks uniqueness and capacity each time). The bytes are
/// kept in memory it manages itself too:
/// each value is a few bytes, and an `Array` append checks uniqueness and capacity each time.
package final class BinaryOutput {
    private var base: UnsafeMutablePointer<UInt8>
    private var capacity: Int
    /// How many bytes are written.
    private(set) var count = 0
    /// The open containers, outermost first: `depth` of them, in room for `stackCapacity`.
    private var open: UnsafeMutablePointer<(header: Int, count: UInt32)>
    private var depth = 0
    private var stackCapacity = 16
    /// The first thing that could not be written; `encode` throws it.
    var failure: String?
    /// Whether `BinaryDirectCodable` types write themselves directly.
    var directCoding = true

    init(capacity: Int = 64 * 1024) {
        self.capacity = capacity
        base = .allocate(capacity: capacity)
        open = .allocate(capacity: stackCapacity)
    }

    deinit {
        base.deallocate()
        open.deallocate()
    }

    /// The bytes written.
    var bytes: [UInt8] { Array(UnsafeBufferPointer(start: base, count: count)) }

    /// Makes room for `n` more bytes.
    @inline(__always) private func reserve(_ n: Int) {
        guard count + n > capacity else { return }
        var grown = capacity * 2
        while count + n > grown { grown *= 2 }
        let bigger = UnsafeMutablePointer<UInt8>.allocate(capacity: grown)
        bigger.update(from: base, count: count)
        base.deallocate()
        base = bigger
        capacity = grown
    }

    @inline(__always) func append(_ byte: UInt8) {
        reserve(1)
        base[count] = byte
        count += 1
    }

    func append(_ bytes: UnsafeBufferPointer<UInt8>) {
        reserve(bytes.count)
        if let from = bytes.baseAddress { (base + count).update(from: from, count: bytes.count) }
        count += bytes.count
    }

    func append(_ bytes: [UInt8]) { bytes.withUnsafeBufferPointer { append($0) } }

    /// Fills in the length and count of every open container deeper than `level`, innermost
    /// first.
    func close(above level: Int) {
        while depth > level + 1 {
            depth -= 1
            let (header, entries) = open[depth]
            let length = count - header - 5
            guard length <= Int(UInt32.max) else {
                failure = failure ?? "a container is longer than 4 GiB"
                continue
            }
            store(UInt32(length), at: header + 1)
            store(entries, at: header + 5)
        }
    }

    /// Whether the container whose header is at `header`, at `level`, may be written to: it is
    /// still open (closing whatever is nested in it), else records why not.
    func reopen(_ header: Int, level: Int) -> Bool {
        guard depth > level, open[level].header == header else {
            failure = failure ?? "a container was written to after a container nested in it was closed"
            return false
        }
        close(above: level)
        return true
    }

    /// Opens a container with `tag` at the end, at `level`; returns its header's offset.
    func openContainer(_ tag: UInt8, level: Int) -> Int {
        close(above: level - 1)
        let header = count
        reserve(BinaryFormat.containerHeader)
        base[count] = tag
        (base + count + 1).initialize(repeating: 0, count: 8)
        count += BinaryFormat.containerHeader
        if depth == stackCapacity {
            let bigger = UnsafeMutablePointer<(header: Int, count: UInt32)>.allocate(capacity: stackCapacity * 2)
            bigger.moveInitialize(from: open, count: depth)
            open.deallocate()
            open = bigger
            stackCapacity *= 2
        }
        (open + depth).initialize(to: (header, 0))
        depth += 1
        return header
    }

    /// Counts one more entry in the open container at `level` (`reopen` made it the innermost).
    func countEntry(level: Int) {
        assert(level < depth, "an entry counted in a container that is not open")
        open[level].count &+= 1
    }

    func writeEmptyContainer() {
        reserve(BinaryFormat.containerHeader)
        base[count] = BinaryFormat.keyed
        count += 1
        store(4, at: count)
        store(0, at: count + 4)
        count += 8
    }

    private func store(_ value: UInt32, at offset: Int) {
        UnsafeMutableRawPointer(base + offset).storeBytes(of: value.littleEndian, as: UInt32.self)
    }

    @inline(__always) func leb128(_ value: UInt64) {
        reserve(10)
        var v = value
        while v >= 0x80 {
            base[count] = UInt8(truncatingIfNeeded: v) | 0x80
            count += 1
            v >>= 7
        }
        base[count] = UInt8(v)
        count += 1
    }

    func text(_ value: String) {
        var s = value
        s.withUTF8 { utf8 in
            leb128(UInt64(utf8.count))
            append(utf8)
        }
    }

    func key(_ key: some CodingKey) {
        text(key.stringValue)
    }

    func null() { append(BinaryFormat.null) }
    func bool(_ value: Bool) { append(value ? BinaryFormat.trueValue : BinaryFormat.falseValue) }
    func double(_ value: Double) {
        reserve(9)
        base[count] = BinaryFormat.double
        UnsafeMutableRawPointer(base + count + 1).storeBytes(of: value.bitPattern.littleEndian, as: UInt64.self)
        count += 9
    }
    func string(_ value: String) {
        append(BinaryFormat.string)
        text(value)
    }
    func integer<T: BinaryInteger>(_ value: T) {
        if value >= 0 {
            append(BinaryFormat.unsigned)
            leb128(UInt64(value))
        } else {
            append(BinaryFormat.negative)
            leb128(UInt64(-(Int64(value) + 1)))
        }
    }

    /// Writes `value` at `level` (the level of the containers it makes), then closes them:
    /// directly when it is `BinaryDirectCodable` and this output writes directly (the same
    /// bytes, by that protocol's contract), else by `encode(to:)`. Every value of a keyed or
    /// unkeyed container is written through here; a single-value container's goes to its
    /// `encode(to:)`.
    func value<T: Encodable>(_ value: T, level: Int) throws {
        let start = count
        if directCoding, let direct = value as? any BinaryDirectCodable {
            try direct.write(to: self, level: level)
        } else {
            try value.encode(to: BinaryEncoding(output: self, level: level))
        }
        close(above: level - 1)
        if count == start { writeEmptyContainer() }
    }
}

/// The `Encoder` handed to each value's `encode(to:)`.
struct BinaryEncoding: Encoder {
    let output: BinaryOutput
    /// The nesting level of the containers this value makes.
    let level: Int
    /// Empty: no type this encoder serves reads it, and building it would cost an allocation
    /// per value.
    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        KeyedEncodingContainer(BinaryKeyedEncoding<Key>(output: output, header: output.openContainer(BinaryFormat.keyed, level: level), level: level))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        BinaryUnkeyedEncoding(output: output, header: output.openContainer(BinaryFormat.unkeyed, level: level), level: level)
    }

    func singleValueContainer() -> any SingleValueEncodingContainer {
        BinarySingleValueEncoding(output: output, level: level)
    }
}

struct BinaryKeyedEncoding<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let output: BinaryOutput
    let header: Int
    let level: Int
    var codingPath: [any CodingKey] { [] }

    private func entry(_ key: Key) -> Bool {
        guard output.reopen(header, level: level) else { return false }
        output.countEntry(level: level)
        output.key(key)
        return true
    }

    mutating func encodeNil(forKey key: Key) throws { if entry(key) { output.null() } }
    mutating func encode(_ value: Bool, forKey key: Key) throws { if entry(key) { output.bool(value) } }
    mutating func encode(_ value: String, forKey key: Key) throws { if entry(key) { output.string(value) } }
    mutating func encode(_ value: Double, forKey key: Key) throws { if entry(key) { output.double(value) } }
    mutating func encode(_ value: Float, forKey key: Key) throws { if entry(key) { output.double(Double(value)) } }
    mutating func encode(_ value: Int, forKey key: Key) throws { if entry(key) { output.integer(value) } }
    mutating func encode(_ value: Int8, forKey key: Key) throws { if entry(key) { output.integer(value) } }
    mutating func encode(_ value: Int16, forKey key: Key) throws { if entry(key) { output.integer(value) } }
    mutating func encode(_ value: Int32, forKey key: Key) throws { if entry(key) { output.integer(value) } }
    mutating func encode(_ value: Int64, forKey key: Key) throws { if entry(key) { output.integer(value) } }
    mutating func encode(_ value: UInt, forKey key: Key) throws { if entry(key) { output.integer(value) } }
    mutating func encode(_ value: UInt8, forKey key: Key) throws { if entry(key) { output.integer(value) } }
    mutating func encode(_ value: UInt16, forKey key: Key) throws { if entry(key) { output.integer(value) } }
    mutating func encode(_ value: UInt32, forKey key: Key) throws { if entry(key) { output.integer(value) } }
    mutating func encode(_ value: UInt64, forKey key: Key) throws { if entry(key) { output.integer(value) } }
    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
        if entry(key) { try output.value(value, level: level + 1) }
    }

    // An absent optional is written as an explicit nil: a reader asking for it then finds it
    // where the cursor is, instead of looking through every entry to learn it is not there.
    mutating func encodeIfPresent(_ value: Bool?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) } else { try encodeNil(forKey: key) }
    }
    mutating func encodeIfPresent(_ value: String?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) } else { try encodeNil(forKey: key) }
    }
    mutating func encodeIfPresent(_ value: Double?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) } else { try encodeNil(forKey: key) }
    }
    mutating func encodeIfPresent(_ value: Float?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) } else { try encodeNil(forKey: key) }
    }
    mutating func encodeIfPresent(_ value: Int?, forKey key: Key) throws { if let value { try encode(value, forKey: key) } else { try encodeNil(forKey: key) } }
    mutating func encodeIfPresent(_ value: Int8?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) } else { try encodeNil(forKey: key) }
    }
    mutating func encodeIfPresent(_ value: Int16?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) } else { try encodeNil(forKey: key) }
    }
    mutating func encodeIfPresent(_ value: Int32?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) } else { try encodeNil(forKey: key) }
    }
    mutating func encodeIfPresent(_ value: Int64?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) } else { try encodeNil(forKey: key) }
    }
    mutating func encodeIfPresent(_ value: UInt?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) } else { try encodeNil(forKey: key) }
    }
    mutating func encodeIfPresent(_ value: UInt8?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) } else { try encodeNil(forKey: key) }
    }
    mutating func encodeIfPresent(_ value: UInt16?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) } else { try encodeNil(forKey: key) }
    }
    mutating func encodeIfPresent(_ value: UInt32?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) } else { try encodeNil(forKey: key) }
    }
    mutating func encodeIfPresent(_ value: UInt64?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) } else { try encodeNil(forKey: key) }
    }
    mutating func encodeIfPresent<T: Encodable>(_ value: T?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) } else { try encodeNil(forKey: key) }
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key) -> KeyedEncodingContainer<NestedKey> {
        _ = entry(key)
        return BinaryEncoding(output: output, level: level + 1).container(keyedBy: keyType)
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        _ = entry(key)
        return BinaryEncoding(output: output, level: level + 1).unkeyedContainer()
    }

    mutating func superEncoder() -> any Encoder { unsupportedSuperEncoder(output) }
    mutating func superEncoder(forKey key: Key) -> any Encoder { unsupportedSuperEncoder(output) }
}

struct BinaryUnkeyedEncoding: UnkeyedEncodingContainer {
    let output: BinaryOutput
    let header: Int
    let level: Int
    var codingPath: [any CodingKey] { [] }
    private(set) var count = 0

    init(output: BinaryOutput, header: Int, level: Int) {
        self.output = output
        self.header = header
        self.level = level
    }

    private mutating func element() -> Bool {
        guard output.reopen(header, level: level) else { return false }
        output.countEntry(level: level)
        count += 1
        return true
    }

    mutating func encodeNil() throws { if element() { output.null() } }
    mutating func encode(_ value: Bool) throws { if element() { output.bool(value) } }
    mutating func encode(_ value: String) throws { if element() { output.string(value) } }
    mutating func encode(_ value: Double) throws { if element() { output.double(value) } }
    mutating func encode(_ value: Float) throws { if element() { output.double(Double(value)) } }
    mutating func encode(_ value: Int) throws { if element() { output.integer(value) } }
    mutating func encode(_ value: Int8) throws { if element() { output.integer(value) } }
    mutating func encode(_ value: Int16) throws { if element() { output.integer(value) } }
    mutating func encode(_ value: Int32) throws { if element() { output.integer(value) } }
    mutating func encode(_ value: Int64) throws { if element() { output.integer(value) } }
    mutating func encode(_ value: UInt) throws { if element() { output.integer(value) } }
    mutating func encode(_ value: UInt8) throws { if element() { output.integer(value) } }
    mutating func encode(_ value: UInt16) throws { if element() { output.integer(value) } }
    mutating func encode(_ value: UInt32) throws { if element() { output.integer(value) } }
    mutating func encode(_ value: UInt64) throws { if element() { output.integer(value) } }
    mutating func encode<T: Encodable>(_ value: T) throws {
        if element() { try output.value(value, level: level + 1) }
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
        _ = element()
        return BinaryEncoding(output: output, level: level + 1).container(keyedBy: keyType)
    }

    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
        _ = element()
        return BinaryEncoding(output: output, level: level + 1).unkeyedContainer()
    }

    mutating func superEncoder() -> any Encoder { unsupportedSuperEncoder(output) }
}

struct BinarySingleValueEncoding: SingleValueEncodingContainer {
    let output: BinaryOutput
    let level: Int
    var codingPath: [any CodingKey] { [] }

    private func place() { output.close(above: level - 1) }

    mutating func encodeNil() throws { place(); output.null() }
    mutating func encode(_ value: Bool) throws { place(); output.bool(value) }
    mutating func encode(_ value: String) throws { place(); output.string(value) }
    mutating func encode(_ value: Double) throws { place(); output.double(value) }
    mutating func encode(_ value: Float) throws { place(); output.double(Double(value)) }
    mutating func encode(_ value: Int) throws { place(); output.integer(value) }
    mutating func encode(_ value: Int8) throws { place(); output.integer(value) }
    mutating func encode(_ value: Int16) throws { place(); output.integer(value) }
    mutating func encode(_ value: Int32) throws { place(); output.integer(value) }
    mutating func encode(_ value: Int64) throws { place(); output.integer(value) }
    mutating func encode(_ value: UInt) throws { place(); output.integer(value) }
    mutating func encode(_ value: UInt8) throws { place(); output.integer(value) }
    mutating func encode(_ value: UInt16) throws { place(); output.integer(value) }
    mutating func encode(_ value: UInt32) throws { place(); output.integer(value) }
    mutating func encode(_ value: UInt64) throws { place(); output.integer(value) }
    mutating func encode<T: Encodable>(_ value: T) throws { try value.encode(to: BinaryEncoding(output: output, level: level)) }
}

/// Records that a `superEncoder` was asked for, which `encode` then throws, and returns an
/// encoder whose writes go nowhere.
private func unsupportedSuperEncoder(_ output: BinaryOutput) -> any Encoder {
    output.failure = output.failure ?? "superEncoder() is not supported by the binary form"
    return BinaryEncoding(output: BinaryOutput(capacity: 16), level: 0)
}
