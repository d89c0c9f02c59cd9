import Foundation
import SupervisorCore
import SupervisorKernel
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `LinuxKernel.startChild` and `finish`, the re-exec's check of the document, with real
/// programs: the input reaches the child whole, its output comes back, and a child that stops
/// reading or outlives its deadline is dealt with.
struct ChildProgramTests {
    let kernel = try! LinuxKernel(withLoop: false)

    /// What `child`'s descriptors refer to: its two pipes and its pidfd.
    func identities(of child: ChildProgram) throws -> Set<String> {
        let pipes = try [child.input, child.output].map { try kernel.readLink("/proc/self/fd/\($0)").get() }
        #expect(pipes.allSatisfy { $0.hasPrefix("pipe:[") }, "\(pipes)")
        return Set(pipes + ["pidfd of \(child.pid)"])
    }

    /// Which of `identities` a descriptor of this process still refers to (other tests open
    /// and close descriptors meanwhile, so their numbers are not compared).
    func stillOpen(_ identities: Set<String>) -> Set<String> {
        var open: Set<String> = []
        for fd in kernel.listDirectory("/proc/self/fd") ?? [] {
            if case .success(let target) = kernel.readLink("/proc/self/fd/\(fd)"), identities.contains(target) { open.insert(target) }
            if case .success(let info) = kernel.read("/proc/self/fdinfo/\(fd)"),
                let pid = String(decoding: info, as: UTF8.self).split(separator: "\n").first(where: { $0.hasPrefix("Pid:") })?.split(separator: "\t").last,
                identities.contains("pidfd of \(pid)")
            {
                open.insert("pidfd of \(pid)")
            }
        }
        return open
    }

    @Test func theInputReachesTheChildWholeAndItsOutputComesBack() throws {
        // More than a pipe holds by default (as root, the pipe may be raised to hold it all).
        let input = (0..<3_000_000).map { UInt8(truncatingIfNeeded: $0 % 241) }
        let child = try kernel.startChild("/bin/sh", arguments: ["-c", "wc -c; echo done >&2; exit 3"], seconds: 10).get()
        let identities = try identities(of: child)
        #expect(stillOpen(identities) == identities)
        var calls = 0
        // In parts, an empty one among them: the child reads one stream.
        let parts = [Array(input[..<1_000_000]), [], Array(input[1_000_000...])]
        let (status, output) = try kernel.finish(child, input: parts) { calls += 1 }.get()
        #expect(calls == 1, "whileItRuns runs once")
        #expect(status == .exited(3))
        #expect(output.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) } == ["3000000", "done"], "\(output)")
        #expect(stillOpen(identities).isEmpty, "every descriptor of the child is closed")
    }

    /// Parts of the input, empty ones among them, reach the child as one stream, in order; and a
    /// file replaced with the same parts holds the same bytes.
    @Test func partsReachTheChildAsOneStreamInOrderAndAFileHoldsThem() throws {
        let parts = [[], (0..<700_000).map { UInt8(truncatingIfNeeded: $0 % 251) }, [42], [], (0..<1_500_000).map { UInt8(truncatingIfNeeded: $0 % 239) }]
        let path = "/tmp/extensiond-parts-\(getpid())"
        defer { unlink(path) }
        #expect(kernel.replaceFile(path, withParts: parts, mode: 0o600, durable: false) == nil)
        let whole = Array(parts.joined())
        #expect(try kernel.read(path).get() == whole, "the file is the parts, one after another")
        let child = try kernel.startChild("/bin/sh", arguments: ["-c", "cmp - \(path) && echo same"], seconds: 10).get()
        let (status, output) = try kernel.finish(child, input: parts) {}.get()
        #expect(status == .exited(0))
        #expect(output == "same\n", "the child read the file's bytes on its stdin: \(output)")
    }

    @Test func aChildThatStopsReadingIsReapedWithItsStatus() throws {
        let input = [UInt8](repeating: 7, count: 4_000_000)
        let child = try kernel.startChild("/bin/sh", arguments: ["-c", "head -c 10 >/dev/null; echo read ten"], seconds: 10).get()
        var calls = 0
        let (status, output) = try kernel.finish(child, input: [input]) { calls += 1 }.get()
        #expect(calls == 1)
        #expect(status == .exited(0))
        #expect(output == "read ten\n")
    }

    /// A child that exited before reading anything: the first write is an EPIPE (and the
    /// SIGPIPE it raises is taken, or it would end this test process), and the status is the
    /// child's.
    @Test func aChildThatExitedBeforeReadingIsAnEPIPEAndItsStatus() throws {
        let child = try kernel.startChild("/bin/sh", arguments: ["-c", "exit 4"], seconds: 10).get()
        // Its exit, awaited on its pidfd without reaping it (WNOWAIT): `finish` reaps it.
        var info = siginfo_t()
        #expect(waitid(idtype_t(rawValue: 3), id_t(child.pidfd), &info, WEXITED | WNOWAIT) == 0)
        var calls = 0
        let (status, _) = try kernel.finish(child, input: [[UInt8](repeating: 1, count: 8 << 20)]) { calls += 1 }.get()
        #expect(calls == 1)
        #expect(status == .exited(4))
    }

    @Test func aChildStillRunningAtItsDeadlineIsKilled() throws {
        let child = try kernel.startChild("/bin/sh", arguments: ["-c", "exec sleep 30"], seconds: 0.2).get()
        let identities = try identities(of: child)
        var calls = 0
        let (status, _) = try kernel.finish(child, input: []) { calls += 1 }.get()
        #expect(calls == 1)
        #expect(status == nil, "killed at its deadline")
        #expect(stillOpen(identities).isEmpty)
    }

    @Test func anAbandonedChildIsKilledAndReaped() throws {
        let child = try kernel.startChild("/bin/sh", arguments: ["-c", "exec sleep 30"], seconds: 10).get()
        let identities = try identities(of: child)
        kernel.abandon(child)
        #expect(stillOpen(identities).isEmpty, "its pipes and pidfd are closed, and it was reaped")
    }

    @Test func aProgramThatCannotBeStartedIsNamed() throws {
        let result = kernel.startChild("/nonexistent/extensiond", arguments: [], seconds: 1)
        guard case .failure(let e) = result else {
            Issue.record("started: \(result)")
            return
        }
        #expect("\(e)".contains("spawn /nonexistent/extensiond"), "\(e)")
    }
}
