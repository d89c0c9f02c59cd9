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
