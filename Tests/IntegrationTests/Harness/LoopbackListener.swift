import Foundation

/// A TCP listener on 127.0.0.1 (or `address`) at a port the kernel picks, for tests of what
/// reaches the host's loopback or another of its addresses. Connections queue in its
/// backlog; nothing accepts them.
final class LoopbackListener {
    let fd: Int32
    let port: Int

    init(address: String = "127.0.0.1") throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        self.fd = fd
        guard fd >= 0 else { throw HarnessError("socket: \(String(cString: strerror(errno)))") }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr(address)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &addr) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { sa in
                bind(fd, sa, length) == 0 && listen(fd, 16) == 0 && getsockname(fd, sa, &length) == 0
            }
        }
        guard bound else {
            let e = errno
            Glibc.close(fd)
            throw HarnessError("cannot listen on \(address): \(String(cString: strerror(e)))")
        }
        port = Int(UInt16(bigEndian: addr.sin_port))
    }

    func close() { Glibc.close(fd) }
}

/// A listening unix stream socket at an abstract name (a leading NUL, no file), as an X
/// server or an input method listens on a desktop. Connections queue; nothing accepts them.
final class AbstractListener {
    let fd: Int32
    let name: String

    init(name: String) throws {
        self.name = name
        fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw HarnessError("socket: \(String(cString: strerror(errno)))") }
        guard AbstractListener.withAddress(name, { bind(fd, $0, $1) == 0 }) && listen(fd, 16) == 0 else {
            let e = errno
            Glibc.close(fd)
            throw HarnessError("cannot listen on @\(name): \(String(cString: strerror(e)))")
        }
    }

    /// Connects a new socket to the abstract `name`: nil, or the error's text.
    static func connect(_ name: String) -> String? {
        let s = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        defer { Glibc.close(s) }
        return withAddress(name, { Glibc.connect(s, $0, $1) == 0 }) ? nil : String(cString: strerror(errno))
    }

    /// Calls `body` with the sockaddr_un of the abstract `name` and its length.
    static func withAddress(_ name: String, _ body: (UnsafePointer<sockaddr>, socklen_t) -> Bool) -> Bool {
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(name.utf8.prefix(100))
        withUnsafeMutableBytes(of: &addr.sun_path) { path in
            path[0] = 0
            for (i, b) in bytes.enumerated() { path[i + 1] = b }
        }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + 1 + bytes.count)
        return withUnsafePointer(to: &addr) { p in p.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, length) } }
    }

    func close() { Glibc.close(fd) }
}
