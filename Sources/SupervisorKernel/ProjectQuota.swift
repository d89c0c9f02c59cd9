import CShims
import ExtensionTransport

#if canImport(Glibc)
import Glibc
#endif

/// What putting a container under a project quota came to (`Kernel.limitTreeInBackground`).
public enum ProjectQuotaOutcome: Equatable, Sendable {
    /// The tree has the project id (its directories PROJINHERIT), and the project its limit:
    /// the file system refuses a write past it (EDQUOT).
    case limited
    /// The tree's file system enforces no project quota here (none, only counted, or the
    /// daemon may not set one): the reason.
    case unavailable(SystemError)
}

/// Project quotas (ext4 with `-O project,quota` mounted `prjquota`, XFS mounted `pquota`): a
/// container's tree is given a project id and the project a hard block limit, so that the
/// file system itself refuses a write past the container's `limits.diskMaxBytes`. On the
/// thread it is called on (a background one: the tree is walked).
enum ProjectQuota {
    /// Gives the tree at `path` (never followed if it is a link), which `owner` owns, the
    /// project id of the owner's uid, and the project the hard limit `limit` bytes. The limit
    /// is set before the tree is tagged, so that each file is limited from the moment it is
    /// tagged; each directory is tagged before it is listed, so that what is made in it
    /// meanwhile is tagged too. The tree is walked with the owner's file system ids: an owner
    /// may set its files' project id (in the initial user namespace), so the daemon needs no
    /// CAP_FOWNER; a directory the owner made unsearchable to itself keeps what it held
    /// untagged (what is made in a tagged directory is tagged at birth, and the measurement,
    /// with the daemon's ids, counts everything).
    static func apply(_ path: String, owner: FileOwner, limit: UInt64) -> Result<ProjectQuotaOutcome, SystemError> {
        let project = owner.uid
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { return .failure(SystemError("open \(path)", errno: errno)) }
        let enforced = shim_project_quota_enforced(fd)
        if enforced <= 0 {
            close(fd)
            let why =
                enforced == 0
                ? SystemError("project quotas counted but not enforced on the file system of \(path) (mounted without prjquota)", errno: ENOTSUP)
                : SystemError("quotactl_fd(Q_XGETQSTATV, PRJQUOTA) on the file system of \(path)", errno: -enforced)
            return .success(.unavailable(why))
        }
        let rc = shim_set_project_limit(fd, project, limit)
        if rc != 0 {
            close(fd)
            let e = SystemError("quotactl_fd(Q_SETQUOTA, PRJQUOTA, \(project))", errno: -rc)
            return rc == -EPERM ? .success(.unavailable(e)) : .failure(e)
        }
        let switched = shim_set_thread_fs_ids(owner.uid, owner.gid)
        if switched != 0 {
            close(fd)
            return .failure(SystemError("setfsuid \(owner.uid)", errno: -switched))
        }
        defer { _ = shim_set_thread_fs_ids(geteuid(), getegid()) }
        var bytes: UInt64 = 0
        let tagged = shim_tree_usage(fd, 0, project, &bytes)  // closes fd
        guard tagged == 0 else {
            let e = SystemError("set project \(project) on the tree at \(path)", errno: -tagged)
            // A file system without the attribute (ENOTTY, EOPNOTSUPP) will not take it on any
            // container.
            return [ENOTTY, EOPNOTSUPP].contains(-tagged) ? .success(.unavailable(e)) : .failure(e)
        }
        return .success(.limited)
    }
}
