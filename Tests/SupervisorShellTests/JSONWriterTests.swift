import Foundation  // the tests only: JSONSerialization is the reference the writer must match
import SupervisorKernel
import Testing

@testable import SupervisorShell

/// `JSONWriter` prints what `JSONSerialization` with `.sortedKeys` printed for the daemon's
/// documents (docs/json.md), byte for byte.
struct JSONWriterTests {
    func text(_ value: JSONValue) -> String { String(decoding: JSONWriter.encode(value), as: UTF8.self) }

    /// What the daemon sent before it dropped Foundation.
    func foundation(_ object: Any) throws -> String {
        String(decoding: try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]), as: UTF8.self)
    }

    @Test func stringsAreEscapedAsJSONSerializationDid() throws {
        let s = "a/b\"c\\d\n\r\t\u{0}\u{1}\u{8}\u{b}\u{c}\u{1f} \u{7f}é😀\u{2028}end"
        #expect(text(.string(s)) == #""a\/b\"c\\d\n\r\t\u0000\u0001\b\u000b\f\u001f \#u{7f}é😀\#u{2028}end""#)
        #expect(text(.array([.string(s)])) == (try foundation([s])))
        #expect(text(.string("")) == #""""#)
        for b in UInt8(0)..<0x80 {
            let one = String(UnicodeScalar(b))
            #expect(text(.array([.string(one)])) == (try foundation([one])), "byte \(b)")
        }
    }

    @Test func objectKeysAreSorted() throws {
        let keys = [
            "z", "a", "aa", "B", "_", "assertions", "assertionOverruns", "expireSent", "expireAcknowledged",
            "hostUID", "hostPID", "suspend", "suspendedLifetimeSeconds", "id", "ID", "Id", "iD", "a_", "A_",
        ]
        var value: [String: JSONValue] = [:]
        var object: [String: Any] = [:]
        for (i, k) in keys.enumerated() {
            value[k] = .integer(i)
            object[k] = i
        }
        #expect(text(.object(value)) == (try foundation(object)))
        #expect(text(.object(["b": 1, "a": ["d": 2, "c": 3]])) == #"{"a":{"c":3,"d":2},"b":1}"#)
    }

    @Test func nullBooleansAndEmptyContainers() throws {
        #expect(text(.object(["n": .null, "t": true, "f": false, "a": [], "o": .object([:])])) == #"{"a":[],"f":false,"n":null,"o":{},"t":true}"#)
        #expect(text(.integerOrNull(Int32?.none)) == "null")
        #expect(text(.integerOrNull(Int32(7))) == "7")
        #expect(text(.stringOrNull(nil)) == "null")
        #expect(text(.stringOrNull("x")) == #""x""#)
    }

    @Test func numbersArePrintedAsJSONSerializationDid() throws {
        let doubles: [Double] = [
            0.5, 1e-05, 5, 0, -0.0, 59.003843, 793.25988, 0.02, 1e-07, 0.000123, 0.0001, 1e+20, 2e15, 1e16,
            9007199254740992, 123456789.123456789, 1.7976931348623157e308, .leastNonzeroMagnitude, -2.5, 60, 120, 1e300,
        ]
        #expect(text(.array(doubles.map { .number($0) })) == (try foundation(doubles)))
        #expect(text(.array([.number(0.5), .number(1e-05), .number(5), .number(1e16), .number(-0.0)])) == "[0.5,1e-05,5,1e+16,-0]")
        // The `monotonic` of an event: nanoseconds / 1e9.
        for ns: UInt64 in [0, 1, 999_999_999, 1_000_000_000, 793_259_880_000, 123_456_789_012_345, 18_446_744_073_709_551_615] {
            let d = Double(ns) / 1e9
            #expect(text(.array([.number(d)])) == (try foundation([d])))
        }
        var random = SystemRandomNumberGenerator()
        for _ in 0..<2_000 {
            let d = [
                Double.random(in: 0..<1_000, using: &random), Double(bitPattern: random.next()), Double(Int32.random(in: .min ... .max, using: &random)) / 1e6,
            ]
            .filter(\.isFinite)
            #expect(text(.array(d.map { .number($0) })) == (try foundation(d)))
        }
        #expect(text(.array([.number(.nan), .number(.infinity), .number(-.infinity)])) == "[null,null,null]")
    }

    @Test func integers() throws {
        #expect(
            text(.array([.integer(0), .integer(-3), .integer(Int.max), .integer(Int.min), .integer(42)]))
                == "[0,-3,9223372036854775807,-9223372036854775808,42]")
        var w = JSONWriter()
        w.beginArray()
        w.element(); w.integer(UInt64.max)
        w.element(); w.integer(Int32.min)
        w.element(); w.integer(UInt8(9))
        w.endArray()
        #expect(String(decoding: w.bytes, as: UTF8.self) == "[18446744073709551615,-2147483648,9]")
    }

    @Test func memberByMemberWriting() throws {
        var w = JSONWriter()
        w.beginObject()
        w.member("a"); w.beginArray(); w.endArray()
        w.member("b"); w.beginArray()
        w.element(); w.beginObject(); w.endObject()
        w.element(); w.beginObject(); w.member("x"); w.null(); w.member("y"); w.bool(true); w.endObject()
        w.endArray()
        w.member("c"); w.string("/")
        w.endObject()
        w.newline()
        #expect(String(decoding: w.bytes, as: UTF8.self) == "{\"a\":[],\"b\":[{},{\"x\":null,\"y\":true}],\"c\":\"\\/\"}\n")
    }

    @Test func encodedFragmentsAreCopied() throws {
        #expect(text(.object(["e": .encoded(Array(#"{"k":1}"#.utf8)), "a": .array([.encoded(Array("[]".utf8))])])) == #"{"a":[[]],"e":{"k":1}}"#)
    }

    @Test func outputParsesBackAsExtctlReadsIt() throws {
        let value: JSONValue = .object([
            "extensions": .array([
                .object([
                    "id": "org.example.test", "pid": .integer(17816), "lastExit": .null, "cpuSeconds": .number(0.02),
                    "requests": .integer(1), "since": "2026-11-21T02:56:53.584Z", "executable": "/usr/lib/x/y",
                ])
            ])
        ])
        let parsed = try #require(try JSONSerialization.jsonObject(with: Data(JSONWriter.encode(value))) as? [String: Any])
        let e = try #require((parsed["extensions"] as? [[String: Any]])?.first)
        #expect(e["pid"] as? Int == 17816)
        #expect(e["requests"] as? Int == 1)
        #expect(e["cpuSeconds"] as? Double == 0.02)
        #expect(e["lastExit"] is NSNull)
        #expect(e["executable"] as? String == "/usr/lib/x/y")
    }
}

extension JSONValue: ExpressibleByStringLiteral, ExpressibleByBooleanLiteral, ExpressibleByIntegerLiteral,
    ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral
{
    public init(stringLiteral value: String) { self = .string(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(integerLiteral value: Int) { self = .integer(value) }
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    public init(dictionaryLiteral elements: (String, JSONValue)...) { self = .object(Dictionary(uniqueKeysWithValues: elements)) }
}
