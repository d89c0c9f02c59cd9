import ExtensionProtocol
import ExtensionTransport

#if canImport(Glibc)
import Glibc
#endif

/// A shared defaults suite (Apple's `UserDefaults(suiteName:)` for an app group): small typed
/// settings that an app and its extensions share, named after one of the app's groups
/// (docs/defaults.md).
///
/// Reads come from a read-only mapping of the suite, with no system call and no waiting:
/// every value is current as of the read, including the writes of other members. Writes go
/// through extensiond, so no member ever holds a lock that its suspension could strand; a
/// write returns once every member sees it. Other members' changes are announced to the
/// handlers of `onChange` (one call for all the changes made while the extension was
/// suspended, after its resume).
public final class GroupDefaults: Sendable {
    /// The suite's name: a group of the extension's app.
    public let suiteName: String
    private let mapping: SuiteMapping
    private let channel: RuntimeChannel

    /// Opens the suite `suiteName`, one of the groups of the app the extension's manifest
    /// names (`"app"`): one round trip to extensiond. Throws `DefaultsError`: not a group of
    /// the app, no app declares it, or not launched by extensiond.
    public init(suiteName: String) throws(DefaultsError) {
        guard let channel = RuntimeChannel.shared else { throw .notSupervised }
        let answer = channel.call { .suiteOpen(tag: $0, suite: suiteName) }
        if let failure = answer.failure {
            if let fd = answer.descriptor { close(fd) }
            throw DefaultsError(failure, answer.text)
        }
        guard let fd = answer.descriptor else { throw .failed("extensiond answered without the suite's mapping") }
        defer { close(fd) }
        do {
            mapping = try SuiteMapping(fd: fd)
        } catch {
            throw .failed("cannot map the suite '\(suiteName)': \(error)")
        }
        self.suiteName = suiteName
        self.channel = channel
    }

    /// The value of `key`, or nil. A suite that stays malformed (never the case for one
    /// extensiond wrote) reads as empty.
    public subscript(key: String) -> DefaultsValue? { (try? mapping.value(forKey: key)) ?? nil }

    /// The string of `key`, or nil when it has none or another type.
    public func string(forKey key: String) -> String? {
        if case .string(let s)? = self[key] { return s }
        return nil
    }

    /// The integer of `key` (a double is truncated), or 0.
    public func integer(forKey key: String) -> Int64 {
        switch self[key] {
        case .integer(let i)?: i
        case .double(let d)? where d.isFinite && abs(d) < 9.2e18: Int64(d)
        default: 0
        }
    }

    /// The double of `key` (an integer is converted), or 0.
    public func double(forKey key: String) -> Double {
        switch self[key] {
        case .double(let d)?: d
        case .integer(let i)?: Double(i)
        default: 0
        }
    }

    /// The boolean of `key`, or false.
    public func bool(forKey key: String) -> Bool {
        if case .bool(let b)? = self[key] { return b }
        return false
    }

    /// Every key and value, as of one moment.
    public func dictionaryRepresentation() -> [String: DefaultsValue] { (try? mapping.snapshot()) ?? [:] }

    /// Sets `key` to `value` (nil removes it); returns once every member sees it. Throws
    /// `DefaultsError`: a bad key (empty, over 255 bytes, a NUL), a value over 60,000 bytes
    /// encoded, the suite over its 262,144 bytes, or extensiond gone.
    public func set(_ value: DefaultsValue?, forKey key: String) throws(DefaultsError) {
        if let problem = DefaultsValue.keyProblem(key) { throw .invalid("key '\(key)' \(problem)") }
        let encoded = value?.encoded
        if let encoded, encoded.count > WireLimits.maxDefaultsValue {
            throw .full("the value of '\(key)' is \(encoded.count) bytes encoded, over \(WireLimits.maxDefaultsValue)")
        }
        let answer = channel.call { .suiteWrite(tag: $0, suite: suiteName, key: key, value: encoded) }
        if let fd = answer.descriptor { close(fd) }
        if let failure = answer.failure { throw DefaultsError(failure, answer.text) }
    }

    /// Removes `key`; returns once every member sees it.
    public func removeObject(forKey key: String) throws(DefaultsError) { try set(nil, forKey: key) }

    /// Runs `handler` (with the suite's name) on a runtime thread whenever another member
    /// changes the suite: at once while the extension runs, once after its resume for all the
    /// changes made while it was suspended (it is never woken for them).
    public func onChange(_ handler: @escaping @Sendable (String) -> Void) { channel.observeSuite(suiteName, handler) }
}

/// Why a defaults suite could not be opened or written.
public enum DefaultsError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The process was not launched by extensiond.
    case notSupervised
    /// No app declares the group.
    case unknownSuite(String)
    /// The suite is not one of the groups of the extension's app.
    case notPermitted(String)
    /// A malformed key or value.
    case invalid(String)
    /// Over a limit: the value's size or the suite's.
    case full(String)
    /// extensiond failed, or is gone.
    case failed(String)

    init(_ code: FailureCode, _ text: String) {
        switch code {
        case .unknownExtension: self = .unknownSuite(text)
        case .notPermitted: self = .notPermitted(text)
        case .badRequest: self = .invalid(text)
        case .limitReached: self = .full(text)
        default: self = .failed(text)
        }
    }

    public var description: String {
        switch self {
        case .notSupervised: "not launched by extensiond"
        case .unknownSuite(let text), .notPermitted(let text), .invalid(let text), .full(let text), .failed(let text): text
        }
    }
}
