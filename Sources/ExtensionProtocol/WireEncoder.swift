/// Encodes messages into a reusable byte buffer (no allocation per message once the buffer
/// has grown to its working size).
///
/// Layout: an 8-byte header (version u8, kind u8, reserved u16 = 0, payload length u32,
/// all little-endian) followed by the payload fields in declaration order.
public struct WireEncoder: Sendable {
    /// The bytes of the last encoded message.
    public private(set) var bytes: [UInt8] = []

    /// An encoder with an empty buffer.
    public init() {
        bytes.reserveCapacity(256)
    }

    /// Encodes `message`, replacing the previous contents of `bytes`.
    /// Throws when a field exceeds its limit in `WireLimits`.
    public mutating func encode(_ message: Message) throws(WireError) {
        bytes.removeAll(keepingCapacity: true)
        bytes.append(WireLimits.version)
        bytes.append(message.kind.rawValue)
        bytes.append(0); bytes.append(0)
        bytes.append(0); bytes.append(0); bytes.append(0); bytes.append(0)
        switch message {
        case .begin(let tag, let id):
            put32(tag); try putString(id, field: "extensionID", limit: WireLimits.maxIdentifier)
        case .end(let tag, let requestID):
            put32(tag); put64(requestID)
        case .query(let tag, let kind, let ids):
            put32(tag); bytes.append(kind.rawValue); try putIdentifiers(ids)
        case .kill(let tag, let id, let signal):
            put32(tag); try putString(id, field: "extensionID", limit: WireLimits.maxIdentifier)
            put32(UInt32(bitPattern: signal))
        case .reset(let tag, let id):
            put32(tag); try putString(id, field: "extensionID", limit: WireLimits.maxIdentifier)
        case .reload(let tag), .monitor(let tag), .ok(let tag), .reexec(let tag):
            put32(tag)
        case .prewarm(let tag, let ids):
            put32(tag); try putIdentifiers(ids)
        case .discover(let tag, let point, let content):
            put32(tag); try putString(point, field: "point", limit: WireLimits.maxIdentifier)
            put16(UInt16(content.counts.count))
            for (kind, count) in content.counts.sorted(by: { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }) {
                try putString(kind, field: "content", limit: WireLimits.maxIdentifier); put32(count)
            }
        case .begun(let tag, let requestID, let pid, let hasChannel):
            put32(tag); put64(requestID); put32(UInt32(bitPattern: pid)); bytes.append(hasChannel ? 1 : 0)
        case .failure(let tag, let code, let text):
            put32(tag); put16(code.rawValue); putText(text, limit: WireLimits.maxText)
        case .json(let tag, let final, let chunk):
            put32(tag); bytes.append(final ? 1 : 0); try putBytes(chunk, field: "chunk", limit: WireLimits.maxChunk)
        case .interrupted(let requestID, let reason):
            put64(requestID); putText(reason, limit: WireLimits.maxText)
        case .events(let objects), .output(let objects):
            guard !objects.isEmpty, objects.count <= Int(UInt16.max) else { throw .invalidValue("events") }
            put16(UInt16(objects.count))
            for json in objects { try putBytes(json, field: "events", limit: WireLimits.maxChunk) }
        case .discovered(let tag, let final, let extensions):
            put32(tag); bytes.append(final ? 1 : 0)
            guard extensions.count <= WireLimits.maxIdentifiers else { throw .fieldTooLong("extensions", extensions.count) }
            put16(UInt16(extensions.count))
            for e in extensions {
                try putString(e.id, field: "id", limit: WireLimits.maxIdentifier)
                try putString(e.point, field: "point", limit: WireLimits.maxIdentifier)
                bytes.append(e.displayName == nil ? 0 : 1)
                if let name = e.displayName { try putString(name, field: "displayName", limit: WireLimits.maxIdentifier) }
            }
        case .completed(let requestID, let payload), .complete(let requestID, let payload):
            put64(requestID); try putBytes(payload, field: "payload", limit: WireLimits.maxPayload)
        case .cancelled(let requestID, let reason), .cancel(let requestID, let reason):
            put64(requestID); putText(reason, limit: WireLimits.maxText)
        case .post(let tag, let name):
            put32(tag); try putString(name, field: "name", limit: WireLimits.maxIdentifier)
        case .observe(let name), .notify(let name):
            try putString(name, field: "name", limit: WireLimits.maxIdentifier)
        case .forceRefresh(let tag, let id):
            put32(tag); try putString(id, field: "extensionID", limit: WireLimits.maxIdentifier)
        case .subscribe(let tag, let ids):
            put32(tag); try putIdentifiers(ids)
        case .follow(let tag, let ids):
            put32(tag); try putIdentifiers(ids)
        case .refreshed(let tag, let answer):
            put32(tag); bytes.append(answer.rawValue)
        case .newData(let id):
            try putString(id, field: "extensionID", limit: WireLimits.maxIdentifier)
        case .refreshDone(let id, let answer):
            put64(id); bytes.append(answer.rawValue)
        case .refresh(let id):
            put64(id)
        case .ready:
            break
        case .defaultsOpen(let tag, let suite), .suiteOpen(let tag, let suite):
            put32(tag); try putString(suite, field: "suite", limit: WireLimits.maxIdentifier)
        case .defaultsWrite(let tag, let suite, let key, let value), .suiteWrite(let tag, let suite, let key, let value):
            put32(tag); try putString(suite, field: "suite", limit: WireLimits.maxIdentifier)
            try putString(key, field: "key", limit: WireLimits.maxDefaultsKey)
            bytes.append(value == nil ? 0 : 1)
            if let value { try putBytes(value, field: "value", limit: WireLimits.maxDefaultsValue) }
        case .defaultsOpened(let tag):
            put32(tag)
        case .defaultsChanged(let suite), .suiteChanged(let suite):
            try putString(suite, field: "suite", limit: WireLimits.maxIdentifier)
        case .openURL(let tag, let url):
            put32(tag); try putString(url, field: "url", limit: WireLimits.maxURL)
        case .secretAdd(let tag, let attributes, let data):
            put32(tag); try putAttributes(attributes); try putSecret(data)
        case .secretCopy(let tag, let query, let returnData, let all):
            put32(tag); try putAttributes(query); bytes.append(returnData ? 1 : 0); bytes.append(all ? 1 : 0)
        case .secretUpdate(let tag, let query, let label, let data):
            put32(tag); try putAttributes(query)
            bytes.append(label == nil ? 0 : 1)
            if let label { try putString(label, field: "label", limit: WireLimits.maxIdentifier) }
            bytes.append(data == nil ? 0 : 1)
            if let data { try putSecret(data) }
        case .secretDelete(let tag, let query):
            put32(tag); try putAttributes(query)
        case .secretItems(let tag, let items):
            guard !items.isEmpty, items.count <= WireLimits.maxSecretItems else { throw .invalidValue("items") }
            put32(tag); put16(UInt16(items.count))
            for item in items {
                try putAttributes(item.attributes)
                bytes.append(item.data == nil ? 0 : 1)
                if let data = item.data { try putSecret(data) }
            }
        case .transferCreate(let tag, let request):
            put32(tag); try putString(request.session, field: "session", limit: WireLimits.maxIdentifier)
            try putString(request.group, field: "group", limit: WireLimits.maxIdentifier)
            bytes.append(request.method.rawValue)
            try putString(request.url, field: "url", limit: WireLimits.maxTransferURL)
            try putString(request.path, field: "path", limit: WireLimits.maxTransferPath)
            bytes.append(request.discretionary ? 1 : 0)
        case .transferCancel(let tag, let task):
            put32(tag); put64(task)
        case .transferClaim(let tag, let session, let group):
            put32(tag); try putString(session, field: "session", limit: WireLimits.maxIdentifier)
            try putString(group, field: "group", limit: WireLimits.maxIdentifier)
        case .transferHandled(let tag, let session, let group, let through):
            put32(tag); try putString(session, field: "session", limit: WireLimits.maxIdentifier)
            try putString(group, field: "group", limit: WireLimits.maxIdentifier)
            put64(through)
        case .transferCreated(let tag, let task):
            put32(tag); put64(task)
        case .transferEvents(let session, let group, let events):
            guard !events.isEmpty, events.count <= WireLimits.maxTransferEvents else { throw .invalidValue("events") }
            try putString(session, field: "session", limit: WireLimits.maxIdentifier)
            try putString(group, field: "group", limit: WireLimits.maxIdentifier)
            put16(UInt16(events.count))
            for e in events {
                put64(e.sequence); put64(e.task); bytes.append(e.kind.rawValue); put64(e.bytes); put64(UInt64(bitPattern: e.total))
                put16(e.status); try putString(e.path, field: "path", limit: WireLimits.maxTransferPath + 4_096)
                try putString(e.domain, field: "domain", limit: WireLimits.maxIdentifier)
                put32(UInt32(bitPattern: e.code)); putText(e.text, limit: 512)
            }
        case .answer(let tag, let failure, let text):
            put32(tag); put16(failure?.rawValue ?? 0); putText(text, limit: WireLimits.maxText)
        case .acquire(let tag, let reason):
            put32(tag); putText(reason, limit: WireLimits.maxReason)
        case .release(let id), .expireReceived(let id), .deliver(let id), .ended(let id), .expire(let id):
            put64(id)
        case .granted(let tag, let assertionID):
            put32(tag); put64(assertionID)
        case .denied(let tag, let reason):
            put32(tag); putText(reason, limit: WireLimits.maxText)
        }
        let payload = UInt32(bytes.count - WireLimits.headerSize)
        bytes[4] = UInt8(truncatingIfNeeded: payload)
        bytes[5] = UInt8(truncatingIfNeeded: payload >> 8)
        bytes[6] = UInt8(truncatingIfNeeded: payload >> 16)
        bytes[7] = UInt8(truncatingIfNeeded: payload >> 24)
        if bytes.count > WireLimits.maxMessageSize { throw .tooLarge(bytes.count) }
    }

    /// Encodes `message` into a new array (convenience for tests and cold paths).
    public static func encoded(_ message: Message) throws(WireError) -> [UInt8] {
        var encoder = WireEncoder()
        try encoder.encode(message)
        return encoder.bytes
    }

    private mutating func put16(_ v: UInt16) {
        bytes.append(UInt8(truncatingIfNeeded: v)); bytes.append(UInt8(truncatingIfNeeded: v >> 8))
    }

    private mutating func put32(_ v: UInt32) {
        for shift in stride(from: 0, to: 32, by: 8) { bytes.append(UInt8(truncatingIfNeeded: v >> UInt32(shift))) }
    }

    private mutating func put64(_ v: UInt64) {
        for shift in stride(from: 0, to: 64, by: 8) { bytes.append(UInt8(truncatingIfNeeded: v >> UInt64(shift))) }
    }

    private mutating func putString(_ s: String, field: String, limit: Int) throws(WireError) {
        let utf8 = s.utf8
        guard utf8.count <= limit else { throw .fieldTooLong(field, utf8.count) }
        put16(UInt16(utf8.count))
        bytes.append(contentsOf: utf8)
    }

    /// A human-readable text (an error, a reason): one longer than `limit` bytes is cut at the
    /// last whole character that leaves room for "…", never refused, so that a message carrying
    /// a long error (a path 7 MB deep) is still sent and its peer is not left waiting.
    private mutating func putText(_ s: String, limit: Int) {
        var utf8 = Array(s.utf8)
        if utf8.count > limit {
            let ellipsis = Array("…".utf8)
            var cut = limit - ellipsis.count
            // Back to the start of a character: never between a lead byte and its continuation bytes.
            while cut > 0 && utf8[cut] & 0xC0 == 0x80 { cut -= 1 }
            utf8 = Array(utf8[..<cut]) + ellipsis
        }
        put16(UInt16(utf8.count))
        bytes.append(contentsOf: utf8)
    }

    private mutating func putBytes(_ b: [UInt8], field: String, limit: Int) throws(WireError) {
        guard b.count <= limit else { throw .fieldTooLong(field, b.count) }
        put32(UInt32(b.count))
        bytes.append(contentsOf: b)
    }

    private mutating func putAttributes(_ a: SecretAttributes) throws(WireError) {
        bytes.append(a.itemClass.rawValue)
        try putString(a.group, field: "group", limit: WireLimits.maxIdentifier)
        var fields: UInt8 = 0
        if a.service != nil { fields |= 1 }
        if a.account != nil { fields |= 2 }
        if a.server != nil { fields |= 4 }
        if a.protocol != nil { fields |= 8 }
        if a.port != nil { fields |= 16 }
        if a.path != nil { fields |= 32 }
        if a.label != nil { fields |= 64 }
        bytes.append(fields)
        if let v = a.service { try putString(v, field: "service", limit: WireLimits.maxIdentifier) }
        if let v = a.account { try putString(v, field: "account", limit: WireLimits.maxIdentifier) }
        if let v = a.server { try putString(v, field: "server", limit: WireLimits.maxIdentifier) }
        if let v = a.protocol { try putString(v, field: "protocol", limit: SecretAttributes.maxProtocol) }
        if let v = a.port { put16(v) }
        if let v = a.path { try putString(v, field: "path", limit: SecretAttributes.maxPath) }
        if let v = a.label { try putString(v, field: "label", limit: WireLimits.maxIdentifier) }
    }

    private mutating func putSecret(_ data: SecretData) throws(WireError) {
        guard data.count <= WireLimits.maxSecret else { throw .fieldTooLong("data", data.count) }
        put32(UInt32(data.count))
        data.withUnsafeBytes { bytes.append(contentsOf: $0) }
    }

    /// The attributes alone, in their wire form (a secret item's description, as the daemon
    /// keeps it beside the sealed data).
    public static func encoded(_ attributes: SecretAttributes) throws(WireError) -> [UInt8] {
        var encoder = WireEncoder()
        try encoder.putAttributes(attributes)
        return encoder.bytes
    }

    /// Overwrites the buffer with zeros (after a message that carried secret bytes was sent).
    public mutating func clear() {
        for i in bytes.indices { bytes[i] = 0 }
        bytes.removeAll(keepingCapacity: true)
    }

    private mutating func putIdentifiers(_ ids: [String]) throws(WireError) {
        guard ids.count <= WireLimits.maxIdentifiers else { throw .fieldTooLong("extensionIDs", ids.count) }
        put16(UInt16(ids.count))
        for id in ids { try putString(id, field: "extensionIDs", limit: WireLimits.maxIdentifier) }
    }
}
