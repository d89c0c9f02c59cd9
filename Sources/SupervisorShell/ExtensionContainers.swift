import ExtensionTransport
import SupervisorCore
#if canImport(Glibc)
import Glibc
#endif

/// Each extension's own container, `<state directory>/extensions/ID`: its `HOME`, where its
/// settings, caches and data live across relaunches, reloads and daemon restarts.
///
/// - The directory holding them is mode 0711: searchable, not listable, so no extension learns
///   the others' ids from it.
/// - A container is created at the extension's first launch, owned by the extension's uid and
///   gid, mode 0700; an existing one gets its owner and mode back at each launch.
/// - Removing a manifest keeps its container; `reset` empties it.
///
/// Owned by the daemon's loop thread.
final class ExtensionContainers {
    let root: String
    /// Whether the daemon can give a container to another uid (it is root).
    let chowns: Bool

    init(stateDirectory: String, chowns: Bool) {
        root = stateDirectory + "/extensions"
        self.chowns = chowns
    }

    /// The container of extension `id` (whether or not it exists yet).
    func path(of id: String) -> String { root + "/" + id }

    /// Creates the container of `id` if need be, owned by `uid`/`gid` (when the daemon is
    /// root) with mode 0700. Returns its path.
    func prepare(_ id: String, uid: UInt32?, gid: UInt32?) -> Result<String, SystemError> {
        let stateDirectory = String(root.dropLast("/extensions".count))
        for (dir, mode) in [(stateDirectory, mode_t(0o755)), (root, mode_t(0o711))] {
            if mkdir(dir, mode) == 0 {
                if chmod(dir, mode) != 0 { return .failure(SystemError("chmod \(dir)", errno: errno)) }
            } else if errno != EEXIST {
                return .failure(SystemError("mkdir \(dir)", errno: errno))
            }
        }
        let path = path(of: id)
        if mkdir(path, 0o700) != 0 && errno != EEXIST { return .failure(SystemError("mkdir \(path)", errno: errno)) }
        // The directory itself, never a link an extension planted in its place.
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { return .failure(SystemError("open \(path)", errno: errno)) }
        defer { close(fd) }
        if chowns, let uid, let gid, fchown(fd, uid, gid) != 0 { return .failure(SystemError("chown \(path)", errno: errno)) }
        if fchmod(fd, 0o700) != 0 { return .failure(SystemError("chmod \(path)", errno: errno)) }
        return .success(path)
    }

    /// Empties the container of `id`, keeping the directory itself. Links inside are removed,
    /// never followed. Succeeds when there is no container.
    func reset(_ id: String) -> Result<Void, SystemError> {
        let path = path(of: id)
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        if fd < 0 {
            return errno == ENOENT ? .success(()) : .failure(SystemError("open \(path)", errno: errno))
        }
        defer { close(fd) }
        return ExtensionContainers.removeContents(of: fd, path: path)
    }

    /// Removes everything inside the directory open at `fd`, depth first, by descriptor.
    private static func removeContents(of fd: Int32, path: String) -> Result<Void, SystemError> {
        guard let names = directoryEntries(fd: fd) else { return .failure(SystemError("opendir \(path)", errno: errno)) }
        for name in names {
            if unlinkat(fd, name, 0) == 0 || errno == ENOENT { continue }
            guard errno == EISDIR else { return .failure(SystemError("unlink \(path)/\(name)", errno: errno)) }
            let child = openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            guard child >= 0 else { return .failure(SystemError("open \(path)/\(name)", errno: errno)) }
            let emptied = removeContents(of: child, path: path + "/" + name)
            close(child)
            if case .failure = emptied { return emptied }
            if unlinkat(fd, name, AT_REMOVEDIR) != 0 { return .failure(SystemError("rmdir \(path)/\(name)", errno: errno)) }
        }
        return .success(())
    }
}
