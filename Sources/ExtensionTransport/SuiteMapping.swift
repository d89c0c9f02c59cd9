import CShims
import ExtensionProtocol

#if canImport(Glibc)
import Glibc
#endif

/// A shared defaults suite mapped read-only from the descriptor the daemon handed over
/// (docs/defaults.md). Reads make no system call and never wait: each copies what it needs
/// between two loads of the suite's sequence and keeps the copy only when the sequence did not
/// move (a seqlock), so the daemon's writes never wait for a reader either, even one stopped
/// in the middle of a read.
///
/// Sendable: `base` and `size` never change after `init`, the mapping is read-only, and every
/// read of it goes through the seqlock, which makes concurrent reads from any thread safe.
public final class SuiteMapping: @unchecked Sendable {
    private let base: UnsafeRawPointer
    private let size: Int

    /// Maps the suite open at `fd` (which stays the caller's to close): its whole size,
    /// read-only. Throws when it cannot be mapped or is not a suite.
    public init(fd: Int32) throws(SystemError) {
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw SystemError("fstat", errno: errno) }
        let size = Int(st.st_size)
        guard size >= SuiteLayout.headerSize, size <= SuiteLayout.mappingSize else { throw SystemError("a defaults suite of \(size) bytes", errno: EINVAL) }
        let p = mmap(nil, size, PROT_READ, MAP_SHARED, fd, 0)
        guard let p, p != MAP_FAILED else { throw SystemError("mmap", errno: errno) }
        guard memcmp(p, SuiteLayout.magic, SuiteLayout.magic.count) == 0 else {
            munmap(p, size)
            throw SystemError("a mapping without the EXTDFLT1 header", errno: EINVAL)
        }
        self.base = UnsafeRawPointer(p)
        self.size = size
    }

    deinit { munmap(UnsafeMutableRawPointer(mutating: base), size) }

    /// The value of `key`, or nil when the suite has none. Throws when the suite stays
    /// malformed across consistent reads (never for a read torn by a concurrent write).
    public func value(forKey key: String) throws(DefaultsValueError) -> DefaultsValue? {
        guard let bytes = try encodedValue(forKey: key) else { return nil }
        return try DefaultsValue(decoding: bytes)
    }

    /// The encoding of the value of `key`, or nil when the suite has none.
    public func encodedValue(forKey key: String) throws(DefaultsValueError) -> [UInt8]? {
        var key = key
        let found = key.withUTF8 { k in
            Result { () throws(DefaultsValueError) -> [UInt8]? in
                try consistentRead { (area, count) throws(DefaultsValueError) -> [UInt8]? in
                    guard let range = try SuiteLayout.find(UnsafeRawBufferPointer(k), in: area, count: count) else { return nil }
                    return Array(area[range])
                }
            }
        }
        return try found.get()
    }

    /// Every key and value, as of one moment.
    public func snapshot() throws(DefaultsValueError) -> [String: DefaultsValue] {
        let encoded = try consistentRead { (area, count) throws(DefaultsValueError) -> [(String, [UInt8])] in
            try SuiteLayout.entries(in: area, count: count).map { ($0.key, Array(area[$0.value])) }
        }
        var out: [String: DefaultsValue] = [:]
        for (key, bytes) in encoded { out[key] = try DefaultsValue(decoding: bytes) }
        return out
    }

    /// The keys, sorted bytewise, as of one moment.
    public func keys() throws(DefaultsValueError) -> [String] {
        try consistentRead { (area, count) throws(DefaultsValueError) -> [String] in try SuiteLayout.entries(in: area, count: count).map(\.key) }
    }

    /// Runs `read` over the area until it ran between two equal, even loads of the sequence;
    /// returns what it returned. An error inside a torn read is retried like any torn read.
    private func consistentRead<T>(_ read: (UnsafeRawBufferPointer, Int) throws(DefaultsValueError) -> T) throws(DefaultsValueError) -> T {
        let sequence = base + SuiteLayout.sequenceOffset
        var lastError = DefaultsValueError("the suite kept changing")
        for _ in 0..<1_000_000 {
            let before = shim_seq_read_begin(sequence)
            if before & 1 == 1 { continue }
            let used = min(Int(base.loadUnaligned(fromByteOffset: SuiteLayout.usedOffset, as: UInt32.self).littleEndian), size - SuiteLayout.headerSize)
            let count = Int(base.loadUnaligned(fromByteOffset: SuiteLayout.countOffset, as: UInt32.self).littleEndian)
            let area = UnsafeRawBufferPointer(start: base + SuiteLayout.headerSize, count: used)
            let result: Result<T, DefaultsValueError>
            do { result = .success(try read(area, count)) } catch { result = .failure(error) }
            guard shim_seq_read_end(sequence) == before else { continue }
            switch result {
            case .success(let value): return value
            case .failure(let error): lastError = error
            }
            throw lastError
        }
        throw lastError
    }
}
