import CShims
import ExtensionTransport
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Reads of files that can wait in the kernel without any I/O (`/proc/locks`, whose read takes
/// the kernel's file-lock semaphore for writing and so can wait for an RCU grace period), done
/// on a thread of their own so that the loop goes on meanwhile. Each read gets a detached
/// thread, which reads the descriptor from offset 0 to its end, queues the result and wakes
/// the loop through an eventfd; the loop then hands each result to its handler, on the loop's
/// thread. Owned by the loop's thread; only `Finished` is shared with the reading threads.
final class BackgroundReads {
    /// The results the reading threads queued and the loop has not taken yet, and the eventfd
    /// that wakes the loop. The eventfd is never closed: a thread may still hold it when the
    /// loop ends (it lives as long as the process, and is close-on-exec).
    private final class Finished: Sendable {
        let results = Mutex<[(id: UInt64, result: Result<[UInt8], SystemError>)]>([])
        let eventFD: Int32
        init(eventFD: Int32) { self.eventFD = eventFD }
    }

    /// One read, handed to its thread.
    private final class Job: Sendable {
        let id: UInt64
        let fd: Int32
        let finished: Finished
        init(id: UInt64, fd: Int32, finished: Finished) {
            self.id = id
            self.fd = fd
            self.finished = finished
        }

        /// On the reading thread: the read, its result queued, the loop woken.
        func run() {
            let result = LinuxKernel.readAll(fd, offset: 0)
            finished.results.withLock { $0.append((id, result)) }
            var one: UInt64 = 1
            // An eventfd refuses a write only when its counter would pass 2^64 - 2, and the
            // loop's read resets it to 0 at each wake-up: this write cannot fail.
            _ = Glibc.write(finished.eventFD, &one, 8)
        }
    }

    private var finished: Finished?
    private var watch: EventSource?
    private var handlers: [UInt64: (Result<[UInt8], SystemError>) -> Void] = [:]
    private var nextID: UInt64 = 0

    /// Starts a read of `fd` on a new thread; `done` runs on the loop's thread, in a later
    /// iteration. Returns why it could not start (then `done` never runs).
    func read(fd: Int32, loop: EventLoop, _ done: @escaping (Result<[UInt8], SystemError>) -> Void) -> SystemError? {
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
        let job = Job(id: nextID, fd: fd, finished: finished)
        handlers[job.id] = done
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
            handlers.removeValue(forKey: job.id)
            return SystemError("pthread_create", errno: rc)
        }
        return nil
    }

    /// On the loop's thread, when the eventfd is readable: every queued result to its handler.
    private func deliver() {
        guard let finished else { return }
        var counter: UInt64 = 0
        // Only resets the counter: the results are in the queue, whatever this read returns
        // (EAGAIN when a wake-up before this one already took it).
        _ = Glibc.read(finished.eventFD, &counter, 8)
        let results = finished.results.withLock { queued in
            defer { queued.removeAll() }
            return queued
        }
        for (id, result) in results { handlers.removeValue(forKey: id)?(result) }
    }
}
