/// Size limits enforced by the wire decoder and encoder. Anything larger is refused,
/// never truncated, so a peer cannot make the daemon allocate more than these bounds.
public enum WireLimits {
    /// Protocol version carried in every message header.
    public static let version: UInt8 = 1
    /// Size of the fixed message header in bytes.
    public static let headerSize = 8
    /// Largest datagram a peer may send or receive, header included.
    public static let maxMessageSize = 65_536
    /// Longest extension id, or notification hint name, in UTF-8 bytes.
    public static let maxIdentifier = 255
    /// Longest assertion reason, in UTF-8 bytes.
    public static let maxReason = 1_024
    /// Longest human-readable error or interruption message, in UTF-8 bytes.
    public static let maxText = 4_096
    /// Largest JSON chunk in one message; longer documents are split into chunks.
    public static let maxChunk = 60_000
    /// Largest result an extension may return when it completes a request.
    public static let maxPayload = 60_000
    /// Most extension ids named in one query.
    public static let maxIdentifiers = 1_024
    /// Most descriptors attached to one message.
    public static let maxDescriptors = 1
    /// Most notification hint names one extension process may observe: the daemon ignores an
    /// `observe` of a further name, and the runtimes refuse it before sending.
    public static let maxObservedHints = 256
    /// Longest URL an extension may ask to open (`openURL`), in UTF-8 bytes.
    public static let maxURL = 2_048
    /// Longest key of a shared defaults suite, in UTF-8 bytes.
    public static let maxDefaultsKey = 255
    /// Largest encoded value of one key of a shared defaults suite.
    public static let maxDefaultsValue = 60_000
    /// Largest secret item's data.
    public static let maxSecret = 60_000
    /// Most items one `secretItems` carries (attributes only).
    public static let maxSecretItems = 64
    /// Longest URL of a background transfer, in UTF-8 bytes.
    public static let maxTransferURL = 8_192
    /// Longest path of a background transfer's file in its shared container, in UTF-8 bytes.
    public static let maxTransferPath = 1_024
    /// Most events one `transferEvents` carries.
    public static let maxTransferEvents = 64
    /// Largest shared defaults suite: its offsets table and entries, in bytes.
    public static let maxDefaultsSuite = 262_144
}
