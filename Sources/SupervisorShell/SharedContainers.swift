import SupervisorCore
#if canImport(Glibc)
import Glibc
#endif

/// The shared containers' directories, `<state directory>/containers/NAME`:
///
/// - Under a root daemon, owned by root and the container's group, mode 2770 (setgid: files
///   created inside keep the group). The group is the one the configuration names
///   (`sharedContainers.NAME.group`), or else a gid allocated from `extensionUIDs` and kept in
///   `ids.json`. Extensions naming the container get that group as a supplementary group.
/// - Under a daemon that is not root, owned by its user, mode 0700: every extension runs as
///   that user, so the directory separates nothing from other extensions.
///
/// Each directory is created (or its owner and mode corrected) when a manifest naming it is
/// provisioned (`Provisioner`); one that already has its owner, group and mode is left
/// untouched. Owned by the daemon's loop thread.
final class SharedContainers {
    struct Container: Equatable {
        var path: String
        /// Its group; nil under a daemon that is not root.
        var gid: UInt32?
    }

    let stateDirectory: String
    private(set) var known: [String: Container] = [:]

    init(stateDirectory: String) {
        self.stateDirectory = stateDirectory
        resolvedRoot = stateDirectory + "/containers"
    }

    /// The directory holding every container.
    var root: String { stateDirectory + "/containers" }
    /// `root` with the state directory's symbolic links resolved, as `/proc/PID/fd` links
    /// name files (the lock survey compares them).
    private(set) var resolvedRoot: String

    func path(of name: String) -> String { root + "/" + name }

    /// Prepares container `name` with group `gid` (nil: the daemon is not root). A directory
    /// that already has its owner, group and mode is not changed.
    func prepare(_ name: String, gid: UInt32?) -> Result<Container, SharedContainerError> {
        let path = path(of: name)
        let mode: mode_t = gid == nil ? 0o700 : 0o2770
        if !isPrepared(path, gid: gid, mode: mode) {
            if let e = makeDirectory(stateDirectory, mode: 0o755, parents: true) { return .failure(e) }
            if let e = makeDirectory(stateDirectory + "/containers", mode: 0o755, parents: false) { return .failure(e) }
            if let e = makeDirectory(path, mode: mode, parents: false) { return .failure(e) }
            // An existing directory gets its owner and mode back; chown clears the setgid bit, so
            // the mode is set after it.
            if let gid, chown(path, 0, gid) != 0 {
                return .failure(SharedContainerError("cannot give \(path) to group \(gid): \(String(cString: strerror(errno)))"))
            }
            if chmod(path, mode) != 0 {
                return .failure(SharedContainerError("cannot set the mode of \(path): \(String(cString: strerror(errno)))"))
            }
        }
        if let resolved = realpath(stateDirectory, nil) {
            resolvedRoot = String(cString: resolved) + "/containers"
            free(resolved)
        }
        let container = Container(path: path, gid: gid)
        known[name] = container
        return .success(container)
    }

    /// Whether `path` is a directory (symbolic links followed, as `chown` and `chmod` follow
    /// them) with the owner, group and `mode` that `prepare` gives it: root and `gid`, or
    /// with no `gid` the daemon's own user (the only one whose `chmod` of it succeeds).
    private func isPrepared(_ path: String, gid: UInt32?, mode: mode_t) -> Bool {
        var st = stat()
        guard stat(path, &st) == 0, (st.st_mode & S_IFMT) == S_IFDIR, st.st_mode & 0o7777 == mode else { return false }
        if let gid { return st.st_uid == 0 && st.st_gid == gid }
        return st.st_uid == geteuid()
    }

    /// `mkdir` (with `parents`, every missing ancestor too), each created directory given
    /// `mode` explicitly (the umask, 0077 under the system unit, would narrow it).
    private func makeDirectory(_ path: String, mode: mode_t, parents: Bool) -> SharedContainerError? {
        var targets = [path]
        if parents {
            targets = []
            var prefix = ""
            for part in path.split(separator: "/") {
                prefix += "/" + part
                targets.append(prefix)
            }
        }
        for p in targets {
            if mkdir(p, mode) == 0 {
                if chmod(p, mode) != 0 { return SharedContainerError("cannot set the mode of \(p): \(String(cString: strerror(errno)))") }
            } else if errno != EEXIST {
                return SharedContainerError("cannot create \(p): \(String(cString: strerror(errno)))")
            }
        }
        var st = stat()
        guard stat(path, &st) == 0, (st.st_mode & S_IFMT) == S_IFDIR else { return SharedContainerError("\(path) is not a directory") }
        return nil
    }
}

/// Why a shared container cannot be prepared.
struct SharedContainerError: Error, CustomStringConvertible {
    var description: String
    init(_ d: String) { description = d }
}
