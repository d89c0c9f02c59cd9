import CShims
import ExtensionTransport
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Work done on a thread of its own so that the loop goes on meanwhile: reads of files that
/// can wait in the kernel without any I/O (`/proc/locks`, whose read takes the kernel's
/// file-lock semaphore for writing and so can wait for an RCU grace period), and walks of
/// `/proc` whose length a third party decides (the lock survey). Each job gets a detached
/// thread, which runs it, stores its result, queues its id and wakes the loop through an
/// eventfd; the loop then hands each result to its handler, on the loop's thread. Owned by the
/// loop's thread; only `Finished` and each job's `Slot` are shared with the threads.
final class BackgroundWork {
    /// The ids of the jobs whose threads finished and the loop has not delivered yet, and the
    /// eventfd that wakes the loop. The eventfd is never closed: a thread may still hold it
    /// when the loop ends (it lives as long as the process, and is close-on-exec).
    private final class Finished: Sendable {
        let ids = Mutex<[UInt64]>([])
        let eventFD: Int32
        init(eventFD: Int32) { self.eventFD = eventFD }
    }

    /// Where a job's thread leaves its result for the loop.
    private final class Slot<T: Sendable>: Sendable {
        let result = Mutex<T?>(nil)
    }

    /// One job, handed to its thread.
    private final class Job: Sendable {
        let run: @Sendable () -> Void
        init(_ run: @escaping @Sendable () -> Void) { self.run = run }
    }

    private var finished: Finished?
    private var watch: EventSource?
    private var handlers: [UInt64: () -> Void] = [:]
    private var nextID: UInt64 = 0

    /// Runs `work` on a new thread; `done` runs with its result on the loop's thread, in a
    /// later iteration. Returns why it could not start (then neither runs).
    func run<T: Sendable>(_ work: @escaping @Sendable () -> T, loop: EventLoop, _ done: @escaping (T) -> Void) -> SystemError? {
        let finished: Finished
        if let existing = self.finished {
            finished = existing
        } else {
            let eventFD = shim_eventfd()
            guard eventFD >= 0 else { return SystemError("eventfd", errno: -eventFD) }
            do {
                watch = try loop.addIO(fd: eventFD, events: Poll.input) { [unowned self] _ in deliver() }
            } catch {
                Glibc.close(eventFD)
                return error
            }
            finished = Finished(eventFD: eventFD)
            self.finished = finished
        }
        nextID += 1
        let id = nextID
        let slot = Slot<T>()
        // The handler runs only after the thread queued `id`, so the slot holds the result.
        handlers[id] = {
            if let result = slot.result.withLock({ $0 }) { done(result) }
        }
        let job = Job {
            let result = work()
            slot.result.withLock { $0 = result }
            finished.ids.withLock { $0.append(id) }
            var one: UInt64 = 1
            // An eventfd refuses a write only when its counter would pass 2^64 - 2, and the
            // loop's read resets it to 0 at each wake-up: this write cannot fail.
            _ = Glibc.write(finished.eventFD, &one, 8)
        }
        var attributes = pthread_attr_t()
        pthread_attr_init(&attributes)
        pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
        defer { pthread_attr_destroy(&attributes) }
        var thread = pthread_t()
        let context = Unmanaged.passRetained(job).toOpaque()
        let rc = pthread_create(
            &thread, &attributes,
            { context in
                Unmanaged<Job>.fromOpaque(context!).takeRetainedValue().run()
                return nil
            }, context)
        guard rc == 0 else {
            Unmanaged<Job>.fromOpaque(context).release()
            handlers.removeValue(forKey: id)
            return SystemError("pthread_create", errno: rc)
        }
        return nil
    }

    /// On the loop's thread, when the eventfd is readable: every finished job's result to its
    /// handler, in the order the jobs finished.
    private func deliver() {
        guard let finished else { return }
        var counter: UInt64 = 0
        // Only resets the counter: the ids are in the queue, whatever this read returns
        // (EAGAIN when a wake-up before this one already took it).
        _ = Glibc.read(finished.eventFD, &counter, 8)
        let ids = finished.ids.withLock { queued in
            defer { queued.removeAll() }
            return queued
        }
        for id in ids { handlers.removeValue(forKey: id)?() }
    }
}
