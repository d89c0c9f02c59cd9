import ExtensionProtocol
import Testing

/// The defaults value encoding and the suite layout (docs/defaults.md), byte for byte.
@Suite struct DefaultsCodingTests {
    @Test func valuesEncodeAsDocumentedAndRoundTrip() throws {
        #expect(DefaultsValue.bool(true).encoded == [1, 1])
        #expect(DefaultsValue.integer(-2).encoded == [2, 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff])
        #expect(DefaultsValue.string("hé").encoded == [4, 3, 0, 0, 0, 0x68, 0xc3, 0xa9])
        #expect(
            DefaultsValue.dictionary(["b": .bool(false), "a": .bytes([7])]).encoded == [
                7, 2, 0, 0, 0, 1, 0, 0, 0, 0x61, 5, 1, 0, 0, 0, 7, 1, 0, 0, 0, 0x62, 1, 0,
            ])
        let value = DefaultsValue.array([.double(0.5), .string("x"), .dictionary(["k": .array([.integer(1)])])])
        #expect(try DefaultsValue(decoding: value.encoded) == value)
    }

    @Test func malformedValuesAreRefusedNamingWhatIsWrong() {
        #expect(DefaultsValue.problem([]) == "the type runs past the end")
        #expect(DefaultsValue.problem([1, 2]) == "a bool is 2, not 0 or 1")
        #expect(DefaultsValue.problem([4, 1, 0, 0, 0, 0xff]) == "a string is not valid UTF-8")
        #expect(DefaultsValue.problem([1, 1, 0]) == "1 bytes after the value")
        #expect(DefaultsValue.problem([6, 0xff, 0xff, 0xff, 0x7f]) == "an array of 2147483647 values runs past the end")
        #expect(DefaultsValue.problem([7, 2, 0, 0, 0, 1, 0, 0, 0, 0x62, 1, 0, 1, 0, 0, 0, 0x61, 1, 0])?.contains("out of order") == true)
        let deep: [UInt8] = [UInt8](repeating: 6, count: 40).flatMap { (t: UInt8) -> [UInt8] in [t, 1, 0, 0, 0] } + [1, 1]
        #expect(DefaultsValue.problem(deep) == "nested deeper than 32 levels")
        #expect(DefaultsValue.keyProblem("") == "is empty")
        #expect(DefaultsValue.keyProblem("a\u{0}b") == "contains a NUL byte")
    }

    @Test func aSuiteFileHoldsSortedEntriesAndTornOrForgedAreasAreRefusedNotTrapped() throws {
        let entries: [String: [UInt8]] = ["b": DefaultsValue.integer(2).encoded, "a": DefaultsValue.bool(true).encoded]
        let file = SuiteLayout.file(entries)
        #expect(Array(file[0..<8]) == Array("EXTDFLT1".utf8))
        #expect(try SuiteLayout.entries(ofFile: file) == entries)
        try file.withUnsafeBytes { raw in
            let area = UnsafeRawBufferPointer(rebasing: raw[SuiteLayout.headerSize...])
            let key: [UInt8] = Array("b".utf8)
            let range = try key.withUnsafeBytes { try SuiteLayout.find($0, in: area, count: 2) }
            #expect(range.map { Array(area[$0]) } == DefaultsValue.integer(2).encoded)
            let missing = try [UInt8](Array("c".utf8)).withUnsafeBytes { try SuiteLayout.find($0, in: area, count: 2) }
            #expect(missing == nil)
        }
        var forged = file
        forged[SuiteLayout.headerSize] = 0xff  // the first entry's offset leaves the area
        #expect(throws: DefaultsValueError.self) { try SuiteLayout.entries(ofFile: forged) }
        #expect(throws: DefaultsValueError.self) { try SuiteLayout.entries(ofFile: Array(file.dropLast())) }
    }
}
