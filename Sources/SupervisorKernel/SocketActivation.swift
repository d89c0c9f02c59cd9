import CSystemd

#if canImport(Glibc)
import Glibc
#endif

/// The control socket passed by the service manager (socket activation, sd_listen_fds(3)).
public enum SocketActivation {
    /// A listening socket inherited from the service manager.
    public struct Listener: Sendable {
        /// The descriptor (`SD_LISTEN_FDS_START`, i.e. 3); close-on-exec.
        public var fd: Int32
        /// The path it is bound to (from `getsockname`), `@name` for an abstract address,
        /// nil if it has none.
        public var path: String?
        /// How many sockets were passed in all (only the first is used).
        public var passed: Int32
    }

    /// The socket the service manager passed, if any (`$LISTEN_FDS` for this pid). The
    /// variables are removed from the environment, so extensions do not see them.
    /// Throws when something was passed that cannot be the control socket: only a listening
    /// AF_UNIX SOCK_SEQPACKET socket (`ListenSequentialPacket=` in the .socket unit) is accepted.
    public static func inheritedListener() throws(DaemonError) -> Listener? {
        let passed = sd_listen_fds(1)
        if passed < 0 {
            throw DaemonError("cannot read the sockets passed by the service manager: \(String(cString: strerror(-passed)))")
        }
        guard passed > 0 else { return nil }
        let fd = SD_LISTEN_FDS_START
        let check = sd_is_socket_unix(fd, Int32(SOCK_SEQPACKET.rawValue), 1, nil, 0)
        guard check > 0 else {
            throw DaemonError(
                "the socket passed by the service manager (fd \(fd)) is not a listening AF_UNIX SOCK_SEQPACKET socket"
                    + (check < 0 ? " (\(String(cString: strerror(-check))))" : "")
                    + "; the .socket unit must use ListenSequentialPacket= (see docs/operations.md)")
        }
        return Listener(fd: fd, path: boundPath(fd), passed: passed)
    }

    /// The filesystem path an AF_UNIX socket is bound to.
    static func boundPath(_ fd: Int32) -> String? {
        var address = sockaddr_un()
        var length = socklen_t(MemoryLayout<sockaddr_un>.size)
        let rc = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        let pathLength = Int(length) - MemoryLayout<sa_family_t>.size
        guard rc == 0, pathLength > 0 else { return nil }
        return withUnsafeBytes(of: &address.sun_path) { raw in
            let bytes = raw.prefix(min(pathLength, raw.count))
            if bytes.first == 0 { return "@" + String(decoding: bytes.dropFirst(), as: UTF8.self) }
            return String(decoding: bytes.prefix(while: { $0 != 0 }), as: UTF8.self)
        }
    }
}
