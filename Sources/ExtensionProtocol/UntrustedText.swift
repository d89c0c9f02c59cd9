/// Text from untrusted input made safe to log or print to a terminal: a refused manifest's
/// values, a peer's strings, what an extension says (assertion reasons, details, process names).
/// The daemon escapes such text before it reaches the console or the journal, and `extctl`
/// before it prints it, so that no control character (a NUL, an ESC sequence that recolours,
/// moves the cursor or retitles the window, a carriage return that overwrites the line) reaches
/// the log or the terminal raw.
public enum UntrustedText {
    /// `text` with every control character escaped, and nothing else changed:
    ///
    /// * `\` becomes `\\`, so that an escape in the output always stands for one in the input;
    /// * newline, carriage return and tab become `\n`, `\r` and `\t`;
    /// * every other C0 control character (U+0000 to U+001F), DEL (U+007F) and every C1 control
    ///   character (U+0080 to U+009F, which some terminals obey like ESC sequences) becomes
    ///   `\x` and two lower-case hex digits per UTF-8 byte: a NUL is `\x00`, an ESC is `\x1b`,
    ///   U+009B is `\xc2\x9b`.
    ///
    /// The result contains no control character. Text that needs no escaping is returned as it
    /// is, without a copy.
    public static func escaped(_ text: String) -> String {
        guard needsEscaping(text) else { return text }
        var out: [UInt8] = []
        out.reserveCapacity(text.utf8.count + 16)
        let hex: [UInt8] = Array("0123456789abcdef".utf8)
        func byte(_ b: UInt8) {
            out.append(UInt8(ascii: "\\")); out.append(UInt8(ascii: "x"))
            out.append(hex[Int(b >> 4)]); out.append(hex[Int(b & 0xF)])
        }
        var bytes = text.utf8.makeIterator()
        while let b = bytes.next() {
            switch b {
            case UInt8(ascii: "\\"): out.append(UInt8(ascii: "\\")); out.append(UInt8(ascii: "\\"))
            case UInt8(ascii: "\n"): out.append(UInt8(ascii: "\\")); out.append(UInt8(ascii: "n"))
            case UInt8(ascii: "\r"): out.append(UInt8(ascii: "\\")); out.append(UInt8(ascii: "r"))
            case UInt8(ascii: "\t"): out.append(UInt8(ascii: "\\")); out.append(UInt8(ascii: "t"))
            case 0..<0x20, 0x7F: byte(b)
            case 0xC2:
                // A two-byte sequence: U+0080 to U+00BF. Its second byte says whether it is C1.
                guard let next = bytes.next() else { out.append(b); break }
                if next >= 0x80 && next <= 0x9F {
                    byte(b); byte(next)
                } else {
                    out.append(b); out.append(next)
                }
            default: out.append(b)
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Whether `text` holds a byte `escaped` changes.
    static func needsEscaping(_ text: String) -> Bool {
        var previous: UInt8 = 0
        for b in text.utf8 {
            if b < 0x20 || b == 0x7F || b == UInt8(ascii: "\\") || (previous == 0xC2 && b >= 0x80 && b <= 0x9F) { return true }
            previous = b
        }
        return false
    }
}
