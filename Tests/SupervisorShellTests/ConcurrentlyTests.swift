import SupervisorKernel
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `LinuxKernel.concurrently`: every job runs, each but the first on a thread of its own, and
/// the call returns only once all of them are done.
struct ConcurrentlyTests {
    final class Seen: Sendable {
        let started = Mutex<[pthread_t]>([])
        let finished = Mutex<[UInt64]>([])
    }

    @Test func everyJobRunsOnAThreadOfItsOwnAndIsDoneOnReturn() throws {
        let kernel = try LinuxKernel(withLoop: false)
        #expect(kernel.processorCount >= 1)
        let seen = Seen()
        let jobs: [@Sendable () -> Void] = (0..<4).map { n in
            {
                seen.started.withLock { $0.append(pthread_self()) }
                // Enough work that a job still running at the return would be seen unfinished.
                var x = UInt64(n)
                for i in 0..<2_000_000 { x = x &* 6_364_136_223_846_793_005 &+ UInt64(i) }
                seen.finished.withLock { $0.append(x) }
            }
        }
        kernel.concurrently(jobs)
        #expect(seen.finished.withLock { $0.count } == 4, "every job was done when concurrently returned")
        let threads = seen.started.withLock { $0 }
        #expect(threads.count == 4)
        #expect(threads.first == pthread_self(), "the first job runs on the calling thread")
        #expect(Set(threads).count == 4, "each other job on a thread of its own")
        kernel.concurrently([])
    }
}
