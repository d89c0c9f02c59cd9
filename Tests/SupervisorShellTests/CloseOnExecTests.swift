import SupervisorKernel
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `LinuxKernel.setCloseOnExec`, which the take-over runs on the descriptors that crossed the
/// `execve`: every one of them gets FD_CLOEXEC back, runs of consecutive numbers and single
/// ones alike, and a number that is not open is named.
struct CloseOnExecTests {
    let kernel = try! LinuxKernel(withLoop: false)

    func isCloseOnExec(_ fd: Int32) -> Bool { fcntl(fd, F_GETFD) & FD_CLOEXEC != 0 }

    @Test func everyDescriptorGetsCloseOnExecBack() throws {
        // Six descriptors, as an execve leaves them: inheritable.
        var fds: [Int32] = []
        for _ in 0..<3 {
            var ends: [Int32] = [-1, -1]
            try #require(pipe(&ends) == 0)
            fds += ends
        }
        defer { fds.forEach { close($0) } }
        for fd in fds { _ = fcntl(fd, F_SETFD, 0) }
        #expect(fds.allSatisfy { !isCloseOnExec($0) })
        // And one numbered far above the rest (a dup of the last), a run of its own.
        let lone = fcntl(fds[5], F_DUPFD, 900)
        try #require(lone >= 900)
        defer { close(lone) }
        _ = fcntl(lone, F_SETFD, 0)
        let failed = kernel.setCloseOnExec(fds + [lone])
        #expect(failed.isEmpty, "\(failed)")
        #expect((fds + [lone]).allSatisfy(isCloseOnExec))
    }

    @Test func aDescriptorThatIsNotOpenIsNamed() {
        let failed = kernel.setCloseOnExec([4_000_000])
        #expect(failed.map(\.fd) == [4_000_000])
        #expect(failed.first.map { "\($0.error)".contains("fcntl(4000000, F_SETFD)") } == true, "\(failed)")
    }
}
