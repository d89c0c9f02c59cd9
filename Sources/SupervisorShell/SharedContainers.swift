import SupervisorCore
import SupervisorKernel

/// The shared containers' directories, `<state directory>/containers/NAME`:
///
/// - Under a root daemon, owned by root and the container's group, mode 0770, with a default
///   ACL granting that group read and write (`g:GID:rwx`): every file and directory an
///   extension creates inside is its group's to read and write, whatever the creator's own
///   group and umask (0077 under the system unit). The group is the one the configuration
///   names (`sharedContainers.NAME.group`), or else a gid allocated from `extensionUIDs` and
///   kept in `ids.json`. Extensions naming the container get that group as a supplementary
///   group. (Not a setgid directory: the system unit's `RestrictSUIDSGID=yes` refuses the bit.)
/// - Under a daemon that is not root, owned by its user, mode 0700: every extension runs as
///   that user, so the directory separates nothing from other extensions.
///
/// Each directory is created (or its owner and mode corrected) when a manifest naming it is
/// provisioned (`Provisioner`); one that already has its owner, group and mode is left
/// untouched. Owned by the daemon's loop thread.
final class SharedContainers {
    struct Container: Equatable, Codable {
        var path: String
        /// Its group; nil under a daemon that is not root.
        var gid: UInt32?
    }

    let stateDirectory: String
    let kernel: any Kernel
    private(set) var known: [String: Container] = [:]

    init(stateDirectory: String, kernel: any Kernel) {
        self.stateDirectory = stateDirectory
        self.kernel = kernel
        resolvedRoot = stateDirectory + "/containers"
    }

    /// The directory holding every container.
    var root: String { stateDirectory + "/containers" }
    /// `root` with the state directory's symbolic links resolved, as `/proc/PID/fd` links
    /// name files (the lock survey compares them).
    private(set) var resolvedRoot: String

    func path(of name: String) -> String { root + "/" + name }

    /// Takes over what a replaced daemon had prepared (`known`, `resolvedRoot`): the
    /// directories exist, and the manifests are not provisioned again.
    func restore(known: [String: Container], resolvedRoot: String) {
        self.known = known
        self.resolvedRoot = resolvedRoot
    }

    /// Prepares container `name` with group `gid` (nil: the daemon is not root). A directory
    /// that already has its owner, group and mode is not changed.
    func prepare(_ name: String, gid: UInt32?) -> Result<Container, SharedContainerError> {
        let path = path(of: name)
        if !isPrepared(path, gid: gid), let e = create(path, gid: gid) { return .failure(e) }
        if let resolved = kernel.resolvePath(stateDirectory) { resolvedRoot = resolved + "/containers" }
        let container = Container(path: path, gid: gid)
        known[name] = container
        return .success(container)
    }

    /// The mode of a container's directory.
    private func mode(gid: UInt32?) -> UInt32 { gid == nil ? 0o700 : 0o770 }

    /// Whether `path` is a directory (symbolic links followed, as `chown` and `chmod` follow
    /// them) with the owner, group and mode `create` gives it: root and `gid`, or with no
    /// `gid` the daemon's own user (the only one whose `chmod` of it succeeds).
    private func isPrepared(_ path: String, gid: UInt32?) -> Bool {
        guard case .success(let st) = kernel.status(path, followLinks: true), st.kind == .directory, st.permissions == mode(gid: gid) else {
            return false
        }
        if let gid { return st.owner == 0 && st.group == gid }
        return st.owner == kernel.userID
    }

    /// Creates the directory (and the state directory and `containers` above it) or gives an
    /// existing one its owner and mode back, and then its group's default ACL. Modes are set
    /// while root owns the directory, so none of this needs `CAP_FOWNER`.
    private func create(_ path: String, gid: UInt32?) -> SharedContainerError? {
        if let e = kernel.makeDirectories(stateDirectory + "/containers", mode: 0o755) { return SharedContainerError("cannot create \(e)") }
        if let e = kernel.makeDirectory(path, mode: mode(gid: gid)), !e.isAlreadyExisting {
            return SharedContainerError("cannot create \(path): \(e)")
        }
        guard case .success(let st) = kernel.status(path, followLinks: true), st.kind == .directory else {
            return SharedContainerError("\(path) is not a directory")
        }
        if gid != nil, st.owner != 0, let e = kernel.changeOwner(path, user: 0, group: UInt32.max) {
            return SharedContainerError("cannot give \(path) to root: \(e)")
        }
        if let e = kernel.changeMode(path, mode(gid: gid)) {
            return SharedContainerError("cannot set the mode of \(path): \(e)")
        }
        guard let gid else { return nil }
        if let e = kernel.changeOwner(path, user: 0, group: gid) {
            return SharedContainerError("cannot give \(path) to group \(gid): \(e)")
        }
        if let e = kernel.setGroupDefaultACL(path, group: gid) {
            return SharedContainerError("cannot give \(path) the default ACL of group \(gid) (does its file system support ACLs?): \(e)")
        }
        return nil
    }
}

/// Why a shared container cannot be prepared.
struct SharedContainerError: Error, CustomStringConvertible {
    var description: String
    init(_ d: String) { description = d }
}
