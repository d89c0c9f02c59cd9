import ExtensionStatus
import Foundation  // the tests only: JSONSerialization is the reference
import Testing

/// `JSONWriter.write(_:)` of any `Encodable`: what it writes for every way a type can encode
/// itself, compared with what JSONSerialization prints for the same JSON.
@Suite("JSON stream encoder")
struct JSONStreamEncoderTests {
    func text(_ value: some Encodable) throws -> String {
        var writer = JSONWriter()
        try writer.write(value)
        return String(decoding: writer.bytes, as: UTF8.self)
    }

    struct Plain: Encodable {
        var a = 1
        var b: String? = nil
        var c = [1.5, 2]
        var d: [String: Int] = ["z": 1, "a": 2, "B": 3]
    }

    @Test func synthesizedConformancesAndStandardTypes() throws {
        #expect(try text(Plain()) == #"{"a":1,"c":[1.5,2],"d":{"a":2,"B":3,"z":1}}"#)
        #expect(try text(Plain(b: "x/y")) == #"{"a":1,"b":"x\/y","c":[1.5,2],"d":{"a":2,"B":3,"z":1}}"#)
        #expect(try text([[1, 2], [], [3]]) == "[[1,2],[],[3]]")
        #expect(try text("top") == #""top""#)
        #expect(try text(Int?.none) == "null")
        #expect(try text([String: [Int]]()) == "{}")
        #expect(try text([Bool?.none, true, false]) == "[null,true,false]")
        #expect(try text([UInt64.max, 0]) == "[18446744073709551615,0]")
        #expect(try text([Float(0.5), .infinity]) == "[0.5,null]")
    }

    struct Unordered: Encodable {
        enum Keys: String, CodingKey { case zeta, alpha, Beta, mid }
        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: Keys.self)
            try c.encode(1, forKey: .zeta)
            var inner = c.nestedContainer(keyedBy: Keys.self, forKey: .mid)
            try inner.encode("m", forKey: .mid)
            try inner.encode(["y": 1, "x": 2], forKey: .alpha)
            try c.encode([3, 2], forKey: .alpha)
            try c.encodeNil(forKey: .Beta)
        }
    }

    @Test func membersWrittenOutOfOrderAreSortedWhenTheirObjectCloses() throws {
        #expect(try text(Unordered()) == #"{"alpha":[3,2],"Beta":null,"mid":{"alpha":{"x":2,"y":1},"mid":"m"},"zeta":1}"#)
        #expect(try text([Unordered(), Unordered()]) == "[" + (try text(Unordered())) + "," + (try text(Unordered())) + "]")
        // Keys without digits: JSONSerialization compares runs of digits as numbers.
        let letters = Array("abcdefghijABCDEFGHIJ_")
        let many = Dictionary(uniqueKeysWithValues: (0..<400).map { n in (String([letters[n % 21], letters[n / 21 % 21]]) + "k", n) })
        let written = try text(many)
        let parsed = try JSONSerialization.jsonObject(with: Data(written.utf8))
        #expect(written == String(decoding: try JSONSerialization.data(withJSONObject: parsed, options: [.sortedKeys]), as: UTF8.self))
    }

    struct Nested: Encodable {
        enum Keys: String, CodingKey { case a, b, c, d }
        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: Keys.self)
            try c.encode(1, forKey: .a)
            var inner = c.nestedContainer(keyedBy: Keys.self, forKey: .b)
            try inner.encode("x", forKey: .a)
            var list = inner.nestedUnkeyedContainer(forKey: .b)
            try list.encode(1)
            var deeper = list.nestedContainer(keyedBy: Keys.self)
            try deeper.encodeNil(forKey: .a)
            try list.encode(2)
            try c.encode(true, forKey: .c)
            // The same container asked for again writes into the same object.
            var again = encoder.container(keyedBy: Keys.self)
            try again.encode([Int](), forKey: .d)
        }
    }

    @Test func nestedContainersCloseWhenTheirParentWritesOn() throws {
        #expect(try text(Nested()) == #"{"a":1,"b":{"a":"x","b":[1,{"a":null},2]},"c":true,"d":[]}"#)
        #expect(try text([Nested(), Nested()]) == "[" + (try text(Nested())) + "," + (try text(Nested())) + "]")
    }

    struct Super: Encodable {
        enum Keys: String, CodingKey { case a, z }
        var writesIntoSuper: Bool
        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: Keys.self)
            try c.encode(1, forKey: .a)
            let s = c.superEncoder()
            if writesIntoSuper {
                var sc = s.container(keyedBy: Keys.self)
                try sc.encode(2, forKey: .a)
            }
            try c.encode(3, forKey: .z)
        }
    }

    @Test func superEncodersAndValuesThatWriteNothing() throws {
        #expect(try text(Super(writesIntoSuper: true)) == #"{"a":1,"super":{"a":2},"z":3}"#)
        #expect(try text(Super(writesIntoSuper: false)) == #"{"a":1,"super":{},"z":3}"#)
        struct Nothing: Encodable { func encode(to encoder: any Encoder) throws {} }
        #expect(try text(Nothing()) == "{}")
        #expect(try text([Nothing(), Nothing()]) == "[{},{}]")
    }

    struct SingleValue: Encodable {
        var inner: Plain
        func encode(to encoder: any Encoder) throws {
            var c = encoder.singleValueContainer()
            try c.encode(inner)
        }
    }

    @Test func singleValueContainersWriteTheirValueInPlace() throws {
        #expect(try text(["k": SingleValue(inner: Plain())]) == #"{"k":"# + (try text(Plain())) + "}")
    }

    @Test func theOutputIsWhatJSONSerializationPrints() throws {
        let value: [String: [String: Double]] = ["b": ["y": 1e-05, "x": 59.003843], "a": ["ID": 1e16, "id": 0.25]]
        var writer = JSONWriter()
        try writer.write(value)
        let parsed = try JSONSerialization.jsonObject(with: Data(writer.bytes))
        #expect(writer.bytes == [UInt8](try JSONSerialization.data(withJSONObject: parsed, options: [.sortedKeys])))
    }

    @Test func writingAppendsToWhatIsAlreadyWritten() throws {
        var writer = JSONWriter()
        writer.beginArray()
        writer.element()
        try writer.write(Plain())
        writer.element()
        writer.integer(7)
        writer.endArray()
        #expect(String(decoding: writer.bytes, as: UTF8.self) == "[" + (try text(Plain())) + ",7]")
    }
}
