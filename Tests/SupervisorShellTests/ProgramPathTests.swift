import Testing

@testable import SupervisorKernel

#if canImport(Glibc)
import Glibc
#endif

/// The program a daemon re-executes is found by the path it was started as.
struct ProgramPathTests {
    @Test func anAbsolutePathIsKeptARelativeOneMadeAbsoluteABareNameFoundOnPATH() throws {
        #expect(LinuxKernel.programPath(invokedAs: "/usr/bin/extensiond") == "/usr/bin/extensiond")
        let cwd = try #require(getcwd(nil, 0))
        defer { free(cwd) }
        #expect(LinuxKernel.programPath(invokedAs: "bin/extensiond") == String(cString: cwd) + "/bin/extensiond")
        #expect(LinuxKernel.programPath(invokedAs: "sh").map { $0.hasPrefix("/") && $0.hasSuffix("/sh") } == true)
        #expect(LinuxKernel.programPath(invokedAs: "no-such-program-anywhere") == nil)
        #expect(LinuxKernel.programPath(invokedAs: "") == nil)
    }

    /// A pending delivery of a blocked signal is taken once; none is pending afterwards.
    @Test func aPendingBlockedSignalIsTakenOnce() throws {
        var set = sigset_t()
        sigemptyset(&set)
        sigaddset(&set, SIGUSR2)
        var old = sigset_t()
        pthread_sigmask(SIG_BLOCK, &set, &old)
        defer { pthread_sigmask(SIG_SETMASK, &old, nil) }
        let kernel = try LinuxKernel()
        #expect(!kernel.takePendingSignal(SIGUSR2))
        pthread_kill(pthread_self(), SIGUSR2)
        #expect(kernel.takePendingSignal(SIGUSR2))
        #expect(!kernel.takePendingSignal(SIGUSR2))
    }
}
