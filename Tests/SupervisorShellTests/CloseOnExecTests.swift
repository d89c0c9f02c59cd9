import SupervisorKernel
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `LinuxKernel.setCloseOnExec`, which the take-over runs on the descriptors that crossed the
/// `execve`: every one of them gets FD_CLOEXEC back, runs of consecutive numbers and single
/// ones alike, and a number alone that is not open is named.
struct CloseOnExecTests {
    let kernel = try! LinuxKernel(withLoop: false)

    func isCloseOnExec(_ fd: Int32) -> Bool { fcntl(fd, F_GETFD) & FD_CLOEXEC != 0 }

    @Test func everyDescriptorGetsCloseOnExecBack() throws {
        // Six consecutive numbers (a run: one close_range) and one alone far above them, as an
        // execve leaves them: inheritable. Fixed numbers, so that other tests' descriptors do
        // not break the run.
        var ends: [Int32] = [-1, -1]
        try #require(pipe(&ends) == 0)
        defer { ends.forEach { close($0) } }
        let fds = (0..<6).map { fcntl(ends[$0 % 2], F_DUPFD, 700 + Int32($0)) }
        try #require(fds == Array(700...705), "\(fds)")
        let lone = fcntl(ends[0], F_DUPFD, 900)
        try #require(lone == 900)
        defer { (fds + [lone]).forEach { close($0) } }
        for fd in fds + [lone] { _ = fcntl(fd, F_SETFD, 0) }
        #expect((fds + [lone]).allSatisfy { !isCloseOnExec($0) })
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
