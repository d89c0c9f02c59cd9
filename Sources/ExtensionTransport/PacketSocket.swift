import CShims
import ExtensionProtocol

#if canImport(Glibc)
import Glibc
#endif

/// An AF_UNIX `SOCK_SEQPACKET` socket: one message per datagram, descriptors passed with
/// SCM_RIGHTS. A plain value holding the descriptor; its owner closes it exactly once.
public struct PacketSocket: Sendable, Hashable {
    /// The descriptor (close-on-exec).
    public let fd: Int32

    /// A value referring to `fd`, as it is: nothing is checked or changed, and the caller keeps
    /// the duty to close it once.
    public init(fd: Int32) { self.fd = fd }

    /// A connected pair, both ends close-on-exec.
    public static func pair(nonBlocking: Bool = false) throws(SystemError) -> (PacketSocket, PacketSocket) {
        var fds: [Int32] = [-1, -1]
        let type = Int32(SOCK_SEQPACKET.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | (nonBlocking ? Int32(SOCK_NONBLOCK.rawValue) : 0)
        _ = try retrying("socketpair") { socketpair(AF_UNIX, type, 0, &fds) }
        return (PacketSocket(fd: fds[0]), PacketSocket(fd: fds[1]))
    }

    /// A connected pair of stream sockets (the host ↔ extension data channel).
    public static func streamPair() throws(SystemError) -> (Int32, Int32) {
        var fds: [Int32] = [-1, -1]
        let type = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
        _ = try retrying("socketpair") { socketpair(AF_UNIX, type, 0, &fds) }
        return (fds[0], fds[1])
    }

    /// Connects to a listening socket at `path`.
    public static func connect(path: String) throws(SystemError) -> PacketSocket {
        let fd = try retrying("socket") { socket(AF_UNIX, Int32(SOCK_SEQPACKET.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0) }
        do {
            var addr = try socketAddress(path)
            _ = try retrying("connect to \(path)") {
                withUnsafePointer(to: &addr) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                        Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
                    }
                }
            }
        } catch {
            Glibc.close(fd)
            throw error
        }
        return PacketSocket(fd: fd)
    }

    /// Creates a non-blocking listening socket at `path`. A stale socket file (nobody
    /// accepting on it) is replaced; a live one is an error (`EADDRINUSE`).
    public static func listen(path: String, backlog: Int32 = 128) throws(SystemError) -> PacketSocket {
        var addr = try socketAddress(path)
        if let probe = try? connect(path: path) {
            probe.close()
            throw SystemError("listen on \(path) (another daemon is accepting there)", errno: EADDRINUSE)
        }
        var st = stat()
        if lstat(path, &st) == 0 {
            guard (st.st_mode & S_IFMT) == S_IFSOCK else {
                throw SystemError("listen on \(path) (exists and is not a socket)", errno: EEXIST)
            }
            unlink(path)  // stale socket from a previous run
        }
        let type = Int32(SOCK_SEQPACKET.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue)
        let fd = try retrying("socket") { socket(AF_UNIX, type, 0) }
        do {
            _ = try retrying("bind \(path)") {
                withUnsafePointer(to: &addr) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                        bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
                    }
                }
            }
            _ = try retrying("listen on \(path)") { Glibc.listen(fd, backlog) }
        } catch {
            Glibc.close(fd)
            throw error
        }
        return PacketSocket(fd: fd)
    }

    static func socketAddress(_ path: String) throws(SystemError) -> sockaddr_un {
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        let capacity = MemoryLayout.size(ofValue: addr.sun_path)
        guard !bytes.isEmpty, bytes.count < capacity else { throw SystemError("socket path '\(path)'", errno: ENAMETOOLONG) }
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in
            for (i, b) in bytes.enumerated() { raw[i] = b }
            raw[bytes.count] = 0
        }
        return addr
    }

    /// Accepts one connection (non-blocking, close-on-exec); nil when none is waiting.
    public func accept() throws(SystemError) -> PacketSocket? {
        while true {
            let c = shim_accept(fd)
            if c >= 0 { return PacketSocket(fd: c) }
            let e = -c
            if e == EINTR || e == ECONNABORTED { continue }
            if e == EAGAIN || e == EWOULDBLOCK { return nil }
            throw SystemError("accept", errno: e)
        }
    }

    /// The peer's pid, uid and gid, as the kernel recorded them at connect time.
    public func peerCredentials() throws(SystemError) -> (pid: Int32, uid: UInt32, gid: UInt32) {
        var pid: pid_t = 0, uid: uid_t = 0, gid: gid_t = 0
        let rc = shim_peer_credentials(fd, &pid, &uid, &gid)
        if rc < 0 { throw SystemError("SO_PEERCRED", errno: -rc) }
        return (pid, uid, gid)
    }

    /// The outcome of a send.
    public enum SendResult: Equatable, Sendable {
        /// The datagram was sent (a SOCK_SEQPACKET send queues it whole or fails).
        case sent
        /// The peer's buffer is full (non-blocking socket): try again when writable.
        case wouldBlock
    }

    /// Sends one datagram, with `descriptor` attached when given. Blocking sockets block;
    /// non-blocking ones report `wouldBlock`.
    public func send(_ bytes: [UInt8], descriptor: Int32? = nil) throws(SystemError) -> SendResult {
        let rc: Int = bytes.withUnsafeBytes { raw in
            if let descriptor {
                var d = descriptor
                return shim_send_with_fds(fd, raw.baseAddress, raw.count, &d, 1)
            }
            return shim_send_with_fds(fd, raw.baseAddress, raw.count, nil, 0)
        }
        if rc >= 0 { return .sent }
        let e = Int32(-rc)
        if e == EAGAIN || e == EWOULDBLOCK { return .wouldBlock }
        throw SystemError("send", errno: e)
    }

    /// Sends the datagrams laid end to end in `bytes`, of `lengths` (at most
    /// `PacketSocket.maxBatch`), with one system call (sendmmsg(2)): each arrives as its own
    /// datagram, as from `send`. Returns how many were sent: fewer than given when the peer's
    /// buffer filled (0: none, try again when writable).
    public func send(batch bytes: UnsafeRawBufferPointer, lengths: [Int]) throws(SystemError) -> Int {
        precondition(!lengths.isEmpty && lengths.count <= PacketSocket.maxBatch && lengths.reduce(0, +) <= bytes.count)
        let rc = lengths.withUnsafeBufferPointer { shim_send_batch(fd, bytes.baseAddress, $0.baseAddress, Int32(lengths.count)) }
        if rc >= 0 { return Int(rc) }
        let e = -rc
        if e == EAGAIN || e == EWOULDBLOCK { return 0 }
        throw SystemError("sendmmsg", errno: e)
    }

    /// The most datagrams `send(batch:lengths:)` takes.
    public static let maxBatch = Int(SHIM_MAX_BATCH)

    /// The outcome of a receive.
    public enum ReceiveResult: Equatable, Sendable {
        /// A datagram of `count` bytes (in the caller's buffer), with a descriptor if one came.
        case datagram(count: Int, descriptor: Int32?, truncated: Bool)
        /// The peer closed its end.
        case closed
        /// Nothing waiting (non-blocking socket).
        case wouldBlock
    }

    /// Receives one datagram into `buffer`. At most one descriptor is kept; extras are closed.
    public func receive(into buffer: UnsafeMutableRawBufferPointer) throws(SystemError) -> ReceiveResult {
        var received: Int32 = -1  // a local, not an array: no allocation per datagram
        var nfds: Int32 = 0
        var truncated: Int32 = 0
        var rc = shim_recv_with_fds(fd, buffer.baseAddress, buffer.count, &received, 1, &nfds, &truncated)
        if rc == -Int(ECONNRESET) {
            // The peer closed while our message to it was unread. The kernel reports that
            // first, once, but datagrams it sent before closing are still queued: read them.
            rc = shim_recv_with_fds(fd, buffer.baseAddress, buffer.count, &received, 1, &nfds, &truncated)
        }
        if rc < 0 { return try PacketSocket.outcome(ofFailedReceive: Int32(-rc)) }
        if rc == 0 && nfds == 0 { return .closed }
        return .datagram(count: rc, descriptor: nfds > 0 ? received : nil, truncated: truncated != 0)
    }

    /// The most datagrams `receive(batchInto:slotSize:_:)` takes in one call.
    public static let maxReceiveBatch = Int(SHIM_MAX_RECEIVE_BATCH)

    /// Receives up to `buffer.count / slotSize` datagrams (at most `maxReceiveBatch`) with one
    /// system call (recvmmsg(2)), without waiting, the i-th into the i-th `slotSize` bytes of
    /// `buffer`, and calls `each` with each outcome in order: `.datagram` (at most one
    /// descriptor is kept; extras are closed and mark it truncated), then `.closed` if the peer
    /// closed after them, or `.wouldBlock` alone when nothing waits. Returns how many datagrams
    /// arrived: fewer than the slots means the socket was drained when it was read.
    public func receive(
        batchInto buffer: UnsafeMutableRawBufferPointer, slotSize: Int, _ each: (ReceiveResult) -> Void
    ) throws(SystemError) -> Int {
        let slots = min(buffer.count / slotSize, PacketSocket.maxReceiveBatch)
        precondition(slots >= 1)
        // On the stack: each slot's length, descriptor and truncation, no allocation per call.
        let outcome = withUnsafeTemporaryAllocation(of: Int32.self, capacity: 3 * PacketSocket.maxReceiveBatch) { table -> Result<Int, SystemError> in
            let length = table.baseAddress!, fd = length + PacketSocket.maxReceiveBatch, cut = fd + PacketSocket.maxReceiveBatch
            var rc = shim_recv_batch(self.fd, buffer.baseAddress, slotSize, Int32(slots), length, fd, cut)
            if rc == -ECONNRESET {
                // As in `receive(into:)`: the reset is reported once, before what the peer sent
                // before closing.
                rc = shim_recv_batch(self.fd, buffer.baseAddress, slotSize, Int32(slots), length, fd, cut)
            }
            if rc < 0 {
                let failed = Result { () throws(SystemError) in try PacketSocket.outcome(ofFailedReceive: -rc) }
                return failed.map { result in
                    each(result)
                    return 0
                }
            }
            var arrived = 0
            for i in 0..<Int(rc) {
                // The end of the stream shows as an empty datagram, in every slot left.
                if length[i] == 0 && fd[i] < 0 {
                    each(.closed)
                    break
                }
                arrived += 1
                each(.datagram(count: Int(length[i]), descriptor: fd[i] >= 0 ? fd[i] : nil, truncated: cut[i] != 0))
            }
            return .success(arrived)
        }
        return try outcome.get()
    }

    /// What a receive that failed with `errno` means: nothing waiting, or the peer gone; any
    /// other error is thrown.
    private static func outcome(ofFailedReceive errno: Int32) throws(SystemError) -> ReceiveResult {
        if errno == EAGAIN || errno == EWOULDBLOCK { return .wouldBlock }
        if errno == ECONNRESET || errno == ENOTCONN { return .closed }
        throw SystemError("receive", errno: errno)
    }

    /// Bytes sent on this socket that the peer has not read yet (SIOCOUTQ).
    public func unreadBytes() -> Int {
        Int(max(0, shim_unread_bytes(fd)))
    }

    /// Closes the descriptor.
    public func close() {
        Glibc.close(fd)
    }

    /// Makes the socket non-blocking (`O_NONBLOCK`).
    public func setNonBlocking() throws(SystemError) {
        let rc = shim_set_nonblocking(fd)
        if rc != 0 { throw SystemError("fcntl(O_NONBLOCK)", errno: rc < 0 ? -rc : rc) }
    }

    /// Closes a descriptor that arrived with a message (SCM_RIGHTS) and is not kept.
    public static func closeReceived(_ descriptor: Int32) {
        Glibc.close(descriptor)
    }
}
