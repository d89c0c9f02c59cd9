// File system helpers of the daemon: default ACLs of shared containers, and per-thread file
// system credentials for work done in another uid's files.
#define _GNU_SOURCE
#include "shims.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/acl.h>
#include <sys/fsuid.h>
#include <linux/dqblk_xfs.h>
#include <linux/fs.h>
#include <linux/quota.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SYS_quotactl_fd
#define SYS_quotactl_fd 443
#endif

int shim_set_group_default_acl(const char *path, unsigned int gid) {
    char text[96];
    snprintf(text, sizeof(text), "u::rwx,g::---,g:%u:rwx,m::rwx,o::---", gid);
    acl_t acl = acl_from_text(text);
    if (acl == NULL) return -errno;
    int rc = acl_set_file(path, ACL_TYPE_DEFAULT, acl) == 0 ? 0 : -errno;
    acl_free(acl);
    return rc;
}

int shim_set_thread_fs_ids(unsigned int uid, unsigned int gid) {
    // Each call returns the previous id; a second call with the same id tells whether the
    // first took effect (setfsuid reports no error itself). Half done, the previous ids are
    // put back: the thread is left as it was.
    int previous_gid = setfsgid(gid);
    int previous_uid = setfsuid(uid);
    if ((unsigned int)setfsgid(gid) != gid || (unsigned int)setfsuid(uid) != uid) {
        setfsuid((uid_t)previous_uid);
        setfsgid((gid_t)previous_gid);
        return -EPERM;
    }
    return 0;
}

// The directory at `fd`'s identity.
struct shim_identity {
    dev_t dev;
    ino_t ino;
};

static int shim_identity_of(int fd, struct shim_identity *out) {
    struct stat st;
    if (fstat(fd, &st) != 0) return -errno;
    out->dev = st.st_dev;
    out->ino = st.st_ino;
    return 0;
}

int shim_project_quota_enforced(int fd) {
    struct fs_quota_statv state = { .qs_version = FS_QSTATV_VERSION1 };
    if (syscall(SYS_quotactl_fd, fd, QCMD(Q_XGETQSTATV, PRJQUOTA), 0, &state) != 0) return -errno;
    return (state.qs_flags & FS_QUOTA_PDQ_ENFD) != 0;
}

int shim_set_project_limit(int fd, uint32_t project, uint64_t bytes) {
    // In quota blocks of 1 KiB (QIF_DQBLKSIZE), rounded up; soft and hard the same: refused
    // at once, no grace period.
    uint64_t blocks = bytes / 1024 + (bytes % 1024 != 0);
    struct if_dqblk limit = { .dqb_bhardlimit = blocks, .dqb_bsoftlimit = blocks, .dqb_valid = QIF_BLIMITS };
    return syscall(SYS_quotactl_fd, fd, QCMD(Q_SETQUOTA, PRJQUOTA), project, &limit) == 0 ? 0 : -errno;
}

// Whether a file's tagging failed for a reason of its own, after which the walk goes on: it is
// gone or was replaced (ENOENT, ELOOP, ENXIO, ENOTTY), cannot be opened (EACCES, EWOULDBLOCK:
// a lease; ENOKEY: encrypted, its key gone), is not the owner's (EPERM), or would take the
// project past its limit (EDQUOT). It
// stays as it was; the measurement still counts it.
static int shim_tag_skipped(int error) {
    return error == ENOENT || error == ELOOP || error == ENXIO || error == ENOTTY || error == EACCES || error == EWOULDBLOCK ||
           error == EPERM || error == EDQUOT || error == ENOKEY;
}

// Gives the file open at `fd` the project id `project`, and a directory PROJINHERIT too (what
// is made in it gets the same id), unless it has them. The project id is the files' owner's
// uid: the change is made with it as the thread's file system uid (an owner may make it; the
// daemon has no CAP_FOWNER), the walk itself with the daemon's ids (CAP_DAC_READ_SEARCH opens
// what the owner made unreadable to itself). 0 or -errno.
static int shim_tag_project(int fd, uint32_t project, int directory) {
    struct fsxattr a;
    if (ioctl(fd, FS_IOC_FSGETXATTR, &a) != 0) return -errno;
    uint32_t flags = directory ? a.fsx_xflags | FS_XFLAG_PROJINHERIT : a.fsx_xflags;
    if (a.fsx_projid == project && flags == a.fsx_xflags) return 0;
    a.fsx_projid = project;
    a.fsx_xflags = flags;
    int previous = setfsuid(project);
    int rc = ioctl(fd, FS_IOC_FSSETXATTR, &a) == 0 ? 0 : -errno;
    setfsuid((uid_t)previous);
    return rc;
}

// Tags the regular file `name` in `dir` with `project`, unless it is skipped
// (shim_tag_skipped). 0 or -errno.
static int shim_tag_file(int dir, const char *name, uint32_t project) {
    int fd = openat(dir, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) return shim_tag_skipped(errno) ? 0 : -errno;
    struct stat st;
    int rc = fstat(fd, &st) != 0 ? -errno : S_ISREG(st.st_mode) ? shim_tag_project(fd, project, 0) : 0;
    close(fd);
    return rc != 0 && shim_tag_skipped(-rc) ? 0 : rc;
}

// Tags the directory open at `fd` (shim_tag_project); one skipped (shim_tag_skipped) is still
// walked, for what is the owner's below it. 0 or -errno.
static int shim_tag_directory(int fd, uint32_t project) {
    int rc = shim_tag_project(fd, project, 1);
    return rc != 0 && shim_tag_skipped(-rc) ? 0 : rc;
}

int shim_tree_usage(int top, uint64_t limit, uint32_t project, uint64_t *bytes) {
    // One level per directory on the way down: its identity and where its listing stood.
    struct level {
        struct shim_identity id;
        long position;
    };
    struct level *levels = NULL;
    size_t depth = 0, capacity = 0;
    uint64_t total = 0;
    int rc = 0;
    DIR *dir = fdopendir(top);
    if (dir == NULL) {
        rc = -errno;
        close(top);
        return rc;
    }
    struct stat st;
    if (fstat(dirfd(dir), &st) == 0) total += (uint64_t)st.st_blocks * 512;
    // Each directory is tagged before it is listed: what is made in it meanwhile inherits.
    // The top is tagged or the walk fails: without it, what is made there would not inherit.
    if (project != 0 && (rc = shim_tag_project(dirfd(dir), project, 1)) != 0) {
        closedir(dir);
        *bytes = 0;
        return rc;
    }
    for (;;) {
        errno = 0;
        struct dirent *e = readdir(dir);
        if (e == NULL) {
            if (errno != 0) {
                rc = -errno;
                break;
            }
            // This directory is done: back to its parent, where its listing stood.
            if (depth == 0) break;
            int parent = openat(dirfd(dir), "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
            closedir(dir);
            dir = NULL;
            if (parent < 0) {
                rc = -errno;
                break;
            }
            depth--;
            struct shim_identity id;
            if ((rc = shim_identity_of(parent, &id)) != 0 || id.dev != levels[depth].id.dev || id.ino != levels[depth].id.ino) {
                close(parent);
                if (rc == 0) rc = -ESTALE;  // moved meanwhile: the walk does not follow it out
                break;
            }
            dir = fdopendir(parent);
            if (dir == NULL) {
                rc = -errno;
                close(parent);
                break;
            }
            seekdir(dir, levels[depth].position);
            continue;
        }
        if (e->d_name[0] == '.' && (e->d_name[1] == '\0' || (e->d_name[1] == '.' && e->d_name[2] == '\0'))) continue;
        if (fstatat(dirfd(dir), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
            if (errno == ENOENT) continue;  // removed meanwhile
            rc = -errno;
            break;
        }
        total += (uint64_t)st.st_blocks * 512;
        if (limit > 0 && total > limit) break;  // over: no need to count the rest
        if (project != 0 && S_ISREG(st.st_mode) && (rc = shim_tag_file(dirfd(dir), e->d_name, project)) != 0) break;
        if (!S_ISDIR(st.st_mode)) continue;
        int child = openat(dirfd(dir), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (child < 0) {
            // Removed, or replaced by a link or a file since it was examined: its blocks were
            // counted as they were then.
            if (errno == ENOENT || errno == ELOOP || errno == ENOTDIR) continue;
            rc = -errno;
            break;
        }
        if (depth == capacity) {
            size_t more = capacity == 0 ? 64 : capacity * 2;
            struct level *grown = realloc(levels, more * sizeof(*levels));
            if (grown == NULL) {
                close(child);
                rc = -ENOMEM;
                break;
            }
            levels = grown;
            capacity = more;
        }
        if ((rc = shim_identity_of(dirfd(dir), &levels[depth].id)) != 0) {
            close(child);
            break;
        }
        levels[depth].position = telldir(dir);
        depth++;
        closedir(dir);
        dir = fdopendir(child);
        if (dir == NULL) {
            rc = -errno;
            close(child);
            break;
        }
        if (project != 0 && (rc = shim_tag_directory(dirfd(dir), project)) != 0) break;
    }
    if (dir != NULL) closedir(dir);
    free(levels);
    *bytes = total;
    return rc;
}

// `relative` opened beneath the directory `dirfd`, one component at a time: each directory with
// O_NOFOLLOW | O_DIRECTORY, the last with O_NOFOLLOW, each on the file system of `dirfd`; no
// empty, "." or ".." component. What openat2's RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
// RESOLVE_NO_XDEV give, for a kernel or a system-call filter without openat2 (systemd 252's
// @system-service answers it ENOSYS). The new descriptor, or -errno.
static int open_walk(int dirfd, const char *relative, int flags, unsigned int mode) {
    struct stat top;
    if (fstat(dirfd, &top) != 0) return -errno;
    char *copy = strdup(relative);
    if (!copy) return -ENOMEM;
    int current = dirfd, result = -EINVAL;
    char *rest = copy;
    for (;;) {
        char *slash = strchr(rest, '/');
        if (slash) *slash = 0;
        if (!*rest || strcmp(rest, ".") == 0 || strcmp(rest, "..") == 0) { result = -EINVAL; break; }
        int last = slash == NULL;
        int fd = openat(current, rest, last ? (flags | O_NOFOLLOW | O_CLOEXEC) : (O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC),
                        (flags & O_CREAT) ? mode : 0);
        if (fd < 0) { result = -errno; break; }
        struct stat st;
        int failed = fstat(fd, &st) != 0 ? -errno : st.st_dev != top.st_dev ? -EXDEV : 0;
        if (failed) {
            result = failed;
            close(fd);
            break;
        }
        if (current != dirfd) close(current);
        current = fd;
        if (last) { result = fd; current = dirfd; break; }
        rest = slash + 1;
    }
    if (current != dirfd) close(current);
    free(copy);
    return result;
}

// openat2(2) of `relative` beneath the directory `dirfd`: no symbolic link, no magic link, no
// `..` out of it, no mount crossing; the same walked by hand where openat2 is not there.
// Background transfers open a file an extension may have replaced with a link this way. The
// new descriptor, or -errno.
#include <linux/openat2.h>
#include <sys/syscall.h>
int shim_open_beneath(int dirfd, const char *relative, int flags, unsigned int mode) {
    struct open_how how = {
        .flags = (uint64_t)(flags | O_CLOEXEC),
        .mode = (flags & O_CREAT) ? mode : 0,
        .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV,
    };
    long fd = syscall(SYS_openat2, dirfd, relative, &how, sizeof how);
    if (fd < 0 && (errno == ENOSYS || errno == EPERM)) return open_walk(dirfd, relative, flags, mode);
    return fd < 0 ? -errno : (int)fd;
}
