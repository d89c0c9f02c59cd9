extension JSONWriter {
    /// Appends `value` as its `encode(to:)` describes it, straight into the buffer (no tree of
    /// values is built), every object's members in `keyOrder` whatever order `encode(to:)` gives
    /// them in (a dictionary's included): an object whose members came out of order is put in
    /// order when it is closed. A value that writes nothing is written as `{}`. `codingPath` is
    /// always empty and `userInfo` has nothing.
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
    /// A container open.
    private struct Level {
        /// An object (else an array).
        var isObject: Bool
        /// Where its first member starts (right after `{`).
        var start: Int
        /// Each member's key and where it starts (at its comma, after the first).
        var members: [(name: String, offset: Int)] = []
        /// Its members so far are in `keyOrder`.
        var inOrder = true
    }

    /// The containers open, the innermost last.
    private var levels: [Level] = []
    /// How many containers are open.
    private var depth: Int { levels.count }
    /// `depth` when the value being encoded started: the containers it opens lie above it.
    private var valueDepth = 0
    /// A member's key, or an element's comma, has been written and its value not yet.
    var awaitingValue = true

    init(writer: JSONWriter) {
        self.writer = writer
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
        valueDepth = depth
        defer { valueDepth = outer }
        try value.encode(to: self)
        close(downTo: valueDepth)
        if awaitingValue { writeEmptyObject() }
    }

    /// The container of the value that started at `start`: opened now, or the one it opened
    /// already when it asks again. Returns the container's level (`depth` while it is the
    /// innermost).
    func openContainer(_ closer: UInt8, forValueAt start: Int) -> Int {
        if depth > start {
            close(downTo: start + 1)
            return start + 1
        }
        return openNested(closer)
    }

    /// An encoder for the value just begun (a member's or an element's, for `superEncoder`).
    func encoderForValue() -> any Encoder {
        ValueEncoder(base: self, depth: depth)
    }

    /// Opens a container as the value of the member or element just begun (`nestedContainer`).
    func openNested(_ closer: UInt8) -> Int {
        willWriteValue()
        let object = closer == UInt8(ascii: "}")
        if object { writer.beginObject() } else { writer.beginArray() }
        levels.append(Level(isObject: object, start: writer.bytes.count))
        return depth
    }

    /// Closes the containers above `level`, innermost first, putting each object's members in
    /// `keyOrder` if they are not.
    func close(downTo level: Int) {
        while depth > level {
            if awaitingValue { writeEmptyObject() }
            let closed = levels.removeLast()
            guard closed.isObject else {
                writer.endArray()
                continue
            }
            if !closed.inOrder { writer.sortMembers(from: closed.start, closed.members) }
            writer.endObject()
        }
    }

    /// Writes the key of a member of the object at `level` (the innermost), noting where it
    /// starts; its value follows.
    func beginMember(_ name: String, level: Int) {
        beginEntry(level: level)
        let index = level - 1
        if let last = levels[index].members.last?.name, !JSONWriter.keyOrder(last, name) { levels[index].inOrder = false }
        levels[index].members.append((name, writer.bytes.count))
        writer.member(key: name)
        awaitingValue = true
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

    /// Writes a value with `body`, straight into the buffer (a type's own fast writer).
    func writeValue(_ body: (inout JSONWriter) -> Void) {
        willWriteValue()
        body(&writer)
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

struct KeyedContainer<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let encoder: JSONStreamEncoder
    let level: Int

    var codingPath: [any CodingKey] { [] }

    private mutating func begin(_ key: Key) {
        encoder.beginMember(key.stringValue, level: level)
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
        encoder.beginMember("super", level: level)
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
