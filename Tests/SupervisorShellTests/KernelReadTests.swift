import ExtensionTransport
import Foundation
import SupervisorKernel
import Testing

@testable import SupervisorShell

#if canImport(Glibc)
import Glibc
#endif

/// Reads of open files through the real kernel interface: a read of short-record files stops
/// at a short first read, and nothing is cut from files longer than one read.
struct KernelReadTests {
    let kernel = try! LinuxKernel(withLoop: false)

    func temporaryFile(_ bytes: [UInt8]) throws -> (path: String, fd: Int32) {
        var template = Array("/tmp/extensiond-read-XXXXXX".utf8CString)
        let fd = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        try #require(fd >= 0)
        let path = String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        #expect(bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) } == bytes.count)
        return (path, fd)
    }

    @Test func aFileLongerThanOneReadIsReadWhole() throws {
        let content = (0..<10_000).map { UInt8(truncatingIfNeeded: $0 % 251) }
        let (path, fd) = try temporaryFile(content)
        defer { close(fd); unlink(path) }
        #expect(try kernel.read(fd: fd).get() == content)
        #expect(try kernel.readToEnd(fd: fd).get() == content)
        #expect(try kernel.read(fd: fd).get() == content, "every read starts at offset 0")
    }

    @Test func aSmallFileIsReadWhole() throws {
        let content = Array("populated 1\nfrozen 0\n".utf8)
        let (path, fd) = try temporaryFile(content)
        defer { close(fd); unlink(path) }
        #expect(try kernel.read(fd: fd).get() == content)
    }

    /// The cached identity of an open file's `/proc/self/fd/N` link is the one stat(2) gives for
    /// the file (device and inode): the lock survey compares identities from both.
    @Test func theCachedIdentityOfADescriptorIsTheFilesIdentity() throws {
        let (path, fd) = try temporaryFile([1, 2, 3])
        defer { close(fd); unlink(path) }
        let cached = try kernel.cachedIdentity("/proc/self/fd/\(fd)").get()
        #expect(cached == (try kernel.status(path, followLinks: true).get().identity))
        #expect(cached == (try kernel.status("/proc/self/fd/\(fd)", followLinks: true).get().identity))
        #expect(throws: SystemError.self) { try kernel.cachedIdentity("/proc/self/fd/999999").get() }
    }

    @Test func aProcFileReadToItsEndMatchesAReadByPath() throws {
        let fd = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC)
        try #require(fd >= 0)
        defer { close(fd) }
        let byPath = try kernel.read("/proc/self/mountinfo").get()
        #expect(try kernel.readToEnd(fd: fd).get() == byPath)
    }

    @Test func aFileLargerThanAPageAndAPipeAreReadWholeByPath() throws {
        let content = (0..<300_000).map { UInt8(truncatingIfNeeded: $0 % 253) }
        let (path, fd) = try temporaryFile(content)
        defer { close(fd); unlink(path) }
        #expect(try kernel.read(path).get() == content)

        var ends: [Int32] = [-1, -1]
        try #require(pipe(&ends) == 0)
        defer { close(ends[0]) }
        let writer = ends[1]
        let thread = Thread {
            // A read that failed early closes the read end: the writes then fail with EPIPE
            // instead of ending the test process with SIGPIPE.
            var brokenPipe = sigset_t()
            sigemptyset(&brokenPipe)
            sigaddset(&brokenPipe, SIGPIPE)
            pthread_sigmask(SIG_BLOCK, &brokenPipe, nil)
            content.withUnsafeBytes { bytes in
                var done = 0
                while done < bytes.count {
                    let n = write(writer, bytes.baseAddress! + done, bytes.count - done)
                    if n <= 0 { break }
                    done += n
                }
            }
            close(writer)
        }
        thread.start()
        #expect(try kernel.read("/proc/self/fd/\(ends[0])").get() == content, "a pipe is read to its end of file")
    }
}
