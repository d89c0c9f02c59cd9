import ExtensionProtocol
import Dispatch
#if canImport(Glibc)
import Glibc
#endif

/// The entry point of an extension process.
///
/// ```swift
/// ExtensionMain.run { request in
///     request.channel.write("hello\n")
/// }
/// ```
public enum ExtensionMain {
    /// Whether this process was launched by extensiond (it inherited a runtime channel).
    public static var isSupervised: Bool { RuntimeChannel.shared != nil }

    /// Announces readiness to the supervisor and serves requests until the process is ended.
    ///
    /// `onRequest` runs for each request a host begins, on a runtime thread of its own (it may
    /// block, e.g. reading the request's channel); `onEnd` runs likewise when a host ends a
    /// request (the host's end of the channel also reaches end-of-file).
    /// Never returns. Without a supervisor it serves nothing and waits to be killed.
    public static func run(
        onRequest: @escaping @Sendable (ExtensionRequest) -> Void,
        onEnd: @escaping @Sendable (UInt64) -> Void = { _ in }
    ) -> Never {
        start(onRequest: onRequest, onEnd: onEnd)
        dispatchMain()
    }

    /// Observes the notification hint `name` (posted by a host with
    /// `ExtensionHostConnection.post(_:)` or `extctl post`): `handler` runs on a runtime thread
    /// for each post made while this process runs, and once for all the posts made while it was
    /// suspended, when it is resumed (a hint never resumes or launches it). Names follow the
    /// extension id rule (letters, digits, `.`, `-`, `_`; at most 255 bytes). Throws
    /// `HintError` for a bad name, or when not launched by extensiond.
    public static func observe(_ name: String, _ handler: @escaping @Sendable (String) -> Void) throws(HintError) {
        if let problem = Identifier.problem(name) { throw .badName(name, problem) }
        guard let channel = RuntimeChannel.shared else { throw .notSupervised }
        guard channel.observe(name, handler) else { throw .supervisorGone }
    }

    /// Like `run`, but returns at once: for programs that own their main thread.
    public static func start(
        onRequest: @escaping @Sendable (ExtensionRequest) -> Void,
        onEnd: @escaping @Sendable (UInt64) -> Void = { _ in }
    ) {
        guard let channel = RuntimeChannel.shared else { return }
        channel.start(onRequest: onRequest, onEnd: onEnd)
        channel.send(.ready)
    }
}

/// Why a notification hint could not be observed.
public enum HintError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The name breaks the naming rule (the name, the problem).
    case badName(String, String)
    /// The process was not launched by extensiond.
    case notSupervised
    /// The channel to extensiond is closed.
    case supervisorGone

    public var description: String {
        switch self {
        case .badName(let name, let problem): "bad hint name '\(name)': \(problem)"
        case .notSupervised: "not launched by extensiond: no hint can be observed"
        case .supervisorGone: "the channel to extensiond is closed"
        }
    }
}
