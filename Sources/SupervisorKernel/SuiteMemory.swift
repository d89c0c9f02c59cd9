import CShims
import ExtensionProtocol
import ExtensionTransport

#if canImport(Glibc)
import Glibc
#endif

/// The memory of one shared defaults suite, as the daemon writes it (docs/defaults.md, "The
/// mapping"): a sealed memory file of `SuiteLayout.mappingSize` bytes, mapped for writing here,
/// that members map read-only from the descriptor `readOnlyDescriptor` gives them. `publish`
/// rewrites it under the suite's seqlock, so a reader never waits and never keeps a torn copy.
/// Owned by the daemon's loop thread.
public final class SuiteMemory {
    /// The memory file, read and write (it crosses a re-exec, and the new daemon maps it again).
    public let fd: Int32
    private let base: UnsafeMutableRawPointer

    /// A new, empty suite (no entries).
    public static func make() -> Result<SuiteMemory, SystemError> {
        let fd = shim_suite_memory(SuiteLayout.mappingSize)
        guard fd >= 0 else { return .failure(SystemError("memfd_create", errno: -fd)) }
        return adopt(fd: fd, fresh: true)
    }

    /// The suite memory open at `fd` (handed over by the daemon this one replaced), mapped again.
    public static func adopt(fd: Int32) -> Result<SuiteMemory, SystemError> { adopt(fd: fd, fresh: false) }

    private static func adopt(fd: Int32, fresh: Bool) -> Result<SuiteMemory, SystemError> {
        let p = mmap(nil, SuiteLayout.mappingSize, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
        guard let p, p != MAP_FAILED else {
            let e = errno
            if fresh { _ = Glibc.close(fd) }
            return .failure(SystemError("mmap", errno: e))
        }
        if fresh { SuiteLayout.magic.withUnsafeBytes { p.copyMemory(from: $0.baseAddress!, byteCount: $0.count) } }
        return .success(SuiteMemory(fd: fd, base: p))
    }

    private init(fd: Int32, base: UnsafeMutableRawPointer) {
        self.fd = fd
        self.base = base
    }

    /// Replaces the suite's area with `area` (`SuiteLayout.area`, at most `SuiteLayout.capacity`
    /// bytes) of `count` entries, under the seqlock.
    public func publish(area: [UInt8], count: Int) {
        precondition(area.count <= SuiteLayout.capacity, "a defaults suite over its capacity")
        let sequence = base + SuiteLayout.sequenceOffset
        shim_seq_write_begin(sequence)
        area.withUnsafeBytes { base.advanced(by: SuiteLayout.headerSize).copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
        base.storeBytes(of: UInt32(area.count).littleEndian, toByteOffset: SuiteLayout.usedOffset, as: UInt32.self)
        base.storeBytes(of: UInt32(count).littleEndian, toByteOffset: SuiteLayout.countOffset, as: UInt32.self)
        shim_seq_write_end(sequence)
    }

    /// The suite's area and entry count as published last.
    public func published() -> (area: [UInt8], count: Int) {
        let used = Int(base.loadUnaligned(fromByteOffset: SuiteLayout.usedOffset, as: UInt32.self).littleEndian)
        let count = Int(base.loadUnaligned(fromByteOffset: SuiteLayout.countOffset, as: UInt32.self).littleEndian)
        let area = Array(UnsafeRawBufferPointer(start: base + SuiteLayout.headerSize, count: min(used, SuiteLayout.capacity)))
        return (area, count)
    }

    /// A new read-only descriptor of the memory (close-on-exec), for a member: it can map it,
    /// never write it (the file's mode is 0400, and a read-only descriptor cannot be mapped
    /// for writing).
    public func readOnlyDescriptor() -> Result<Int32, SystemError> {
        let fd = shim_reopen_read_only(fd)
        return fd >= 0 ? .success(fd) : .failure(SystemError("open /proc/self/fd/\(self.fd)", errno: -fd))
    }

    /// Unmaps and closes it.
    public func close() {
        munmap(base, SuiteLayout.mappingSize)
        _ = Glibc.close(fd)
    }
}
