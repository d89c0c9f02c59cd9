#define _GNU_SOURCE
#include "shims.h"
#include "sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/sockios.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

int shim_peer_credentials(int fd, pid_t *pid, uid_t *uid, gid_t *gid) {
    struct ucred cred;
    socklen_t len = sizeof(cred);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return -errno;
    *pid = cred.pid;
    *uid = cred.uid;
    *gid = cred.gid;
    return 0;
}

#define SHIM_MAX_FDS 8

ssize_t shim_send_with_fds(int fd, const void *buf, size_t len, const int *fds, int nfds) {
    if (nfds < 0 || nfds > SHIM_MAX_FDS) return -EINVAL;
    struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
    union {
        char buf[CMSG_SPACE(sizeof(int) * SHIM_MAX_FDS)];
        struct cmsghdr align;
    } control;
    struct msghdr msg;
    memset(&msg, 0, sizeof(msg));
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    if (nfds > 0) {
        memset(&control, 0, sizeof(control));
        msg.msg_control = control.buf;
        msg.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
        struct cmsghdr *cmsg = CMSG_FIRSTHDR(&msg);
        cmsg->cmsg_level = SOL_SOCKET;
        cmsg->cmsg_type = SCM_RIGHTS;
        cmsg->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
        memcpy(CMSG_DATA(cmsg), fds, sizeof(int) * nfds);
    }
    ssize_t n;
    do {
        n = sendmsg(fd, &msg, MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    return n < 0 ? -errno : n;
}

int shim_send_batch(int fd, const void *base, const size_t *lengths, int count) {
    if (count < 1 || count > SHIM_MAX_BATCH) return -EINVAL;
    struct iovec iov[SHIM_MAX_BATCH];
    struct mmsghdr msgs[SHIM_MAX_BATCH];
    memset(msgs, 0, sizeof(struct mmsghdr) * (size_t)count);
    const char *p = base;
    for (int i = 0; i < count; i++) {
        iov[i].iov_base = (void *)p;
        iov[i].iov_len = lengths[i];
        p += lengths[i];
        msgs[i].msg_hdr.msg_iov = &iov[i];
        msgs[i].msg_hdr.msg_iovlen = 1;
    }
    int n;
    do {
        n = sendmmsg(fd, msgs, (unsigned)count, MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    return n < 0 ? -errno : n;
}

ssize_t shim_recv_with_fds(int fd, void *buf, size_t len, int *fds, int maxfds, int *nfds, int *truncated) {
    struct iovec iov = {.iov_base = buf, .iov_len = len};
    union {
        char buf[CMSG_SPACE(sizeof(int) * SHIM_MAX_FDS)];
        struct cmsghdr align;
    } control;
    struct msghdr msg;
    memset(&msg, 0, sizeof(msg));
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.buf;
    msg.msg_controllen = sizeof(control.buf);
    *nfds = 0;
    *truncated = 0;
    ssize_t n;
    do {
        n = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
    } while (n < 0 && errno == EINTR);
    if (n < 0) return -errno;
    if (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) *truncated = 1;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c != NULL; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
        int count = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
        int *received = (int *)CMSG_DATA(c);
        for (int i = 0; i < count; i++) {
            if (*nfds < maxfds) {
                fds[(*nfds)++] = received[i];
            } else {
                close(received[i]); // never keep a descriptor nobody asked for
                *truncated = 1;
            }
        }
    }
    return n;
}

int shim_recv_batch(int fd, void *buf, size_t slot, int count, int *lengths, int *fds, int *truncated) {
    if (count < 1 || count > SHIM_MAX_RECEIVE_BATCH) return -EINVAL;
    struct iovec iov[SHIM_MAX_RECEIVE_BATCH];
    struct mmsghdr msgs[SHIM_MAX_RECEIVE_BATCH];
    union {
        char buf[CMSG_SPACE(sizeof(int) * SHIM_MAX_FDS)];
        struct cmsghdr align;
    } control[SHIM_MAX_RECEIVE_BATCH];
    memset(msgs, 0, sizeof(struct mmsghdr) * (size_t)count);
    for (int i = 0; i < count; i++) {
        iov[i].iov_base = (char *)buf + (size_t)i * slot;
        iov[i].iov_len = slot;
        msgs[i].msg_hdr.msg_iov = &iov[i];
        msgs[i].msg_hdr.msg_iovlen = 1;
        msgs[i].msg_hdr.msg_control = control[i].buf;
        msgs[i].msg_hdr.msg_controllen = sizeof(control[i].buf);
    }
    int n;
    do {
        n = recvmmsg(fd, msgs, (unsigned)count, MSG_DONTWAIT | MSG_CMSG_CLOEXEC, NULL);
    } while (n < 0 && errno == EINTR);
    if (n < 0) return -errno;
    for (int i = 0; i < n; i++) {
        struct msghdr *msg = &msgs[i].msg_hdr;
        lengths[i] = (int)msgs[i].msg_len;
        fds[i] = -1;
        truncated[i] = (msg->msg_flags & (MSG_TRUNC | MSG_CTRUNC)) ? 1 : 0;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(msg); c != NULL; c = CMSG_NXTHDR(msg, c)) {
            if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
            int received = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
            int *list = (int *)CMSG_DATA(c);
            for (int j = 0; j < received; j++) {
                if (fds[i] < 0) {
                    fds[i] = list[j];
                } else {
                    close(list[j]); // never keep a descriptor nobody asked for
                    truncated[i] = 1;
                }
            }
        }
    }
    return n;
}

#ifndef CLONE_INTO_CGROUP
#define CLONE_INTO_CGROUP 0x200000000ULL
#endif
#ifndef CLONE_PIDFD
#define CLONE_PIDFD 0x00001000
#endif

// struct clone_args of linux/sched.h (CLONE_ARGS_SIZE_VER2: with the cgroup field).
struct shim_clone_args {
    uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls, set_tid, set_tid_size, cgroup;
};

// Moves `fd` to a descriptor >= 10 (close-on-exec cleared later by dup2); -1 stays -1.
static int shim_lift(int fd) { return fd < 0 ? -1 : fcntl(fd, F_DUPFD_CLOEXEC, 10); }

// The capabilities of the spawning thread's bounding set, one bit each, read once per thread
// (a PR_CAPBSET_READ per capability the kernel knows) so that its children drop only those:
// each PR_CAPBSET_DROP commits new credentials (~1.1 µs here), whether or not the capability
// is in the set, and under the system unit's CapabilityBoundingSet= only 11 of the 41 are. A
// bounding set is per thread and only shrinks within a user namespace, so the mask stays a
// superset of the thread's set. A child reads it from the thread it was cloned from (shared
// memory, or fork's copy). A child that enters a new user namespace gets a full set there,
// and drops every capability (shim_child). A read refused for any other reason than the end
// of the list leaves every bit set: nothing is left undropped on a guess.
static __thread uint64_t shim_bounding_mask;
static __thread int shim_bounding_known;

static void shim_read_bounding_set(void) {
    if (shim_bounding_known) return;
    shim_bounding_known = 1;
    uint64_t mask = 0;
    for (int cap = 0; cap < 64; cap++) {
        int present = prctl(PR_CAPBSET_READ, cap, 0, 0, 0);
        if (present < 0) {
            if (errno != EINVAL) mask = ~0ULL;  // EINVAL: past the last capability this kernel knows
            break;
        }
        if (present) mask |= 1ULL << cap;
    }
    shim_bounding_mask = mask;
}

// The child between clone3 and exec: only async-signal-safe calls (the parent is
// multi-threaded). `forked_child`: made by fork, not by clone3 with the sandbox's namespaces.
// On failure, the errno is written to `report` and the child exits.
static void shim_child(const shim_spawn_options *o, int report, int forked_child) {
    int step = SHIM_STEP_DESCRIPTORS;
    report = shim_lift(report);  // above 3, where nothing below can land on it
    if (report < 0) _exit(127);
    step = SHIM_STEP_MEMORY_CGROUP;
    if (o->memory_cgroup_procs_fd >= 0) {
        int rc = shim_join_cgroup_v1(o->memory_cgroup_procs_fd);
        if (rc != 0) {
            errno = -rc;
            goto fail;
        }
    }
    // The network namespace of the extension's point, entered while its descriptor is open.
    if (o->sandbox != NULL && (o->sandbox->parts & SHIM_SANDBOX_NETWORK) && o->sandbox->netns_fd >= 0) {
        step = SHIM_STEP_SANDBOX_NETWORK;
        if (setns(o->sandbox->netns_fd, CLONE_NEWNET) != 0) goto fail;
    }
    // The file system view from its template, entered while the template's descriptor is open.
    if (shim_sandbox_uses_template(o->sandbox)) {
        step = SHIM_STEP_SANDBOX_FILESYSTEM;
        int rc = shim_sandbox_view_from_template(o->sandbox, &step);
        if (rc != 0) {
            errno = -rc;
            goto fail;
        }
    }
    step = SHIM_STEP_DESCRIPTORS;
    int channel = shim_lift(o->channel_fd), out = shim_lift(o->stdout_fd), err = shim_lift(o->stderr_fd);
    int extra = shim_lift(o->extra_fd);
    if ((o->channel_fd >= 0 && channel < 0) || (o->stdout_fd >= 0 && out < 0) || (o->stderr_fd >= 0 && err < 0)) goto fail;
    if (o->extra_fd >= 0 && (extra < 0 || channel < 0)) {
        if (channel < 0) errno = EINVAL;  // fd 4 comes after a channel at 3
        goto fail;
    }
    if (setsid() < 0) goto fail;
    struct sigaction dfl;
    memset(&dfl, 0, sizeof(dfl));
    dfl.sa_handler = SIG_DFL;
    for (int s = 1; s < NSIG; s++) {
        if (s != SIGKILL && s != SIGSTOP) sigaction(s, &dfl, NULL);  // fails harmlessly for reserved numbers
    }
    sigset_t empty;
    sigemptyset(&empty);
    if (sigprocmask(SIG_SETMASK, &empty, NULL) != 0) goto fail;
    int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (null < 0 || dup2(null, 0) < 0) goto fail;
    if (out >= 0 && dup2(out, 1) < 0) goto fail;
    if (err >= 0 && dup2(err, 2) < 0) goto fail;
    if (channel >= 0 && dup2(channel, 3) < 0) goto fail;
    if (extra >= 0 && dup2(extra, 4) < 0) goto fail;
    // Everything above the standard descriptors, the channel and the extra one closes here,
    // except the report pipe, which is close-on-exec.
    int first = extra >= 0 ? 5 : channel >= 0 ? 4 : 3;
    syscall(SYS_close_range, first, report - 1, 0);
    syscall(SYS_close_range, report + 1, ~0U, 0);
    step = SHIM_STEP_RLIMIT;
    for (int i = 0; i < o->nrlimits; i++) {
        struct rlimit rl = { .rlim_cur = (rlim_t)o->rlimits[i].value, .rlim_max = (rlim_t)o->rlimits[i].value };
        if (setrlimit(o->rlimits[i].resource, &rl) != 0) goto fail;
    }
    if (o->sandbox != NULL && o->sandbox->parts != 0) {
        int rc = shim_sandbox_enter(o->sandbox, forked_child ? 0 : shim_sandbox_clone_flags(o->sandbox), &step);
        if (rc != 0) {
            errno = -rc;
            goto fail;
        }
    }
    step = SHIM_STEP_BOUNDING;
    // Every capability of the bounding set the parent read (shim_spawn), which is this
    // child's: it was cloned from the same thread. In a user namespace of its own the set is
    // full again: every capability the kernel knows.
    uint64_t bounding = (o->sandbox != NULL && (o->sandbox->parts & SHIM_SANDBOX_USERNS)) ? ~0ULL : shim_bounding_mask;
    for (int cap = 0; cap < 64; cap++) {
        if (!(bounding & (1ULL << cap))) continue;
        // A trusted helper keeps the capabilities it names (its permitted set is not cleared
        // below, and no_new_privs bounds what it gets at exec by it and this bounding set).
        if (o->keep_privilege && (o->kept_capabilities & (1ULL << cap))) continue;
        if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0) {
            if (errno == EINVAL) break;  // past the last capability this kernel knows
            if (errno == EPERM && !o->set_credentials) break;  // no CAP_SETPCAP: nothing to drop from
            goto fail;
        }
    }
    if (o->set_credentials) {
        step = SHIM_STEP_GROUPS;
        if (setgroups((size_t)o->ngroups, o->groups) != 0) goto fail;
        step = SHIM_STEP_GID;
        if (setresgid(o->gid, o->gid, o->gid) != 0) goto fail;
        step = SHIM_STEP_UID;
        if (setresuid(o->uid, o->uid, o->uid) != 0) goto fail;
    }
    step = SHIM_STEP_NO_NEW_PRIVS;
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) goto fail;
    if (o->sandbox != NULL && (o->sandbox->parts & SHIM_SANDBOX_SCOPE)) {
        step = SHIM_STEP_SANDBOX_SCOPE;
        int rc = shim_landlock_scope();
        if (rc != 0) {
            errno = -rc;
            goto fail;
        }
    }
    step = SHIM_STEP_CAPABILITIES;
    if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 && errno != EINVAL) goto fail;
    struct __user_cap_header_struct header = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
    struct __user_cap_data_struct data[2];
    memset(data, 0, sizeof(data));
    if (!o->keep_privilege && syscall(SYS_capset, &header, data) != 0) goto fail;
    step = SHIM_STEP_CHDIR;
    if (o->cwd != NULL && chdir(o->cwd) != 0) goto fail;
    if (o->sandbox != NULL && (o->sandbox->parts & SHIM_SANDBOX_SYSCALLS)) {
        step = SHIM_STEP_SANDBOX_SYSCALLS;
        int rc = shim_sandbox_install_filter(o->sandbox->filter);
        if (rc != 0) {
            errno = -rc;
            goto fail;
        }
    }
    step = SHIM_STEP_EXEC;
    execve(o->path, o->argv, o->envp);
fail:;
    int e[2] = { errno, step };
    ssize_t ignored = write(report, e, sizeof(e));
    (void)ignored;
    _exit(127);
}

// The child of a shared-memory clone3 runs this on its own stack.
struct shim_child_start {
    const shim_spawn_options *options;
    int report;
};

static void shim_child_entry(void *start) {
    struct shim_child_start *s = start;
    shim_child(s->options, s->report, 0);
}

#if defined(__x86_64__) || defined(__aarch64__)
#define SHIM_SHARED_VM_CLONE 1
// clone3 with CLONE_VM | CLONE_VFORK among `args->flags`, the way posix_spawn clones: the
// child shares this process's memory (no copy of the daemon's page tables, no copy-on-write
// faults before exec) and runs `fn(arg)` on `args->stack`; it never returns into this frame
// (exec or exit). The parent resumes once the child has exec'd or exited. Returns the pid
// (or -errno from the raw system call). glibc has no clone3 wrapper that takes a function,
// hence the few instructions of assembly.
static long shim_clone3_shared_vm(struct shim_clone_args *args, void (*fn)(void *), void *arg) {
#if defined(__x86_64__)
    register long rax __asm__("rax") = SYS_clone3;
    register struct shim_clone_args *rdi __asm__("rdi") = args;
    register long rsi __asm__("rsi") = (long)sizeof(*args);
    register void (*r12)(void *) __asm__("r12") = fn;
    register void *r13 __asm__("r13") = arg;
    __asm__ volatile(
        "syscall\n\t"
        "test %%rax, %%rax\n\t"
        "jnz 1f\n\t"
        // The child, on its new (16-byte aligned) stack: no frame to return to.
        "xor %%ebp, %%ebp\n\t"
        "mov %%r13, %%rdi\n\t"
        "call *%%r12\n\t"
        "mov $231, %%eax\n\t"  // exit_group(127), should fn return
        "mov $127, %%edi\n\t"
        "syscall\n\t"
        "1:\n\t"
        : "+r"(rax)
        : "r"(rdi), "r"(rsi), "r"(r12), "r"(r13)
        : "rcx", "r11", "memory");
    return rax;
#else
    register long x0 __asm__("x0") = (long)args;
    register long x1 __asm__("x1") = (long)sizeof(*args);
    register long x8 __asm__("x8") = SYS_clone3;
    register void (*x19)(void *) __asm__("x19") = fn;
    register void *x20 __asm__("x20") = arg;
    __asm__ volatile(
        "svc #0\n\t"
        "cbnz x0, 1f\n\t"
        "mov x29, xzr\n\t"
        "mov x0, x20\n\t"
        "blr x19\n\t"
        "mov x0, #127\n\t"
        "mov x8, #94\n\t"  // exit_group
        "svc #0\n\t"
        "1:\n\t"
        : "+r"(x0)
        : "r"(x1), "r"(x8), "r"(x19), "r"(x20)
        : "x30", "memory");
    return x0;
#endif
}
#endif

int shim_clone3_available(void) {
    // A NULL argument of size 0 is rejected with EINVAL by a kernel that has clone3; a seccomp
    // filter that forbids it (systemd's RestrictNamespaces=) answers ENOSYS.
    long rc = syscall(SYS_clone3, NULL, 0);
    return rc < 0 && errno == ENOSYS ? 0 : 1;
}

pid_t shim_spawn(const shim_spawn_options *o, int *pidfd) {
    if (o->failed_step != NULL) *o->failed_step = -1;
    shim_read_bounding_set();
    // Without clone3 (and so without a cgroup): fork, and the same child, which takes every
    // step (the bounding set, no_new_privs, the capabilities) whatever the manifest asks.
    int forked = o->cgroup_fd < 0 && !shim_clone3_available();
    int pipefd[2];
    if (pipe2(pipefd, O_CLOEXEC) != 0) return -errno;
    int fd = -1;
    long pid;
    if (forked) {
        pid = fork();
    } else {
        struct shim_clone_args args;
        memset(&args, 0, sizeof(args));
        // The sandbox's pid namespace (and the user namespace it needs) are made at birth.
        args.flags = CLONE_PIDFD | (o->cgroup_fd >= 0 ? CLONE_INTO_CGROUP : 0) | shim_sandbox_clone_flags(o->sandbox);
        args.pidfd = (uint64_t)(uintptr_t)&fd;
        args.exit_signal = SIGCHLD;
        args.cgroup = o->cgroup_fd >= 0 ? (uint64_t)o->cgroup_fd : 0;
#ifdef SHIM_SHARED_VM_CLONE
        // Shared memory, as posix_spawn: every signal is blocked across the clone so that no
        // handler of the daemon runs in the child, which resets them all before unblocking.
        enum { stack_size = 128 * 1024 };
        void *stack = mmap(NULL, stack_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
        if (stack == MAP_FAILED) {
            int e = errno;
            close(pipefd[0]);
            close(pipefd[1]);
            return -e;
        }
        args.flags |= CLONE_VM | CLONE_VFORK;
        args.stack = (uint64_t)(uintptr_t)stack;
        args.stack_size = stack_size;
        struct shim_child_start start = { .options = o, .report = pipefd[1] };
        sigset_t all, previous;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &previous);
        long rc = shim_clone3_shared_vm(&args, shim_child_entry, &start);
        pthread_sigmask(SIG_SETMASK, &previous, NULL);
        munmap(stack, stack_size);
        if (rc < 0) {
            errno = (int)-rc;
            pid = -1;
        } else {
            pid = rc;
        }
#else
        pid = syscall(SYS_clone3, &args, sizeof(args));
#endif
    }
    if (pid == 0) {
        close(pipefd[0]);
        shim_child(o, pipefd[1], forked);
    }
    int saved = errno;
    close(pipefd[1]);
    if (pid < 0) {
        close(pipefd[0]);
        return -saved;
    }
    if (forked) {
        // Our unreaped child: the pid cannot have been reused.
        fd = shim_pidfd_open((pid_t)pid);
        if (fd < 0) {
            kill((pid_t)pid, SIGKILL);
            siginfo_t si;
            waitid(P_PID, (id_t)pid, &si, WEXITED);
            close(pipefd[0]);
            return fd;
        }
    }
    // EOF: exec succeeded (the write end was close-on-exec). Two ints: the errno and the step.
    int report[2] = { 0, 0 };
    ssize_t n;
    do {
        n = read(pipefd[0], report, sizeof(report));
    } while (n < 0 && errno == EINTR);
    close(pipefd[0]);
    if (n == (ssize_t)sizeof(report)) {
        siginfo_t si;
        waitid(P_PID, (id_t)pid, &si, WEXITED);
        close(fd);
        if (o->failed_step != NULL) *o->failed_step = report[1];
        return -(report[0] != 0 ? report[0] : EIO);
    }
    *pidfd = fd;
    return (pid_t)pid;
}

int shim_usable_cpus(void) {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) != 0) return 0;
    return CPU_COUNT(&set);
}

int shim_eventfd(void) {
    int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    return fd < 0 ? -errno : fd;
}

int shim_pidfd_open(pid_t pid) {
    long fd = syscall(SYS_pidfd_open, pid, 0);
    return fd < 0 ? -errno : (int)fd;
}

int shim_pipe_cloexec(int fds[2]) {
    return pipe2(fds, O_CLOEXEC) == 0 ? 0 : -errno;
}

int shim_memfd(const char *name) {
    int fd = memfd_create(name, MFD_CLOEXEC);
    return fd < 0 ? -errno : fd;
}

int shim_close_range_cloexec(unsigned int first, unsigned int last) {
    /* CLOSE_RANGE_CLOEXEC (linux/close_range.h), spelled out for older headers. */
    long rc = syscall(SYS_close_range, first, last, 1u << 2);
    return rc == 0 ? 0 : -errno;
}

int shim_pidfd_send_signal(int pidfd, int sig) {
    long rc = syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0);
    return rc < 0 ? -errno : 0;
}

int shim_kill(pid_t pid, int sig) { return kill(pid, sig) == 0 ? 0 : -errno; }

int shim_cached_identity(const char *path, uint64_t *device, uint64_t *inode) {
    struct statx st;
    if (statx(AT_FDCWD, path, AT_STATX_DONT_SYNC, STATX_INO, &st) != 0) return -errno;
    *device = makedev(st.stx_dev_major, st.stx_dev_minor);
    *inode = st.stx_ino;
    return 0;
}

int shim_unread_bytes(int fd) {
    int queued = 0;
    if (ioctl(fd, SIOCOUTQ, &queued) != 0) return -errno;
    return queued;
}

int shim_set_child_subreaper(void) { return prctl(PR_SET_CHILD_SUBREAPER, 1) == 0 ? 0 : -errno; }

int shim_block_signals(const int *signals) {
    sigset_t set;
    sigemptyset(&set);
    for (const int *s = signals; *s != 0; s++) sigaddset(&set, *s);
    int rc = pthread_sigmask(SIG_BLOCK, &set, NULL);
    return -rc;
}

int shim_signal_number(const char *name) {
    if (strncasecmp(name, "SIG", 3) == 0) name += 3;
    for (int s = 1; s < NSIG; s++) {
        const char *abbrev = sigabbrev_np(s);
        if (abbrev != NULL && strcasecmp(abbrev, name) == 0) return s;
    }
    return -EINVAL;
}

int shim_set_nonblocking(int fd) {
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0) return -errno;
    if (fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) return -errno;
    return 0;
}

int shim_accept(int fd) {
    int c = accept4(fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    return c < 0 ? -errno : c;
}

#ifndef P_PIDFD
#define P_PIDFD 3
#endif

int shim_waitid_pidfd(int pidfd, int options, int *code, int *status) {
    siginfo_t si;
    memset(&si, 0, sizeof(si));
    int rc;
    do {
        rc = waitid((idtype_t)P_PIDFD, (id_t)pidfd, &si, options | WNOHANG);
    } while (rc < 0 && errno == EINTR);
    if (rc < 0) return -errno;
    if (si.si_pid == 0) return 0;
    *code = si.si_code;
    *status = si.si_status;
    return 1;
}

int shim_join_cgroup_v1(int procs_fd) {
    // In cgroup v1, pid 0 written to cgroup.procs is the writing process (its whole thread group).
    ssize_t n;
    do {
        n = pwrite(procs_fd, "0", 1, 0);
    } while (n < 0 && errno == EINTR);
    if (n < 0) return -errno;
    return n == 1 ? 0 : -EIO;
}

int shim_suite_memory(size_t size) {
    int fd = memfd_create("extensiond-defaults", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) return -errno;
    if (ftruncate(fd, (off_t)size) != 0 || fchmod(fd, 0400) != 0 ||
        fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    return fd;
}

int shim_reopen_read_only(int fd) {
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    int copy = open(path, O_RDONLY | O_CLOEXEC);
    return copy < 0 ? -errno : copy;
}
