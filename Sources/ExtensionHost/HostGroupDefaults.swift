import ExtensionProtocol
import ExtensionTransport

#if canImport(Glibc)
import Glibc
#endif

/// A shared defaults suite opened by an app (or an administrator) over the control socket: the
/// same suite, semantics and limits as `GroupDefaults` in extensions (docs/defaults.md). Reads
/// come from a read-only mapping with no round trip; a write returns once every member sees it.
public final class HostGroupDefaults: Sendable {
    /// The suite's name: a group of the app.
    public let suiteName: String
    private let mapping: SuiteMapping
    private let client: ControlClient

    /// Opens the suite `suiteName` on `client`'s connection. Allowed to the processes of an app
    /// that declares the group (recognized by their systemd scope, or their uid under a root
    /// daemon) and to administrators; throws the daemon's refusal otherwise.
    public init(suiteName: String, client: ControlClient) throws(HostError) {
        let reply = try client.call { .defaultsOpen(tag: $0, suite: suiteName) }
        guard case .suite(let fd?) = reply else { throw HostError("extensiond answered without the suite's mapping") }
        defer { close(fd) }
        do {
            mapping = try SuiteMapping(fd: fd)
        } catch {
            throw HostError("cannot map the suite '\(suiteName)': \(error)")
        }
        self.suiteName = suiteName
        self.client = client
    }

    /// The value of `key`, or nil.
    public subscript(key: String) -> DefaultsValue? { (try? mapping.value(forKey: key)) ?? nil }

    /// Every key and value, as of one moment. Throws when the suite is malformed.
    public func dictionaryRepresentation() throws(DefaultsValueError) -> [String: DefaultsValue] { try mapping.snapshot() }

    /// Sets `key` to `value` (nil removes it); returns once every member sees it. Throws the
    /// daemon's refusal: a bad key or value (`badRequest`), over a limit (`limitReached`).
    public func set(_ value: DefaultsValue?, forKey key: String) throws(HostError) {
        _ = try client.call { .defaultsWrite(tag: $0, suite: suiteName, key: key, value: value?.encoded) }
    }

    /// Sets `key` to a value already encoded (`DefaultsValue.encoded`), as `set` does.
    public func set(encoded value: [UInt8]?, forKey key: String) throws(HostError) {
        _ = try client.call { .defaultsWrite(tag: $0, suite: suiteName, key: key, value: value) }
    }

    /// Runs `handler` (on the connection's reader thread) whenever another member changes the suite.
    public func onChange(_ handler: @escaping @Sendable (String) -> Void) { client.addSuiteChangeHandler(suiteName, handler) }
}

extension ExtensionHostConnection {
    /// Opens the shared defaults suite `suiteName` (a group of the calling app) on this connection.
    public func defaults(suiteName: String) throws(HostError) -> HostGroupDefaults {
        try HostGroupDefaults(suiteName: suiteName, client: client)
    }
}
