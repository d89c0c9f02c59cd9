/// The layout of a shared defaults suite, as the daemon writes it into the mapping it hands to
/// members and into its state file (docs/defaults.md, "The mapping"), little-endian:
///
/// | offset | field |
/// |---|---|
/// | 0 | magic `EXTDFLT1` |
/// | 8 | sequence, u64: odd while the daemon rewrites the suite (a seqlock) |
/// | 16 | used, u32: bytes of the area in use |
/// | 20 | count, u32: entries |
/// | 24–63 | zero |
/// | 64 | the area: `count` u32 offsets of the entries (from the area's start, sorted by key bytewise), then the entries: u32 key length, key, u32 value length, value (`DefaultsValue`'s encoding) |
///
/// The reading functions check every offset and length against the area, so a torn read
/// (the sequence changed meanwhile, and the caller retries) never reads out of bounds.
public enum SuiteLayout {
    /// The first 8 bytes.
    public static let magic: [UInt8] = Array("EXTDFLT1".utf8)
    /// Where the area starts.
    public static let headerSize = 64
    /// Where the sequence (u64) is.
    public static let sequenceOffset = 8
    /// Where `used` (u32) is.
    public static let usedOffset = 16
    /// Where `count` (u32) is.
    public static let countOffset = 20
    /// The largest area (`WireLimits.maxDefaultsSuite`).
    public static let capacity = WireLimits.maxDefaultsSuite
    /// The size of every mapping: the header and the largest area.
    public static let mappingSize = headerSize + capacity

    /// The bytes one entry takes in the area, its offset included.
    public static func entrySize(key: String, valueCount: Int) -> Int { 4 + 4 + key.utf8.count + 4 + valueCount }

    /// The area holding `entries` (key → a value's encoding).
    public static func area(_ entries: [String: [UInt8]]) -> [UInt8] {
        area(bytes: Dictionary(entries.map { (Array($0.key.utf8), $0.value) }, uniquingKeysWith: { a, _ in a }))
    }

    /// The area holding `entries` (a key's UTF-8 bytes → a value's encoding): keys told apart by
    /// their bytes, as readers look them up (two canonically equivalent spellings are two keys).
    public static func area(bytes entries: [[UInt8]: [UInt8]]) -> [UInt8] {
        let keys = entries.keys.sorted { $0.lexicographicallyPrecedes($1) }
        var table: [UInt8] = []
        var body: [UInt8] = []
        table.reserveCapacity(keys.count * 4)
        let tableSize = keys.count * 4
        for key in keys {
            let value = entries[key]!
            append32(tableSize + body.count, to: &table)
            append32(key.count, to: &body)
            body.append(contentsOf: key)
            append32(value.count, to: &body)
            body.append(contentsOf: value)
        }
        return table + body
    }

    /// A whole suite file: header (sequence 0) and area.
    public static func file(_ entries: [String: [UInt8]]) -> [UInt8] {
        file(bytes: Dictionary(entries.map { (Array($0.key.utf8), $0.value) }, uniquingKeysWith: { a, _ in a }))
    }

    /// A whole suite file, keys by their bytes.
    public static func file(bytes entries: [[UInt8]: [UInt8]]) -> [UInt8] {
        let area = area(bytes: entries)
        var header = magic + [UInt8](repeating: 0, count: headerSize - magic.count)
        put32(area.count, at: usedOffset, in: &header)
        put32(entries.count, at: countOffset, in: &header)
        return header + area
    }

    /// The entries of a suite file, checked; throws naming what is malformed.
    public static func entries(ofFile bytes: [UInt8]) throws(DefaultsValueError) -> [String: [UInt8]] {
        guard bytes.count >= headerSize, Array(bytes[0..<magic.count]) == magic else { throw DefaultsValueError("not a defaults suite (no EXTDFLT1 header)") }
        let decoded = bytes.withUnsafeBytes { raw in
            Result { () throws(DefaultsValueError) -> [String: [UInt8]] in
                let used = Int(raw.loadUnaligned(fromByteOffset: usedOffset, as: UInt32.self).littleEndian)
                let count = Int(raw.loadUnaligned(fromByteOffset: countOffset, as: UInt32.self).littleEndian)
                guard used == raw.count - headerSize, used <= capacity else { throw DefaultsValueError("its size is not what its header says") }
                let area = UnsafeRawBufferPointer(rebasing: raw[headerSize...])
                var out: [String: [UInt8]] = [:]
                for (key, value) in try self.entries(in: area, count: count) {
                    if let problem = DefaultsValue.problem(Array(area[value])) { throw DefaultsValueError("the value of '\(key)': \(problem)") }
                    out[key] = Array(area[value])
                }
                return out
            }
        }
        return try decoded.get()
    }

    /// Where the value of `key` is in `area` (`count` entries), or nil when there is no such key.
    /// Throws when an offset or length leaves the area.
    public static func find(_ key: UnsafeRawBufferPointer, in area: UnsafeRawBufferPointer, count: Int) throws(DefaultsValueError) -> Range<Int>? {
        guard count >= 0, count <= area.count / 12 else { throw DefaultsValueError("the entry count is out of range") }
        var low = 0, high = count
        while low < high {
            let mid = (low + high) / 2
            let (keyRange, valueRange) = try entry(mid, in: area)
            let candidate = UnsafeRawBufferPointer(rebasing: area[keyRange])
            if candidate.elementsEqual(key) { return valueRange }
            if candidate.lexicographicallyPrecedes(key) { low = mid + 1 } else { high = mid }
        }
        return nil
    }

    /// Every entry of `area` (`count` entries): its key, and where its value is. Throws when
    /// an offset or length leaves the area, or a key is not UTF-8.
    public static func entries(in area: UnsafeRawBufferPointer, count: Int) throws(DefaultsValueError) -> [(key: String, value: Range<Int>)] {
        guard count >= 0, count <= area.count / 12 else { throw DefaultsValueError("the entry count is out of range") }
        var out: [(key: String, value: Range<Int>)] = []
        out.reserveCapacity(count)
        for i in 0..<count {
            let (keyRange, valueRange) = try entry(i, in: area)
            guard let key = String(validating: UnsafeRawBufferPointer(rebasing: area[keyRange]), as: UTF8.self) else {
                throw DefaultsValueError("a key is not valid UTF-8")
            }
            out.append((key, valueRange))
        }
        return out
    }

    /// The key's and the value's ranges of entry `index`.
    private static func entry(_ index: Int, in area: UnsafeRawBufferPointer) throws(DefaultsValueError) -> (Range<Int>, Range<Int>) {
        func u32(_ at: Int) throws(DefaultsValueError) -> Int {
            guard at >= 0, at <= area.count - 4 else { throw DefaultsValueError("an offset leaves the suite") }
            return Int(area.loadUnaligned(fromByteOffset: at, as: UInt32.self).littleEndian)
        }
        let start = try u32(index * 4)
        let keyCount = try u32(start)
        guard keyCount <= area.count - start - 8 else { throw DefaultsValueError("a key leaves the suite") }
        let keyRange = start + 4..<start + 4 + keyCount
        let valueCount = try u32(keyRange.upperBound)
        let valueStart = keyRange.upperBound + 4
        guard valueCount <= area.count - valueStart else { throw DefaultsValueError("a value leaves the suite") }
        return (keyRange, valueStart..<valueStart + valueCount)
    }

    private static func append32(_ v: Int, to out: inout [UInt8]) {
        withUnsafeBytes(of: UInt32(v).littleEndian) { out.append(contentsOf: $0) }
    }

    private static func put32(_ v: Int, at offset: Int, in out: inout [UInt8]) {
        withUnsafeBytes(of: UInt32(v).littleEndian) { for (i, b) in $0.enumerated() { out[offset + i] = b } }
    }
}

extension DefaultsValue {
    /// Whether `key` may name a defaults entry: 1 to `WireLimits.maxDefaultsKey` bytes of UTF-8,
    /// no NUL (nil), or what is wrong with it.
    public static func keyProblem(_ key: String) -> String? {
        if key.isEmpty { return "is empty" }
        if key.utf8.count > WireLimits.maxDefaultsKey { return "is \(key.utf8.count) bytes long, over \(WireLimits.maxDefaultsKey)" }
        if key.utf8.contains(0) { return "contains a NUL byte" }
        return nil
    }
}
