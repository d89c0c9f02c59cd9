import ExtensionProtocol

/// SplitMix64: a tiny deterministic PRNG so every randomized test is reproducible.
struct SplitMix64: RandomNumberGenerator {
    private var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// Every wire type number, in order.
let allKinds: [UInt8] = Array(1...16) + Array(32...36) + Array(38...45) + Array(64...82) + Array(96...108)

/// Little-endian field builders for hand-made datagrams.
func le16(_ v: UInt16) -> [UInt8] { [UInt8(v & 0xFF), UInt8(v >> 8)] }
func le32(_ v: UInt32) -> [UInt8] { (0..<4).map { UInt8(truncatingIfNeeded: v >> (8 * $0)) } }
func le64(_ v: UInt64) -> [UInt8] { (0..<8).map { UInt8(truncatingIfNeeded: v >> (8 * UInt64($0))) } }
func str(_ s: String) -> [UInt8] { le16(UInt16(s.utf8.count)) + Array(s.utf8) }

/// A datagram with a header declaring exactly `payload.count` bytes unless told otherwise.
func frame(
    kind: UInt8, _ payload: [UInt8], version: UInt8 = WireLimits.version, reserved: UInt16 = 0, declared: UInt32? = nil
) -> [UInt8] {
    [version, kind] + le16(reserved) + le32(declared ?? UInt32(payload.count)) + payload
}

func decodeError(_ bytes: [UInt8]) -> WireError? {
    do throws(WireError) {
        _ = try WireDecoder.decode(bytes)
        return nil
    } catch {
        return error
    }
}

func encodeError(_ message: Message) -> WireError? {
    do throws(WireError) {
        _ = try WireEncoder.encoded(message)
        return nil
    } catch {
        return error
    }
}

/// One or more samples of every message, including boundary values.
let sampleMessages: [Message] = [
    .begin(tag: 0, extensionID: ""),
    .forceRefresh(tag: 14, extensionID: "com.example.stocks.widget"),
    .subscribe(tag: 15, extensionIDs: ["com.example.stocks.widget", "b"]),
    .follow(tag: 16, extensionIDs: ["com.example.stocks.widget"]),
    .reset(tag: 16, extensionID: "com.example.stocks.widget"),
    .reexec(tag: 17),
    .defaultsOpen(tag: 18, suite: "group.com.example.stocks"),
    .defaultsWrite(tag: 19, suite: "group.com.example.stocks", key: "theme", value: [4, 4, 0, 0, 0, 0x64, 0x61, 0x72, 0x6b]),
    .defaultsWrite(tag: 20, suite: "group.com.example.stocks", key: "gone", value: nil),
    .defaultsOpened(tag: 18),
    .defaultsChanged(suite: "group.com.example.stocks"),
    .openURL(tag: 21, url: "stocks://item/42"),
    .suiteOpen(tag: 22, suite: "group.com.example.stocks"),
    .suiteWrite(tag: 23, suite: "group.com.example.stocks", key: "n", value: [2, 1, 0, 0, 0, 0, 0, 0, 0]),
    .suiteWrite(tag: 24, suite: "group.com.example.stocks", key: "n", value: nil),
    .answer(tag: 21, failure: nil, text: ""),
    .answer(tag: 22, failure: .notPermitted, text: "not a member"),
    .suiteChanged(suite: "group.com.example.stocks"),
    .secretAdd(
        tag: 25, attributes: SecretAttributes(itemClass: .genericPassword, service: "api", account: "alice", label: "token"), data: SecretData([1, 2, 3])),
    .secretCopy(tag: 26, query: SecretAttributes(itemClass: .any), returnData: true, all: false),
    .secretUpdate(
        tag: 27, query: SecretAttributes(itemClass: .internetPassword, group: "group.x", server: "s", protocol: "https", port: 443, path: "/"), label: "l",
        data: nil),
    .secretUpdate(tag: 28, query: SecretAttributes(itemClass: .genericPassword), label: nil, data: SecretData([9])),
    .secretDelete(tag: 29, query: SecretAttributes(itemClass: .genericPassword, account: "bob")),
    .secretItems(
        tag: 26,
        items: [
            SecretItem(
                attributes: SecretAttributes(itemClass: .genericPassword, group: "group.x", service: "a", account: "b", label: "c"), data: SecretData([7]))
        ]),
    .transferCreate(
        tag: 30, request: TransferRequest(session: "s1", group: "group.x", method: .download, url: "https://example.org/f", path: "", discretionary: true)),
    .transferCreate(
        tag: 31, request: TransferRequest(session: "s1", group: "group.x", method: .uploadPost, url: "http://h/u", path: "dir/file", discretionary: false)),
    .transferCancel(tag: 32, task: .max),
    .transferClaim(tag: 33, session: "s1", group: "group.x"),
    .transferHandled(tag: 34, session: "s1", group: "group.x", through: 7),
    .transferCreated(tag: 30, task: 12),
    .transferEvents(
        session: "s1", group: "group.x",
        events: [
            TransferEvent(sequence: 0, task: 12, kind: .progress, bytes: 10, total: -1),
            TransferEvent(sequence: 3, task: 12, kind: .completed, bytes: 20, total: 20, status: 200, path: "/c/transfers/s1/12"),
            TransferEvent(sequence: 4, task: 13, kind: .failed, bytes: 0, total: -1, domain: "curl", code: 6, text: "could not resolve"),
        ]),
    .refreshed(tag: 16, answer: .newData),
    .refreshed(tag: 17, answer: .unsupported),
    .newData(extensionID: "com.example.stocks.widget"),
    .refreshDone(refreshID: 9, answer: .noData),
    .refreshDone(refreshID: .max, answer: .failed),
    .refresh(refreshID: 3),
    .post(tag: 13, name: "com.example.stocks.quotes-changed"),
    .observe(name: "com.example.stocks.quotes-changed"),
    .notify(name: ""),
    .completed(requestID: 1, payload: []),
    .completed(requestID: .max, payload: Array("translated page".utf8)),
    .cancelled(requestID: 2, reason: "the user cancelled"),
    .complete(requestID: 3, payload: [0, 255, 10]),
    .cancel(requestID: 4, reason: ""),
    .discover(tag: 9, point: "", content: try! ActivationContent([:])),
    .discover(tag: 10, point: "share", content: try! ActivationContent(["url": 1, "image": 3, "application/pdf": 2, "text": 0])),
    .discovered(tag: 11, final: true, extensions: []),
    .discovered(
        tag: 12, final: false,
        extensions: [
            DiscoveredExtension(id: "com.example.a", point: "share", displayName: "Ä share"),
            DiscoveredExtension(id: "com.example.b", point: "action", displayName: nil),
        ]),
    .begin(tag: 1, extensionID: "com.example.stocks.widget"),
    .begin(tag: .max, extensionID: String(repeating: "x", count: WireLimits.maxIdentifier)),
    .end(tag: 7, requestID: 0),
    .end(tag: .max, requestID: .max),
    .query(tag: 3, kind: .list, extensionIDs: []),
    .query(tag: 4, kind: .status, extensionIDs: ["a", "b.c", "ünïcødé.id"]),
    .query(tag: 5, kind: .container, extensionIDs: ["group.com.example.stocks"]),
    .kill(tag: 5, extensionID: "com.example.x", signal: 15),
    .kill(tag: 6, extensionID: "y", signal: -1),
    .kill(tag: 6, extensionID: "y", signal: .min),
    .reload(tag: 8),
    .monitor(tag: 9),
    .prewarm(tag: 10, extensionIDs: []),
    .prewarm(tag: 11, extensionIDs: ["one", "two", "three"]),
    .begun(tag: 12, requestID: 99, pid: 4321, hasChannel: true),
    .begun(tag: 12, requestID: .max, pid: -1, hasChannel: false),
    .ok(tag: 13),
    .failure(tag: 14, code: .unknownExtension, text: "no extension with id 'x'"),
    .failure(tag: 14, code: .interrupted, text: ""),
    .json(tag: 15, final: false, chunk: Array("{\"a\":".utf8)),
    .json(tag: 15, final: true, chunk: []),
    .json(tag: 16, final: true, chunk: [0, 0xFF, 0x80, 0x7F]),  // bytes, not text: anything goes
    .interrupted(requestID: 17, reason: "'x' ended: crashed (signal 11)"),
    .events(json: [Array("{\"kind\":\"launch\"}".utf8)]),
    .output(json: [Array("{\"id\":\"a\",\"text\":\"hello\",\"time\":\"2026-11-28T17:00:00.000Z\"}".utf8)]),
    .events(json: [[], Array("{\"kind\":\"ready\"}".utf8), Array("{}".utf8)]),
    .ready,
    .acquire(tag: 18, reason: "finish upload ✓"),
    .release(assertionID: 19),
    .expireReceived(assertionID: .max),
    .deliver(requestID: 20),
    .ended(requestID: 21),
    .granted(tag: 22, assertionID: 23),
    .denied(tag: 24, reason: "the extension is expiring"),
    .expire(assertionID: 25),
]
