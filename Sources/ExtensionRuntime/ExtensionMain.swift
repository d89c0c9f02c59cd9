import Dispatch
import ExtensionProtocol
import Synchronization

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
    /// Whether this process was launched by extensiond: it inherited a runtime channel, an
    /// AF_UNIX SOCK_SEQPACKET socket named by `EXTENSIOND_CHANNEL_FD` (which is then removed
    /// from the environment).
    public static var isSupervised: Bool { RuntimeChannel.shared != nil }

    /// Announces readiness to the supervisor and serves requests until the process is ended.
    ///
    /// `onRequest` runs for each request a host begins, on a runtime thread of its own (it may
    /// block, e.g. reading the request's channel); `onEnd` runs likewise when a host ends a
    /// request (the host's end of the channel also reaches end-of-file). When that end
    /// suspends the extension at once, `onEnd` runs once it is resumed (its message arrives
    /// before the next request's).
    /// Never returns. Without a supervisor it serves nothing and waits to be killed.
    /// - Precondition: the runtime was not started already (`start`).
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
    /// extension id rule (letters, digits, `.`, `-`, `_`; at most 255 bytes). A name may have
    /// several handlers, called in the order they were added. Throws `HintError`: for a bad
    /// name, when not launched by extensiond, for a new name when
    /// `WireLimits.maxObservedHints` names are observed already, or when the channel is closed.
    public static func observe(_ name: String, _ handler: @escaping @Sendable (String) -> Void) throws(HintError) {
        if let problem = Identifier.problem(name) { throw .badName(name, problem) }
        guard let channel = RuntimeChannel.shared else { throw .notSupervised }
        try channel.observe(name, handler)
    }

    /// Handles background refreshes (a widget's `widgetPerformUpdate(completionHandler:)`).
    /// When the supervisor refreshes the extension (on its manifest's `refresh` schedule, or
    /// `extctl refresh`), `handler` runs on a runtime thread with a completion to call once
    /// with `.newData`, `.noData` or `.failed`; further calls are ignored. The extension has
    /// the policy's `refreshSeconds` to call it, as under a task assertion; without an answer
    /// the refresh counts as failed and the extension is suspended again. Call it before `run`
    /// or `start`. Without this handler every refresh is answered "unsupported".
    public static func onRefresh(_ handler: @escaping @Sendable (_ completion: @escaping @Sendable (RefreshResult) -> Void) -> Void) {
        guard let channel = RuntimeChannel.shared else { return }
        channel.setRefreshHandler { refreshID in
            let once = RefreshCompletion(refreshID: refreshID, channel: channel)
            handler { result in once.complete(result) }
        }
    }

    /// Like `run`, but returns at once: for programs that own their main thread.
    /// - Precondition: under a supervisor, the runtime was not started already: a second call
    ///   stops the process (the C `ext_runtime_start` returns -EALREADY).
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
    /// The process observes `WireLimits.maxObservedHints` names already: no new name can be
    /// observed.
    case tooManyNames

    public var description: String {
        switch self {
        case .badName(let name, let problem): "bad hint name '\(name)': \(problem)"
        case .notSupervised: "not launched by extensiond: no hint can be observed"
        case .supervisorGone: "the channel to extensiond is closed"
        case .tooManyNames: "already observing \(WireLimits.maxObservedHints) names, the most one process may"
        }
    }
}

/// The answer to a background refresh.
public enum RefreshResult: Sendable, Equatable {
    /// New content was fetched: hosts showing the widget are told to redraw.
    case newData
    /// Nothing changed: the next refresh comes later.
    case noData
    /// The refresh failed: the next one is backed off.
    case failed

    var answer: RefreshAnswer {
        switch self {
        case .newData: .newData
        case .noData: .noData
        case .failed: .failed
        }
    }
}

/// Sends the answer to one refresh, once.
final class RefreshCompletion: Sendable {
    let refreshID: UInt64
    let channel: RuntimeChannel
    private let done = Mutex(false)

    init(refreshID: UInt64, channel: RuntimeChannel) {
        self.refreshID = refreshID
        self.channel = channel
    }

    func complete(_ result: RefreshResult) {
        guard
            done.withLock({ d in
                defer { d = true }; return !d
            })
        else { return }
        channel.send(.refreshDone(refreshID: refreshID, answer: result.answer))
    }
}
