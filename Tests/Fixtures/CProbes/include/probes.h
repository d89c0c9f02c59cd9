// System calls the sandbox tests try from inside an extension (test-extension's `syscall`
// command). Each returns 0 when the kernel allowed the call, or the errno it failed with.
#ifndef PROBES_H
#define PROBES_H

#include <sys/types.h>

/// mount(2) of a tmpfs on /mnt.
int probe_mount(void);
/// unshare(CLONE_NEWUSER).
int probe_unshare_user(void);
/// bpf(BPF_PROG_LOAD) with an empty attribute.
int probe_bpf(void);
/// ptrace(PTRACE_ATTACH, pid) (detached again when it worked).
int probe_ptrace(pid_t pid);
/// io_uring_setup(2) with 1 entry (the ring closed again when it worked).
int probe_io_uring(void);
/// A TCP connect to 127.0.0.1:port.
int probe_tcp_connect(int port);
/// socket(2) of `family` and `protocol` (a datagram socket, else a stream one), closed again.
int probe_socket(int family, int protocol);
/// The same through syscall(2) with the upper 32 bits of the family and protocol registers
/// set (the kernel reads their lower halves).
int probe_socket_wide(int family, int protocol);
/// msgget(2) of the System V message queue `key`, created (mode 0666) when `create`.
int probe_message_queue(int key, int create);
/// kill(pid, 0): 0 or the errno.
int probe_kill(int pid);
/// pidfd_open(pid): 0 or the errno.
int probe_pidfd(int pid);
/// How many of the pids 1...last pidfd_open opens; in `*unexplained`, how many kill(pid, 0)
/// finds (EPERM counts: the process exists) that its own /proc does not have.
int probe_reach_count(int last, int *unexplained);
/// connect(2) to the abstract unix socket `name` (stream): 0 or the errno.
int probe_abstract_connect(const char *name);
/// Listens on the abstract unix socket `name` for the rest of the process's life: 0 or the errno.
int probe_abstract_listen(const char *name);
/// connect(2) to the IPv4 `address`:`port`: 0 or the errno.
int probe_tcp_connect_to(const char *address, int port);

/// ioctl(FS_IOC_FSSETXATTR) on the directory `path` with project 0 and no flags.
int probe_project_attribute(const char *path);
/// ioctl(FS_IOC_SETFLAGS) on the directory `path` with no flags.
int probe_inode_flags(const char *path);
/// file_setattr(2) of `path` with no attributes (EINVAL from a kernel that has it).
int probe_file_setattr(const char *path);

#endif
