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
    /// project id of the owner's uid, and the project the hard limit `limit` bytes (0: no
    /// limit, and the tree is not walked). The limit is set before the tree is tagged, so that
    /// each file is limited from the moment it is tagged; each directory is tagged before it is
    /// listed, so that what is made in it meanwhile gets the id at birth. The walk is made with
    /// the daemon's ids (it opens what the owner made unreadable to itself), each change with
    /// the owner's uid as the file system uid (an owner may set its files' project id in the
    /// initial user namespace, so the daemon needs no CAP_FOWNER); an entry that cannot be
    /// tagged is left as it is (`shim_tree_usage`), and the measurement still counts it.
    static func apply(_ path: String, owner: FileOwner, limit: UInt64) -> Result<ProjectQuotaOutcome, SystemError> {
        let project = owner.uid
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { return .failure(SystemError("open \(path)", errno: errno)) }
        let enforced = shim_project_quota_enforced(fd)
        if enforced <= 0 {
            close(fd)
            if enforced == 0 {
                return .success(.unavailable(SystemError("project quotas are counted but not enforced on the file system of \(path)", errno: ENOTSUP)))
            }
            let e = SystemError("quotactl_fd(Q_XGETQSTATV, PRJQUOTA) on the file system of \(path)", errno: -enforced)
            return unavailable(-enforced) ? .success(.unavailable(e)) : .failure(e)
        }
        let rc = shim_set_project_limit(fd, project, limit)
        if rc != 0 {
            close(fd)
            let e = SystemError("quotactl_fd(Q_SETQUOTA, PRJQUOTA, \(project))", errno: -rc)
            // Without the privilege (EPERM, ENOSYS: a filter) no container gets one; another
            // error is this project's (an id out of the file system's range: EINVAL).
            return [EPERM, ENOSYS].contains(-rc) ? .success(.unavailable(e)) : .failure(e)
        }
        if limit == 0 {
            close(fd)
            return .success(.limited)
        }
        // The walk makes each change as the owner (setfsuid): a thread that cannot switch would
        // have every change refused, and every entry skipped without a word.
        let switched = shim_set_thread_fs_ids(owner.uid, owner.gid)
        _ = shim_set_thread_fs_ids(geteuid(), getegid())
        if switched != 0 {
            close(fd)
            return .failure(SystemError("setfsuid \(owner.uid)", errno: -switched))
        }
        var bytes: UInt64 = 0
        let tagged = shim_tree_usage(fd, 0, project, &bytes)  // closes fd
        guard tagged == 0 else {
            let e = SystemError("set project \(project) on the tree at \(path)", errno: -tagged)
            // A file system without the project id attribute has none on any container.
            return [ENOTTY, ENOTSUP, EOPNOTSUPP].contains(-tagged) ? .success(.unavailable(e)) : .failure(e)
        }
        return .success(.limited)
    }

    /// Whether `error` says the file system (or the daemon's privilege) has no project quotas
    /// to offer: not a failure of this container, and not worth trying again there. ENOSYS (no
    /// quotactl_fd), ESRCH (no project quota turned on), ENOTSUP/EOPNOTSUPP/ENOTTY (the file
    /// system has none, or no project id attribute), EINVAL (the command unknown to it), EPERM
    /// (no CAP_SYS_ADMIN, or a system-call filter).
    static func unavailable(_ error: Int32) -> Bool {
        [ENOSYS, ESRCH, ENOTSUP, EOPNOTSUPP, ENOTTY, EINVAL, EPERM].contains(error)
    }
}
