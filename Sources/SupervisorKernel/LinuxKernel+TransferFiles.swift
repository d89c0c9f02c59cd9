import CShims
import ExtensionTransport

#if canImport(Glibc)
import Glibc
#endif

/// The files of background transfers: a partial download, an upload's source and a finished
/// download's place, the last two in a shared container that extensions write, so reached
/// with `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)`: a link an extension planted there
/// never sends the root daemon elsewhere.
extension LinuxKernel {
    /// `Kernel.openPartialFile`.
    public func openPartialFile(_ path: String) -> Result<(fd: Int32, size: UInt64), SystemError> {
        let fd = Glibc.open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { return .failure(SystemError("open \(path)", errno: errno)) }
        var st = stat()
        guard fstat(fd, &st) == 0 else {
            let e = SystemError("fstat \(path)", errno: errno)
            Glibc.close(fd)
            return .failure(e)
        }
        return .success((fd, UInt64(st.st_size)))
    }

    /// `Kernel.truncate(fd:)`.
    public func truncate(fd: Int32) -> SystemError? {
        ftruncate(fd, 0) == 0 ? nil : SystemError("ftruncate", errno: errno)
    }

    /// `Kernel.openBeneath`.
    public func openBeneath(_ root: String, _ relative: String) -> Result<(fd: Int32, size: UInt64), SystemError> {
        let top = Glibc.open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard top >= 0 else { return .failure(SystemError("open \(root)", errno: errno)) }
        defer { Glibc.close(top) }
        // O_NONBLOCK: a FIFO a member planted there must not block the loop in open(2).
        let fd = shim_open_beneath(top, relative, O_RDONLY | O_NOCTTY | O_NONBLOCK, 0)
        guard fd >= 0 else { return .failure(SystemError("open \(relative) in \(root)", errno: -fd)) }
        var st = stat()
        guard fstat(fd, &st) == 0, st.st_mode & S_IFMT == S_IFREG, fcntl(fd, F_SETFL, 0) == 0 else {
            Glibc.close(fd)
            return .failure(SystemError("\(relative) in \(root) is not a regular file", errno: EINVAL))
        }
        return .success((fd, UInt64(st.st_size)))
    }

    /// `Kernel.placeBeneath`.
    public func placeBeneath(_ root: String, _ relative: String, from path: String, group: UInt32?) -> SystemError? {
        var parts = relative.split(separator: "/").map(String.init)
        guard let leaf = parts.popLast() else { return SystemError("no file name in '\(relative)'", errno: EINVAL) }
        var dir = Glibc.open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard dir >= 0 else { return SystemError("open \(root)", errno: errno) }
        defer { Glibc.close(dir) }
        let directoryMode: mode_t = group == nil ? 0o700 : 0o770
        for part in parts {
            let made = mkdirat(dir, part, directoryMode) == 0
            if !made && errno != EEXIST { return SystemError("mkdir \(part) in \(root)", errno: errno) }
            let next = shim_open_beneath(dir, part, O_RDONLY | O_DIRECTORY, 0)
            guard next >= 0 else { return SystemError("open \(part) in \(root)", errno: -next) }
            Glibc.close(dir)
            dir = next
            // Made here: its mode and group set explicitly (the daemon's umask may be 0077).
            if made {
                if let group, fchown(dir, UInt32.max, group) != 0 { return SystemError("chown \(part) in \(root)", errno: errno) }
                if fchmod(dir, directoryMode) != 0 { return SystemError("chmod \(part) in \(root)", errno: errno) }
            }
        }
        let file = Glibc.open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard file >= 0 else { return SystemError("open \(path)", errno: errno) }
        defer { Glibc.close(file) }
        if let group, fchown(file, UInt32.max, group) != 0 { return SystemError("chown \(path)", errno: errno) }
        if fchmod(file, group == nil ? 0o600 : 0o660) != 0 { return SystemError("chmod \(path)", errno: errno) }
        if renameat(AT_FDCWD, path, dir, leaf) != 0 { return SystemError("rename \(path) to \(relative) in \(root)", errno: errno) }
        if fsync(dir) != 0 { return SystemError("fsync the directory of \(relative) in \(root)", errno: errno) }
        return nil
    }
}
