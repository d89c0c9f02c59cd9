/// A type that `BinaryEncoder` writes and `BinaryDecoder` reads without going through the
/// `Encoder` and `Decoder` protocols: its own code writes and reads its values in the binary
/// form (`BinaryFormat`), with no existential container, no generic call per field and no
/// allocation per value. For the values a hand-over document holds by the tens of thousands
/// (a record's recent events, instants), where the protocols' generic calls are most of the
/// cost of reading the document.
///
/// A conforming type keeps its `Codable` conformance, and the two must agree: `write(to:level:)`
/// writes exactly the bytes `encode(to:)` writes through `BinaryEncoder`, and
/// `init(binary:at:within:)` accepts exactly what `init(from:)` accepts through `BinaryDecoder`,
/// reading the same value and failing with the same error. So the form of the document does not
/// depend on which path wrote it, and `BinaryDirectCodingTests` checks both paths of every
/// conforming type against each other.
protocol BinaryDirectCodable: Codable {
    /// Writes the value at `level` (the level of the containers it opens), as `encode(to:)`
    /// would through `BinaryEncoder`.
    func write(to output: BinaryOutput, level: Int) throws

    /// The value at `offset`, inside a container ending at `end`, as `init(from:)` would read it
    /// through `BinaryDecoder`.
    init(binary input: BinaryInput, at offset: Int, within end: Int) throws
}

extension BinaryDirectCodable {
    /// The value `decoder` holds, read directly when `decoder` is `BinaryDecoder`'s; nil for any
    /// other decoder. A conforming type's `init(from:)` starts with it.
    static func directly(from decoder: any Decoder) throws -> Self? {
        guard let binary = decoder as? BinaryDecoding, binary.input.directCoding else { return nil }
        return try Self(binary: binary.input, at: binary.offset, within: binary.end)
    }

    /// Writes the value directly when `encoder` is `BinaryEncoder`'s, and says whether it did.
    /// A conforming type's `encode(to:)` starts with it.
    func wroteDirectly(to encoder: any Encoder) throws -> Bool {
        guard let binary = encoder as? BinaryEncoding, binary.output.directCoding else { return false }
        try write(to: binary.output, level: binary.level)
        return true
    }
}

/// The elements of an unkeyed container, read one after another by a `BinaryDirectCodable`
/// type. An error reading an element gets the element's index in front of its path (`[3]`),
/// as `BinaryDecoder`'s unkeyed container gives it.
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

    /// The next element, read by `body` from its offset and the container's end; moves past it.
    mutating func next<T>(_ body: (_ offset: Int, _ end: Int) throws -> T) throws -> T {
        guard index < count else {
            throw BinaryDecodingError(path: ["[\(index)]"], problem: "missing: the container has \(count) element(s)")
        }
        do {
            let value = try body(offset, end)
            offset = try input.skip(offset, within: end)
            index += 1
            return value
        } catch {
            throw BinaryDecodingError.inside("[\(index)]", error)
        }
    }

    /// The next element, or nil when it is nil (and then moves past it).
    mutating func nextUnlessNil<T>(_ body: (_ offset: Int, _ end: Int) throws -> T) throws -> T? {
        if index < count, try input.null(offset, within: end) {
            offset += 1
            index += 1
            return nil
        }
        return try next(body)
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

    /// A table of `pairs`, each a name and the value it stands for.
    init(_ pairs: [(String, Value)]) {
        var bytes: [UInt8] = []
        var starts: [Int] = []
        for (name, _) in pairs {
            starts.append(bytes.count)
            bytes += Array(name.utf8)
        }
        starts.append(bytes.count)
        self.bytes = bytes
        self.starts = starts
        values = pairs.map(\.1)
    }

    /// The value named by the string at `offset`, nil when no name matches; throws when there is
    /// no string there.
    func value(_ input: BinaryInput, at offset: Int, within end: Int) throws(BinaryDecodingError) -> Value? {
        let tag = try input.byte(offset, within: end)
        guard tag == BinaryFormat.string else { throw BinaryDecodingError(problem: "expected a string, found \(BinaryFormat.name(of: tag))") }
        let range = try input.text(offset + 1, within: end)
        return bytes.withUnsafeBytes { names in
            for i in values.indices where starts[i + 1] - starts[i] == range.count {
                if input.matches(range, UnsafeRawBufferPointer(rebasing: names[starts[i]..<starts[i + 1]])) { return values[i] }
            }
            return nil
        }
    }
}
