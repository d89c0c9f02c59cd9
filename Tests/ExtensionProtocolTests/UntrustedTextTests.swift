import ExtensionProtocol
import Testing

/// `UntrustedText.escaped`: no control character of untrusted text reaches a log or a terminal.
@Suite("Untrusted text: escaping")
struct UntrustedTextTests {
    @Test func plainTextIsLeftAsItIs() {
        for text in ["", "com.example.stocks.widget", "upload photos", "é漢🙂 — ok", "/var/lib/extensiond/x.json", "\u{A0}\u{2028}"] {
            #expect(UntrustedText.escaped(text) == text)
        }
    }

    @Test func controlCharactersAreEscapedVisibly() {
        #expect(UntrustedText.escaped("a\u{1B}[31mb") == #"a\x1b[31mb"#)
        #expect(UntrustedText.escaped("\u{0}root") == #"\x00root"#)
        #expect(UntrustedText.escaped("one\ntwo\rthree\tfour") == #"one\ntwo\rthree\tfour"#)
        #expect(UntrustedText.escaped("bell\u{7}del\u{7F}") == #"bell\x07del\x7f"#)
        #expect(UntrustedText.escaped("\u{1F}\u{1}") == #"\x1f\x01"#)
    }

    @Test func c1ControlsAreEscapedAsTheirUTF8Bytes() {
        #expect(UntrustedText.escaped("a\u{9B}31mb") == #"a\xc2\x9b31mb"#)
        #expect(UntrustedText.escaped("\u{80}\u{85}\u{9F}") == #"\xc2\x80\xc2\x85\xc2\x9f"#)
        // U+00A0 to U+00BF share the lead byte but are not controls.
        #expect(UntrustedText.escaped("\u{A0}\u{BF}é") == "\u{A0}\u{BF}é")
    }

    @Test func backslashesAreDoubledSoEveryEscapeIsUnambiguous() {
        #expect(UntrustedText.escaped(#"C:\x1b"#) == #"C:\\x1b"#)
        #expect(UntrustedText.escaped("\\\u{1B}") == #"\\\x1b"#)
    }

    @Test func theResultHasNoControlCharacterWhateverTheInput() {
        var rng = SplitMix64(seed: 11)
        for _ in 0..<2_000 {
            let text = String(
                (0..<Int.random(in: 0...40, using: &rng)).map { _ -> Character in
                    let value = Bool.random(using: &rng) ? UInt32.random(in: 0...0x7F, using: &rng) : UInt32.random(in: 0x80...0xFF, using: &rng)
                    return Character(UnicodeScalar(value)!)
                })
            let escaped = UntrustedText.escaped(text)
            #expect(!escaped.unicodeScalars.contains { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) }, "\(Array(text.utf8))")
        }
    }
}
