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
        let started = Mutex<[Int: pthread_t]>([:])
        let finished = Mutex<[UInt64]>([])
    }

    @Test func everyJobRunsOnAThreadOfItsOwnAndIsDoneOnReturn() throws {
        let kernel = try LinuxKernel(withLoop: false)
        #expect(kernel.processorCount >= 1)
        let seen = Seen()
        let jobs: [@Sendable () -> Void] = (0..<4).map { n in
            {
                seen.started.withLock { $0[n] = pthread_self() }
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
        #expect(threads[0] == pthread_self(), "the first job runs on the calling thread")
        #expect(Set(threads.values).count == 4, "each other job on a thread of its own")
        kernel.concurrently([])
    }

    /// The CPU count is the calling thread's affinity mask (what a cpuset or `taskset` leaves
    /// it), as the kernel lists it in `Cpus_allowed_list` (`0-3,6`).
    @Test func theProcessorCountIsTheAffinityMasks() throws {
        let status = try String(contentsOfFile: "/proc/thread-self/status", encoding: .utf8)
        let list = try #require(status.split(separator: "\n").first { $0.hasPrefix("Cpus_allowed_list:") }?.dropFirst(18))
        let count = list.trimmingCharacters(in: .whitespaces).split(separator: ",").reduce(0) { total, range in
            let ends = range.split(separator: "-").compactMap { Int($0) }
            return total + (ends.count == 2 ? ends[1] - ends[0] + 1 : 1)
        }
        #expect(try LinuxKernel(withLoop: false).processorCount == count, "Cpus_allowed_list: \(list)")
    }
}
