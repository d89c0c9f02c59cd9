/// Why a datagram was refused by the decoder (or a message by the encoder).
public enum WireError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The datagram, of this many bytes, is shorter than the header.
    case tooShort(Int)
    /// The message, of this many bytes, is over `WireLimits.maxMessageSize`.
    case tooLarge(Int)
    /// The header names this protocol version, which this side does not speak.
    case unsupportedVersion(UInt8)
    /// The header names this message type, which is not a `MessageKind`.
    case unknownKind(UInt8)
    /// The header declares `declared` payload bytes, but `actual` arrived.
    case lengthMismatch(declared: Int, actual: Int)
    /// The payload ends inside the named field.
    case truncatedField(String)
    /// The named field has this length (bytes, or entries for a list), over its limit in
    /// `WireLimits`.
    case fieldTooLong(String, Int)
    /// The named text field is not valid UTF-8.
    case invalidUTF8(String)
    /// The named field holds a value its type does not allow.
    case invalidValue(String)
    /// This many bytes follow the last field of the message.
    case trailingBytes(Int)

    /// One sentence naming the fault, for logs and refusals.
    public var description: String {
        switch self {
        case .tooShort(let n): "message of \(n) bytes is shorter than the \(WireLimits.headerSize)-byte header"
        case .tooLarge(let n): "message of \(n) bytes exceeds the \(WireLimits.maxMessageSize)-byte limit"
        case .unsupportedVersion(let v): "protocol version \(v) is not supported (this side speaks \(WireLimits.version))"
        case .unknownKind(let k): "unknown message type \(k)"
        case .lengthMismatch(let d, let a): "header declares \(d) payload bytes but \(a) arrived"
        case .truncatedField(let f): "payload ends inside field '\(f)'"
        case .fieldTooLong(let f, let n): "field '\(f)' is \(n) bytes, over its limit"
        case .invalidUTF8(let f): "field '\(f)' is not valid UTF-8"
        case .invalidValue(let f): "field '\(f)' has an invalid value"
        case .trailingBytes(let n): "\(n) unexpected bytes after the last field"
        }
    }
}
