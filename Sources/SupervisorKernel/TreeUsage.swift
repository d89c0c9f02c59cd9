import CShims
import ExtensionTransport

#if canImport(Glibc)
import Glibc
#endif

/// Measures the space a directory tree that an untrusted uid built takes (an extension's
/// container, against its `limits.diskMaxBytes`), with bounded descriptors and memory
/// whatever its depth and names (`shim_tree_usage`), with that uid's file system ids, on the
/// thread it is called on (setfsuid(2) is per thread).
enum TreeUsage {
    /// The bytes below `path` (never followed if it is a link); with `limit` > 0 the count
    /// stops once past it. Fails naming the step, never a path below `path`.
    /// Its parent is opened with the process's own ids (the owner may not be able to search
    /// the directories above), the tree with the owner's.
    static func measure(_ path: String, owner: FileOwner?, limit: UInt64) -> Result<UInt64, SystemError> {
        guard let slash = path.lastIndex(of: "/") else { return .failure(SystemError("measure \(path)", errno: EINVAL)) }
        let parentPath = slash == path.startIndex ? "/" : String(path[..<slash])
        let name = String(path[path.index(after: slash)...])
        let parent = open(parentPath, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard parent >= 0 else { return .failure(SystemError("open \(parentPath)", errno: errno)) }
        defer { close(parent) }
        if let owner {
            let rc = shim_set_thread_fs_ids(owner.uid, owner.gid)
            if rc != 0 { return .failure(SystemError("setfsuid \(owner.uid)", errno: -rc)) }
        }
        defer { if owner != nil { _ = shim_set_thread_fs_ids(geteuid(), getegid()) } }
        let top = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard top >= 0 else { return .failure(SystemError("open \(path)", errno: errno)) }
        var bytes: UInt64 = 0
        let rc = shim_tree_usage(top, limit, 0, &bytes)
        return rc == 0 ? .success(bytes) : .failure(SystemError("measure \(path)", errno: -rc))
    }
}
