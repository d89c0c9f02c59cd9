extension JSONWriter {
    /// Appends `value` as its `encode(to:)` describes it, straight into the buffer (no tree of
    /// values is built): each object's members in the order `encode(to:)` writes them, except
    /// those of a `[String: T]` dictionary, which are written in `keyOrder`. The documents of this
    /// module write their members in `keyOrder`, so they come out as docs/json.md shows them (and
    /// a debug build traps on a member written out of order). A value that writes nothing is
    /// written as `{}`. `codingPath` is always empty and `userInfo` has nothing.
    ///
    /// Throws what `encode(to:)` throws; the encoder itself never throws.
    public mutating func write(_ value: some Encodable) throws {
        let encoder = JSONStreamEncoder(writer: self)
        self = JSONWriter()  // the buffer now has one owner, the encoder: appending copies nothing
        defer { self = encoder.writer }
        try encoder.encodeValue(value)
    }
}

/// The `Encoder` behind `JSONWriter.write(_:)`. It writes as the value encodes itself: a
/// container's opening bracket when the container is asked for, each member or element as it is
/// encoded, and the closing bracket once the value that opened the container has been encoded
/// (or when its parent writes its next member, for a container opened with `nestedContainer`).
final class JSONStreamEncoder: Encoder {
    var writer: JSONWriter
    /// The closing bracket of each container open, innermost last.
    private var open: [UInt8] = []
    /// `open.count` when the value being encoded started: the containers it opens lie above it.
    private var valueDepth = 0
    /// A member's key, or an element's comma, has been written and its value not yet.
    var awaitingValue = true

    init(writer: JSONWriter) {
        self.writer = writer
        open.reserveCapacity(8)
    }

    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        keyedContainer(forValueAt: valueDepth)
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        UnkeyedContainer(encoder: self, level: openContainer(UInt8(ascii: "]"), forValueAt: valueDepth))
    }

    func singleValueContainer() -> any SingleValueEncodingContainer {
        SingleValueContainer(encoder: self)
    }

    func keyedContainer<Key: CodingKey>(forValueAt depth: Int) -> KeyedEncodingContainer<Key> {
        KeyedEncodingContainer(KeyedContainer<Key>(encoder: self, level: openContainer(UInt8(ascii: "}"), forValueAt: depth)))
    }

    /// Encodes one value where a value is awaited (the document, a member's value, an element).
    func encodeValue<T: Encodable>(_ value: T) throws {
        let outer = valueDepth
        valueDepth = open.count
        defer { valueDepth = outer }
        if let object = value as? any SortedObject {
            try object.encodeSorted(to: self)
        } else {
            try value.encode(to: self)
        }
        close(downTo: valueDepth)
        if awaitingValue { writeEmptyObject() }
    }

    /// The container of the value that started at `depth`: opened now, or the one it opened
    /// already when it asks again. Returns the container's level (`open.count` while it is the
    /// innermost).
    func openContainer(_ closer: UInt8, forValueAt depth: Int) -> Int {
        if open.count > depth {
            close(downTo: depth + 1)
            return depth + 1
        }
        willWriteValue()
        if closer == UInt8(ascii: "}") { writer.beginObject() } else { writer.beginArray() }
        open.append(closer)
        return open.count
    }

    /// An encoder for the value just begun (a member's or an element's, for `superEncoder`).
    func encoderForValue() -> any Encoder {
        ValueEncoder(base: self, depth: open.count)
    }

    /// Opens a container as the value of the member or element just begun (`nestedContainer`).
    func openNested(_ closer: UInt8) -> Int {
        willWriteValue()
        if closer == UInt8(ascii: "}") { writer.beginObject() } else { writer.beginArray() }
        open.append(closer)
        return open.count
    }

    /// Closes the containers above `level`, innermost first.
    func close(downTo level: Int) {
        while open.count > level {
            if awaitingValue { writeEmptyObject() }
            if open.removeLast() == UInt8(ascii: "}") { writer.endObject() } else { writer.endArray() }
        }
    }

    /// Begins a member or an element of the container at `level`: what was opened above it is
    /// closed, and a member left without a value gets `{}`.
    func beginEntry(level: Int) {
        close(downTo: level)
        if awaitingValue { writeEmptyObject() }
    }

    /// A value is about to be written where one is awaited.
    @inline(__always)
    func willWriteValue() {
        awaitingValue = false
    }

    private func writeEmptyObject() {
        awaitingValue = false
        writer.beginObject()
        writer.endObject()
    }

    /// A member's key, or an element's comma, was written: its value follows.
    func willAwaitValue() {
        awaitingValue = true
    }

    func write(_ value: Bool) {
        willWriteValue()
        writer.bool(value)
    }

    func write(_ value: String) {
        willWriteValue()
        writer.string(value)
    }

    func write(_ value: Double) {
        willWriteValue()
        writer.number(value)
    }

    func write(_ value: some BinaryInteger) {
        willWriteValue()
        writer.integer(value)
    }

    func writeNull() {
        willWriteValue()
        writer.null()
    }
}

/// A `[String: T]` dictionary, written with its keys in `JSONWriter.keyOrder` (Swift encodes a
/// dictionary in its own, unstable, order).
protocol SortedObject {
    func encodeSorted(to encoder: JSONStreamEncoder) throws
}

extension Dictionary: SortedObject where Key == String, Value: Encodable {
    func encodeSorted(to encoder: JSONStreamEncoder) throws {
        var container = encoder.container(keyedBy: NameKey.self)
        for key in keys.sorted(by: JSONWriter.keyOrder) {
            try container.encode(self[key]!, forKey: NameKey(key))
        }
    }
}

/// The encoder `superEncoder` hands out: the value it encodes starts where the member's key (or
/// the element's comma) was written, whatever is encoded around it later.
struct ValueEncoder: Encoder {
    let base: JSONStreamEncoder
    let depth: Int

    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        base.keyedContainer(forValueAt: depth)
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        UnkeyedContainer(encoder: base, level: base.openContainer(UInt8(ascii: "]"), forValueAt: depth))
    }

    func singleValueContainer() -> any SingleValueEncodingContainer {
        SingleValueContainer(encoder: base)
    }
}

/// A coding key that is only a name.
struct NameKey: CodingKey {
    var stringValue: String
    var intValue: Int? { nil }
    init(_ name: String) { stringValue = name }
    init?(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { nil }
}

struct KeyedContainer<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let encoder: JSONStreamEncoder
    let level: Int
    #if DEBUG
    /// The last key written, to check that members come in `keyOrder`.
    var lastKey: String?
    #endif

    var codingPath: [any CodingKey] { [] }

    private mutating func begin(_ key: Key) {
        encoder.beginEntry(level: level)
        let name = key.stringValue
        #if DEBUG
        if let lastKey { assert(JSONWriter.keyOrder(lastKey, name), "member '\(name)' written after '\(lastKey)': not in keyOrder") }
        lastKey = name
        #endif
        encoder.writer.member(key: name)
        encoder.willAwaitValue()
    }

    mutating func encodeNil(forKey key: Key) throws { begin(key); encoder.writeNull() }
    mutating func encode(_ value: Bool, forKey key: Key) throws { begin(key); encoder.write(value) }
    mutating func encode(_ value: String, forKey key: Key) throws { begin(key); encoder.write(value) }
    mutating func encode(_ value: Double, forKey key: Key) throws { begin(key); encoder.write(value) }
    mutating func encode(_ value: Float, forKey key: Key) throws { begin(key); encoder.write(Double(value)) }
    mutating func encode(_ value: Int, forKey key: Key) throws { begin(key); encoder.write(value) }
    mutating func encode(_ value: Int8, forKey key: Key) throws { begin(key); encoder.write(value) }
    mutating func encode(_ value: Int16, forKey key: Key) throws { begin(key); encoder.write(value) }
    mutating func encode(_ value: Int32, forKey key: Key) throws { begin(key); encoder.write(value) }
    mutating func encode(_ value: Int64, forKey key: Key) throws { begin(key); encoder.write(value) }
    mutating func encode(_ value: UInt, forKey key: Key) throws { begin(key); encoder.write(value) }
    mutating func encode(_ value: UInt8, forKey key: Key) throws { begin(key); encoder.write(value) }
    mutating func encode(_ value: UInt16, forKey key: Key) throws { begin(key); encoder.write(value) }
    mutating func encode(_ value: UInt32, forKey key: Key) throws { begin(key); encoder.write(value) }
    mutating func encode(_ value: UInt64, forKey key: Key) throws { begin(key); encoder.write(value) }

    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
        begin(key)
        try encoder.encodeValue(value)
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key) -> KeyedEncodingContainer<NestedKey> {
        begin(key)
        return KeyedEncodingContainer(KeyedContainer<NestedKey>(encoder: encoder, level: encoder.openNested(UInt8(ascii: "}"))))
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        begin(key)
        return UnkeyedContainer(encoder: encoder, level: encoder.openNested(UInt8(ascii: "]")))
    }

    /// The value of member `super`, written by whoever encodes into it (`{}` if nobody does).
    mutating func superEncoder() -> any Encoder {
        encoder.beginEntry(level: level)
        encoder.writer.member(key: "super")
        encoder.willAwaitValue()
        return encoder.encoderForValue()
    }

    mutating func superEncoder(forKey key: Key) -> any Encoder {
        begin(key)
        return encoder.encoderForValue()
    }
}

struct UnkeyedContainer: UnkeyedEncodingContainer {
    let encoder: JSONStreamEncoder
    let level: Int
    private(set) var count = 0

    init(encoder: JSONStreamEncoder, level: Int) {
        self.encoder = encoder
        self.level = level
    }

    var codingPath: [any CodingKey] { [] }

    private mutating func begin() {
        encoder.beginEntry(level: level)
        encoder.writer.element()
        encoder.willAwaitValue()
        count += 1
    }

    mutating func encodeNil() throws { begin(); encoder.writeNull() }
    mutating func encode(_ value: Bool) throws { begin(); encoder.write(value) }
    mutating func encode(_ value: String) throws { begin(); encoder.write(value) }
    mutating func encode(_ value: Double) throws { begin(); encoder.write(value) }
    mutating func encode(_ value: Float) throws { begin(); encoder.write(Double(value)) }
    mutating func encode(_ value: Int) throws { begin(); encoder.write(value) }
    mutating func encode(_ value: Int8) throws { begin(); encoder.write(value) }
    mutating func encode(_ value: Int16) throws { begin(); encoder.write(value) }
    mutating func encode(_ value: Int32) throws { begin(); encoder.write(value) }
    mutating func encode(_ value: Int64) throws { begin(); encoder.write(value) }
    mutating func encode(_ value: UInt) throws { begin(); encoder.write(value) }
    mutating func encode(_ value: UInt8) throws { begin(); encoder.write(value) }
    mutating func encode(_ value: UInt16) throws { begin(); encoder.write(value) }
    mutating func encode(_ value: UInt32) throws { begin(); encoder.write(value) }
    mutating func encode(_ value: UInt64) throws { begin(); encoder.write(value) }

    mutating func encode<T: Encodable>(_ value: T) throws {
        begin()
        try encoder.encodeValue(value)
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
        begin()
        return KeyedEncodingContainer(KeyedContainer<NestedKey>(encoder: encoder, level: encoder.openNested(UInt8(ascii: "}"))))
    }

    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
        begin()
        return UnkeyedContainer(encoder: encoder, level: encoder.openNested(UInt8(ascii: "]")))
    }

    mutating func superEncoder() -> any Encoder {
        begin()
        return encoder.encoderForValue()
    }
}

struct SingleValueContainer: SingleValueEncodingContainer {
    let encoder: JSONStreamEncoder

    var codingPath: [any CodingKey] { [] }

    mutating func encodeNil() throws { encoder.writeNull() }
    mutating func encode(_ value: Bool) throws { encoder.write(value) }
    mutating func encode(_ value: String) throws { encoder.write(value) }
    mutating func encode(_ value: Double) throws { encoder.write(value) }
    mutating func encode(_ value: Float) throws { encoder.write(Double(value)) }
    mutating func encode(_ value: Int) throws { encoder.write(value) }
    mutating func encode(_ value: Int8) throws { encoder.write(value) }
    mutating func encode(_ value: Int16) throws { encoder.write(value) }
    mutating func encode(_ value: Int32) throws { encoder.write(value) }
    mutating func encode(_ value: Int64) throws { encoder.write(value) }
    mutating func encode(_ value: UInt) throws { encoder.write(value) }
    mutating func encode(_ value: UInt8) throws { encoder.write(value) }
    mutating func encode(_ value: UInt16) throws { encoder.write(value) }
    mutating func encode(_ value: UInt32) throws { encoder.write(value) }
    mutating func encode(_ value: UInt64) throws { encoder.write(value) }
    mutating func encode<T: Encodable>(_ value: T) throws { try encoder.encodeValue(value) }
}
