import ExtensionProtocol

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

    public init(id: UInt64, channel: RequestChannel) {
        self.id = id
        self.channel = channel
    }

    /// Ends the request, returning `payload` to the host (`completeRequest(returningItems:)`):
    /// the host receives it as the request's result, and the request is over, as if dismissed
    /// (with no other request open, the extension is backgrounded or suspended by the usual
    /// rules). The request channel stays open until the extension closes it. A second
    /// completion, or one after the host ended the request, is ignored by the supervisor.
    /// Throws `RequestError.payloadTooLarge` for more than `WireLimits.maxPayload` bytes (nothing
    /// is sent), and `RequestError.notSupervised` without extensiond.
    public func complete(returning payload: [UInt8]) throws(RequestError) {
        guard payload.count <= WireLimits.maxPayload else { throw .payloadTooLarge(payload.count) }
        try finish(.complete(requestID: id, payload: payload))
    }

    /// Ends the request without a result (`cancelRequest(withError:)`): the host receives
    /// `reason`, and the request is over as with `complete`. A reason longer than
    /// `WireLimits.maxText` bytes is cut at a character boundary.
    public func cancel(reason: String) throws(RequestError) {
        var text = reason
        while text.utf8.count > WireLimits.maxText { text.removeLast() }
        try finish(.cancel(requestID: id, reason: text))
    }

    private func finish(_ message: Message) throws(RequestError) {
        guard let runtime = RuntimeChannel.shared else { throw .notSupervised }
        guard runtime.trySend(message) else { throw .supervisorGone }
    }
}

/// Why a request could not be completed or cancelled.
public enum RequestError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The result is over `WireLimits.maxPayload` bytes (the count given).
    case payloadTooLarge(Int)
    /// The process was not launched by extensiond.
    case notSupervised
    /// The channel to extensiond is closed.
    case supervisorGone

    public var description: String {
        switch self {
        case .payloadTooLarge(let n): "the result is \(n) bytes, over the limit of \(WireLimits.maxPayload)"
        case .notSupervised: "not launched by extensiond: there is no request to complete"
        case .supervisorGone: "the channel to extensiond is closed"
        }
    }
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
