#define _GNU_SOURCE
#include "bench_shims.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <systemd/sd-bus.h>

uint64_t bench_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

pid_t bench_spawn(const char *path, char *const *argv, char *const *envp, const char *cwd, int channel_fd, int quiet) {
    posix_spawn_file_actions_t actions;
    posix_spawnattr_t attr;
    int rc = posix_spawn_file_actions_init(&actions);
    if (rc != 0) return -rc;
    rc = posix_spawnattr_init(&attr);
    if (rc != 0) { posix_spawn_file_actions_destroy(&actions); return -rc; }
    sigset_t empty, all;
    sigemptyset(&empty);
    sigfillset(&all);
    sigdelset(&all, SIGKILL);
    sigdelset(&all, SIGSTOP);
    rc = posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    if (rc == 0) rc = posix_spawnattr_setsigmask(&attr, &empty);
    if (rc == 0) rc = posix_spawnattr_setsigdefault(&attr, &all);
    if (rc == 0) rc = posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    if (rc == 0 && quiet) rc = posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
    if (rc == 0 && quiet) rc = posix_spawn_file_actions_adddup2(&actions, 1, 2);
    if (rc == 0 && channel_fd >= 0) {
        if (channel_fd == 3) {
            rc = posix_spawn_file_actions_adddup2(&actions, 3, 100);
            if (rc == 0) rc = posix_spawn_file_actions_adddup2(&actions, 100, 3);
        } else {
            rc = posix_spawn_file_actions_adddup2(&actions, channel_fd, 3);
        }
    }
    if (rc == 0) rc = posix_spawn_file_actions_addclosefrom_np(&actions, channel_fd >= 0 ? 4 : 3);
    if (rc == 0 && cwd != NULL) rc = posix_spawn_file_actions_addchdir_np(&actions, cwd);
    pid_t pid = -1;
    if (rc == 0) rc = posix_spawn(&pid, path, &actions, &attr, argv, envp);
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
    return rc == 0 ? pid : -rc;
}

int bench_waitid(pid_t pid, int options) {
    siginfo_t info;
    memset(&info, 0, sizeof(info));
    int rc;
    do { rc = waitid(P_PID, (id_t)pid, &info, options); } while (rc < 0 && errno == EINTR);
    return rc < 0 ? -errno : info.si_code;
}

int bench_pidfd_open(pid_t pid) {
    long fd = syscall(SYS_pidfd_open, pid, 0);
    return fd < 0 ? -errno : (int)fd;
}

int bench_pidfd_wait(int pidfd, int timeout_ms) {
    struct pollfd p = {.fd = pidfd, .events = POLLIN};
    int rc;
    do { rc = poll(&p, 1, timeout_ms); } while (rc < 0 && errno == EINTR);
    return rc < 0 ? -errno : rc;
}

long bench_raise_nofile(void) {
    struct rlimit r;
    if (getrlimit(RLIMIT_NOFILE, &r) != 0) return -errno;
    r.rlim_cur = r.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &r) != 0) return -errno;
    return (long)r.rlim_cur;
}

int bench_seqpacket_pair(int fds[2]) {
    return socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds) == 0 ? 0 : -errno;
}

int bench_stream_pair(int fds[2]) {
    return socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) == 0 ? 0 : -errno;
}

ssize_t bench_send_fd(int sock, const void *buf, size_t len, int fd) {
    struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
    union { char buf[CMSG_SPACE(sizeof(int))]; struct cmsghdr align; } control;
    struct msghdr msg;
    memset(&msg, 0, sizeof(msg));
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    if (fd >= 0) {
        memset(&control, 0, sizeof(control));
        msg.msg_control = control.buf;
        msg.msg_controllen = sizeof(control.buf);
        struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &fd, sizeof(int));
    }
    ssize_t n;
    do { n = sendmsg(sock, &msg, MSG_NOSIGNAL); } while (n < 0 && errno == EINTR);
    return n < 0 ? -errno : n;
}

int bench_read_full(int fd, void *buf, size_t len) {
    size_t done = 0;
    while (done < len) {
        ssize_t n = read(fd, (char *)buf + done, len - done);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return -errno;
        if (n == 0) return -EPIPE;
        done += (size_t)n;
    }
    return 0;
}

int bench_write_full(int fd, const void *buf, size_t len) {
    size_t done = 0;
    while (done < len) {
        ssize_t n = send(fd, (const char *)buf + done, len - done, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return -errno;
        done += (size_t)n;
    }
    return 0;
}

void bench_echo_loop(int fd) {
    char buf[256];
    for (;;) {
        ssize_t n = read(fd, buf, sizeof(buf));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return;
        if (bench_write_full(fd, buf, (size_t)n) != 0) return;
    }
}

void *bench_dbus_open(const char *address, int *error) {
    sd_bus *bus = NULL;
    int rc = sd_bus_new(&bus);
    if (rc >= 0) rc = sd_bus_set_address(bus, address);
    if (rc >= 0) rc = sd_bus_set_bus_client(bus, 1);
    if (rc >= 0) rc = sd_bus_start(bus);
    if (rc < 0) {
        if (bus) sd_bus_unref(bus);
        *error = rc;
        return NULL;
    }
    *error = 0;
    return bus;
}

int bench_dbus_ping(void *bus, const char *destination) {
    sd_bus_message *m = NULL, *reply = NULL;
    sd_bus_error error = SD_BUS_ERROR_NULL;
    int rc = sd_bus_message_new_method_call((sd_bus *)bus, &m, destination, "/", "org.freedesktop.DBus.Peer", "Ping");
    if (rc >= 0) rc = sd_bus_call((sd_bus *)bus, m, 0, &error, &reply);
    sd_bus_error_free(&error);
    sd_bus_message_unref(reply);
    sd_bus_message_unref(m);
    return rc < 0 ? rc : 0;
}

/// Manager.Begin(id, {}) on extensiond's D-Bus interface: the request's object path (copied into
/// `path`, `path_size` bytes) and the channel (`*fd`, a descriptor of the caller's own). 0 or -errno.
int bench_dbus_begin(void *bus, const char *id, int *fd, char *path, size_t path_size) {
    sd_bus_message *reply = NULL;
    sd_bus_error error = SD_BUS_ERROR_NULL;
    const char *object = NULL;
    int channel = -1;
    int rc = sd_bus_call_method((sd_bus *)bus, "org.extensiond1", "/org/extensiond1", "org.extensiond1.Manager", "Begin", &error, &reply,
                                "sa{sv}", id, 0);
    if (rc >= 0) rc = sd_bus_message_read(reply, "oh", &object, &channel);
    if (rc >= 0) {
        snprintf(path, path_size, "%s", object);
        *fd = fcntl(channel, F_DUPFD_CLOEXEC, 3);
        if (*fd < 0) rc = -errno;
    }
    sd_bus_error_free(&error);
    sd_bus_message_unref(reply);
    return rc < 0 ? rc : 0;
}

/// Request.Dismiss on the request object `path`. 0 or -errno.
int bench_dbus_dismiss(void *bus, const char *path) {
    sd_bus_error error = SD_BUS_ERROR_NULL;
    int rc = sd_bus_call_method((sd_bus *)bus, "org.extensiond1", path, "org.extensiond1.Request", "Dismiss", &error, NULL, "");
    sd_bus_error_free(&error);
    return rc < 0 ? rc : 0;
}

void bench_dbus_close(void *bus) {
    if (bus) sd_bus_flush_close_unref((sd_bus *)bus);
}

int bench_dbus_serve(const char *address, const char *name, int ready_fd) {
    int error = 0;
    sd_bus *bus = bench_dbus_open(address, &error);
    if (!bus) return error;
    int rc = sd_bus_request_name(bus, name, 0);
    if (rc < 0) return rc;
    char one = 1;
    if (write(ready_fd, &one, 1) != 1) return -errno;
    close(ready_fd);
    for (;;) {
        rc = sd_bus_process(bus, NULL);
        if (rc < 0) break;
        if (rc > 0) continue;
        rc = sd_bus_wait(bus, UINT64_MAX);
        if (rc < 0) break;
    }
    sd_bus_unref(bus);
    return rc;
}

void bench_minimal_responder(int fd) {
    unsigned char in[65536], out[20];
    uint64_t next = 1;
    for (;;) {
        ssize_t n = recv(fd, in, sizeof(in), 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return;
        if (n >= 12 && in[0] == 1 && in[1] == 65) {  // acquire(tag u32, reason)
            out[0] = 1; out[1] = 98; out[2] = 0; out[3] = 0;  // granted
            uint32_t len = 12;
            memcpy(out + 4, &len, 4);
            memcpy(out + 8, in + 8, 4);                        // tag
            memcpy(out + 12, &next, 8);                        // assertion id (little-endian host)
            next++;
            send(fd, out, 20, MSG_NOSIGNAL);
        }
    }
}

int bench_pin_cpu(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (cpu >= 0) {
        CPU_SET(cpu, &set);
    } else {
        long n = sysconf(_SC_NPROCESSORS_CONF);
        for (long i = 0; i < n && i < CPU_SETSIZE; i++) CPU_SET((int)i, &set);
    }
    return sched_setaffinity(0, sizeof(set), &set) == 0 ? 0 : -errno;
}
