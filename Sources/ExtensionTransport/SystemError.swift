#if canImport(Glibc)
import Glibc
#endif

/// A failed system call: which operation, on what, and the kernel's errno.
public struct SystemError: Error, Equatable, Sendable, CustomStringConvertible {
    public var operation: String
    public var errno: Int32

    public init(_ operation: String, errno: Int32) {
        self.operation = operation
        self.errno = errno
    }

    public var description: String { "\(operation): \(String(cString: strerror(errno)))" }
}

/// Calls `body` until it does not fail with EINTR; returns its result or throws a SystemError.
@inline(__always)
func retrying(_ operation: @autoclosure () -> String, _ body: () -> Int32) throws(SystemError) -> Int32 {
    while true {
        let rc = body()
        if rc >= 0 { return rc }
        let e = Glibc.errno
        if e == EINTR { continue }
        throw SystemError(operation(), errno: e)
    }
}
