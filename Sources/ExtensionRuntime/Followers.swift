import Dispatch
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The runtime's threads and the *read role* they pass among themselves (leader/follower).
///
/// While the runtime channel is open, exactly one runtime thread holds the read role: it is
/// blocked in `recvmsg` on the channel, or handling what it just read. When a message asks for
/// work that may take long (an activity's block, a request handler), the reader first hands the
/// role to a parked follower (or to a new thread when none is parked), then does the work itself
/// on the thread that read the message. The work thus starts without a wake-up of another
/// thread, and *expire* messages are still read and acknowledged at once while it runs, however
/// busy the extension's own threads are. A thread that finished its work parks as a follower.
final class Followers: Sendable {
    /// A parked thread: waits on its own semaphore to be handed the read role.
    final class Follower: Sendable {
        let wake = DispatchSemaphore(value: 0)
    }

    struct State {
        var parked: [Follower] = []
        var closed = false
    }

    /// Threads parked beyond this many exit instead.
    static let maxParked = 4

    let state = Mutex(State())

    /// Hands the read role to a parked follower, or to a new thread running `body` when none is
    /// parked. Returns false if no thread could be created: the caller then keeps the role.
    func handOff(spawning body: @escaping @Sendable (Follower) -> Void) -> Bool {
        if let follower = state.withLock({ $0.parked.popLast() }) {
            follower.wake.signal()
            return true
        }
        return RuntimeThread.spawn { body(Follower()) }
    }

    /// Parks `me` until it is handed the read role. Returns false when the thread should exit
    /// instead: the channel closed, or enough threads are parked already.
    func park(_ me: Follower, parked: (() -> Void)? = nil) -> Bool {
        let wait = state.withLock { s -> Bool in
            guard !s.closed, s.parked.count < Followers.maxParked else { return false }
            s.parked.append(me)
            return true
        }
        guard wait else { return false }
        parked?()
        me.wake.wait()
        return !state.withLock { $0.closed }
    }

    /// The channel closed: every parked follower exits, and so does every thread that finishes
    /// its work.
    func close() {
        let parked = state.withLock { s -> [Follower] in
            s.closed = true
            defer { s.parked.removeAll() }
            return s.parked
        }
        for follower in parked { follower.wake.signal() }
    }
}

/// A plain detached pthread (not a Dispatch worker: it blocks in `recvmsg` or runs work that
/// may block for long).
enum RuntimeThread {
    final class Body: Sendable {
        let run: @Sendable () -> Void
        init(_ run: @escaping @Sendable () -> Void) { self.run = run }
    }

    /// Starts a thread running `body`; false if it could not be created.
    static func spawn(_ body: @escaping @Sendable () -> Void) -> Bool {
        let box = Unmanaged.passRetained(Body(body))
        var thread = pthread_t()
        let rc = pthread_create(
            &thread, nil,
            { raw in
                Unmanaged<Body>.fromOpaque(raw!).takeRetainedValue().run()
                return nil
            }, box.toOpaque())
        guard rc == 0 else {
            box.release()
            return false
        }
        pthread_detach(thread)
        return true
    }
}
