import Foundation

/// A TCP listener on 127.0.0.1 at a port the kernel picks, for tests of what reaches the
/// host's loopback. Connections queue in its backlog; nothing accepts them.
final class LoopbackListener {
    let fd: Int32
    let port: Int

    init() throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        self.fd = fd
        guard fd >= 0 else { throw HarnessError("socket: \(String(cString: strerror(errno)))") }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &addr) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { sa in
                bind(fd, sa, length) == 0 && listen(fd, 16) == 0 && getsockname(fd, sa, &length) == 0
            }
        }
        guard bound else {
            let e = errno
            Glibc.close(fd)
            throw HarnessError("cannot listen on 127.0.0.1: \(String(cString: strerror(e)))")
        }
        port = Int(UInt16(bigEndian: addr.sin_port))
    }

    func close() { Glibc.close(fd) }
}
