/// Why a datagram was refused by the decoder (or a message by the encoder).
public enum WireError: Error, Equatable, Sendable, CustomStringConvertible {
    case tooShort(Int)
    case tooLarge(Int)
    case unsupportedVersion(UInt8)
    case unknownKind(UInt8)
    case lengthMismatch(declared: Int, actual: Int)
    case truncatedField(String)
    case fieldTooLong(String, Int)
    case invalidUTF8(String)
    case invalidValue(String)
    case trailingBytes(Int)

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
