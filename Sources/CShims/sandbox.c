#define _GNU_SOURCE
#include "sandbox.h"
#include "shims.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <limits.h>
#include <linux/fs.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <net/if.h>
#include <pthread.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

// Everything below up to shim_seccomp_filter runs in the spawned child, which shares the
// daemon's memory until it execs: system calls only, no allocation, no stdio.

// The pseudo-devices of the private /dev.
static const char *const shim_devices[] = { "null", "zero", "full", "random", "urandom", "tty" };
enum { shim_device_count = sizeof(shim_devices) / sizeof(shim_devices[0]) };
// Most mounts in a plan (its masks, private directories and kept directories).
enum { shim_max_keeps = 96 };

// Appends `s` to `buf` at `*len` (bounded by `cap`); returns 0 or -ENAMETOOLONG.
static int shim_append(char *buf, size_t cap, size_t *len, const char *s) {
    size_t n = strlen(s);
    if (*len + n + 1 > cap) return -ENAMETOOLONG;
    memcpy(buf + *len, s, n + 1);
    *len += n;
    return 0;
}

// Writes `value` in decimal at `out` (at least 21 bytes); returns the number of digits.
static size_t shim_format_uint(char *out, unsigned long value) {
    char digits[21];
    size_t n = 0;
    do {
        digits[n++] = (char)('0' + value % 10);
        value /= 10;
    } while (value > 0);
    for (size_t i = 0; i < n; i++) out[i] = digits[n - 1 - i];
    return n;
}

// "/proc/self/fd/N", the path through which a descriptor opened with O_PATH is bound.
static void shim_fd_path(char out[40], int fd) {
    size_t len = 0;
    shim_append(out, 40, &len, "/proc/self/fd/");
    len += shim_format_uint(out + len, (unsigned long)fd);
    out[len] = '\0';
}

// mkdir -p `path` with `mode`, exactly: each component created is given `mode` with chmod, since
// the umask (0077 under the system unit) would narrow it and leave a mount point that the
// extension's uid cannot search. Existing components are left as they are.
static int shim_make_path(const char *path, mode_t mode) {
    char buf[4096];
    size_t len = strlen(path);
    if (len >= sizeof(buf)) return -ENAMETOOLONG;
    memcpy(buf, path, len + 1);
    for (size_t i = 1; i <= len; i++) {
        if (buf[i] != '/' && buf[i] != '\0') continue;
        char saved = buf[i];
        buf[i] = '\0';
        if (mkdir(buf, mode) == 0) {
            if (chmod(buf, mode) != 0) return -errno;
        } else if (errno != EEXIST) {
            return -errno;
        }
        buf[i] = saved;
    }
    return 0;
}

// The MS_ flags of the mount at `path` that a bind remount must repeat (statvfs's ST_ bits):
// noexec and the access-time ones.
static unsigned long shim_mount_flags(const char *path) {
    struct statvfs sv;
    if (statvfs(path, &sv) != 0) return 0;
    unsigned long flags = 0;
    if (sv.f_flag & ST_NOEXEC) flags |= MS_NOEXEC;
    if (sv.f_flag & ST_NOATIME) flags |= MS_NOATIME;
    if (sv.f_flag & ST_NODIRATIME) flags |= MS_NODIRATIME;
    if (sv.f_flag & ST_RELATIME) flags |= MS_RELATIME;
    return flags;
}

// Remounts the kept directory bound at `path` nosuid and nodev (and read-only for
// SHIM_MOUNT_KEEP_RO), keeping the flags it already has: in a user namespace the ones it
// inherited are locked (a cgroup or sysfs mount's noexec), and a remount that would clear one
// fails with EPERM. Returns 0 or -errno.
static int shim_remount_kept(const char *path, int kind) {
    unsigned long flags = MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV | shim_mount_flags(path);
    if (kind == SHIM_MOUNT_KEEP_RO) flags |= MS_RDONLY;
    return mount(NULL, path, NULL, flags, NULL) != 0 ? -errno : 0;
}

// Makes the mask at `path` read-only (and nosuid, nodev, noexec); -1 with errno on failure.
static int shim_seal_mask(const char *path) {
    return mount(NULL, path, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
}

// Writes `text` to the file `path` (the id maps of a user namespace).
static int shim_write_file(const char *path, const char *text) {
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return -errno;
    size_t n = strlen(text);
    ssize_t w = write(fd, text, n);
    int e = errno;
    close(fd);
    if (w < 0) return -e;
    return (size_t)w == n ? 0 : -EIO;
}

// "ID ID 1\n": an id mapped to itself.
static void shim_id_map(char out[48], unsigned id) {
    size_t len = shim_format_uint(out, id);
    out[len++] = ' ';
    len += shim_format_uint(out + len, id);
    memcpy(out + len, " 1\n", 4);
}

// The id maps of a new user namespace: the daemon's own uid and gid map to themselves.
static int shim_map_ids(uid_t uid, gid_t gid) {
    char map[48];
    int rc = shim_write_file("/proc/self/setgroups", "deny");
    if (rc != 0) return rc;
    shim_id_map(map, uid);
    if ((rc = shim_write_file("/proc/self/uid_map", map)) != 0) return rc;
    shim_id_map(map, gid);
    return shim_write_file("/proc/self/gid_map", map);
}

// A new user namespace in which the daemon's own uid and gid map to themselves: it gives the
// namespaces created after it the privilege a daemon that is not root lacks.
static int shim_enter_user_namespace(uid_t uid, gid_t gid) {
    if (unshare(CLONE_NEWUSER) != 0) return -errno;
    return shim_map_ids(uid, gid);
}

// Whether `path` is `prefix` or lies below it.
static int shim_under(const char *path, const char *prefix) {
    size_t n = strlen(prefix);
    if (strncmp(path, prefix, n) != 0) return 0;
    return path[n] == '\0' || path[n] == '/' || (n == 1 && prefix[0] == '/');
}

// Whether a mount of the plan after mount `i` lies below it (the mask at `i` holds a mount
// point: it needs a tmpfs of its own, to make that mount point in).
static int shim_holds_below(const shim_sandbox *p, int i) {
    for (int k = i + 1; k < p->nmounts; k++) {
        if (shim_under(p->mounts[k].path, p->mounts[i].path)) return 1;
    }
    return 0;
}

// The private /dev: a tmpfs with the pseudo-devices bound in from `device_fds` (opened with
// O_PATH before it covered them), a private /dev/shm, and the usual links into /proc.
static int shim_private_dev(const int device_fds[shim_device_count], const char *scratch_options) {
    if (mount("tmpfs", "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=64k") != 0) return -errno;
    for (int i = 0; i < shim_device_count; i++) {
        if (device_fds[i] < 0) continue;  // absent in the daemon's own /dev
        char target[32];
        size_t len = 0;
        shim_append(target, sizeof(target), &len, "/dev/");
        shim_append(target, sizeof(target), &len, shim_devices[i]);
        int fd = open(target, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0666);
        if (fd < 0) return -errno;
        close(fd);
        char source[40];
        shim_fd_path(source, device_fds[i]);
        if (mount(source, target, NULL, MS_BIND, NULL) != 0) return -errno;
    }
    if (mkdir("/dev/shm", 01777) != 0) return -errno;
    // Without options (a template), the directory only: each extension mounts its own.
    if (scratch_options != NULL && mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, scratch_options) != 0) return -errno;
    static const char *const links[][2] = {
        { "/proc/self/fd", "/dev/fd" }, { "/proc/self/fd/0", "/dev/stdin" },
        { "/proc/self/fd/1", "/dev/stdout" }, { "/proc/self/fd/2", "/dev/stderr" },
    };
    for (size_t i = 0; i < sizeof(links) / sizeof(links[0]); i++) {
        if (symlink(links[i][0], links[i][1]) != 0) return -errno;
    }
    if (mount(NULL, "/dev", NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NOEXEC, NULL) != 0) return -errno;
    return 0;
}

// Whether the directory open at `fd` is the plan's hidden directory (the daemon's state
// directory) or lies below it, found from the descriptor by walking up with ".." to the root:
// no path text is trusted, so a link put on a kept directory's path (before the plan or
// between the plan and now) cannot bring that directory into the view. 1, 0, or -errno.
static int shim_within_hidden(const shim_sandbox *p, int fd) {
    if (p->hidden_dev == 0 && p->hidden_ino == 0) return 0;
    struct stat st;
    if (fstat(fd, &st) != 0) return -errno;
    int at = fd, rc = -ELOOP;
    for (int depth = 0; depth < 4096; depth++) {
        if (st.st_dev == p->hidden_dev && st.st_ino == p->hidden_ino) {
            rc = 1;
            break;
        }
        int up = openat(at, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
        struct stat parent;
        if (up < 0 || fstat(up, &parent) != 0) {
            rc = -errno;
            if (up >= 0) close(up);
            break;
        }
        if (at != fd) close(at);
        at = up;
        if (parent.st_dev == st.st_dev && parent.st_ino == st.st_ino) {  // the root: its ".." is itself
            rc = 0;
            break;
        }
        st = parent;
    }
    if (at != fd) close(at);
    return rc;
}

// Whether the directory open at `fd`, named `path` in the plan, is one of the plan's protected
// directories (one the view hides or replaces, or above one) reached by another path: bound
// there, it would show what the view's masks, made at their own paths, do not cover. 1, 0, or
// -errno.
static int shim_exposes_protected(const shim_sandbox *p, int fd, const char *path) {
    if (p->nprotected_dirs == 0) return 0;
    struct stat st;
    if (fstat(fd, &st) != 0) return -errno;
    int found = 0;
    for (int k = 0; k < p->nprotected_dirs; k++) {
        const shim_protected_dir *d = &p->protected_dirs[k];
        if (d->dev != st.st_dev || d->ino != st.st_ino) continue;
        if (strcmp(d->path, path) == 0) return 0;
        found = 1;
    }
    return found;
}

// Opens the absolute `path`, a directory, following no link on it: each component O_NOFOLLOW
// (openat2's RESOLVE_NO_SYMLINKS, which systemd 252's @system-service answers ENOSYS). A link
// (or a file) on the way fails with ELOOP. The daemon makes a kept path real when it plans:
// a link found here was put there since. O_PATH descriptor, or -errno.
static int shim_open_without_links(const char *path) {
    if (path[0] != '/') return -EINVAL;
    int at = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (at < 0) return -errno;
    const char *s = path;
    char name[NAME_MAX + 1];
    for (;;) {
        while (*s == '/') s++;
        if (*s == 0) return at;
        size_t n = 0;
        while (s[n] != 0 && s[n] != '/') n++;
        int bad = n > NAME_MAX ? -ENAMETOOLONG : 0;
        if (bad == 0) {
            memcpy(name, s, n);
            name[n] = 0;
            if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0) bad = -EINVAL;
        }
        if (bad != 0) {
            close(at);
            return bad;
        }
        s += n;
        int next = openat(at, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        int error = errno;
        close(at);
        if (next < 0) return error == ENOTDIR ? -ELOOP : -error;
        at = next;
    }
}

// Opens the directory kept mount `i` of the view shows (O_PATH). A read-only one is opened
// without following a link (shim_open_without_links), and refused with EXDEV where it is the
// hidden directory or lies below it, or is a protected directory reached by another path (a
// writable one is the extension's container, there by design). The descriptor, or -errno.
static int shim_open_kept(const shim_sandbox *p, int i) {
    int fd;
    if (p->mounts[i].kind == SHIM_MOUNT_KEEP_RO) {
        fd = shim_open_without_links(p->mounts[i].path);
        if (fd < 0) return fd;
    } else {
        fd = open(p->mounts[i].path, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0) return -errno;
    }
    int refused = 0;
    if (p->mounts[i].kind == SHIM_MOUNT_KEEP_RO) {
        refused = shim_within_hidden(p, fd);
        if (refused == 0) refused = shim_exposes_protected(p, fd, p->mounts[i].path);
    }
    if (refused != 0) {
        close(fd);
        return refused > 0 ? -EXDEV : refused;
    }
    return fd;
}

// The file system view: see sandbox.h and docs/security.md.
static int shim_file_system_view(const shim_sandbox *p) {
    // No propagation either way: nothing mounted here reaches the daemon's namespace, and a
    // mount made on the system after the launch does not arrive here, where it would escape
    // the read-only remount below (which covers only the mounts there are now).
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) return -errno;
    // What the masks and private directories will cover, opened first.
    int keep_fds[shim_max_keeps];
    if (p->nmounts > shim_max_keeps) return -E2BIG;
    for (int i = 0; i < p->nmounts; i++) {
        keep_fds[i] = -1;
        if (p->mounts[i].kind < SHIM_MOUNT_KEEP_RO) continue;
        keep_fds[i] = shim_open_kept(p, i);
        if (keep_fds[i] < 0) return keep_fds[i];
    }
    int device_fds[shim_device_count];
    for (int i = 0; i < shim_device_count; i++) {
        char path[32];
        size_t len = 0;
        shim_append(path, sizeof(path), &len, "/dev/");
        shim_append(path, sizeof(path), &len, shim_devices[i]);
        device_fds[i] = open(path, O_PATH | O_CLOEXEC);
    }
    // The whole system read-only, every mount below / included.
    struct mount_attr ro = { .attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID };
    if (mount_setattr(AT_FDCWD, "/", AT_RECURSIVE, &ro, sizeof(ro)) != 0) return -errno;
    int rc = shim_private_dev(device_fds, p->scratch_options);
    if (rc != 0) return rc;
    for (int i = 0; i < shim_device_count; i++) {
        if (device_fds[i] >= 0) close(device_fds[i]);
    }
    int first_empty = -1;  // the first mask with nothing kept below it, and its tmpfs, open
    int empty_fd = -1;
    for (int i = 0; i < p->nmounts; i++) {
        const char *path = p->mounts[i].path;
        switch (p->mounts[i].kind) {
        case SHIM_MOUNT_SCRATCH:
            if (mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, p->scratch_options) != 0) return -errno;
            break;
        case SHIM_MOUNT_MASK:
            // A mask with nothing kept below it is the same empty directory as every other
            // such mask: one tmpfs, bound at each (a bind makes no new file system).
            if (!shim_holds_below(p, i) && empty_fd >= 0) {
                // Bound from its descriptor, never by path: a path can lead elsewhere by now.
                char source[40];
                shim_fd_path(source, empty_fd);
                if (mount(source, path, NULL, MS_BIND, NULL) != 0) return -errno;
                break;
            }
            if (mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0711,size=4k") != 0) return -errno;
            if (!shim_holds_below(p, i)) {
                empty_fd = open(path, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (empty_fd < 0) return -errno;
                first_empty = i;
            }
            break;
        default: {
            // Its mount point, created inside the mask or private directory over it if need be.
            if ((rc = shim_make_path(path, 0755)) != 0) return rc;
            char source[40];
            shim_fd_path(source, keep_fds[i]);
            // A read-only one alone, without the mounts below it (another mount of what the
            // view hides could be one); its container with them.
            unsigned long recursive = p->mounts[i].kind == SHIM_MOUNT_KEEP_RW ? MS_REC : 0;
            if (mount(source, path, NULL, MS_BIND | recursive, NULL) != 0) return -errno;
            if ((rc = shim_remount_kept(path, p->mounts[i].kind)) != 0) return rc;
            close(keep_fds[i]);
        }
        }
    }
    // The masks become read-only; one with nothing kept below it is not even searchable (the
    // empty masks share one directory: it is made so once).
    for (int i = 0; i < p->nmounts; i++) {
        if (p->mounts[i].kind != SHIM_MOUNT_MASK) continue;
        if (i == first_empty) {
            char dir[40];
            shim_fd_path(dir, empty_fd);
            if (chmod(dir, 0) != 0) return -errno;
            close(empty_fd);
        }
        if (shim_seal_mask(p->mounts[i].path) != 0) return -errno;
    }
    return 0;
}

int shim_sandbox_uses_template(const shim_sandbox *p) {
    return p != NULL && (p->parts & SHIM_SANDBOX_FILESYSTEM) && !(p->parts & SHIM_SANDBOX_USERNS) && p->template_fd >= 0;
}

// Whether a mount of the plan before mount `i` lies at or above it: that mount covers what the
// template has there (a private /tmp over a template mask below it, or a kept directory that
// brings the real contents back).
static int shim_covered_before(const shim_sandbox *p, int i) {
    for (int k = 0; k < i; k++) {
        if (shim_under(p->mounts[i].path, p->mounts[k].path)) return 1;
    }
    return 0;
}

// Whether `path` is one of the masks the plan's template made.
static int shim_in_template(const shim_sandbox *p, const char *path) {
    for (int k = 0; k < p->ntemplate_masks; k++) {
        if (strcmp(p->template_masks[k], path) == 0) return 1;
    }
    return 0;
}

// The file system view from the plan's template (shim_sandbox_template): a copy of its mount
// namespace, with what is this extension's own added. The directories it keeps are taken
// first, from the daemon's namespace (where the masks do not hide them), as detached copies
// made read-only and nosuid throughout, as the template's mounts are; a bind mount could not
// come from another namespace, a detached copy is attached with move_mount.
int shim_sandbox_view_from_template(const shim_sandbox *p, int *step) {
    int trees[shim_max_keeps];
    if (p->nmounts > shim_max_keeps) return -E2BIG;
    // Private as well: a copy keeps its source's peer group, through which a mount made later
    // under the directory on the system would appear here (and one made here, there).
    struct mount_attr ro = { .attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID, .propagation = MS_PRIVATE };
    for (int i = 0; i < p->nmounts; i++) {
        trees[i] = -1;
        if (p->mounts[i].kind < SHIM_MOUNT_KEEP_RO) continue;
        // Copied from the directory checked, never from its path again.
        int dir = shim_open_kept(p, i);
        if (dir < 0) return dir;
        unsigned int recursive = p->mounts[i].kind == SHIM_MOUNT_KEEP_RW ? AT_RECURSIVE : 0;  // as shim_file_system_view
        trees[i] = (int)syscall(SYS_open_tree, dir, "", AT_EMPTY_PATH | OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | recursive);
        close(dir);
        if (trees[i] < 0) return -errno;
        if (mount_setattr(trees[i], "", AT_EMPTY_PATH | AT_RECURSIVE, &ro, sizeof(ro)) != 0) return -errno;
    }
    *step = SHIM_STEP_SANDBOX_TEMPLATE;
    if (setns(p->template_fd, CLONE_NEWNS) != 0) return -errno;
    // A copy of the template's namespace, the extension's own (and its own System V IPC).
    if (unshare(CLONE_NEWNS | CLONE_NEWIPC) != 0) return -errno;
    *step = SHIM_STEP_SANDBOX_FILESYSTEM;
    if (mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, p->scratch_options) != 0) return -errno;
    int made[shim_max_keeps];
    for (int i = 0; i < p->nmounts; i++) {
        const char *path = p->mounts[i].path;
        made[i] = 0;
        switch (p->mounts[i].kind) {
        case SHIM_MOUNT_SCRATCH:
            if (mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, p->scratch_options) != 0) return -errno;
            break;
        case SHIM_MOUNT_MASK:
            // Already there, empty and read-only, unless something kept lies below it (a tmpfs
            // of its own over it, to make that mount point in) or a mount made here above it
            // covered the template's (a fresh mask over what that mount shows).
            if (shim_in_template(p, path) && !shim_holds_below(p, i) && !shim_covered_before(p, i)) break;
            if (mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0711,size=4k") != 0) return -errno;
            made[i] = 1;
            break;
        default: {
            int rc = shim_make_path(path, 0755);
            if (rc != 0) return rc;
            if (syscall(SYS_move_mount, trees[i], "", AT_FDCWD, path, MOVE_MOUNT_F_EMPTY_PATH) != 0) return -errno;
            close(trees[i]);
            trees[i] = -1;
            if ((rc = shim_remount_kept(path, p->mounts[i].kind)) != 0) return rc;
        }
        }
    }
    // The masks made here become read-only; one with nothing kept below it is not even searchable.
    for (int i = 0; i < p->nmounts; i++) {
        if (!made[i]) continue;
        if (!shim_holds_below(p, i) && chmod(p->mounts[i].path, 0) != 0) return -errno;
        if (shim_seal_mask(p->mounts[i].path) != 0) return -errno;
    }
    return 0;
}

// A /proc of its own pid namespace, read-only: only the extension's processes are there.
// hidepid=invisible as well, for a process that a setuid-less extension could still meet
// there (none today: the namespace holds the extension's processes alone).
static int shim_private_proc(void) {
    if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY, "hidepid=invisible") != 0) return -errno;
    return 0;
}

// The loopback interface of a new network namespace, up.
static int shim_loopback_up(void) {
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0) return -errno;
    struct ifreq ifr;
    memset(&ifr, 0, sizeof(ifr));
    memcpy(ifr.ifr_name, "lo", 3);
    int rc = 0;
    if (ioctl(s, SIOCGIFFLAGS, &ifr) != 0) {
        rc = -errno;
    } else {
        ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
        if (ioctl(s, SIOCSIFFLAGS, &ifr) != 0) rc = -errno;
    }
    close(s);
    return rc;
}

uint64_t shim_sandbox_clone_flags(const shim_sandbox *p) {
    if (p == NULL || !(p->parts & SHIM_SANDBOX_PROC)) return 0;
    return CLONE_NEWPID | ((p->parts & SHIM_SANDBOX_USERNS) ? CLONE_NEWUSER : 0);
}

int shim_sandbox_enter(const shim_sandbox *p, uint64_t cloned, int *step) {
    int rc;
    if (p->parts & SHIM_SANDBOX_USERNS) {
        *step = SHIM_STEP_SANDBOX_USERNS;
        rc = (cloned & CLONE_NEWUSER) ? shim_map_ids(p->uid, p->gid) : shim_enter_user_namespace(p->uid, p->gid);
        if (rc != 0) return rc;
    }
    // The pid namespace came with the clone; a forked child cannot have one.
    if ((p->parts & SHIM_SANDBOX_PROC) && !(cloned & CLONE_NEWPID)) {
        *step = SHIM_STEP_SANDBOX_PROC;
        return -ENOSYS;
    }
    // A network namespace given (netns_fd) was entered by the child before its descriptors
    // were rearranged (shim_spawn).
    if ((p->parts & SHIM_SANDBOX_NETWORK) && p->netns_fd < 0) {
        *step = SHIM_STEP_SANDBOX_NETWORK;
        if (unshare(CLONE_NEWNET) != 0) return -errno;
        if ((rc = shim_loopback_up()) != 0) return rc;
    }
    // A view from a template was built by the child before its descriptors were closed
    // (shim_sandbox_view_from_template: the template's descriptor was still open).
    int from_template = shim_sandbox_uses_template(p);
    if (from_template) {
        // Built.
    } else if (p->parts & (SHIM_SANDBOX_FILESYSTEM | SHIM_SANDBOX_PROC)) {
        *step = SHIM_STEP_SANDBOX_FILESYSTEM;
        // With the file system's part, System V IPC and POSIX message queues are the
        // extension's own too, as /tmp and /dev/shm are: an IPC namespace of its own.
        int flags = CLONE_NEWNS | ((p->parts & SHIM_SANDBOX_FILESYSTEM) ? CLONE_NEWIPC : 0);
        if (unshare(flags) != 0) return -errno;
    }
    if (from_template) {
        // Built.
    } else if (p->parts & SHIM_SANDBOX_FILESYSTEM) {
        if ((rc = shim_file_system_view(p)) != 0) return rc;
    } else if (p->parts & SHIM_SANDBOX_PROC) {
        if (mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) != 0) return -errno;
    }
    if (p->parts & SHIM_SANDBOX_PROC) {
        *step = SHIM_STEP_SANDBOX_PROC;
        if ((rc = shim_private_proc()) != 0) return rc;
    }
    return 0;
}

#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#endif
#ifndef SYS_landlock_restrict_self
#define SYS_landlock_restrict_self 446
#endif

// struct landlock_ruleset_attr of linux/landlock.h, with `scoped` (ABI 6).
struct shim_landlock_ruleset_attr {
    uint64_t handled_access_fs;
    uint64_t handled_access_net;
    uint64_t scoped;
};

int shim_landlock_abi(void) {
    long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, 1UL /* LANDLOCK_CREATE_RULESET_VERSION */);
    return abi < 0 ? 0 : (int)abi;
}

int shim_landlock_scope(void) {
    struct shim_landlock_ruleset_attr attr = {
        .handled_access_fs = 0, .handled_access_net = 0,
        .scoped = (1ULL << 0) /* ABSTRACT_UNIX_SOCKET */ | (1ULL << 1) /* SIGNAL */,
    };
    long fd = syscall(SYS_landlock_create_ruleset, &attr, sizeof(attr), 0);
    if (fd < 0) return -errno;
    long rc = syscall(SYS_landlock_restrict_self, (int)fd, 0);
    int e = errno;
    close((int)fd);
    return rc == 0 ? 0 : -e;
}

int shim_sandbox_install_filter(const void *filter) {
    // prctl rather than seccomp(2): systemd's @system-service filter allows prctl only.
    if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, filter, 0, 0) != 0) return -errno;
    return 0;
}

// The rest runs in the daemon.

// A mount point of /proc/thread-self/mountinfo (its fifth field) with its octal escapes
// (\040 for a space) undone, into `out`; 0, or -1 when it does not fit.
static int shim_mount_point(const char *line, char *out, size_t size) {
    const char *p = line;
    for (int field = 0; field < 4; field++) {
        p = strchr(p, ' ');
        if (p == NULL) return -1;
        p++;
    }
    size_t n = 0;
    while (*p != ' ' && *p != '\0' && *p != '\n') {
        char c = *p++;
        if (c == '\\' && p[0] >= '0' && p[0] <= '7' && p[1] >= '0' && p[1] <= '7' && p[2] >= '0' && p[2] <= '7') {
            c = (char)((p[0] - '0') * 64 + (p[1] - '0') * 8 + (p[2] - '0'));
            p += 3;
        }
        if (n + 1 >= size) return -1;
        out[n++] = c;
    }
    out[n] = '\0';
    return 0;
}

// Detaches, in the calling thread's own private mount namespace, the mounts at or below one
// of `masks`: what a mask hides need not be in the template (each launch's copy of the
// template is then smaller, and a file system mounted there is not kept busy by it). Read once,
// the deepest first and, at one depth, the last mounted first; best effort: a mount that
// cannot be detached (one covered by another, which its path no longer reaches) stays, hidden
// under the mask like the rest. Returns 0, or -errno when the table cannot be read.
static int shim_detach_below(const shim_sandbox_mount *masks, int nmasks) {
    FILE *f = fopen("/proc/thread-self/mountinfo", "re");
    if (f == NULL) return -errno;
    char *line = NULL;
    size_t cap = 0, count = 0, room = 0, deepest = 0;
    struct shim_point { char *path; size_t depth; } *points = NULL;
    char point[4096];
    int rc = 0;
    while (getline(&line, &cap, f) > 0) {
        if (shim_mount_point(line, point, sizeof(point)) != 0) continue;
        int hidden = 0;
        for (int i = 0; i < nmasks && !hidden; i++) hidden = shim_under(point, masks[i].path);
        if (!hidden) continue;
        if (count == room) {
            room = room ? room * 2 : 64;
            struct shim_point *more = realloc(points, room * sizeof(*points));
            if (more == NULL) {
                rc = -ENOMEM;
                break;
            }
            points = more;
        }
        size_t depth = 0;
        for (const char *c = point; *c; c++) depth += *c == '/';
        points[count].path = strdup(point);
        points[count].depth = depth;
        if (depth > deepest) deepest = depth;
        if (points[count].path == NULL) {
            rc = -ENOMEM;
            break;
        }
        count++;
    }
    free(line);
    fclose(f);
    for (size_t depth = deepest + 1; rc == 0 && count > 0 && depth-- > 0;) {
        for (size_t k = count; k-- > 0;) {
            if (points[k].depth == depth) (void)umount2(points[k].path, MNT_DETACH);
        }
    }
    for (size_t k = 0; k < count; k++) free(points[k].path);
    free(points);
    return rc;
}

struct shim_namespace_work {
    int flags;           // the CLONE_NEW* to unshare
    const char *ns;      // its /proc/thread-self/ns entry
    int (*build)(void *);
    void *arg;
    int fd;
    int error;
};

// The thread of shim_namespace_on_thread: a namespace unshared here is this thread's own (a
// mount namespace with its root and working directory), the daemon's other threads stay where
// they are; the namespace outlives the thread through the descriptor.
static void *shim_namespace_thread(void *arg) {
    struct shim_namespace_work *w = arg;
    if (unshare(w->flags) != 0) {
        w->error = errno;
        return NULL;
    }
    int rc = w->build(w->arg);
    if (rc != 0) {
        w->error = -rc;
        return NULL;
    }
    w->fd = open(w->ns, O_RDONLY | O_CLOEXEC);
    if (w->fd < 0) w->error = errno;
    return NULL;
}

// A new namespace (`flags`), built by `build(arg)` on a thread of its own: its descriptor
// (close-on-exec) in `*fd`. Returns 0 or -errno.
static int shim_namespace_on_thread(int flags, const char *ns, int (*build)(void *), void *arg, int *fd) {
    struct shim_namespace_work w = { .flags = flags, .ns = ns, .build = build, .arg = arg, .fd = -1, .error = 0 };
    pthread_t thread;
    int rc = pthread_create(&thread, NULL, shim_namespace_thread, &w);
    if (rc != 0) return -rc;
    pthread_join(thread, NULL);
    if (w.error != 0) return -w.error;
    *fd = w.fd;
    return 0;
}

struct shim_template_masks {
    const shim_sandbox_mount *masks;
    int nmasks;
};

// The template's view, in the thread's new mount namespace.
static int shim_template_build(void *arg) {
    const struct shim_template_masks *t = arg;
    shim_sandbox view;
    memset(&view, 0, sizeof(view));
    view.parts = SHIM_SANDBOX_FILESYSTEM;
    view.mounts = t->masks;
    view.nmounts = t->nmasks;
    view.scratch_options = NULL;  // /dev/shm is each extension's own
    view.netns_fd = -1;
    view.template_fd = -1;
    // Nothing propagates out before anything is detached here.
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) return -errno;
    int rc = shim_detach_below(t->masks, t->nmasks);
    return rc != 0 ? rc : shim_file_system_view(&view);
}

int shim_sandbox_template(const shim_sandbox_mount *masks, int nmasks, int *fd) {
    for (int i = 0; i < nmasks; i++) {
        if (masks[i].kind != SHIM_MOUNT_MASK) return -EINVAL;
    }
    // A child enters the template with setns, which takes CAP_SYS_ADMIN and CAP_SYS_CHROOT
    // (a unit's bounding set may lack the second): without both, no template.
    struct __user_cap_header_struct header = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
    struct __user_cap_data_struct data[2];
    memset(data, 0, sizeof(data));
    if (syscall(SYS_capget, &header, data) != 0) return -errno;
    if (!(data[0].effective & (1u << CAP_SYS_ADMIN)) || !(data[0].effective & (1u << CAP_SYS_CHROOT))) return -EPERM;
    struct shim_template_masks t = { .masks = masks, .nmasks = nmasks };
    return shim_namespace_on_thread(CLONE_NEWNS, "/proc/thread-self/ns/mnt", shim_template_build, &t, fd);
}

// A network namespace's loopback, up.
static int shim_netns_build(void *unused) {
    (void)unused;
    return shim_loopback_up();
}

int shim_bind_namespace(int fd, const char *path) {
    int file = open(path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC | O_NOFOLLOW, 0400);
    if (file < 0) return -errno;
    close(file);
    char source[40];
    shim_fd_path(source, fd);
    if (mount(source, path, NULL, MS_BIND, NULL) != 0) {
        int e = errno;
        unlink(path);
        return -e;
    }
    return 0;
}

int shim_unbind_namespace(const char *path) {
    if (umount2(path, MNT_DETACH | UMOUNT_NOFOLLOW) != 0 && errno != EINVAL && errno != ENOENT) return -errno;
    if (unlink(path) != 0 && errno != ENOENT) return -errno;
    return 0;
}

int shim_network_namespace(int *fd) {
    return shim_namespace_on_thread(CLONE_NEWNET, "/proc/thread-self/ns/net", shim_netns_build, NULL, fd);
}

#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif

// file_setattr(2)'s number (the same in the generic table and x86_64's).
enum { shim_file_setattr_nr = 469 };

int shim_seccomp_filter(const void **out) {
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
    if (ctx == NULL) return -ENOMEM;
    const uint32_t eperm = SCMP_ACT_ERRNO(EPERM);
    int rc = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, eperm);
    // A binary tree of the system call numbers rather than a chain: every system call the
    // extension makes runs the filter, and a chain costs a comparison per rule before an
    // allowed call is let through.
    if (rc == 0) rc = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2);
    // Refused outright (docs/security.md, "System calls").
    static const char *const refused[] = {
        // Mounting, and the new mount API.
        "mount", "umount", "umount2", "pivot_root", "chroot", "fsopen", "fsconfig", "fsmount", "fspick",
        "move_mount", "open_tree", "mount_setattr",
        // Namespaces.
        "unshare", "setns",
        // Other processes' memory.
        "ptrace", "process_vm_readv", "process_vm_writev", "kcmp",
        // The kernel's other interpreters and key store.
        "bpf", "perf_event_open", "keyctl", "add_key", "request_key", "userfaultfd",
        // The machine itself.
        "kexec_load", "kexec_file_load", "reboot", "init_module", "finit_module", "delete_module",
        "swapon", "swapoff", "acct", "quotactl", "quotactl_fd", "open_by_handle_at", "lookup_dcookie", "nfsservctl",
        // io_uring bypasses this filter for the operations it performs.
        "io_uring_setup", "io_uring_enter", "io_uring_register",
    };
    for (size_t i = 0; rc == 0 && i < sizeof(refused) / sizeof(refused[0]); i++) {
        int nr = seccomp_syscall_resolve_name(refused[i]);
        if (nr == __NR_SCMP_ERROR) continue;  // not on this architecture
        rc = seccomp_rule_add(ctx, eperm, nr, 0);
    }
    // clone with any flag that makes a namespace. clone3 passes its flags in memory a filter
    // cannot read: it answers ENOSYS, on which libc falls back to clone.
    static const uint64_t namespaces[] = {
        CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWCGROUP,
    };
    int clone_arg = 0;
#if defined(__s390x__) || defined(__s390__)
    clone_arg = 1;  // s390 swaps clone's first two arguments
#endif
    for (size_t i = 0; rc == 0 && i < sizeof(namespaces) / sizeof(namespaces[0]); i++) {
        struct scmp_arg_cmp cmp = { .arg = (unsigned)clone_arg, .op = SCMP_CMP_MASKED_EQ, .datum_a = namespaces[i], .datum_b = namespaces[i] };
        rc = seccomp_rule_add_array(ctx, eperm, SCMP_SYS(clone), 1, &cmp);
    }
    // Socket families: unix (1), inet (2), inet6 (10) and netlink's (16) route protocol only
    // (getaddrinfo reads the addresses through it); every other family (vsock, packet,
    // bluetooth, alg, …) is refused with EAFNOSUPPORT, as a kernel without it would answer.
    // The family and protocol are ints, of which the kernel reads the lower 32 bits of their
    // registers: each comparison masks those (a 64-bit comparison, libseccomp's SCMP_CMP32
    // included, would let a caller that sets the upper half through). The families refused, as
    // masked ranges: 0, 3, 4–7, 8–9, 11, 12–15, 17, 18–19, 20–23, 24–31, 32–63; from 64 on (and
    // negative ones) the kernel itself answers EAFNOSUPPORT (AF_MAX is 46 in Linux 6.x).
    const uint32_t nofamily = SCMP_ACT_ERRNO(EAFNOSUPPORT);
    static const int syscalls_with_family[] = { SCMP_SYS(socket), SCMP_SYS(socketpair) };
    static const uint32_t refused_families[][2] = {
        { 0xffffffffu, 0 }, { 0xffffffffu, 3 }, { ~3u, 4 }, { ~1u, 8 }, { 0xffffffffu, 11 }, { ~3u, 12 },
        { 0xffffffffu, 17 }, { ~1u, 18 }, { ~3u, 20 }, { ~7u, 24 }, { ~31u, 32 },
    };
    for (size_t s = 0; rc == 0 && s < sizeof(syscalls_with_family) / sizeof(syscalls_with_family[0]); s++) {
        for (size_t r = 0; rc == 0 && r < sizeof(refused_families) / sizeof(refused_families[0]); r++) {
            struct scmp_arg_cmp family = { .arg = 0, .op = SCMP_CMP_MASKED_EQ, .datum_a = refused_families[r][0], .datum_b = refused_families[r][1] };
            rc = seccomp_rule_add_array(ctx, nofamily, syscalls_with_family[s], 1, &family);
        }
    }
    // Netlink with a protocol other than NETLINK_ROUTE (0): 1, 2–3, 4–7, 8–15, 16–31; from 32
    // on (MAX_LINKS) the kernel answers EPROTONOSUPPORT itself.
    static const uint32_t refused_protocols[][2] = { { 0xffffffffu, 1 }, { ~1u, 2 }, { ~3u, 4 }, { ~7u, 8 }, { ~15u, 16 } };
    for (size_t r = 0; rc == 0 && r < sizeof(refused_protocols) / sizeof(refused_protocols[0]); r++) {
        struct scmp_arg_cmp both[2] = {
            { .arg = 0, .op = SCMP_CMP_MASKED_EQ, .datum_a = 0xffffffffu, .datum_b = AF_NETLINK },
            { .arg = 2, .op = SCMP_CMP_MASKED_EQ, .datum_a = refused_protocols[r][0], .datum_b = refused_protocols[r][1] },
        };
        rc = seccomp_rule_add_array(ctx, nofamily, SCMP_SYS(socket), 2, both);
    }
    // A file's project id and inode flags: the extension owns its container's files and
    // could give one project 0, or clear PROJINHERIT on a directory (whose new files would
    // then be in project 0), and so escape its container's project quota (docs/policies.md,
    // "The container's size"). The request is an unsigned int: its register's lower half.
    static const uint32_t refused_ioctls[] = { FS_IOC_FSSETXATTR, FS_IOC_SETFLAGS, FS_IOC32_SETFLAGS };
    for (size_t i = 0; rc == 0 && i < sizeof(refused_ioctls) / sizeof(refused_ioctls[0]); i++) {
        struct scmp_arg_cmp request = { .arg = 1, .op = SCMP_CMP_MASKED_EQ, .datum_a = 0xffffffffu, .datum_b = refused_ioctls[i] };
        rc = seccomp_rule_add_array(ctx, eperm, SCMP_SYS(ioctl), 1, &request);
    }
    // file_setattr(2) (Linux 6.17) sets the same attributes by path; libseccomp 2.5 has no
    // name for it.
#if defined(__x86_64__) || defined(__aarch64__)
    if (rc == 0) rc = seccomp_rule_add(ctx, eperm, shim_file_setattr_nr, 0);
#endif
    if (rc == 0) {
        int nr = seccomp_syscall_resolve_name("clone3");
        if (nr != __NR_SCMP_ERROR) rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), nr, 0);
    }
    // The BPF program, read back through a memory file.
    int fd = rc == 0 ? memfd_create("extensiond-seccomp", MFD_CLOEXEC) : -1;
    if (rc == 0 && fd < 0) rc = -errno;
    if (rc == 0) rc = seccomp_export_bpf(ctx, fd);
    seccomp_release(ctx);
    if (rc != 0) {
        if (fd >= 0) close(fd);
        return rc < 0 ? rc : -EINVAL;
    }
    off_t size = lseek(fd, 0, SEEK_END);
    if (size <= 0 || size % (off_t)sizeof(struct sock_filter) != 0 || size / (off_t)sizeof(struct sock_filter) > BPF_MAXINSNS) {
        close(fd);
        return -EINVAL;
    }
    struct sock_fprog *prog = malloc(sizeof(*prog));
    struct sock_filter *code = malloc((size_t)size);
    if (prog == NULL || code == NULL) {
        free(prog);
        free(code);
        close(fd);
        return -ENOMEM;
    }
    ssize_t n = pread(fd, code, (size_t)size, 0);
    int e = errno;
    close(fd);
    if (n != size) {
        free(prog);
        free(code);
        return n < 0 ? -e : -EIO;
    }
    prog->len = (unsigned short)(size / (off_t)sizeof(struct sock_filter));
    prog->filter = code;
    *out = prog;
    return 0;
}

int shim_seccomp_filter_length(const void *filter) {
    return filter == NULL ? 0 : ((const struct sock_fprog *)filter)->len;
}

// The probe child: builds `part` (with a user namespace first when `userns`) and exits 0, or
// with the errno of the failure.
static int shim_probe_part(int part, int userns, const void *filter) {
    pid_t pid = fork();
    if (pid < 0) return errno;
    if (pid == 0) {
        if (userns && shim_enter_user_namespace(getuid(), getgid()) != 0) _exit(errno ? errno : EPERM);
        int rc = 0;
        if (part == SHIM_SANDBOX_SYSCALLS) {
            if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) _exit(errno);
            rc = shim_sandbox_install_filter(filter);
            // The filter is in force: unshare must be refused.
            if (rc == 0 && unshare(0) == 0) _exit(EPROTO);
        } else if (part == SHIM_SANDBOX_NETWORK) {
            if (unshare(CLONE_NEWNET) != 0) _exit(errno);
            rc = shim_loopback_up();
        } else if (part == SHIM_SANDBOX_PROC) {
            // A pid namespace, entered at birth as the spawn does (which needs clone3), with
            // its /proc mounted by its pid 1.
            if (!shim_clone3_available()) _exit(ENOSYS);
            if (unshare(CLONE_NEWPID) != 0) _exit(errno);
            pid_t init = fork();
            if (init < 0) _exit(errno);
            if (init == 0) {
                if (unshare(CLONE_NEWNS) != 0) _exit(errno);
                if (mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) != 0) _exit(errno);
                _exit(-shim_private_proc());
            }
            int status = 0;
            while (waitpid(init, &status, 0) < 0) {
                if (errno != EINTR) _exit(errno);
            }
            _exit(WIFEXITED(status) ? WEXITSTATUS(status) : EINTR);
        } else {
            if (unshare(CLONE_NEWNS) != 0) _exit(errno);
            if (mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) != 0) _exit(errno);
            struct mount_attr ro = { .attr_set = MOUNT_ATTR_RDONLY };
            if (mount_setattr(AT_FDCWD, "/", AT_RECURSIVE, &ro, sizeof(ro)) != 0) _exit(errno);
            if (mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777") != 0) _exit(errno);
            if (mount(NULL, "/tmp", NULL, MS_REMOUNT | MS_BIND | MS_RDONLY, NULL) != 0) _exit(errno);
        }
        _exit(rc < 0 ? -rc : 0);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) return errno;
    }
    if (!WIFEXITED(status)) return EINTR;
    return WEXITSTATUS(status);
}

int shim_sandbox_probe(const void *filter, int errors[4]) {
    static const int parts[4] = { SHIM_SANDBOX_FILESYSTEM, SHIM_SANDBOX_PROC, SHIM_SANDBOX_NETWORK, SHIM_SANDBOX_SYSCALLS };
    // Namespaces with the daemon's own privilege, or else inside a user namespace.
    int userns = 0;
    int direct = shim_probe_part(SHIM_SANDBOX_FILESYSTEM, 0, filter);
    if (direct != 0 && shim_probe_part(SHIM_SANDBOX_FILESYSTEM, 1, filter) == 0) userns = 1;
    int result = userns ? SHIM_SANDBOX_USERNS : 0;
    for (int i = 0; i < 4; i++) {
        if (parts[i] == SHIM_SANDBOX_SYSCALLS && filter == NULL) {
            errors[i] = ENOSYS;
            continue;
        }
        errors[i] = shim_probe_part(parts[i], parts[i] == SHIM_SANDBOX_SYSCALLS ? 0 : userns, filter);
        if (errors[i] == 0) result |= parts[i];
    }
    return result;
}
