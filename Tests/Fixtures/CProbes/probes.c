#define _GNU_SOURCE
#include "probes.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/bpf.h>
#include <linux/fs.h>
#include <fcntl.h>
#include <sys/ioctl.h>
#include <netinet/in.h>
#include <sched.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/msg.h>
#include <sys/ptrace.h>
#include <signal.h>
#include <stdio.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/syscall.h>
#include <unistd.h>

int probe_mount(void) {
    return mount("tmpfs", "/mnt", "tmpfs", 0, NULL) == 0 ? 0 : errno;
}

int probe_unshare_user(void) {
    return unshare(CLONE_NEWUSER) == 0 ? 0 : errno;
}

int probe_bpf(void) {
    union bpf_attr attr;
    memset(&attr, 0, sizeof(attr));
    return syscall(SYS_bpf, BPF_PROG_LOAD, &attr, sizeof(attr)) >= 0 ? 0 : errno;
}

int probe_ptrace(pid_t pid) {
    if (ptrace(PTRACE_ATTACH, pid, NULL, NULL) != 0) return errno;
    ptrace(PTRACE_DETACH, pid, NULL, NULL);
    return 0;
}

int probe_io_uring(void) {
    unsigned char params[120];  // struct io_uring_params
    memset(params, 0, sizeof(params));
    long fd = syscall(SYS_io_uring_setup, 1, params);
    if (fd < 0) return errno;
    close((int)fd);
    return 0;
}

int probe_tcp_connect(int port) { return probe_tcp_connect_to("127.0.0.1", port); }

int probe_socket(int family, int protocol) {
    int s = socket(family, SOCK_DGRAM | SOCK_CLOEXEC, protocol);
    if (s < 0 && errno == ESOCKTNOSUPPORT) s = socket(family, SOCK_STREAM | SOCK_CLOEXEC, protocol);
    if (s < 0) return errno;
    close(s);
    return 0;
}

int probe_socket_wide(int family, int protocol) {
    // The upper halves of the registers set: the kernel reads ints (the lower halves), so a
    // filter that compares all 64 bits would let any family through.
    long high = 1L << 32;
    long s = syscall(SYS_socket, (long)(unsigned)family | high, (long)(SOCK_DGRAM | SOCK_CLOEXEC), (long)(unsigned)protocol | high);
    if (s < 0 && errno == ESOCKTNOSUPPORT) s = syscall(SYS_socket, (long)(unsigned)family | high, (long)(SOCK_STREAM | SOCK_CLOEXEC), (long)(unsigned)protocol | high);
    if (s < 0) return errno;
    close((int)s);
    return 0;
}

int probe_message_queue(int key, int create) {
    return msgget((key_t)key, create ? IPC_CREAT | 0666 : 0) < 0 ? errno : 0;
}

int probe_kill(int pid) { return kill(pid, 0) == 0 ? 0 : errno; }

int probe_pidfd(int pid) {
    int fd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (fd < 0) return errno;
    close(fd);
    return 0;
}

int probe_reach_count(int last, int *unexplained) {
    int by_pidfd = 0;
    *unexplained = 0;
    for (int pid = 1; pid <= last; pid++) {
        if (probe_pidfd(pid) == 0) by_pidfd++;
        if (kill(pid, 0) != 0 && errno != EPERM) continue;
        // kill also finds threads by their ids; its /proc has every process and thread of its
        // own namespace by path (threads are not listed, but they are there).
        char path[32];
        snprintf(path, sizeof(path), "/proc/%d/status", pid);
        if (access(path, F_OK) != 0) (*unexplained)++;
    }
    return by_pidfd;
}

// The address of the abstract unix socket `name` (a leading NUL, no file) in `*addr`, and its length.
static socklen_t abstract_address(const char *name, struct sockaddr_un *addr) {
    memset(addr, 0, sizeof(*addr));
    addr->sun_family = AF_UNIX;
    size_t n = strlen(name);
    if (n + 1 > sizeof(addr->sun_path)) n = sizeof(addr->sun_path) - 1;
    memcpy(addr->sun_path + 1, name, n);
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
}

int probe_abstract_connect(const char *name) {
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0) return errno;
    struct sockaddr_un addr;
    socklen_t length = abstract_address(name, &addr);
    int rc = connect(s, (struct sockaddr *)&addr, length) == 0 ? 0 : errno;
    close(s);
    return rc;
}

int probe_tcp_connect_to(const char *address, int port) {
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0) return errno;
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof(addr));
    addr.sin_family = AF_INET;
    addr.sin_port = htons((unsigned short)port);
    if (inet_pton(AF_INET, address, &addr.sin_addr) != 1) {
        close(s);
        return EINVAL;
    }
    int rc = connect(s, (struct sockaddr *)&addr, sizeof(addr)) == 0 ? 0 : errno;
    close(s);
    return rc;
}

int probe_abstract_listen(const char *name) {
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0) return errno;
    struct sockaddr_un addr;
    socklen_t length = abstract_address(name, &addr);
    if (bind(s, (struct sockaddr *)&addr, length) != 0 || listen(s, 16) != 0) {
        int e = errno;
        close(s);
        return e;
    }
    return 0;  // kept open: it listens for the rest of the process's life
}

int probe_project_attribute(const char *path) {
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return errno;
    struct fsxattr a;
    memset(&a, 0, sizeof(a));
    int rc = ioctl(fd, FS_IOC_FSSETXATTR, &a) == 0 ? 0 : errno;
    close(fd);
    return rc;
}

int probe_inode_flags(const char *path) {
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return errno;
    long flags = 0;
    int rc = ioctl(fd, FS_IOC_SETFLAGS, &flags) == 0 ? 0 : errno;
    close(fd);
    return rc;
}

int probe_file_setattr(const char *path) {
    return syscall(469, AT_FDCWD, path, NULL, 0, 0) == 0 ? 0 : errno;
}
