/// The one decoder for every byte extensiond reads from a socket.
///
/// It checks the header (version, kind, declared length against the datagram's length and
/// `WireLimits.maxMessageSize`), then each field against its limit, and refuses trailing
/// bytes. It never traps on malformed input: every failure is a `WireError`.
public enum WireDecoder {
    /// Decodes one datagram.
    public static func decode(_ datagram: UnsafeRawBufferPointer) throws(WireError) -> Message {
        guard datagram.count >= WireLimits.headerSize else { throw .tooShort(datagram.count) }
        guard datagram.count <= WireLimits.maxMessageSize else { throw .tooLarge(datagram.count) }
        var r = Reader(buffer: datagram, offset: 0)
        let version = try r.u8("version")
        guard version == WireLimits.version else { throw .unsupportedVersion(version) }
        let rawKind = try r.u8("kind")
        guard let kind = MessageKind(rawValue: rawKind) else { throw .unknownKind(rawKind) }
        guard try r.u16("reserved") == 0 else { throw .invalidValue("reserved") }
        let declared = Int(try r.u32("length"))
        let actual = datagram.count - WireLimits.headerSize
        guard declared == actual else { throw .lengthMismatch(declared: declared, actual: actual) }
        let message = try decodePayload(kind, &r)
        guard r.remaining == 0 else { throw .trailingBytes(r.remaining) }
        return message
    }

    /// Attributes alone, as `WireEncoder.encoded(_: SecretAttributes)` wrote them.
    public static func attributes(_ bytes: [UInt8]) throws(WireError) -> SecretAttributes {
        let decoded = bytes.withUnsafeBytes { raw in
            Result { () throws(WireError) -> SecretAttributes in
                var r = Reader(buffer: raw, offset: 0)
                let a = try r.attributes()
                guard r.remaining == 0 else { throw .trailingBytes(r.remaining) }
                return a
            }
        }
        return try decoded.get()
    }

    /// Decodes one datagram held in an array (convenience for tests and fuzzing).
    public static func decode(_ bytes: [UInt8]) throws(WireError) -> Message {
        do {
            return try bytes.withUnsafeBytes { raw in try decode(raw) }
        } catch let error as WireError {
            throw error
        } catch {
            throw .invalidValue("unexpected")
        }
    }

    private static func decodePayload(_ kind: MessageKind, _ r: inout Reader) throws(WireError) -> Message {
        switch kind {
        case .begin:
            return .begin(tag: try r.u32("tag"), extensionID: try r.string("extensionID", limit: WireLimits.maxIdentifier))
        case .end:
            return .end(tag: try r.u32("tag"), requestID: try r.u64("requestID"))
        case .query:
            let tag = try r.u32("tag")
            let raw = try r.u8("kind")
            guard let queryKind = QueryKind(rawValue: raw) else { throw .invalidValue("kind") }
            return .query(tag: tag, kind: queryKind, extensionIDs: try r.identifiers())
        case .kill:
            let tag = try r.u32("tag")
            let id = try r.string("extensionID", limit: WireLimits.maxIdentifier)
            return .kill(tag: tag, extensionID: id, signal: Int32(bitPattern: try r.u32("signal")))
        case .reset:
            let tag = try r.u32("tag")
            return .reset(tag: tag, extensionID: try r.string("extensionID", limit: WireLimits.maxIdentifier))
        case .reload:
            return .reload(tag: try r.u32("tag"))
        case .reexec:
            return .reexec(tag: try r.u32("tag"))
        case .monitor:
            return .monitor(tag: try r.u32("tag"))
        case .prewarm:
            return .prewarm(tag: try r.u32("tag"), extensionIDs: try r.identifiers())
        case .discover:
            let tag = try r.u32("tag")
            let point = try r.string("point", limit: WireLimits.maxIdentifier)
            let n = Int(try r.u16("content"))
            guard n <= ActivationContent.maxKinds else { throw .invalidValue("content") }
            // Canonical form, as the encoder writes it: kinds in increasing order, counts above 0.
            var counts: [String: UInt32] = [:]
            var previous: String?
            for _ in 0..<n {
                let kind = try r.string("content", limit: WireLimits.maxIdentifier)
                if let previous, !(previous.utf8.lexicographicallyPrecedes(kind.utf8)) { throw .invalidValue("content") }
                previous = kind
                let count = try r.u32("content")
                guard count > 0 else { throw .invalidValue("content") }
                counts[kind] = count
            }
            do {
                return .discover(tag: tag, point: point, content: try ActivationContent(counts))
            } catch {
                throw .invalidValue("content")
            }
        case .discovered:
            let tag = try r.u32("tag")
            let final = try r.flag("final")
            let n = Int(try r.u16("extensions"))
            guard n <= WireLimits.maxIdentifiers else { throw .invalidValue("extensions") }
            var found: [DiscoveredExtension] = []
            for _ in 0..<n {
                let id = try r.string("id", limit: WireLimits.maxIdentifier)
                let point = try r.string("point", limit: WireLimits.maxIdentifier)
                let name = try r.flag("displayName") ? try r.string("displayName", limit: WireLimits.maxIdentifier) : nil
                found.append(DiscoveredExtension(id: id, point: point, displayName: name))
            }
            return .discovered(tag: tag, final: final, extensions: found)
        case .begun:
            let tag = try r.u32("tag")
            let requestID = try r.u64("requestID")
            let pid = Int32(bitPattern: try r.u32("pid"))
            return .begun(tag: tag, requestID: requestID, pid: pid, hasChannel: try r.flag("hasChannel"))
        case .ok:
            return .ok(tag: try r.u32("tag"))
        case .failure:
            let tag = try r.u32("tag")
            guard let code = FailureCode(rawValue: try r.u16("code")) else { throw .invalidValue("code") }
            return .failure(tag: tag, code: code, text: try r.string("text", limit: WireLimits.maxText))
        case .json:
            let tag = try r.u32("tag")
            let final = try r.flag("final")
            return .json(tag: tag, final: final, chunk: try r.bytes("chunk", limit: WireLimits.maxChunk))
        case .interrupted:
            return .interrupted(requestID: try r.u64("requestID"), reason: try r.string("reason", limit: WireLimits.maxText))
        case .events, .output:
            let n = Int(try r.u16("events"))
            guard n > 0 else { throw .invalidValue("events") }
            var objects: [[UInt8]] = []
            // Each event takes at least its 4-byte length: no more room than the payload can fill.
            objects.reserveCapacity(min(n, r.remaining / 4))
            for _ in 0..<n { objects.append(try r.bytes("events", limit: WireLimits.maxChunk)) }
            return kind == .events ? .events(json: objects) : .output(json: objects)
        case .completed:
            return .completed(requestID: try r.u64("requestID"), payload: try r.bytes("payload", limit: WireLimits.maxPayload))
        case .cancelled:
            return .cancelled(requestID: try r.u64("requestID"), reason: try r.string("reason", limit: WireLimits.maxText))
        case .complete:
            return .complete(requestID: try r.u64("requestID"), payload: try r.bytes("payload", limit: WireLimits.maxPayload))
        case .cancel:
            return .cancel(requestID: try r.u64("requestID"), reason: try r.string("reason", limit: WireLimits.maxText))
        case .post:
            return .post(tag: try r.u32("tag"), name: try r.string("name", limit: WireLimits.maxIdentifier))
        case .observe:
            return .observe(name: try r.string("name", limit: WireLimits.maxIdentifier))
        case .notify:
            return .notify(name: try r.string("name", limit: WireLimits.maxIdentifier))
        case .forceRefresh:
            return .forceRefresh(tag: try r.u32("tag"), extensionID: try r.string("extensionID", limit: WireLimits.maxIdentifier))
        case .subscribe:
            return .subscribe(tag: try r.u32("tag"), extensionIDs: try r.identifiers())
        case .follow:
            return .follow(tag: try r.u32("tag"), extensionIDs: try r.identifiers())
        case .refreshed:
            let tag = try r.u32("tag")
            guard let answer = RefreshAnswer(rawValue: try r.u8("answer")) else { throw .invalidValue("answer") }
            return .refreshed(tag: tag, answer: answer)
        case .newData:
            return .newData(extensionID: try r.string("extensionID", limit: WireLimits.maxIdentifier))
        case .refreshDone:
            let id = try r.u64("refreshID")
            guard let answer = RefreshAnswer(rawValue: try r.u8("answer")) else { throw .invalidValue("answer") }
            return .refreshDone(refreshID: id, answer: answer)
        case .refresh:
            return .refresh(refreshID: try r.u64("refreshID"))
        case .ready:
            return .ready
        case .defaultsOpen:
            return .defaultsOpen(tag: try r.u32("tag"), suite: try r.string("suite", limit: WireLimits.maxIdentifier))
        case .suiteOpen:
            return .suiteOpen(tag: try r.u32("tag"), suite: try r.string("suite", limit: WireLimits.maxIdentifier))
        case .defaultsWrite, .suiteWrite:
            let tag = try r.u32("tag")
            let suite = try r.string("suite", limit: WireLimits.maxIdentifier)
            let key = try r.string("key", limit: WireLimits.maxDefaultsKey)
            let value = try r.flag("hasValue") ? try r.bytes("value", limit: WireLimits.maxDefaultsValue) : nil
            return kind == .defaultsWrite
                ? .defaultsWrite(tag: tag, suite: suite, key: key, value: value) : .suiteWrite(tag: tag, suite: suite, key: key, value: value)
        case .defaultsOpened:
            return .defaultsOpened(tag: try r.u32("tag"))
        case .defaultsChanged:
            return .defaultsChanged(suite: try r.string("suite", limit: WireLimits.maxIdentifier))
        case .suiteChanged:
            return .suiteChanged(suite: try r.string("suite", limit: WireLimits.maxIdentifier))
        case .openURL:
            return .openURL(tag: try r.u32("tag"), url: try r.string("url", limit: WireLimits.maxURL))
        case .secretAdd:
            let tag = try r.u32("tag")
            return .secretAdd(tag: tag, attributes: try r.attributes(), data: try r.secret())
        case .secretCopy:
            let tag = try r.u32("tag")
            let query = try r.attributes()
            return .secretCopy(tag: tag, query: query, returnData: try r.flag("returnData"), all: try r.flag("all"))
        case .secretUpdate:
            let tag = try r.u32("tag")
            let query = try r.attributes()
            let label = try r.flag("hasLabel") ? try r.string("label", limit: WireLimits.maxIdentifier) : nil
            let data = try r.flag("hasData") ? try r.secret() : nil
            return .secretUpdate(tag: tag, query: query, label: label, data: data)
        case .secretDelete:
            let tag = try r.u32("tag")
            return .secretDelete(tag: tag, query: try r.attributes())
        case .secretItems:
            let tag = try r.u32("tag")
            let n = Int(try r.u16("count"))
            guard n > 0, n <= WireLimits.maxSecretItems else { throw .invalidValue("count") }
            var items: [SecretItem] = []
            for _ in 0..<n {
                let attributes = try r.attributes()
                items.append(SecretItem(attributes: attributes, data: try r.flag("hasData") ? try r.secret() : nil))
            }
            return .secretItems(tag: tag, items: items)
        case .transferCreate:
            let tag = try r.u32("tag")
            let session = try r.string("session", limit: WireLimits.maxIdentifier)
            let group = try r.string("group", limit: WireLimits.maxIdentifier)
            guard let method = TransferMethod(rawValue: try r.u8("method")) else { throw .invalidValue("method") }
            let url = try r.string("url", limit: WireLimits.maxTransferURL)
            let path = try r.string("path", limit: WireLimits.maxTransferPath)
            return .transferCreate(
                tag: tag,
                request: TransferRequest(session: session, group: group, method: method, url: url, path: path, discretionary: try r.flag("discretionary")))
        case .transferCancel:
            return .transferCancel(tag: try r.u32("tag"), task: try r.u64("task"))
        case .transferClaim:
            let tag = try r.u32("tag")
            let session = try r.string("session", limit: WireLimits.maxIdentifier)
            return .transferClaim(tag: tag, session: session, group: try r.string("group", limit: WireLimits.maxIdentifier))
        case .transferHandled:
            let tag = try r.u32("tag")
            let session = try r.string("session", limit: WireLimits.maxIdentifier)
            let group = try r.string("group", limit: WireLimits.maxIdentifier)
            return .transferHandled(tag: tag, session: session, group: group, through: try r.u64("through"))
        case .transferCreated:
            return .transferCreated(tag: try r.u32("tag"), task: try r.u64("task"))
        case .transferEvents:
            let session = try r.string("session", limit: WireLimits.maxIdentifier)
            let group = try r.string("group", limit: WireLimits.maxIdentifier)
            let n = Int(try r.u16("count"))
            guard n > 0, n <= WireLimits.maxTransferEvents else { throw .invalidValue("count") }
            var events: [TransferEvent] = []
            for _ in 0..<n {
                let sequence = try r.u64("sequence"), task = try r.u64("task")
                guard let kind = TransferEvent.Kind(rawValue: try r.u8("kind")) else { throw .invalidValue("kind") }
                let bytes = try r.u64("bytes"), total = Int64(bitPattern: try r.u64("total")), status = try r.u16("status")
                let path = try r.string("path", limit: WireLimits.maxTransferPath + 4_096)
                let domain = try r.string("domain", limit: WireLimits.maxIdentifier)
                let code = Int32(bitPattern: try r.u32("code"))
                events.append(
                    TransferEvent(
                        sequence: sequence, task: task, kind: kind, bytes: bytes, total: total, status: status, path: path, domain: domain, code: code,
                        text: try r.string("text", limit: 512)))
            }
            return .transferEvents(session: session, group: group, events: events)
        case .answer:
            let tag = try r.u32("tag")
            let raw = try r.u16("code")
            guard raw == 0 || FailureCode(rawValue: raw) != nil else { throw .invalidValue("code") }
            return .answer(tag: tag, failure: FailureCode(rawValue: raw), text: try r.string("text", limit: WireLimits.maxText))
        case .acquire:
            return .acquire(tag: try r.u32("tag"), reason: try r.string("reason", limit: WireLimits.maxReason))
        case .release:
            return .release(assertionID: try r.u64("assertionID"))
        case .expireReceived:
            return .expireReceived(assertionID: try r.u64("assertionID"))
        case .deliver:
            return .deliver(requestID: try r.u64("requestID"))
        case .ended:
            return .ended(requestID: try r.u64("requestID"))
        case .granted:
            return .granted(tag: try r.u32("tag"), assertionID: try r.u64("assertionID"))
        case .denied:
            return .denied(tag: try r.u32("tag"), reason: try r.string("reason", limit: WireLimits.maxText))
        case .expire:
            return .expire(assertionID: try r.u64("assertionID"))
        }
    }
}

/// A bounds-checked little-endian cursor over a datagram.
struct Reader {
    let buffer: UnsafeRawBufferPointer
    var offset: Int

    var remaining: Int { buffer.count - offset }

    mutating func take(_ n: Int, _ field: String) throws(WireError) -> UnsafeRawBufferPointer {
        guard n >= 0, remaining >= n else { throw .truncatedField(field) }
        let slice = UnsafeRawBufferPointer(rebasing: buffer[offset..<offset + n])
        offset += n
        return slice
    }

    mutating func u8(_ field: String) throws(WireError) -> UInt8 {
        try take(1, field)[0]
    }

    mutating func flag(_ field: String) throws(WireError) -> Bool {
        switch try u8(field) {
        case 0: return false
        case 1: return true
        default: throw .invalidValue(field)
        }
    }

    mutating func u16(_ field: String) throws(WireError) -> UInt16 {
        let b = try take(2, field)
        return UInt16(b[0]) | UInt16(b[1]) << 8
    }

    mutating func u32(_ field: String) throws(WireError) -> UInt32 {
        let b = try take(4, field)
        var v: UInt32 = 0
        for i in 0..<4 { v |= UInt32(b[i]) << UInt32(8 * i) }
        return v
    }

    mutating func u64(_ field: String) throws(WireError) -> UInt64 {
        let b = try take(8, field)
        var v: UInt64 = 0
        for i in 0..<8 { v |= UInt64(b[i]) << UInt64(8 * i) }
        return v
    }

    mutating func string(_ field: String, limit: Int) throws(WireError) -> String {
        let n = Int(try u16(field))
        guard n <= limit else { throw .fieldTooLong(field, n) }
        let raw = try take(n, field)
        guard let s = String(validating: raw.bindMemory(to: UInt8.self), as: UTF8.self) else {
            throw .invalidUTF8(field)
        }
        return s
    }

    mutating func bytes(_ field: String, limit: Int) throws(WireError) -> [UInt8] {
        let n = Int(try u32(field))
        guard n <= limit else { throw .fieldTooLong(field, n) }
        return Array(try take(n, field))
    }

    mutating func attributes() throws(WireError) -> SecretAttributes {
        guard let itemClass = SecretAttributes.ItemClass(rawValue: try u8("class")) else { throw .invalidValue("class") }
        var a = SecretAttributes(itemClass: itemClass, group: try string("group", limit: WireLimits.maxIdentifier))
        let fields = try u8("fields")
        guard fields & 0x80 == 0 else { throw .invalidValue("fields") }
        if fields & 1 != 0 { a.service = try string("service", limit: WireLimits.maxIdentifier) }
        if fields & 2 != 0 { a.account = try string("account", limit: WireLimits.maxIdentifier) }
        if fields & 4 != 0 { a.server = try string("server", limit: WireLimits.maxIdentifier) }
        if fields & 8 != 0 { a.protocol = try string("protocol", limit: SecretAttributes.maxProtocol) }
        if fields & 16 != 0 { a.port = try u16("port") }
        if fields & 32 != 0 { a.path = try string("path", limit: SecretAttributes.maxPath) }
        if fields & 64 != 0 { a.label = try string("label", limit: WireLimits.maxIdentifier) }
        return a
    }

    /// Secret bytes: u32 length, then the bytes, copied straight into a `SecretData`.
    mutating func secret() throws(WireError) -> SecretData {
        let n = Int(try u32("data"))
        guard n <= WireLimits.maxSecret else { throw .fieldTooLong("data", n) }
        return SecretData(copying: try take(n, "data"))
    }

    mutating func identifiers() throws(WireError) -> [String] {
        let count = Int(try u16("extensionIDs"))
        guard count <= WireLimits.maxIdentifiers else { throw .fieldTooLong("extensionIDs", count) }
        var ids: [String] = []
        ids.reserveCapacity(min(count, remaining / 2))
        for _ in 0..<count { ids.append(try string("extensionIDs", limit: WireLimits.maxIdentifier)) }
        return ids
    }
}
