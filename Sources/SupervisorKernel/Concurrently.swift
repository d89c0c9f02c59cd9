#if canImport(Glibc)
import Glibc
#endif

/// Runs independent pieces of CPU work at once, one thread per piece but the first, which runs
/// on the calling thread, and returns when every piece is done: the hand-over's encoding and
/// decoding of its record parts. The threads live only for the call.
enum Concurrently {
    /// One piece, handed to its thread.
    private final class Piece: Sendable {
        let work: @Sendable () -> Void
        init(_ work: @escaping @Sendable () -> Void) { self.work = work }
    }

    /// Runs every one of `jobs`; when a thread cannot be started, its job runs on the calling
    /// thread after the others have been started.
    static func run(_ jobs: [@Sendable () -> Void]) {
        guard let first = jobs.first else { return }
        var threads: [pthread_t] = []
        var inline: [@Sendable () -> Void] = [first]
        for job in jobs.dropFirst() {
            var thread = pthread_t()
            let context = Unmanaged.passRetained(Piece(job)).toOpaque()
            let rc = pthread_create(
                &thread, nil,
                { context in
                    Unmanaged<Piece>.fromOpaque(context!).takeRetainedValue().work()
                    return nil
                }, context)
            if rc == 0 {
                threads.append(thread)
            } else {
                Unmanaged<Piece>.fromOpaque(context).release()
                inline.append(job)
            }
        }
        for job in inline { job() }
        for thread in threads { pthread_join(thread, nil) }
    }
}
