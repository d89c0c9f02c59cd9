// Small C helpers for what Swift cannot reach through Glibc on Linux:
// struct ucred, the CMSG_* macros, clone3, pidfd system calls, SIOCOUTQ.
// Every function returns 0 or a positive count on success and -errno on failure,
// so callers never read the thread-local errno after a Swift call boundary.
#ifndef SHIMS_H
#define SHIMS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/// Peer credentials of a connected AF_UNIX socket (SO_PEERCRED).
int shim_peer_credentials(int fd, pid_t *pid, uid_t *uid, gid_t *gid);

/// Sends one datagram of `len` bytes with up to `nfds` descriptors attached (SCM_RIGHTS).
/// Never blocks when `fd` is non-blocking. Returns bytes sent or -errno.
ssize_t shim_send_with_fds(int fd, const void *buf, size_t len, const int *fds, int nfds);

/// Receives one datagram into `buf`; descriptors are received close-on-exec into `fds`
/// (at most `maxfds`; any beyond that are closed). `*nfds` receives their count and
/// `*truncated` is set when the datagram or its control data did not fit.
/// Returns bytes received (0 on orderly shutdown) or -errno.
ssize_t shim_recv_with_fds(int fd, void *buf, size_t len, int *fds, int maxfds, int *nfds, int *truncated);
/// The most datagrams one shim_recv_batch receives.
#define SHIM_MAX_RECEIVE_BATCH 16
/// Receives up to `count` datagrams (at most SHIM_MAX_RECEIVE_BATCH) in one recvmmsg(2), the
/// i-th into `buf + i * slot` (at most `slot` bytes), without waiting (MSG_DONTWAIT): returns how
/// many arrived (0 is never returned; with none waiting, -EAGAIN), or -errno. For each, `lengths`
/// gets its length, `fds` the one descriptor it carried (close-on-exec) or -1 (more are closed,
/// and mark it truncated), and `truncated` 1 when its data or descriptors were cut short.
/// Retries EINTR.
int shim_recv_batch(int fd, void *buf, size_t slot, int count, int *lengths, int *fds, int *truncated);

/// The most datagrams `shim_send_batch` sends in one call.
#define SHIM_MAX_BATCH 64

/// Sends `count` datagrams (at most SHIM_MAX_BATCH, no descriptors) in one sendmmsg(2): the
/// i-th is `lengths[i]` bytes of `base`, following the previous one. Returns how many were
/// sent (fewer when the socket's buffer filled), or -errno when none was.
int shim_send_batch(int fd, const void *base, const size_t *lengths, int count);

/// One resource limit for shim_spawn: soft and hard both set to `value`.
typedef struct {
    int resource;              // RLIMIT_*
    uint64_t value;
} shim_rlimit;

/// The steps of the child between clone3 and exec, as reported in `*failed_step`.
enum {
    SHIM_STEP_DESCRIPTORS = 0, // session, signals, standard descriptors, the channel
    SHIM_STEP_RLIMIT = 1,      // setrlimit
    SHIM_STEP_BOUNDING = 2,    // dropping the capability bounding set (PR_CAPBSET_DROP)
    SHIM_STEP_GROUPS = 3,      // setgroups
    SHIM_STEP_GID = 4,         // setresgid
    SHIM_STEP_UID = 5,         // setresuid
    SHIM_STEP_NO_NEW_PRIVS = 6,// prctl(PR_SET_NO_NEW_PRIVS)
    SHIM_STEP_CAPABILITIES = 7,// ambient set cleared, capset to the empty set
    SHIM_STEP_CHDIR = 8,       // the working directory
    SHIM_STEP_EXEC = 9,        // execve
    SHIM_STEP_MEMORY_CGROUP = 10, // joining the cgroup v1 memory cgroup (shim_join_cgroup_v1)
};

struct shim_sandbox_plan;

/// Spawn options for shim_spawn.
typedef struct {
    const char *path;          // executable
    char *const *argv;         // NULL-terminated
    char *const *envp;         // NULL-terminated
    const char *cwd;           // working directory, or NULL
    int channel_fd;            // descriptor to place at fd 3, or -1
    int extra_fd;              // descriptor to place at fd 4 (with a channel at 3), or -1
    int keep_privilege;        // 1: the capabilities of `kept_capabilities` are kept (a trusted
                               //   helper that needs them, as root: the network stack), else 0
    uint64_t kept_capabilities;// with keep_privilege: bit N keeps capability N; every other is dropped
    int stdout_fd;             // descriptor for stdout (fd 1), or -1 to inherit
    int stderr_fd;             // descriptor for stderr (fd 2), or -1 to inherit
    int cgroup_fd;             // O_DIRECTORY descriptor of the cgroup to start in, or -1
    int set_credentials;       // 1: switch to uid, gid and groups below (needs root)
    uid_t uid;
    gid_t gid;
    const gid_t *groups;       // supplementary groups (setgroups), `ngroups` of them
    int ngroups;
    const shim_rlimit *rlimits;// set in the child before exec, `nrlimits` of them
    int nrlimits;
    const struct shim_sandbox_plan *sandbox; // the sandbox to build (sandbox.h), or NULL
    int *failed_step;          // receives the SHIM_STEP_* that failed, or NULL
    int memory_cgroup_procs_fd;// `cgroup.procs` of a cgroup v1 memory cgroup (open for writing)
                               // the child joins before anything else, or -1
} shim_spawn_options;

/// Spawns a process with clone3(2): in the cgroup `cgroup_fd` from its first instruction
/// (CLONE_INTO_CGROUP, no window in which it runs elsewhere), in a new session (its own
/// process group, pgid == pid), with an empty signal mask and default signal dispositions,
/// stdin on /dev/null, `stdout_fd` and `stderr_fd` at fds 1 and 2 when given (else the
/// caller's), `channel_fd` at fd 3 and every other descriptor closed; then, in this
/// order, its resource limits, an empty capability bounding set, its supplementary groups,
/// gid and uid (with `set_credentials`), PR_SET_NO_NEW_PRIVS, an empty ambient and capability
/// set, its working directory, and last, with a sandbox, its system-call filter. A sandbox's
/// namespaces and file system view (sandbox.h) are built after the resource limits, while the
/// child still has the daemon's privilege. Each failure is reported, never ignored (dropping the bounding
/// set may fail only with EPERM in a daemon that is not root and has no capabilities). Waits until
/// the child has exec'd. Returns the pid and its pidfd in `*pidfd` (CLONE_PIDFD), or -errno
/// (also when a step of the child failed, with its errno and step; the failed child is reaped).
/// Without a cgroup, where clone3 is unavailable, falls back to fork (posix_spawn when there
/// are neither credentials nor limits to apply) and pidfd_open.
/// With `memory_cgroup_procs_fd`, the very first step of the child, before it runs anything of
/// the extension, is to join that cgroup v1 memory cgroup (`shim_join_cgroup_v1`): the image it
/// executes, and every process it creates, is charged there.
pid_t shim_spawn(const shim_spawn_options *options, int *pidfd);

/// Whether clone3(2) can be called (a seccomp filter, such as the one systemd's
/// RestrictNamespaces= installs, makes it fail with ENOSYS). 1 or 0.
int shim_clone3_available(void);

/// pidfd_open(2). Returns a descriptor or -errno.
int shim_pidfd_open(pid_t pid);

/// pipe2(2) with O_CLOEXEC: both ends close-on-exec from the start. Returns 0 or -errno.
int shim_pipe_cloexec(int fds[2]);

/// memfd_create(2) with MFD_CLOEXEC: an anonymous file in memory, named `name` for
/// /proc/PID/fd. Returns a descriptor or -errno.
int shim_memfd(const char *name);

/// close_range(2) of `first` through `last` with CLOSE_RANGE_CLOEXEC: every open descriptor in
/// the range becomes close-on-exec, none is closed. Returns 0 or -errno (-ENOSYS or -EINVAL on
/// kernels before 5.11).
int shim_close_range_cloexec(unsigned int first, unsigned int last);

/* The CPUs this process may run on (sched_getaffinity), or 0 when that cannot be read. */
int shim_usable_cpus(void);
/// eventfd(2) with a count of 0, non-blocking and close-on-exec. Returns a descriptor or -errno.
int shim_eventfd(void);

/// The device (encoded as stat(2)'s st_dev) and inode number of the file `path` names, links
/// followed, from the attributes the kernel has cached: statx(2) with AT_STATX_DONT_SYNC,
/// asking for the inode number alone. A file on a FUSE or network file system whose server
/// does not answer is not waited for. Returns 0 or -errno.
int shim_cached_identity(const char *path, uint64_t *device, uint64_t *inode);

/// pidfd_send_signal(2). Returns 0 or -errno.
int shim_pidfd_send_signal(int pidfd, int sig);

/// kill(2) wrapper returning -errno.
int shim_kill(pid_t pid, int sig);

/// Bytes still queued in the socket's send buffer, not yet consumed by the peer (SIOCOUTQ).
int shim_unread_bytes(int fd);

/// Makes the calling process a child subreaper (PR_SET_CHILD_SUBREAPER).
int shim_set_child_subreaper(void);

/// Blocks `signals` (a zero-terminated list) in the calling thread: call before threads start.
int shim_block_signals(const int *signals);

/// The number of a signal given by name ("TERM", "SIGTERM", case-insensitive), or -EINVAL.
int shim_signal_number(const char *name);

#include <signal.h>

/// accept4(2) with SOCK_CLOEXEC|SOCK_NONBLOCK. Returns a descriptor or -errno.
int shim_accept(int fd);

/// waitid(P_PIDFD, pidfd, ..., options | WNOHANG): 1 and the siginfo's code and status when a
/// state change was reported, 0 when none is pending, -errno on failure.
int shim_waitid_pidfd(int pidfd, int options, int *code, int *status);

/// Sets O_NONBLOCK on a descriptor.
int shim_set_nonblocking(int fd);

/// Moves the calling process into the cgroup v1 cgroup whose `cgroup.procs` is open for writing
/// at `procs_fd` (writes "0", which names the writer). Async-signal-safe. Returns 0 or -errno.
int shim_join_cgroup_v1(int procs_fd);

/// Gives the directory at `path` the default ACL `u::rwx,g::---,g:GID:rwx,m::rwx,o::---`
/// (libacl): every file and directory created inside it afterwards grants group `gid` read and
/// write (directories: and search), whatever its creator's group and umask. The directory's own
/// mode is not changed. Returns 0 or -errno (EOPNOTSUPP: the file system has no ACLs).
int shim_set_group_default_acl(const char *path, unsigned int gid);

/// setfsuid(2) and setfsgid(2) for the calling thread alone: file system permission checks of
/// this thread are then made as `uid` and `gid` (with no capability while `uid` is not 0).
/// Returns 0, or -EPERM when the thread's ids did not become those asked for.
int shim_set_thread_fs_ids(unsigned int uid, unsigned int gid);

/// The space the tree below the directory open at `top` takes (st_blocks × 512 of every
/// entry, the directory's own included; links not followed), in `*bytes`; `top` is closed.
/// An entry that disappears or is replaced while it is walked keeps what it was counted at; a
/// directory moved while the walk is inside it ends the walk with -ESTALE.
/// Bounded whatever the tree's depth and names: one descriptor open at a time, going back up
/// by "..", checked against the directory it came from, and 24 bytes per level; no path is
/// built. With `limit` > 0 it stops counting once past it. With `project` > 0, the uid of
/// the tree's owner, it also gives each directory (before listing it) and each regular file
/// that project id, and each directory PROJINHERIT (shim_set_project_limit), as `chattr -R +P
/// -p` does: the walk with the caller's ids, each change with the owner's as the file system
/// uid. An entry that is gone, cannot be opened, is not the owner's or would take the project
/// past its limit is left as it is, and the walk goes on. Returns 0 or -errno (`*bytes` then
/// holds what was counted).
int shim_tree_usage(int top, uint64_t limit, uint32_t project, uint64_t *bytes);

/// Whether the file system of the file open at `fd` enforces project quotas (ext4 mounted
/// with `prjquota`, XFS with `pquota`): 1, 0 when it only counts them, or -errno (ENOSYS
/// without quotactl_fd(2), ESRCH without project quotas, EPERM without CAP_SYS_ADMIN).
int shim_project_quota_enforced(int fd);

/// Sets the hard (and soft) block limit of project `project` on the file system of the file
/// open at `fd` to `bytes`, rounded up to whole KiB: the file system then refuses a write
/// that would take the files of that project past it (EDQUOT). Needs CAP_SYS_ADMIN.
/// Returns 0 or -errno.
int shim_set_project_limit(int fd, uint32_t project, uint64_t bytes);

/// openat2(2) of `relative` beneath the directory `dirfd` with RESOLVE_BENEATH,
/// RESOLVE_NO_SYMLINKS, RESOLVE_NO_MAGICLINKS and RESOLVE_NO_XDEV (`flags` get O_CLOEXEC;
/// `mode` is used with O_CREAT). The new descriptor, or -errno.
int shim_open_beneath(int dirfd, const char *relative, int flags, unsigned int mode);

/// A shared defaults suite's memory: a memory file (memfd_create(2), close-on-exec) of `size`
/// zero bytes, mode 0400, sealed against shrinking and growing (a member that maps it never
/// gets SIGBUS). Returns the descriptor (read and write: map it to write) or -errno.
int shim_suite_memory(size_t size);

/// A new read-only descriptor (close-on-exec) of the file open at `fd`, opened again through
/// /proc/self/fd: what members of a suite get. Returns it or -errno.
int shim_reopen_read_only(int fd);

/// The seqlock of a shared defaults suite's mapping (docs/defaults.md): the u64 at `sequence`.
/// A reader takes `shim_seq_read_begin` (an acquire load), copies what it needs, then keeps
/// the copy only if `shim_seq_read_end` (an acquire fence, then a load) gives the same even
/// value. The writer makes it odd with `shim_seq_write_begin` (a store, then a release fence)
/// and even again with `shim_seq_write_end` (a release store), so a reader never waits and
/// never keeps a torn copy.
static inline uint64_t shim_seq_read_begin(const void *sequence) {
    return __atomic_load_n((const uint64_t *)sequence, __ATOMIC_ACQUIRE);
}
static inline uint64_t shim_seq_read_end(const void *sequence) {
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    return __atomic_load_n((const uint64_t *)sequence, __ATOMIC_RELAXED);
}
static inline void shim_seq_write_begin(void *sequence) {
    uint64_t s = __atomic_load_n((uint64_t *)sequence, __ATOMIC_RELAXED);
    __atomic_store_n((uint64_t *)sequence, s + 1, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
}
static inline void shim_seq_write_end(void *sequence) {
    uint64_t s = __atomic_load_n((uint64_t *)sequence, __ATOMIC_RELAXED);
    __atomic_store_n((uint64_t *)sequence, s + 1, __ATOMIC_RELEASE);
}

#ifdef __cplusplus
}
#endif
#endif
