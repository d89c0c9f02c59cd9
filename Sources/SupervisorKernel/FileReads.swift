import CShims
import ExtensionTransport

#if canImport(Glibc)
import Glibc
#endif

/// The calls on files that work done off the loop's thread may make (`Kernel.inBackground`):
/// reads of files and links (the lock survey's walk of `/proc`), and the watch of locked files
/// for opens the survey makes before it looks at other processes. `Kernel` offers them too,
/// so that code written against this interface runs on the loop or in the background alike.
public protocol FileReads {
    /// The whole contents of a file (`/proc`, cgroup files, configuration).
    func read(_ path: String) -> Result<[UInt8], SystemError>
    /// Reads an open file from offset 0 to its end, whatever its records (`/proc/locks`, where
    /// one record is a lock and every waiter on it).
    func readToEnd(fd: Int32) -> Result<[UInt8], SystemError>
    /// stat(2) (`followLinks`) or lstat(2).
    func status(_ path: String, followLinks: Bool) -> Result<FileStatus, SystemError>
    /// The entry names of a directory (without "." and ".."), or nil if it cannot be read.
    func listDirectory(_ path: String) -> [String]?
    /// readlink(2): where a symbolic link (a `/proc/PID/fd/N` entry) points.
    func readLink(_ path: String) -> Result<String, SystemError>
    /// The identity of the file `path` names (links followed: a `/proc/PID/fd/N` entry) from
    /// the attributes the kernel has cached, never asking the file system: a file on a FUSE
    /// or network file system whose server does not answer is not waited for.
    func cachedIdentity(_ path: String) -> Result<FileIdentity, SystemError>
    /// inotify(7): a non-blocking, close-on-exec descriptor that reports each open (`IN_OPEN`)
    /// of the files at `paths` (symbolic links followed, so `/proc/PID/fd/N` names the open
    /// file itself), and the watch descriptor of each path (nil for one that cannot be
    /// watched). Fails only when no path can be watched. Each watch checks the caller's
    /// permission to read the file, which a FUSE file system mounted with
    /// `default_permissions`, or a network one, may ask its server about: a server that does
    /// not answer holds the call. The daemon watches only files on local file systems
    /// (`LocalFileSystems`).
    func watchOpens(_ paths: [String]) -> Result<(fd: Int32, watches: [Int32?]), SystemError>
}

/// `FileReads` made with system calls on the calling thread. It holds no state, so any thread
/// may use it; each call opens, reads and closes what it needs before it returns.
public struct SystemFileReads: FileReads, Sendable {
    /// Reads with system calls; nothing is opened until a read.
    public init() {}

    /// Opens `path` read-only and close-on-exec (links followed; blocks as the file does: a FIFO
    /// waits for a writer), reads to end of file retrying EINTR, and closes the descriptor before
    /// returning. A regular file larger than a page is read straight into one buffer of the
    /// size fstat(2) gives (grown if the file grew), a pipe 1 MiB at a time, anything else a
    /// page at a time. Fails with the errno alone.
    public func read(_ path: String) -> Result<[UInt8], SystemError> {
        let fd = Glibc.open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return .failure(SystemError(errno: errno)) }
        defer { Glibc.close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0 else { return LinuxKernel.readAll(fd, offset: nil) }
        switch st.st_mode & S_IFMT {
        case S_IFREG where st.st_size > 4096: return LinuxKernel.readSized(fd, size: Int(st.st_size))
        case S_IFIFO: return LinuxKernel.readAll(fd, offset: nil, chunk: 1 << 20)
        default: return LinuxKernel.readAll(fd, offset: nil)
        }
    }

    /// pread(2) from offset 0 in 4 KiB reads, retrying EINTR, until one returns end of file. The
    /// descriptor stays open and its file offset unchanged. Fails with the errno alone.
    public func readToEnd(fd: Int32) -> Result<[UInt8], SystemError> { LinuxKernel.readAll(fd, offset: 0) }

    /// fstatat(AT_FDCWD), with AT_SYMLINK_NOFOLLOW unless `followLinks`. The errno alone on
    /// failure.
    public func status(_ path: String, followLinks: Bool) -> Result<FileStatus, SystemError> {
        var st = stat()
        guard fstatat(AT_FDCWD, path, &st, followLinks ? 0 : AT_SYMLINK_NOFOLLOW) == 0 else { return .failure(SystemError(errno: errno)) }
        return .success(LinuxKernel.fileStatus(st))
    }

    /// opendir(3) (links followed) and readdir(3) in the order the file system returns them;
    /// the stream is closed before returning. Nil when the directory cannot be opened; a read
    /// error ends the list early.
    public func listDirectory(_ path: String) -> [String]? { directoryEntries(path) }

    /// statx(2) with AT_STATX_DONT_SYNC, asking for the inode number alone; the device as
    /// stat(2) encodes it. The errno alone on failure.
    public func cachedIdentity(_ path: String) -> Result<FileIdentity, SystemError> {
        var device: UInt64 = 0
        var inode: UInt64 = 0
        let rc = shim_cached_identity(path, &device, &inode)
        guard rc == 0 else { return .failure(SystemError(errno: -rc)) }
        return .success(FileIdentity(device: device, inode: inode))
    }

    /// inotify_init1(IN_NONBLOCK | IN_CLOEXEC) and one IN_OPEN watch per path. The caller owns
    /// the returned descriptor and closes it. When no path can be watched (`paths` empty
    /// included), the descriptor is closed and the failure carries the errno of the last path
    /// tried.
    public func watchOpens(_ paths: [String]) -> Result<(fd: Int32, watches: [Int32?]), SystemError> {
        let fd = inotify_init1(Int32(IN_NONBLOCK) | Int32(IN_CLOEXEC))
        guard fd >= 0 else { return .failure(SystemError(errno: errno)) }
        var lastError: Int32 = 0
        let watches: [Int32?] = paths.map { path in
            let wd = inotify_add_watch(fd, path, UInt32(IN_OPEN))
            if wd < 0 {
                lastError = errno
                return nil
            }
            return wd
        }
        guard watches.contains(where: { $0 != nil }) else {
            Glibc.close(fd)
            return .failure(SystemError(errno: lastError))
        }
        return .success((fd, watches))
    }

    /// readlink(2) into a buffer of PATH_MAX bytes, decoded as UTF-8 (invalid bytes replaced).
    /// The errno alone on failure (EINVAL: not a symbolic link).
    public func readLink(_ path: String) -> Result<String, SystemError> {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let n = Glibc.readlink(path, &buffer, buffer.count - 1)
        guard n >= 0 else { return .failure(SystemError(errno: errno)) }
        return .success(String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self))
    }
}
