import SupervisorCore
import Testing

/// `BinaryEncoder` and `BinaryDecoder`, the form of the hand-over document: every value reads
/// back as written, keys are found whatever order a type asks for them in, and bad bytes give an
/// error naming where, never a crash.
struct BinaryCodingTests {
    struct Everything: Codable, Equatable {
        var flag = true
        var off = false
        var text = "héllo\u{0}\u{1B}[31m"
        var empty = ""
        var int = Int.min
        var int8 = Int8.min
        var int16 = Int16.max
        var int32 = Int32(-1)
        var int64 = Int64.max
        var uint = UInt.max
        var uint8 = UInt8.max
        var uint16 = UInt16(0)
        var uint32 = UInt32.max
        var uint64 = UInt64.max
        var double = -0.0
        var tiny = Double.leastNonzeroMagnitude
        var float = Float(1.5)
        var absent: Int? = nil
        var present: String? = "yes"
        var list = [[1, 2], [], [3]]
        var map = ["a": [1.5], "b": []]
        var nested = Inner()
        var optionals: [Int?] = [nil, 1, nil]
    }

    struct Inner: Codable, Equatable {
        var name = "inner"
        var deep: [Inner] = []
    }

    @Test func everyKindOfValueReadsBackAsWritten() throws {
        var value = Everything()
        value.nested.deep = [Inner(name: "a", deep: [Inner(name: "b")]), Inner()]
        let bytes = try BinaryEncoder().encode(value, signature: Array("sig".utf8))
        #expect(bytes.starts(with: Array("sig".utf8)))
        let back = try BinaryDecoder().decode(Everything.self, from: bytes, signature: Array("sig".utf8))
        #expect(back == value)
        #expect(back.double.sign == .minus)
        let nan = try BinaryDecoder().decode(Double.self, from: try BinaryEncoder().encode(Double.nan))
        #expect(nan.isNaN)
    }

    /// Written in one order, read in another, with a key skipped and one absent.
    struct Reordered: Decodable {
        var c: String
        var a: Int
        var z: Int?
        enum Key: String, CodingKey { case a, b, c, z }
        init(from decoder: any Decoder) throws {
            let k = try decoder.container(keyedBy: Key.self)
            c = try k.decode(String.self, forKey: .c)
            z = try k.decodeIfPresent(Int.self, forKey: .z)
            a = try k.decode(Int.self, forKey: .a)
            #expect(k.contains(.b) && !k.contains(.z))
            #expect(Set(k.allKeys.map(\.stringValue)) == ["a", "b", "c"])
        }
    }

    struct Written: Encodable {
        var a = 1
        var b = [1, 2, 3]
        var c = "c"
    }

    @Test func keysAreFoundInAnyOrder() throws {
        let bytes = try BinaryEncoder().encode(Written())
        let read = try BinaryDecoder().decode(Reordered.self, from: bytes)
        #expect(read.c == "c" && read.a == 1 && read.z == nil)
    }

    /// A type that writes through nested containers, as a hand-written `encode(to:)` may.
    struct Nesting: Codable, Equatable {
        var pairs: [[String]]
        var inner: [String: Int]
        enum Key: String, CodingKey { case pairs, inner, after }
        struct AnyKey: CodingKey {
            var stringValue: String
            var intValue: Int? { nil }
            init(stringValue: String) { self.stringValue = stringValue }
            init?(intValue: Int) { nil }
        }

        init(pairs: [[String]], inner: [String: Int]) {
            self.pairs = pairs
            self.inner = inner
        }

        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: Key.self)
            var list = c.nestedUnkeyedContainer(forKey: .pairs)
            for pair in pairs {
                var sub = list.nestedUnkeyedContainer()
                for s in pair { try sub.encode(s) }
            }
            var map = c.nestedContainer(keyedBy: AnyKey.self, forKey: .inner)
            for (k, v) in inner.sorted(by: { $0.key < $1.key }) { try map.encode(v, forKey: AnyKey(stringValue: k)) }
            try c.encode(true, forKey: .after)
        }

        init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: Key.self)
            #expect(try c.decode(Bool.self, forKey: .after))
            var list = try c.nestedUnkeyedContainer(forKey: .pairs)
            pairs = []
            while !list.isAtEnd {
                var sub = try list.nestedUnkeyedContainer()
                var pair: [String] = []
                while !sub.isAtEnd { pair.append(try sub.decode(String.self)) }
                pairs.append(pair)
            }
            let map = try c.nestedContainer(keyedBy: AnyKey.self, forKey: .inner)
            inner = [:]
            for k in map.allKeys { inner[k.stringValue] = try map.decode(Int.self, forKey: k) }
        }
    }

    @Test func nestedContainersAreClosedByTheNextWriteOutsideThem() throws {
        let value = Nesting(pairs: [["a", "b"], [], ["c"]], inner: ["x": 1, "y": -2])
        #expect(try BinaryDecoder().decode(Nesting.self, from: try BinaryEncoder().encode(value)) == value)
    }

    struct Super: Encodable {
        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: Nesting.Key.self)
            _ = c.superEncoder()
        }
    }

    @Test func whatTheFormCannotHoldIsAnErrorNotALoss() {
        #expect(throws: EncodingError.self) { try BinaryEncoder().encode(Super()) }
    }

    @Test func anIntegerThatDoesNotFitIsAnErrorNamingItsPlace() throws {
        struct Wide: Encodable { var inner = [["n": 300]] }
        struct Narrow: Decodable { var inner: [[String: UInt8]] }
        let bytes = try BinaryEncoder().encode(Wide())
        #expect(throws: BinaryDecodingError(path: ["inner", "[0]", "n"], problem: "300 does not fit UInt8")) {
            try BinaryDecoder().decode(Narrow.self, from: bytes)
        }
        struct Negative: Encodable { var n = -1 }
        struct Unsigned: Decodable { var n: UInt32 }
        let error = #expect(throws: BinaryDecodingError.self) { try BinaryDecoder().decode(Unsigned.self, from: try BinaryEncoder().encode(Negative())) }
        #expect(error?.description == "n: -1 does not fit UInt32")
    }

    @Test func numbersCrossBetweenIntegerAndFloatingPointOnlyWhenExact() throws {
        struct Numbers: Codable, Equatable { var a: Double; var b: Double; var c: Int }
        struct Written: Encodable { var a = 3; var b = -2; var c = 4.0 }
        #expect(try BinaryDecoder().decode(Numbers.self, from: try BinaryEncoder().encode(Written())) == Numbers(a: 3, b: -2, c: 4))
        struct Fraction: Encodable { var a = 1.0; var b = 1.0; var c = 4.5 }
        #expect(throws: BinaryDecodingError(path: ["c"], problem: "4.5 does not fit Int")) {
            try BinaryDecoder().decode(Numbers.self, from: try BinaryEncoder().encode(Fraction()))
        }
        struct Huge: Encodable { var a = Int64.max; var b = 1; var c = 1 }
        #expect(throws: BinaryDecodingError(path: ["a"], problem: "\(Int64.max) is not exactly a Double")) {
            try BinaryDecoder().decode(Numbers.self, from: try BinaryEncoder().encode(Huge()))
        }
    }

    @Test func aMissingKeyOrAWrongTypeIsNamedByItsPath() throws {
        struct Wrong: Decodable { var nested: Inner; var list: [Int] }
        struct Right: Encodable { var nested = ["name": 5]; var list = [1] }
        let error = #expect(throws: BinaryDecodingError.self) { try BinaryDecoder().decode(Wrong.self, from: try BinaryEncoder().encode(Right())) }
        #expect(error?.description == "nested.name: expected a string, found an integer")
        struct Short: Encodable { var nested = Inner() }
        let missing = #expect(throws: BinaryDecodingError.self) { try BinaryDecoder().decode(Wrong.self, from: try BinaryEncoder().encode(Short())) }
        #expect(missing?.description == "list: missing")
    }

    /// Every prefix of a document, and every single-byte change of it, is refused or read, and
    /// nothing reads outside the bytes.
    @Test func truncatedOrChangedBytesNeverCrash() throws {
        var value = Everything()
        value.nested.deep = [Inner(name: "a")]
        let bytes = try BinaryEncoder().encode(value)
        for n in 0..<bytes.count {
            #expect(throws: BinaryDecodingError.self) { try BinaryDecoder().decode(Everything.self, from: Array(bytes.prefix(n))) }
        }
        var rng = SystemRandomNumberGenerator()
        for _ in 0..<2000 {
            var changed = bytes
            changed[Int.random(in: 0..<bytes.count, using: &rng)] = UInt8.random(in: 0...255, using: &rng)
            _ = try? BinaryDecoder().decode(Everything.self, from: changed)
        }
        let trailing = bytes + [0]
        #expect(throws: BinaryDecodingError(problem: "1 byte(s) after the value")) { try BinaryDecoder().decode(Everything.self, from: trailing) }
    }

    /// A count larger than its container's bytes can hold is refused before anything is
    /// reserved for it: a list of events whose count was changed to 2^32 - 1 once made the
    /// reader ask for a terabyte.
    @Test func aContainerCountTheBytesCannotHoldIsRefused() throws {
        var bytes = try BinaryEncoder().encode([[1, 2, 3]])
        // The inner list's count: after the outer header (tag, length, count) and the inner
        // list's tag and length.
        let countAt = 9 + 5
        #expect(bytes[countAt] == 3)
        bytes.replaceSubrange(countAt..<(countAt + 4), with: [0xFF, 0xFF, 0xFF, 0xFF])
        #expect(throws: BinaryDecodingError(path: ["[0]"], problem: "a container of 6 byte(s) cannot hold 4294967295 entries")) {
            try BinaryDecoder().decode([[Int]].self, from: bytes)
        }
    }
}
