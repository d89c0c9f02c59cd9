import ExtensionTransport
import SupervisorCore
import SupervisorKernel

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
    let kernel: any Kernel

    init(stateDirectory: String, kernel: any Kernel) {
        root = stateDirectory + "/extensions"
        chowns = kernel.userID == 0
        self.kernel = kernel
    }

    /// The container of extension `id` (whether or not it exists yet).
    func path(of id: String) -> String { root + "/" + id }

    /// Creates the container of `id` if need be, owned by `uid`/`gid` (when the daemon is
    /// root) with mode 0700. Returns its path.
    func prepare(_ id: String, uid: UInt32?, gid: UInt32?) -> Result<String, SystemError> {
        let stateDirectory = String(root.dropLast("/extensions".count))
        for (dir, mode) in [(stateDirectory, UInt32(0o755)), (root, UInt32(0o711))] {
            if let e = kernel.makeDirectory(dir, mode: mode) {
                guard e.isAlreadyExisting else { return .failure(e.during("mkdir \(dir)")) }
            } else if let e = kernel.changeMode(dir, mode) {
                return .failure(e.during("chmod \(dir)"))
            }
        }
        let path = path(of: id)
        if let e = kernel.makeDirectory(path, mode: 0o700), !e.isAlreadyExisting { return .failure(e.during("mkdir \(path)")) }
        // The directory itself, never a link an extension planted in its place.
        switch kernel.status(path, followLinks: false) {
        case .failure(let e): return .failure(e.during("stat \(path)"))
        case .success(let st) where st.kind != .directory:
            return .failure(.notADirectory("open \(path)"))
        case .success: break
        }
        if chowns, let uid, let gid, let e = kernel.changeOwner(path, user: uid, group: gid) { return .failure(e.during("chown \(path)")) }
        if let e = kernel.changeMode(path, 0o700) { return .failure(e.during("chmod \(path)")) }
        return .success(path)
    }

    /// Empties the container of `id`, keeping the directory itself. Links inside are removed,
    /// never followed. Succeeds when there is no container.
    func reset(_ id: String) -> Result<Void, SystemError> {
        guard let e = kernel.removeContents(ofDirectory: path(of: id)) else { return .success(()) }
        return e.isNoEntry ? .success(()) : .failure(e)
    }
}
