/// The messages between the daemon and its transfer worker (`extensiond-transfer`, docs/transfers.md,
/// "The worker"): one per `SOCK_SEQPACKET` datagram, little-endian, strings as a u16 length and
/// their bytes. Pure: encoding and decoding only; a malformed datagram decodes to nil.
public enum TransferWorkerMessage: Equatable, Sendable {
    // Daemon → worker.
    /// Perform task `task`: `method` 1 GET (a download, written with `pwrite` from `offset`), 2 PUT
    /// or 3 POST (an upload of `uploadSize` bytes). The file's descriptor is attached.
    case start(task: UInt64, method: UInt8, offset: UInt64, uploadSize: UInt64, stallSeconds: UInt32, url: String, ifRange: String)
    /// Abandon task `task` (answered by `done` with `CURLE_ABORTED_BY_CALLBACK`).
    case cancel(task: UInt64)
    // Worker → daemon.
    /// The final answer's headers: its status, whether the download started again from 0 (a 200
    /// to a range request), the resource's whole length (-1 unknown) and its validators.
    case headers(task: UInt64, status: UInt32, restarted: Bool, total: Int64, etag: String, lastModified: String)
    /// Bytes done so far (a few times a second at most).
    case progress(task: UInt64, done: UInt64, total: Int64)
    /// The attempt is over: the last status, libcurl's code (0: completed; -1: the worker
    /// refused it), the bytes done, and an error text.
    case done(task: UInt64, status: UInt32, curlCode: Int32, done: UInt64, error: String)

    /// The datagram of this message.
    public var encoded: [UInt8] {
        var b: [UInt8] = []
        func u8(_ v: UInt8) { b.append(v) }
        func u16(_ v: UInt16) { b.append(UInt8(truncatingIfNeeded: v)); b.append(UInt8(truncatingIfNeeded: v >> 8)) }
        func u32(_ v: UInt32) { for i in 0..<4 { b.append(UInt8(truncatingIfNeeded: v >> (8 * UInt32(i)))) } }
        func u64(_ v: UInt64) { for i in 0..<8 { b.append(UInt8(truncatingIfNeeded: v >> (8 * UInt64(i)))) } }
        func str(_ s: String) {
            let bytes = Array(s.utf8.prefix(Int(UInt16.max)))
            u16(UInt16(bytes.count))
            b.append(contentsOf: bytes)
        }
        switch self {
        case let .start(task, method, offset, uploadSize, stall, url, ifRange):
            u8(1); u64(task); u8(method); u64(offset); u64(uploadSize); u32(stall); str(url); str(ifRange)
        case let .cancel(task):
            u8(2); u64(task)
        case let .headers(task, status, restarted, total, etag, lastModified):
            u8(10); u64(task); u32(status); u8(restarted ? 1 : 0); u64(UInt64(bitPattern: total)); str(etag); str(lastModified)
        case let .progress(task, done, total):
            u8(11); u64(task); u64(done); u64(UInt64(bitPattern: total))
        case let .done(task, status, code, done, error):
            u8(12); u64(task); u32(status); u32(UInt32(bitPattern: code)); u64(done); str(error)
        }
        return b
    }

    /// The message in `datagram`, or nil if it is not one (unknown type, short, trailing bytes,
    /// a string that is not UTF-8).
    public static func decode(_ datagram: [UInt8]) -> TransferWorkerMessage? {
        var i = 0
        func take(_ n: Int) -> ArraySlice<UInt8>? {
            guard n >= 0, datagram.count - i >= n else { return nil }
            defer { i += n }
            return datagram[i..<i + n]
        }
        func int<T: FixedWidthInteger>(_ t: T.Type) -> T? {
            guard let s = take(MemoryLayout<T>.size) else { return nil }
            var v: T = 0
            for (k, byte) in s.enumerated() { v |= T(byte) << (8 * k) }
            return v
        }
        func str() -> String? {
            guard let n = int(UInt16.self), let s = take(Int(n)) else { return nil }
            return String(validating: s, as: UTF8.self)
        }
        guard let type = int(UInt8.self) else { return nil }
        let message: TransferWorkerMessage?
        switch type {
        case 1:
            guard let task = int(UInt64.self), let method = int(UInt8.self), let offset = int(UInt64.self), let size = int(UInt64.self),
                let stall = int(UInt32.self), let url = str(), let ifRange = str()
            else { return nil }
            message = .start(task: task, method: method, offset: offset, uploadSize: size, stallSeconds: stall, url: url, ifRange: ifRange)
        case 2:
            message = int(UInt64.self).map { .cancel(task: $0) }
        case 10:
            guard let task = int(UInt64.self), let status = int(UInt32.self), let restarted = int(UInt8.self), restarted <= 1,
                let total = int(UInt64.self), let etag = str(), let lastModified = str()
            else { return nil }
            message = .headers(task: task, status: status, restarted: restarted == 1, total: Int64(bitPattern: total), etag: etag, lastModified: lastModified)
        case 11:
            guard let task = int(UInt64.self), let done = int(UInt64.self), let total = int(UInt64.self) else { return nil }
            message = .progress(task: task, done: done, total: Int64(bitPattern: total))
        case 12:
            guard let task = int(UInt64.self), let status = int(UInt32.self), let code = int(UInt32.self), let done = int(UInt64.self),
                let error = str()
            else { return nil }
            message = .done(task: task, status: status, curlCode: Int32(bitPattern: code), done: done, error: error)
        default:
            return nil
        }
        return i == datagram.count ? message : nil
    }
}
