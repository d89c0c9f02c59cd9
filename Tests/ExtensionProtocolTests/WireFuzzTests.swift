import ExtensionProtocol
import Testing

/// Deterministic fuzzing of the decoder: it must never trap, and anything it accepts must be
/// the canonical encoding of what it returned (re-encoding reproduces the input bytes exactly).
@Suite("Wire decoder fuzzing")
struct WireFuzzTests {
    struct Outcome {
        var accepted = 0
        var refused = 0
        var mismatches: [String] = []
    }

    /// Decodes `bytes`; when accepted, checks that re-encoding gives the same bytes back.
    static func probe(_ bytes: [UInt8], _ outcome: inout Outcome) {
        do throws(WireError) {
            let message = try WireDecoder.decode(bytes)
            outcome.accepted += 1
            do throws(WireError) {
                let again = try WireEncoder.encoded(message)
                if again != bytes, outcome.mismatches.count < 5 {
                    outcome.mismatches.append("\(bytes) decoded to \(message), re-encoded as \(again)")
                }
            } catch {
                if outcome.mismatches.count < 5 { outcome.mismatches.append("\(bytes) decoded to \(message) which does not encode: \(error)") }
            }
        } catch {
            outcome.refused += 1
        }
    }

    static func setLength(_ bytes: inout [UInt8]) {
        guard bytes.count >= WireLimits.headerSize else { return }
        let n = UInt32(bytes.count - WireLimits.headerSize)
        for i in 0..<4 { bytes[4 + i] = UInt8(truncatingIfNeeded: n >> (8 * UInt32(i))) }
    }

    /// 20,000 inputs: random bytes, random payloads behind a valid header, and mutations of
    /// valid encodings (with and without the length field fixed up so the payload is reached).

    @Test func decoderNeverTrapsAndAcceptedInputIsCanonical() throws {
        var rng = SplitMix64(seed: 0x5EED_CAFE)
        let valid = try sampleMessages.map { m throws(WireError) in try WireEncoder.encoded(m) }
        var outcome = Outcome()
        let mutable = { (count: Int) -> [Int] in Array(0..<count) }

        for i in 0..<24_000 {
            var bytes: [UInt8]
            switch i % 4 {
            case 0:
                // Pure noise, sometimes with a plausible version byte.
                bytes = (0..<Int.random(in: 0...48, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
                if bytes.count > 1 && Bool.random(using: &rng) { bytes[0] = WireLimits.version }
            case 1:
                // A valid header of a known kind over a random payload.
                let kind = allKinds[Int.random(in: 0..<allKinds.count, using: &rng)]
                let payload = (0..<Int.random(in: 0...40, using: &rng)).map { _ in
                    // Small values make plausible lengths, flags and codes.
                    Bool.random(using: &rng) ? UInt8.random(in: 0...3, using: &rng) : UInt8.random(in: 0...255, using: &rng)
                }
                bytes = frame(kind: kind, payload)
            default:
                // A valid encoding with one to three mutations.
                bytes = valid[Int.random(in: 0..<valid.count, using: &rng)]
                for _ in 0..<Int.random(in: 1...3, using: &rng) {
                    let positions = mutable(bytes.count)
                    switch Int.random(in: 0..<6, using: &rng) {
                    case 0 where !positions.isEmpty:  // flip one bit
                        let p = positions[Int.random(in: 0..<positions.count, using: &rng)]
                        bytes[p] ^= 1 << UInt8.random(in: 0...7, using: &rng)
                    case 1 where !positions.isEmpty:  // replace one byte
                        let p = positions[Int.random(in: 0..<positions.count, using: &rng)]
                        bytes[p] = UInt8.random(in: 0...255, using: &rng)
                    case 2:  // insert a byte in the payload
                        let p = Int.random(in: min(WireLimits.headerSize, bytes.count)...bytes.count, using: &rng)
                        bytes.insert(UInt8.random(in: 0...255, using: &rng), at: p)
                    case 3 where bytes.count > WireLimits.headerSize:  // delete a payload byte
                        bytes.remove(at: Int.random(in: WireLimits.headerSize..<bytes.count, using: &rng))
                    case 4:  // truncate
                        bytes.removeLast(Int.random(in: 0...bytes.count, using: &rng))
                    default:  // append garbage
                        bytes += (0..<Int.random(in: 1...4, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
                    }
                }
                if Bool.random(using: &rng) { Self.setLength(&bytes) }
            }
            Self.probe(bytes, &outcome)
        }
        #expect(outcome.mismatches.isEmpty, "\(outcome.mismatches)")
        // The inputs must reach both outcomes often, or the loop proves little.
        #expect(outcome.accepted > 1_000)
        #expect(outcome.refused > 10_000)
    }

    /// Random valid messages (random field values, multi-byte text, sizes up to the limits)
    /// encode, decode to themselves, and re-encode to the same bytes.
    @Test func randomValidMessagesRoundTrip() throws {
        var rng = SplitMix64(seed: 7)
        let alphabet: [Character] = ["a", "Z", "0", ".", "-", "_", " ", "é", "漢", "🙂", "\u{0}", "\n"]
        func text(_ maxBytes: Int) -> String {
            var s = ""
            let target = Int.random(in: 0...maxBytes, using: &rng)
            while true {
                let c = alphabet[Int.random(in: 0..<alphabet.count, using: &rng)]
                if s.utf8.count + String(c).utf8.count > target { return s }
                s.append(c)
            }
        }
        func ids() -> [String] { (0..<Int.random(in: 0...6, using: &rng)).map { _ in text(WireLimits.maxIdentifier) } }
        func bytes(_ max: Int) -> [UInt8] { (0..<Int.random(in: 0...max, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) } }
        func attributes() -> SecretAttributes {
            func maybe(_ n: Int) -> String? { Bool.random(using: &rng) ? text(n) : nil }
            return SecretAttributes(
                itemClass: SecretAttributes.ItemClass(rawValue: UInt8.random(in: 0...2, using: &rng))!, group: text(60), service: maybe(60), account: maybe(60),
                server: maybe(60), protocol: maybe(SecretAttributes.maxProtocol),
                port: Bool.random(using: &rng) ? UInt16.random(in: 0...UInt16.max, using: &rng) : nil,
                path: maybe(200), label: maybe(60))
        }

        var kindsSeen = Set<UInt8>()
        for _ in 0..<3_000 {
            let tag = UInt32.random(in: 0...UInt32.max, using: &rng)
            let big = UInt64.random(in: 0...UInt64.max, using: &rng)
            let message: Message
            switch Int.random(in: 0..<62, using: &rng) {
            case 0: message = .begin(tag: tag, extensionID: text(WireLimits.maxIdentifier))
            case 1: message = .end(tag: tag, requestID: big)
            case 2: message = .query(tag: tag, kind: [QueryKind.list, .status, .logs].randomElement(using: &rng)!, extensionIDs: ids())
            case 3: message = .kill(tag: tag, extensionID: text(40), signal: Int32.random(in: .min ... .max, using: &rng))
            case 4: message = .reload(tag: tag)
            case 5: message = .monitor(tag: tag)
            case 6: message = .prewarm(tag: tag, extensionIDs: ids())
            case 7: message = .begun(tag: tag, requestID: big, pid: Int32.random(in: .min ... .max, using: &rng), hasChannel: Bool.random(using: &rng))
            case 8: message = .ok(tag: tag)
            case 9:
                let code = FailureCode(rawValue: UInt16.random(in: 1...12, using: &rng))!
                message = .failure(tag: tag, code: code, text: text(WireLimits.maxText))
            case 10: message = .json(tag: tag, final: Bool.random(using: &rng), chunk: bytes(3_000))
            case 11: message = .interrupted(requestID: big, reason: text(WireLimits.maxText))
            case 12: message = .events(json: (0..<Int.random(in: 1...4, using: &rng)).map { _ in bytes(3_000) })
            case 13: message = .ready
            case 14: message = .acquire(tag: tag, reason: text(WireLimits.maxReason))
            case 15: message = .release(assertionID: big)
            case 16: message = .expireReceived(assertionID: big)
            case 17: message = .deliver(requestID: big)
            case 18: message = .ended(requestID: big)
            case 19: message = .granted(tag: tag, assertionID: big)
            case 20: message = .denied(tag: tag, reason: text(WireLimits.maxText))
            case 22:
                let kinds = ["text", "url", "image", "file", "application/pdf", "image/png", "x-custom/y.z+json"]
                var counts: [String: UInt32] = [:]
                for k in kinds where Bool.random(using: &rng) { counts[k] = UInt32.random(in: 0...ActivationContent.maxCount, using: &rng) }
                message = .discover(tag: tag, point: text(WireLimits.maxIdentifier), content: try ActivationContent(counts))
            case 23:
                let found = (0..<Int.random(in: 0...20, using: &rng)).map { _ in
                    DiscoveredExtension(
                        id: text(WireLimits.maxIdentifier), point: text(40),
                        displayName: Bool.random(using: &rng) ? text(WireLimits.maxIdentifier) : nil)
                }
                message = .discovered(tag: tag, final: Bool.random(using: &rng), extensions: found)
            case 24: message = .completed(requestID: big, payload: bytes(3_000))
            case 25: message = .cancelled(requestID: big, reason: text(WireLimits.maxText))
            case 26: message = .complete(requestID: big, payload: bytes(3_000))
            case 27: message = .cancel(requestID: big, reason: text(WireLimits.maxText))
            case 28: message = .post(tag: tag, name: text(WireLimits.maxIdentifier))
            case 29: message = .observe(name: text(WireLimits.maxIdentifier))
            case 30: message = .notify(name: text(WireLimits.maxIdentifier))
            case 31: message = .forceRefresh(tag: tag, extensionID: text(WireLimits.maxIdentifier))
            case 32: message = .subscribe(tag: tag, extensionIDs: ids())
            case 33: message = .refreshed(tag: tag, answer: RefreshAnswer(rawValue: UInt8.random(in: 0...3, using: &rng))!)
            case 34: message = .newData(extensionID: text(WireLimits.maxIdentifier))
            case 35: message = .refreshDone(refreshID: big, answer: RefreshAnswer(rawValue: UInt8.random(in: 0...3, using: &rng))!)
            case 36: message = .refresh(refreshID: big)
            case 37: message = .reset(tag: tag, extensionID: text(WireLimits.maxIdentifier))
            case 38: message = .reexec(tag: tag)
            case 39: message = .defaultsOpen(tag: tag, suite: text(WireLimits.maxIdentifier))
            case 40:
                message = .defaultsWrite(tag: tag, suite: text(60), key: text(WireLimits.maxDefaultsKey), value: Bool.random(using: &rng) ? bytes(3_000) : nil)
            case 41: message = .defaultsOpened(tag: tag)
            case 42: message = .defaultsChanged(suite: text(WireLimits.maxIdentifier))
            case 43: message = .openURL(tag: tag, url: text(WireLimits.maxURL))
            case 44: message = .suiteOpen(tag: tag, suite: text(WireLimits.maxIdentifier))
            case 45: message = .suiteWrite(tag: tag, suite: text(60), key: text(60), value: Bool.random(using: &rng) ? bytes(3_000) : nil)
            case 46:
                let code = Bool.random(using: &rng) ? nil : FailureCode(rawValue: UInt16.random(in: 1...14, using: &rng))
                message = .answer(tag: tag, failure: code, text: text(WireLimits.maxText))
            case 47: message = .suiteChanged(suite: text(WireLimits.maxIdentifier))
            case 48: message = .secretAdd(tag: tag, attributes: attributes(), data: SecretData(bytes(3_000)))
            case 49: message = .secretCopy(tag: tag, query: attributes(), returnData: Bool.random(using: &rng), all: Bool.random(using: &rng))
            case 50:
                let label = Bool.random(using: &rng) ? text(40) : nil
                message = .secretUpdate(tag: tag, query: attributes(), label: label, data: Bool.random(using: &rng) ? SecretData(bytes(3_000)) : nil)
            case 51: message = .secretDelete(tag: tag, query: attributes())
            case 52:
                message = .secretItems(
                    tag: tag,
                    items: (0..<Int.random(in: 1...3, using: &rng)).map { _ in
                        SecretItem(attributes: attributes(), data: Bool.random(using: &rng) ? SecretData(bytes(500)) : nil)
                    })
            case 53, 54:
                let method = TransferMethod(rawValue: UInt8.random(in: 1...3, using: &rng))!
                message = .transferCreate(
                    tag: tag,
                    request: TransferRequest(
                        session: text(WireLimits.maxIdentifier), group: text(60), method: method, url: text(WireLimits.maxTransferURL),
                        path: text(WireLimits.maxTransferPath), discretionary: Bool.random(using: &rng)))
            case 55: message = .transferCancel(tag: tag, task: big)
            case 56: message = .transferClaim(tag: tag, session: text(WireLimits.maxIdentifier), group: text(WireLimits.maxIdentifier))
            case 57: message = .transferHandled(tag: tag, session: text(60), group: text(60), through: big)
            case 58: message = .transferCreated(tag: tag, task: big)
            case 59:
                message = .transferEvents(
                    session: text(60), group: text(60),
                    events: (0..<Int.random(in: 1...WireLimits.maxTransferEvents, using: &rng)).map { _ in
                        TransferEvent(
                            sequence: UInt64.random(in: 0...UInt64.max, using: &rng), task: big,
                            kind: TransferEvent.Kind(rawValue: UInt8.random(in: 1...3, using: &rng))!, bytes: big,
                            total: Int64.random(in: .min ... .max, using: &rng), status: UInt16.random(in: 0...UInt16.max, using: &rng), path: text(200),
                            domain: text(20), code: Int32.random(in: .min ... .max, using: &rng), text: text(100))
                    })
            case 60: message = .follow(tag: tag, extensionIDs: ids())
            case 61: message = .output(json: (0..<Int.random(in: 1...4, using: &rng)).map { _ in bytes(3_000) })
            default: message = .expire(assertionID: big)
            }
            kindsSeen.insert(message.kind.rawValue)
            let encoded = try WireEncoder.encoded(message)
            let decoded = try WireDecoder.decode(encoded)
            #expect(decoded == message)
            #expect(try WireEncoder.encoded(decoded) == encoded)
            if decoded != message { return }
        }
        #expect(kindsSeen == Set(allKinds))
    }
}
