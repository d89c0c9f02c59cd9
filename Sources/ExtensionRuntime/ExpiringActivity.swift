import Dispatch
import ExtensionProtocol
import Foundation
import Synchronization

/// One `performExpiringActivity` call: tracks its invocations so the block is called with
/// `true` at most once, and the assertion is released only when every invocation returned.
///
/// Both invocations run on runtime threads (see `Followers`): the first on the thread that read
/// `granted`, the expired one on the thread that read *expire*, each after handing the read role
/// on. Each is thus a thread of its own that never waits for a worker thread held by other
/// (possibly blocked) work: the expired call runs while the first one may be blocked waiting
/// for it.
final class ExpiringActivity: Sendable {
    struct State {
        var assertionID: UInt64?
        var running = 0
        var mainReturned = false
        var expiredCalled = false
        var released = false
    }

    let block: @Sendable (Bool) -> Void
    /// Called once every invocation has returned and the assertion was released.
    let onFinished: (@Sendable () -> Void)?
    let state = Mutex(State())
    let channel: RuntimeChannel

    init(block: @escaping @Sendable (Bool) -> Void, onFinished: (@Sendable () -> Void)?, channel: RuntimeChannel) {
        self.block = block
        self.onFinished = onFinished
        self.channel = channel
    }

    /// Runs `block` for an activity that got no assertion: `true` only, at once, on a queue of
    /// its own.
    static func deny(_ block: @escaping @Sendable (Bool) -> Void, onFinished: (@Sendable () -> Void)?) {
        DispatchQueue(label: "extensiond.expiring-activity.denied").async {
            block(true)
            onFinished?()
        }
    }

    /// Starts an activity: asks the supervisor (or denies at once without one).
    static func perform(reason: String, block: @escaping @Sendable (Bool) -> Void, onFinished: (@Sendable () -> Void)?) {
        guard let channel = RuntimeChannel.shared else { return deny(block, onFinished: onFinished) }
        let activity = ExpiringActivity(block: block, onFinished: onFinished, channel: channel)
        channel.acquire(reason: reason, for: .activity(activity))
    }

    /// On the reading thread, when `granted` arrives (before any *expire* for it is read).
    func granted(_ id: UInt64) {
        state.withLock { s in
            s.assertionID = id
            s.running += 1
        }
    }

    /// The first invocation, then the release if nothing else runs.
    func runGranted() {
        block(false)
        finished(main: true)
    }

    /// On the reading thread, when *expire* arrives: whether the expired invocation is due (at
    /// most once, and not after the first invocation returned).
    func expire() -> Bool {
        state.withLock { s -> Bool in
            guard !s.mainReturned, !s.expiredCalled else { return false }
            s.expiredCalled = true
            s.running += 1
            return true
        }
    }

    /// The expired invocation, concurrently with the first one (which may be waiting for
    /// exactly this).
    func runExpired() {
        block(true)
        finished(main: false)
    }

    /// The only invocation of a denied activity.
    func runDenied() {
        block(true)
        onFinished?()
    }

    private func finished(main: Bool) {
        let release = state.withLock { s -> UInt64? in
            s.running -= 1
            if main { s.mainReturned = true }
            guard s.running == 0, s.mainReturned, !s.released, let id = s.assertionID else { return nil }
            s.released = true
            return id
        }
        if let release {
            channel.release(release)
            onFinished?()
        }
    }
}

extension ProcessInfo {
    /// Performs `block` asynchronously under a task assertion held by extensiond, as on
    /// Apple's platforms.
    ///
    /// - The block runs on a private thread of the runtime with `expired == false` once the
    ///   supervisor grants an assertion; the assertion is released when the block returns.
    /// - If the assertion is about to expire (the extension is being suspended, or the
    ///   assertion reached `assertionMaxSeconds`), the block is called a second time,
    ///   concurrently, with `expired == true`: stop the work and return quickly. At most once.
    /// - If no assertion can be had (the extension is expiring or being suspended, its
    ///   background time is spent, or it was not launched by extensiond), the block runs at
    ///   once with `expired == true` only.
    /// - Precondition: `reason` is not empty, and at most `WireLimits.maxReason` bytes of UTF-8.
    public func performExpiringActivity(withReason reason: String, using block: @escaping @Sendable (Bool) -> Void) {
        checkReason(reason, "performExpiringActivity(withReason:using:)")
        ExpiringActivity.perform(reason: reason, block: block, onFinished: nil)
    }

    /// `performExpiringActivity(withReason:using:)`, and calls `onFinished` exactly once, after
    /// every call of `block` has returned and the assertion (if one was granted) was released:
    /// the moment to start the next activity or free what the block used (as the C
    /// `ext_perform_expiring_activity_with_cleanup`).
    /// - Precondition: `reason` is not empty, and at most `WireLimits.maxReason` bytes of UTF-8.
    public func performExpiringActivity(
        withReason reason: String, using block: @escaping @Sendable (Bool) -> Void, onFinished: @escaping @Sendable () -> Void
    ) {
        checkReason(reason, "performExpiringActivity(withReason:using:onFinished:)")
        ExpiringActivity.perform(reason: reason, block: block, onFinished: onFinished)
    }
}

/// Stops the process, naming `function`, when `reason` is empty or over `WireLimits.maxReason`
/// bytes of UTF-8: a reason the supervisor would never receive is a programming error, as in
/// the C runtime's -EINVAL and -EMSGSIZE.
func checkReason(_ reason: String, _ function: String) {
    precondition(!reason.isEmpty, "\(function): the reason must not be empty")
    let length = reason.utf8.count
    precondition(length <= WireLimits.maxReason, "\(function): the reason is \(length) bytes, over the limit of \(WireLimits.maxReason)")
}

/// How a `withExpiringActivity` body ended.
public enum ExpiringActivityOutcome<Value: Sendable>: Sendable {
    /// The body ran to completion under the assertion.
    case completed(Value)
    /// No assertion could be had (the body did not run), or it expired and the body was cancelled.
    case expired
}

/// Runs `body` as a child task under a task assertion; the task is cancelled when the
/// assertion expires. Suspends (never blocks a thread) while waiting for the supervisor.
///
/// Returns `.completed` with the body's value if it finished before expiry, `.expired` if no
/// assertion was granted (the body does not run) or if the assertion expired (the body was
/// cancelled; its result is discarded). Errors thrown by the body are rethrown.
/// - Precondition: `reason` is not empty, and at most `WireLimits.maxReason` bytes of UTF-8.
public func withExpiringActivity<Value: Sendable>(
    reason: String, _ body: @escaping @Sendable () async throws -> Value
) async throws -> ExpiringActivityOutcome<Value> {
    checkReason(reason, "withExpiringActivity(reason:_:)")
    guard let channel = RuntimeChannel.shared else { return .expired }
    let expiry = ExpiryLatch()
    let id: UInt64? = await withCheckedContinuation { continuation in
        channel.acquire(reason: reason, for: .task(continuation, expiry))
    }
    guard let id else { return .expired }
    defer { channel.release(id) }

    return try await withThrowingTaskGroup(of: ActivityBranch<Value>.self) { group in
        group.addTask { .body(try await body()) }
        group.addTask {
            await expiry.wait()
            return .expired
        }
        defer { group.cancelAll() }
        switch try await group.next()! {
        case .body(let value):
            expiry.fire()  // ends the waiter task
            return .completed(value)
        case .expired:
            return .expired
        }
    }
}

/// Which child of `withExpiringActivity` finished first.
enum ActivityBranch<Value: Sendable>: Sendable {
    case body(Value)
    case expired
}

/// A one-shot latch that a task can await without holding a thread, fired from any thread
/// (the runtime's reader thread on expiry) or by cancellation.
final class ExpiryLatch: Sendable {
    struct State {
        var fired = false
        var waiter: CheckedContinuation<Void, Never>?
    }

    let state = Mutex(State())

    func fire() {
        let waiter = state.withLock { s -> CheckedContinuation<Void, Never>? in
            s.fired = true
            defer { s.waiter = nil }
            return s.waiter
        }
        waiter?.resume()
    }

    func wait() async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                let resumeNow = state.withLock { s -> Bool in
                    if s.fired { return true }
                    s.waiter = c
                    return false
                }
                if resumeNow { c.resume() }
            }
        } onCancel: {
            fire()
        }
    }
}
