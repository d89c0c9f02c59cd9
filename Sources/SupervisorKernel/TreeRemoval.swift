import CShims
import ExtensionTransport

#if canImport(Glibc)
import Glibc
#endif

/// The owner of files: the file system ids a walk of them runs with (`TreeRemoval`).
public struct FileOwner: Sendable, Equatable {
    /// The user id (setfsuid).
    public var uid: UInt32
    /// The group id (setfsgid).
    public var gid: UInt32
    /// The owner with these ids.
    public init(uid: UInt32, gid: UInt32) {
        self.uid = uid
        self.gid = gid
    }
}

/// Removes a directory tree that an untrusted uid built (an extension's container at `extctl
/// reset`), with bounded descriptors and memory whatever its depth, width and names:
///
/// - The walk holds two descriptors at most: the directory it is emptying, and briefly its
///   parent. It goes down with `openat(O_NOFOLLOW)` and back up with `openat("..")`, checking
///   that `..` is the directory it came from (device and inode), so a directory moved during
///   the walk cannot lead it out of the tree.
/// - It builds no path: names are passed to `unlinkat` as the bytes `readdir` gave (any byte
///   but `/` and NUL, not necessarily UTF-8). Its memory is one device/inode pair per level
///   (16 bytes), about 0.5 MiB for 30,000 levels.
/// - A directory its owner made unreadable (mode 0) is given mode 0700 first, which only its
///   owner may do: the walk runs with that owner's file system ids (`FileOwner`), on a thread
///   of its own (setfsuid(2) is per thread), so it has exactly the rights of the uid that made
///   the tree, and no capability.
/// - Errors name the step and the entry's last component (at most 255 bytes), never a path.
enum TreeRemoval {
    private struct Identity: Equatable {
        var device: UInt64
        var inode: UInt64
        init(_ st: stat) {
            device = UInt64(st.st_dev)
            inode = UInt64(st.st_ino)
        }
    }

    /// Removes `path` (a directory, never followed if it is a link) and everything in it, with
    /// the calling thread's file system ids set to `owner` for the walk (nil: left as they
    /// are). Its parent is opened first, with the process's own ids (the owner may not be
    /// able to search the directories above), and `path` is removed from it with those ids.
    static func remove(_ path: String, owner: FileOwner?) -> SystemError? {
        guard let slash = path.lastIndex(of: "/") else { return SystemError("remove \(path)", errno: EINVAL) }
        let parentPath = slash == path.startIndex ? "/" : String(path[..<slash])
        let name = String(path[path.index(after: slash)...])
        let parent = open(parentPath, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard parent >= 0 else { return SystemError("open \(parentPath)", errno: errno) }
        defer { close(parent) }
        if let owner {
            let rc = shim_set_thread_fs_ids(owner.uid, owner.gid)
            if rc != 0 { return SystemError("setfsuid \(owner.uid)", errno: -rc) }
        }
        let top = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        let emptied = top >= 0 ? empty(top) : SystemError("open \(path)", errno: errno)
        if owner != nil {
            let rc = shim_set_thread_fs_ids(geteuid(), getegid())
            if rc != 0 { return SystemError("setfsuid \(geteuid())", errno: -rc) }
        }
        if let emptied { return emptied }
        return unlinkat(parent, name, AT_REMOVEDIR) == 0 || errno == ENOENT ? nil : SystemError("rmdir \(path)", errno: errno)
    }

    /// Empties the directory open at `top`, and closes `top`; the directory stays.
    static func empty(_ top: Int32) -> SystemError? {
        var current = top
        var ancestors: [Identity] = []
        while true {
            switch firstSubdirectory(of: current) {
            case .failure(let e):
                close(current)
                return e
            case .success(let name?):
                switch openChild(name, in: current) {
                case .failure(let e):
                    close(current)
                    return e
                case .success(let child):
                    var st = stat()
                    fstat(current, &st)
                    ancestors.append(Identity(st))
                    close(current)
                    current = child
                }
            case .success(nil):
                // `current` is empty: the top is done; otherwise go up and remove it.
                guard let parentIdentity = ancestors.popLast() else {
                    close(current)
                    return nil
                }
                switch climb(from: current, to: parentIdentity) {
                case .failure(let e):
                    close(current)
                    return e
                case .success(let parent):
                    close(current)
                    current = parent
                }
            }
        }
    }

    /// Reads the directory open at `fd` from its start (through a duplicate), unlinking every
    /// entry that is not a directory as it goes, and returns the name of the first
    /// subdirectory, or nil when none is left (the directory is then empty). One pass removes
    /// every file of a flat directory; a directory is read again only after a subdirectory of
    /// it was removed.
    private static func firstSubdirectory(of fd: Int32) -> Result<[CChar]?, SystemError> {
        let listing = dup(fd)
        guard listing >= 0 else { return .failure(SystemError("dup", errno: errno)) }
        guard let dir = fdopendir(listing) else {
            let e = SystemError("fdopendir", errno: errno)
            close(listing)
            return .failure(e)
        }
        defer { closedir(dir) }
        rewinddir(dir)
        errno = 0
        while let d = readdir(dir) {
            let name = withUnsafeBytes(of: d.pointee.d_name) { raw in
                Array(raw.bindMemory(to: CChar.self).prefix(while: { $0 != 0 })) + [0]
            }
            if name == [46, 0] || name == [46, 46, 0] { continue }
            var isDirectory = d.pointee.d_type == UInt8(DT_DIR)
            if d.pointee.d_type == UInt8(DT_UNKNOWN) {
                var st = stat()
                guard fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 else {
                    if errno == ENOENT { continue }
                    return .failure(SystemError("stat \(display(name))", errno: errno))
                }
                isDirectory = (st.st_mode & S_IFMT) == S_IFDIR
            }
            if isDirectory { return .success(name) }
            if unlinkat(fd, name, 0) != 0 && errno != ENOENT { return .failure(SystemError("unlink \(display(name))", errno: errno)) }
            errno = 0
        }
        return errno == 0 ? .success(nil) : .failure(SystemError("readdir", errno: errno))
    }

    /// Opens the subdirectory `name` of `parent` (never a link), giving it mode 0700 first when
    /// its owner left it unreadable.
    private static func openChild(_ name: [CChar], in parent: Int32) -> Result<Int32, SystemError> {
        let flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC
        var child = openat(parent, name, flags)
        if child < 0 && errno == EACCES && fchmodat(parent, name, 0o700, 0) == 0 {
            child = openat(parent, name, flags)
        }
        guard child >= 0 else { return .failure(SystemError("open \(display(name))", errno: errno)) }
        return .success(child)
    }

    /// Opens the parent of the (empty) directory open at `fd`, checks that it is `expected`, and
    /// removes the directory from it, found by its inode. Returns the parent's descriptor.
    private static func climb(from fd: Int32, to expected: Identity) -> Result<Int32, SystemError> {
        var own = stat()
        guard fstat(fd, &own) == 0 else { return .failure(SystemError("fstat", errno: errno)) }
        let parent = openat(fd, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard parent >= 0 else { return .failure(SystemError("open ..", errno: errno)) }
        var st = stat()
        guard fstat(parent, &st) == 0, Identity(st) == expected else {
            close(parent)
            return .failure(SystemError("go back up (a directory was moved during the removal)", errno: ESTALE))
        }
        if let e = removeSubdirectory(Identity(own), from: parent) {
            close(parent)
            return .failure(e)
        }
        return .success(parent)
    }

    /// Removes the empty subdirectory of `parent` whose identity is `child`.
    private static func removeSubdirectory(_ child: Identity, from parent: Int32) -> SystemError? {
        let listing = dup(parent)
        guard listing >= 0 else { return SystemError("dup", errno: errno) }
        guard let dir = fdopendir(listing) else {
            let e = SystemError("fdopendir", errno: errno)
            close(listing)
            return e
        }
        defer { closedir(dir) }
        rewinddir(dir)
        while let d = readdir(dir) {
            guard UInt64(d.pointee.d_ino) == child.inode else { continue }
            let name = withUnsafeBytes(of: d.pointee.d_name) { raw in
                Array(raw.bindMemory(to: CChar.self).prefix(while: { $0 != 0 })) + [0]
            }
            var st = stat()
            guard fstatat(parent, name, &st, AT_SYMLINK_NOFOLLOW) == 0, Identity(st) == child else { continue }
            if unlinkat(parent, name, AT_REMOVEDIR) != 0 && errno != ENOENT {
                return SystemError("rmdir \(display(name))", errno: errno)
            }
            return nil
        }
        return SystemError("go back up (a directory was moved during the removal)", errno: ESTALE)
    }

    /// A name for an error: its bytes as UTF-8 (invalid bytes replaced), at most 255 bytes.
    private static func display(_ name: [CChar]) -> String {
        String(decoding: name.prefix(while: { $0 != 0 }).prefix(255).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
