import ExtensionTransport
import Logging
import SupervisorCore
import SupervisorKernel

/// Each extension's own container, `<state directory>/extensions/ID`: its `HOME`, where its
/// settings, caches and data live across relaunches, reloads and daemon restarts.
///
/// - The directory holding them is mode 0711: searchable, not listable, so no extension learns
///   the others' ids from it.
/// - A container is created at the extension's first launch with mode 0700, then given to the
///   extension's uid and gid; an existing one gets its owner and mode back at each launch.
///   Every mode is set while the daemon owns the directory, so none of this needs
///   `CAP_FOWNER` (the system unit does not grant it).
/// - Removing a manifest keeps its container; `reset` replaces it with an empty one at once,
///   and removes the old contents on another thread (`Kernel.removeTreeInBackground`), with
///   the file system ids of the extension's uid: the daemon needs no `CAP_DAC_OVERRIDE` to
///   enter what the extension made, and a tree of any depth costs it bounded memory.
///
/// Owned by the daemon's loop thread.
final class ExtensionContainers {
    let root: String
    /// Whether the daemon can give a container to another uid (it is root).
    let chowns: Bool
    let kernel: any Kernel
    /// What names a container set aside by `reset` while its contents are removed: an id never
    /// starts with a dot, so no container has such a name.
    static let removalPrefix = ".removing-"
    private var removals = 0

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
        let path = path(of: id)
        // The directories above it are made only when they are missing (the first launch).
        if let e = kernel.makeDirectory(path, mode: 0o700), !e.isAlreadyExisting {
            guard e.isNoEntry else { return .failure(e.during("mkdir \(path)")) }
            if let e = prepareRoot() { return .failure(e) }
            if let e = kernel.makeDirectory(path, mode: 0o700), !e.isAlreadyExisting { return .failure(e.during("mkdir \(path)")) }
        }
        // The directory itself, never a link an extension planted in its place.
        let st: FileStatus
        switch kernel.status(path, followLinks: false) {
        case .failure(let e): return .failure(e.during("stat \(path)"))
        case .success(let found) where found.kind != .directory: return .failure(.notADirectory("open \(path)"))
        case .success(let found): st = found
        }
        let wanted = chowns ? (user: uid ?? st.owner, group: gid ?? st.group) : (user: st.owner, group: st.group)
        var current = (user: st.owner, group: st.group)
        // The mode is set while the daemon owns the directory (an owner may chmod without
        // CAP_FOWNER), then the directory is given to the extension.
        if st.permissions != 0o700 {
            if chowns && current.user != kernel.userID {
                if let e = kernel.changeOwner(path, user: kernel.userID, group: UInt32.max) { return .failure(e.during("chown \(path)")) }
                current.user = kernel.userID
            }
            if let e = kernel.changeMode(path, 0o700) { return .failure(e.during("chmod \(path)")) }
        }
        if chowns && current != wanted, let e = kernel.changeOwner(path, user: wanted.user, group: wanted.group) {
            return .failure(e.during("chown \(path)"))
        }
        return .success(path)
    }

    /// The state directory (0755) and `extensions/` (0711), when they do not exist.
    private func prepareRoot() -> SystemError? {
        let stateDirectory = String(root.dropLast("/extensions".count))
        for (dir, mode) in [(stateDirectory, UInt32(0o755)), (root, UInt32(0o711))] {
            if let e = kernel.makeDirectory(dir, mode: mode), !e.isAlreadyExisting { return e.during("mkdir \(dir)") }
        }
        return nil
    }

    /// Empties the container of `id` at once: it is moved aside (`.removing-ID-N`) and an
    /// empty one with its owner and mode takes its place; the old contents are then removed
    /// on another thread, with the file system ids of their owner, and `removed` runs on the
    /// loop with the outcome (a failure leaves them aside, removed at the daemon's next start
    /// by `removeLeftovers`). Succeeds, with nothing to remove, when there is no container.
    func reset(_ id: String, logger: Logger, removed: @escaping (SystemError?) -> Void = { _ in }) -> Result<Void, SystemError> {
        let path = path(of: id)
        let st: FileStatus
        switch kernel.status(path, followLinks: false) {
        case .failure(let e) where e.isNoEntry: return .success(())
        case .failure(let e): return .failure(e.during("stat \(path)"))
        case .success(let found): st = found
        }
        removals += 1
        let aside = "\(root)/\(Self.removalPrefix)\(id)-\(kernel.processID)-\(removals)"
        if let e = kernel.rename(path, to: aside) { return .failure(e.during("rename \(path)")) }
        if st.kind == .directory, case .failure(let e) = prepare(id, uid: st.owner, gid: st.group) {
            logger.error("\(id): a new container could not be made after the reset: \(e); it is made at the next launch")
        }
        remove(aside, status: st, logger: logger, removed)
        return .success(())
    }

    /// Removes, on other threads, the containers that resets set aside and did not finish
    /// removing (the daemon stopped or re-executed meanwhile).
    func removeLeftovers(logger: Logger) {
        for name in kernel.listDirectory(root) ?? [] where name.hasPrefix(Self.removalPrefix) {
            let path = root + "/" + name
            guard case .success(let st) = kernel.status(path, followLinks: false) else { continue }
            logger.notice("removing \(path), which a reset set aside")
            remove(path, status: st, logger: logger) { _ in }
        }
    }

    /// Removes `path` in the background as its owner, logging the outcome.
    private func remove(_ path: String, status st: FileStatus, logger: Logger, _ removed: @escaping (SystemError?) -> Void) {
        guard st.kind == .directory else {
            let e = kernel.removeFile(path)
            if let e { logger.error("cannot remove \(path): \(e)") }
            return removed(e)
        }
        let owner = chowns && st.owner != kernel.userID ? FileOwner(uid: st.owner, gid: st.group) : nil
        let started = kernel.removeTreeInBackground(path, owner: owner) { e in
            if let e { logger.error("cannot remove \(path) (left for the next start): \(e)") }
            removed(e)
        }
        if let started {
            logger.error("cannot start removing \(path) (left for the next start): \(started)")
            removed(started)
        }
    }
}
