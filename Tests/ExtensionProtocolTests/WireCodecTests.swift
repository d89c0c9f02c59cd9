import ExtensionProtocol
import Testing

@Suite("Wire encoder and decoder: round trips and layout")
struct WireRoundTripTests {
    @Test(arguments: sampleMessages)
    func everyMessageRoundTrips(message: Message) throws {
        let bytes = try WireEncoder.encoded(message)
        #expect(bytes.count >= WireLimits.headerSize)
        #expect(bytes[0] == WireLimits.version)
        #expect(bytes[1] == message.kind.rawValue)
        #expect(bytes[2] == 0 && bytes[3] == 0, "the reserved field is zero")
        let declared = Int(bytes[4]) | Int(bytes[5]) << 8 | Int(bytes[6]) << 16 | Int(bytes[7]) << 24
        #expect(declared == bytes.count - WireLimits.headerSize)
        let decoded = try WireDecoder.decode(bytes)
        #expect(decoded == message)
        #expect(try WireEncoder.encoded(decoded) == bytes)
        // The raw-buffer entry point agrees with the array one.
        let viaBuffer = try bytes.withUnsafeBytes { raw in try WireDecoder.decode(raw) }
        #expect(viaBuffer == message)
    }

    @Test func theSamplesCoverEveryMessageKind() {
        let covered = Set(sampleMessages.map(\.kind.rawValue))
        #expect(covered == Set(allKinds))
        for raw in UInt8.min...UInt8.max {
            #expect((MessageKind(rawValue: raw) != nil) == allKinds.contains(raw), "kind \(raw)")
        }
    }

    @Test func headerAndFieldsAreLittleEndianInDeclarationOrder() throws {
        #expect(try WireEncoder.encoded(.ready) == [1, 64, 0, 0, 0, 0, 0, 0])
        #expect(
            try WireEncoder.encoded(.begin(tag: 0x0403_0201, extensionID: "ab"))
                == [1, 1, 0, 0, 8, 0, 0, 0, 1, 2, 3, 4, 2, 0, 0x61, 0x62])
        #expect(
            try WireEncoder.encoded(.kill(tag: 1, extensionID: "x", signal: -1))
                == [1, 4, 0, 0, 11, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0x78, 0xFF, 0xFF, 0xFF, 0xFF])
        #expect(
            try WireEncoder.encoded(.begun(tag: 2, requestID: 0x0102_0304_0506_0708, pid: 3, hasChannel: true))
                == [1, 32, 0, 0, 17, 0, 0, 0, 2, 0, 0, 0, 8, 7, 6, 5, 4, 3, 2, 1, 3, 0, 0, 0, 1])
        #expect(
            try WireEncoder.encoded(.failure(tag: 1, code: .throttled, text: "t"))
                == [1, 34, 0, 0, 9, 0, 0, 0, 1, 0, 0, 0, 4, 0, 1, 0, 0x74])
        #expect(
            try WireEncoder.encoded(.json(tag: 1, final: true, chunk: [9]))
                == [1, 35, 0, 0, 10, 0, 0, 0, 1, 0, 0, 0, 1, 1, 0, 0, 0, 9])
        #expect(
            try WireEncoder.encoded(.query(tag: 5, kind: .status, extensionIDs: ["a", "bc"]))
                == [1, 3, 0, 0, 14, 0, 0, 0, 5, 0, 0, 0, 2, 2, 0, 1, 0, 0x61, 2, 0, 0x62, 0x63])
        #expect(
            try WireEncoder.encoded(.granted(tag: 0xFFFF_FFFF, assertionID: 1))
                == [1, 98, 0, 0, 12, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF, 1, 0, 0, 0, 0, 0, 0, 0])
    }

    @Test func theEncoderReplacesItsPreviousMessage() throws {
        var encoder = WireEncoder()
        try encoder.encode(.failure(tag: 1, code: .internalError, text: String(repeating: "z", count: 500)))
        try encoder.encode(.ok(tag: 2))
        #expect(encoder.bytes == [1, 33, 0, 0, 4, 0, 0, 0, 2, 0, 0, 0])
    }

    @Test func aFailedEncodingThrowsAndTheNextOneIsClean() throws {
        var encoder = WireEncoder()
        #expect(throws: WireError.fieldTooLong("extensionID", 256)) {
            try encoder.encode(.begin(tag: 1, extensionID: String(repeating: "r", count: 256)))
        }
        try encoder.encode(.ready)
        #expect(encoder.bytes == [1, 64, 0, 0, 0, 0, 0, 0])
    }

    @Test func fieldsAtTheirLimitsRoundTrip() throws {
        let messages: [Message] = [
            .begin(tag: 1, extensionID: String(repeating: "é", count: 127) + "x"),  // 255 bytes
            .acquire(tag: 1, reason: String(repeating: "r", count: WireLimits.maxReason)),
            .failure(tag: 1, code: .badRequest, text: String(repeating: "t", count: WireLimits.maxText)),
            .denied(tag: 1, reason: String(repeating: "d", count: WireLimits.maxText)),
            .interrupted(requestID: 1, reason: String(repeating: "i", count: WireLimits.maxText)),
            .json(tag: 1, final: true, chunk: [UInt8](repeating: 0x20, count: WireLimits.maxChunk)),
            .events(json: [[UInt8](repeating: 0x7B, count: WireLimits.maxChunk)]),
            .prewarm(tag: 1, extensionIDs: Array(repeating: "p", count: WireLimits.maxIdentifiers)),
        ]
        for m in messages {
            #expect(try WireDecoder.decode(try WireEncoder.encoded(m)) == m)
        }
    }

    @Test func aMessageOfExactlyTheMaximumSizeIsAcceptedAndOneByteMoreIsNot() throws {
        // Header 8 + tag 4 + kind 1 + count 2 = 15; 254 ids of 255 bytes take 65,278; one of 241 takes 243.
        var ids = Array(repeating: String(repeating: "a", count: 255), count: 254)
        ids.append(String(repeating: "b", count: 241))
        let largest = Message.query(tag: 1, kind: .list, extensionIDs: ids)
        let bytes = try WireEncoder.encoded(largest)
        #expect(bytes.count == WireLimits.maxMessageSize)
        #expect(try WireDecoder.decode(bytes) == largest)

        ids[254] += "b"
        #expect(encodeError(.query(tag: 1, kind: .list, extensionIDs: ids)) == .tooLarge(WireLimits.maxMessageSize + 1))
    }
}

@Suite("Wire encoder: refused messages")
struct WireEncoderLimitTests {
    /// Texts for people (errors, reasons) are cut to their limit, never refused: a reply whose
    /// error names a path 7 MB long is still sent, and its peer is not left waiting for it.
    @Test func textsOverTheirLimitAreCutAtACharacterWithAnEllipsis() throws {
        let long = String(repeating: "é", count: 30_000)  // 60,000 bytes
        let cases: [(Message, Int)] = [
            (.failure(tag: 1, code: .internalError, text: long), WireLimits.maxText),
            (.interrupted(requestID: 1, reason: long), WireLimits.maxText),
            (.denied(tag: 1, reason: long), WireLimits.maxText),
            (.acquire(tag: 1, reason: long), WireLimits.maxReason),
        ]
        for (message, limit) in cases {
            let decoded = try WireDecoder.decode(try WireEncoder.encoded(message))
            let text: String
            switch decoded {
            case .failure(_, _, let t), .interrupted(_, let t), .denied(_, let t), .acquire(_, let t): text = t
            default: Issue.record("\(decoded)"); continue
            }
            #expect(text.utf8.count <= limit && text.utf8.count > limit - 6, "\(text.utf8.count) bytes")
            #expect(text.hasSuffix("…"))
            #expect(text.dropLast().allSatisfy { $0 == "é" }, "cut between characters, never inside one")
        }
    }

    @Test func overLimitFieldsAreRefusedNotTruncated() {
        let id256 = String(repeating: "é", count: 128)  // 256 UTF-8 bytes, 128 characters
        #expect(encodeError(.begin(tag: 1, extensionID: id256)) == .fieldTooLong("extensionID", 256))
        #expect(encodeError(.kill(tag: 1, extensionID: id256, signal: 9)) == .fieldTooLong("extensionID", 256))
        #expect(encodeError(.json(tag: 1, final: false, chunk: [UInt8](repeating: 0, count: 60_001))) == .fieldTooLong("chunk", 60_001))
        #expect(encodeError(.events(json: [[UInt8](repeating: 0, count: 60_001)])) == .fieldTooLong("events", 60_001))
        #expect(encodeError(.events(json: [])) == .invalidValue("events"))
        #expect(encodeError(.query(tag: 1, kind: .list, extensionIDs: Array(repeating: "a", count: 1_025))) == .fieldTooLong("extensionIDs", 1_025))
        #expect(encodeError(.prewarm(tag: 1, extensionIDs: Array(repeating: "a", count: 1_025))) == .fieldTooLong("extensionIDs", 1_025))
        #expect(encodeError(.prewarm(tag: 1, extensionIDs: ["ok", id256])) == .fieldTooLong("extensionIDs", 256))
    }

    @Test func wireErrorsDescribeThemselves() {
        #expect(WireError.tooShort(3).description.contains("3 bytes"))
        #expect(WireError.fieldTooLong("reason", 2_000).description.contains("'reason'"))
        #expect(WireError.lengthMismatch(declared: 5, actual: 4).description.contains("declares 5"))
        #expect(WireError.unsupportedVersion(9).description.contains("version 9"))
    }
}

/// One hand-made datagram the decoder must refuse with a specific error.
struct BadDatagram: Sendable, CustomTestStringConvertible {
    var name: String
    var bytes: [UInt8]
    var error: WireError
    var testDescription: String { name }
    init(_ name: String, _ bytes: [UInt8], _ error: WireError) {
        self.name = name
        self.bytes = bytes
        self.error = error
    }
}

@Suite("Wire decoder: refused datagrams")
struct WireDecoderErrorTests {
    static let header: [BadDatagram] = [
        BadDatagram("empty", [], .tooShort(0)),
        BadDatagram("7 bytes", [1, 64, 0, 0, 0, 0, 0], .tooShort(7)),
        BadDatagram("short beats version", [9, 1, 0], .tooShort(3)),
        BadDatagram("version 0", frame(kind: 64, [], version: 0), .unsupportedVersion(0)),
        BadDatagram("version 2", frame(kind: 64, [], version: 2), .unsupportedVersion(2)),
        BadDatagram("version 255", frame(kind: 64, [], version: 255), .unsupportedVersion(255)),
        BadDatagram("version checked before kind", frame(kind: 0, [], version: 2), .unsupportedVersion(2)),
        BadDatagram("declared more", frame(kind: 64, [], declared: 1), .lengthMismatch(declared: 1, actual: 0)),
        BadDatagram("declared less", frame(kind: 33, le32(1), declared: 3), .lengthMismatch(declared: 3, actual: 4)),
        BadDatagram("declared 4 GiB", frame(kind: 33, le32(1), declared: .max), .lengthMismatch(declared: Int(UInt32.max), actual: 4)),
        BadDatagram("kind checked before length", frame(kind: 200, [], declared: 77), .unknownKind(200)),
    ]

    static let truncated: [BadDatagram] = [
        BadDatagram("begin: tag", frame(kind: 1, [1, 2, 3]), .truncatedField("tag")),
        BadDatagram("begin: id length", frame(kind: 1, le32(1) + [5]), .truncatedField("extensionID")),
        BadDatagram("begin: id bytes", frame(kind: 1, le32(1) + le16(5) + Array("abc".utf8)), .truncatedField("extensionID")),
        BadDatagram("end: requestID", frame(kind: 2, le32(1) + [1, 2, 3, 4, 5, 6, 7]), .truncatedField("requestID")),
        BadDatagram("query: kind", frame(kind: 3, le32(1)), .truncatedField("kind")),
        BadDatagram("query: count", frame(kind: 3, le32(1) + [1]), .truncatedField("extensionIDs")),
        BadDatagram("query: second id", frame(kind: 3, le32(1) + [1] + le16(2) + str("a")), .truncatedField("extensionIDs")),
        BadDatagram("kill: signal", frame(kind: 4, le32(1) + str("x") + [9, 0]), .truncatedField("signal")),
        BadDatagram("reload: tag", frame(kind: 5, [1]), .truncatedField("tag")),
        BadDatagram("monitor: tag", frame(kind: 6, []), .truncatedField("tag")),
        BadDatagram("prewarm: count", frame(kind: 7, le32(1) + [1]), .truncatedField("extensionIDs")),
        BadDatagram("begun: pid", frame(kind: 32, le32(1) + le64(2) + [1, 2]), .truncatedField("pid")),
        BadDatagram("begun: hasChannel", frame(kind: 32, le32(1) + le64(2) + le32(3)), .truncatedField("hasChannel")),
        BadDatagram("ok: tag", frame(kind: 33, [1, 2]), .truncatedField("tag")),
        BadDatagram("failure: code", frame(kind: 34, le32(1) + [1]), .truncatedField("code")),
        BadDatagram("failure: text", frame(kind: 34, le32(1) + le16(1) + le16(3) + [0x61]), .truncatedField("text")),
        BadDatagram("json: final", frame(kind: 35, le32(1)), .truncatedField("final")),
        BadDatagram("json: chunk length", frame(kind: 35, le32(1) + [1, 0, 0]), .truncatedField("chunk")),
        BadDatagram("json: chunk bytes", frame(kind: 35, le32(1) + [1] + le32(10) + [1, 2, 3]), .truncatedField("chunk")),
        BadDatagram("interrupted: reason", frame(kind: 36, le64(1)), .truncatedField("reason")),
        BadDatagram("events: count", frame(kind: 43, [1]), .truncatedField("events")),
        BadDatagram("events: json bytes", frame(kind: 43, le16(1) + le32(2) + [0x7B]), .truncatedField("events")),
        BadDatagram("events: second json", frame(kind: 43, le16(2) + le32(1) + [0x7B] + [0, 0, 0]), .truncatedField("events")),
        BadDatagram("events: more than the payload holds", frame(kind: 43, le16(2) + le32(0)), .truncatedField("events")),
        BadDatagram("events: 65535", frame(kind: 43, le16(.max) + le32(0)), .truncatedField("events")),
        BadDatagram("acquire: reason", frame(kind: 65, le32(1) + le16(4) + [0x61]), .truncatedField("reason")),
        BadDatagram("release: assertionID", frame(kind: 66, [1, 2, 3]), .truncatedField("assertionID")),
        BadDatagram("expireReceived: assertionID", frame(kind: 67, []), .truncatedField("assertionID")),
        BadDatagram("deliver: requestID", frame(kind: 96, le32(1)), .truncatedField("requestID")),
        BadDatagram("ended: requestID", frame(kind: 97, [0]), .truncatedField("requestID")),
        BadDatagram("granted: assertionID", frame(kind: 98, le32(1) + le32(2)), .truncatedField("assertionID")),
        BadDatagram("denied: reason", frame(kind: 99, le32(1)), .truncatedField("reason")),
        BadDatagram("expire: assertionID", frame(kind: 100, [1, 2, 3, 4, 5, 6, 7]), .truncatedField("assertionID")),
    ]

    static let tooLong: [BadDatagram] = [
        // The declared length is refused before the bytes are looked at.
        BadDatagram("begin: id 256", frame(kind: 1, le32(1) + le16(256)), .fieldTooLong("extensionID", 256)),
        BadDatagram("begin: id 65535", frame(kind: 1, le32(1) + le16(.max) + [UInt8](repeating: 0x61, count: 100)), .fieldTooLong("extensionID", 65_535)),
        BadDatagram("kill: id 256", frame(kind: 4, le32(1) + le16(256) + [UInt8](repeating: 0x61, count: 256) + le32(9)), .fieldTooLong("extensionID", 256)),
        BadDatagram("acquire: reason 1025", frame(kind: 65, le32(1) + le16(1_025) + [UInt8](repeating: 0x61, count: 1_025)), .fieldTooLong("reason", 1_025)),
        BadDatagram("denied: reason 4097", frame(kind: 99, le32(1) + le16(4_097)), .fieldTooLong("reason", 4_097)),
        BadDatagram("interrupted: reason 4097", frame(kind: 36, le64(1) + le16(4_097)), .fieldTooLong("reason", 4_097)),
        BadDatagram("failure: text 4097", frame(kind: 34, le32(1) + le16(1) + le16(4_097)), .fieldTooLong("text", 4_097)),
        BadDatagram("json: chunk 60001", frame(kind: 35, le32(1) + [0] + le32(60_001)), .fieldTooLong("chunk", 60_001)),
        BadDatagram("json: chunk 4 GiB", frame(kind: 35, le32(1) + [0] + le32(.max)), .fieldTooLong("chunk", Int(UInt32.max))),
        BadDatagram("events: json 60001", frame(kind: 43, le16(1) + le32(60_001)), .fieldTooLong("events", 60_001)),
        BadDatagram("query: 1025 ids", frame(kind: 3, le32(1) + [1] + le16(1_025)), .fieldTooLong("extensionIDs", 1_025)),
        BadDatagram("prewarm: 65535 ids", frame(kind: 7, le32(1) + le16(.max)), .fieldTooLong("extensionIDs", 65_535)),
        BadDatagram("prewarm: id 256", frame(kind: 7, le32(1) + le16(1) + le16(256)), .fieldTooLong("extensionIDs", 256)),
    ]

    static let invalid: [BadDatagram] = [
        BadDatagram("begin: 0xFF", frame(kind: 1, le32(1) + le16(1) + [0xFF]), .invalidUTF8("extensionID")),
        BadDatagram("kill: cut sequence", frame(kind: 4, le32(1) + le16(2) + [0xE2, 0x82] + le32(9)), .invalidUTF8("extensionID")),
        BadDatagram("acquire: overlong NUL", frame(kind: 65, le32(1) + le16(2) + [0xC0, 0x80]), .invalidUTF8("reason")),
        BadDatagram("failure: surrogate", frame(kind: 34, le32(1) + le16(1) + le16(3) + [0xED, 0xA0, 0x80]), .invalidUTF8("text")),
        BadDatagram("denied: continuation byte", frame(kind: 99, le32(1) + le16(1) + [0x80]), .invalidUTF8("reason")),
        BadDatagram("interrupted: above U+10FFFF", frame(kind: 36, le64(1) + le16(4) + [0xF4, 0x90, 0x80, 0x80]), .invalidUTF8("reason")),
        BadDatagram("query: bad id", frame(kind: 3, le32(1) + [2] + le16(1) + le16(1) + [0xFE]), .invalidUTF8("extensionIDs")),
        BadDatagram("begun: hasChannel 2", frame(kind: 32, le32(1) + le64(1) + le32(1) + [2]), .invalidValue("hasChannel")),
        BadDatagram("begun: hasChannel 255", frame(kind: 32, le32(1) + le64(1) + le32(1) + [255]), .invalidValue("hasChannel")),
        BadDatagram("json: final 2", frame(kind: 35, le32(1) + [2] + le32(0)), .invalidValue("final")),
        BadDatagram("query: kind 0", frame(kind: 3, le32(1) + [0] + le16(0)), .invalidValue("kind")),
        BadDatagram("query: kind 7", frame(kind: 3, le32(1) + [7] + le16(0)), .invalidValue("kind")),
        BadDatagram("failure: code 0", frame(kind: 34, le32(1) + le16(0) + str("x")), .invalidValue("code")),
        BadDatagram("failure: code 15", frame(kind: 34, le32(1) + le16(15) + str("x")), .invalidValue("code")),
        BadDatagram("failure: code 65535", frame(kind: 34, le32(1) + le16(.max) + str("x")), .invalidValue("code")),
        BadDatagram("events: none", frame(kind: 43, le16(0)), .invalidValue("events")),
    ]

    static let trailing: [BadDatagram] = [
        BadDatagram("ready + 1", frame(kind: 64, [0]), .trailingBytes(1)),
        BadDatagram("ok + 3", frame(kind: 33, le32(1) + [1, 2, 3]), .trailingBytes(3)),
        BadDatagram("begin + 1", frame(kind: 1, le32(1) + str("ab") + [0]), .trailingBytes(1)),
        BadDatagram("end + 8", frame(kind: 2, le32(1) + le64(1) + le64(2)), .trailingBytes(8)),
        BadDatagram("query with fewer ids than bytes", frame(kind: 3, le32(1) + [1] + le16(1) + str("a") + str("b")), .trailingBytes(3)),
        BadDatagram("json chunk shorter than payload", frame(kind: 35, le32(1) + [1] + le32(1) + [7, 8]), .trailingBytes(1)),
    ]

    @Test(arguments: header + truncated + tooLong + invalid + trailing)
    func refused(_ c: BadDatagram) {
        #expect(decodeError(c.bytes) == c.error)
    }

    @Test func everyUnknownKindIsRefused() {
        for raw in UInt8.min...UInt8.max where !allKinds.contains(raw) {
            #expect(decodeError(frame(kind: raw, le32(1))) == .unknownKind(raw), "kind \(raw)")
        }
    }

    @Test func oversizedDatagramsAreRefusedBeforeTheirHeaderIsRead() {
        let payload = [UInt8](repeating: 0, count: WireLimits.maxMessageSize + 1 - WireLimits.headerSize)
        #expect(decodeError(frame(kind: 43, payload)) == .tooLarge(WireLimits.maxMessageSize + 1))
        #expect(decodeError([UInt8](repeating: 0xFF, count: 200_000)) == .tooLarge(200_000))
    }

    @Test func everyStrictPrefixOfAValidMessageIsRefused() throws {
        for m in sampleMessages {
            let bytes = try WireEncoder.encoded(m)
            for n in 0..<bytes.count {
                #expect(decodeError(Array(bytes[0..<n])) != nil, "\(m) cut to \(n) bytes")
            }
            // With the header fixed up to the shorter length, the cut lands inside a field.
            for n in WireLimits.headerSize..<bytes.count {
                var cut = Array(bytes[0..<n])
                let payload = le32(UInt32(n - WireLimits.headerSize))
                cut.replaceSubrange(4..<8, with: payload)
                guard case .truncatedField? = decodeError(cut) else {
                    Issue.record("\(m) cut to \(n) bytes with a matching header: \(String(describing: decodeError(cut)))")
                    continue
                }
            }
        }
    }
}
