#if canImport(Glibc)
import Glibc
#endif

/// A host's request, as delivered to the extension: its id and the extension's end of the
/// private channel to the host (a connected stream socket; the supervisor is not on it).
public struct ExtensionRequest: Sendable {
    /// The request id (the host sees the same id).
    public let id: UInt64
    /// The channel to the host.
    public let channel: RequestChannel
}

/// A connected stream socket between an extension and one host. Blocking; close it when done.
public struct RequestChannel: Sendable {
    /// The socket's descriptor, owned by the extension.
    public let fd: Int32

    public init(fd: Int32) { self.fd = fd }

    /// Writes all of `bytes`; returns false if the host is gone.
    @discardableResult
    public func write(_ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { send(fd, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL)) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return false }
            offset += n
        }
        return true
    }

    /// Writes a string as UTF-8.
    @discardableResult
    public func write(_ text: String) -> Bool { write(Array(text.utf8)) }

    /// Reads up to `maximum` bytes; an empty array means the host closed its end.
    public func read(maximum: Int = 4096) -> [UInt8] {
        var buffer = [UInt8](repeating: 0, count: maximum)
        while true {
            let n = Glibc.read(fd, &buffer, maximum)
            if n < 0 && errno == EINTR { continue }
            return n > 0 ? Array(buffer[0..<n]) : []
        }
    }

    /// Reads one line (without its newline); nil at end of stream.
    public func readLine() -> String? {
        var line: [UInt8] = []
        var byte: UInt8 = 0
        while true {
            let n = Glibc.read(fd, &byte, 1)
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return line.isEmpty ? nil : String(decoding: line, as: UTF8.self) }
            if byte == UInt8(ascii: "\n") { return String(decoding: line, as: UTF8.self) }
            line.append(byte)
        }
    }

    /// Closes the channel.
    public func close() { Glibc.close(fd) }
}
