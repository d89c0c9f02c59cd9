#define _GNU_SOURCE
#include "probes.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/bpf.h>
#include <netinet/in.h>
#include <sched.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/msg.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
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

int probe_tcp_connect(int port) {
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0) return errno;
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof(addr));
    addr.sin_family = AF_INET;
    addr.sin_port = htons((unsigned short)port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int rc = connect(s, (struct sockaddr *)&addr, sizeof(addr)) == 0 ? 0 : errno;
    close(s);
    return rc;
}

int probe_socket(int family, int protocol) {
    int s = socket(family, SOCK_DGRAM | SOCK_CLOEXEC, protocol);
    if (s < 0 && errno == ESOCKTNOSUPPORT) s = socket(family, SOCK_STREAM | SOCK_CLOEXEC, protocol);
    if (s < 0) return errno;
    close(s);
    return 0;
}

int probe_message_queue(int key, int create) {
    return msgget((key_t)key, create ? IPC_CREAT | 0666 : 0) < 0 ? errno : 0;
}
