import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Programs the tests write and then execute, written through a close-on-exec descriptor.
/// Foundation's copy and write open theirs without O_CLOEXEC: a process another test spawns
/// meanwhile inherits that descriptor, and while that process lives, executing the file fails
/// with ETXTBSY ("Text file busy"). (A close-on-exec descriptor is still inherited by a child
/// forked in the instant before its own exec; that window is far shorter than the child's
/// life.)
enum Executables {
    /// Copies the program at `source` to `path`, executable.
    static func copy(_ source: String, to path: String) throws {
        try write(Array(try Data(contentsOf: URL(fileURLWithPath: source))), to: path)
    }

    /// Writes `script` to `path`, executable.
    static func write(_ script: String, to path: String) throws {
        try write(Array(script.utf8), to: path)
    }

    /// Writes `bytes` to a new file at `path` (replacing one there), with `mode`.
    static func write(_ bytes: [UInt8], to path: String, mode: mode_t = 0o755) throws {
        unlink(path)
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode)
        guard fd >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        defer { close(fd) }
        var done = 0
        while done < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + done, $0.count - done) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
            done += n
        }
        guard fchmod(fd, mode) == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
    }
}
