// C helpers for extensiond-bench: what Swift cannot reach through Glibc (posix_spawn flags,
// waitid with siginfo, pidfd, rlimits) and a variadic-free sd-bus client and service for the
// D-Bus baseline. Every function returns 0 (or a count, pid or descriptor) on success and
// -errno on failure.
#ifndef BENCH_SHIMS_H
#define BENCH_SHIMS_H

#include <stdint.h>
#include <stddef.h>
#include <sys/types.h>

/// CLOCK_MONOTONIC in nanoseconds (the clock extensiond stamps its events with).
uint64_t bench_now_ns(void);

/// Spawns `path` exactly as extensiond does (new session, empty signal mask, default
/// dispositions, stdin /dev/null, `channel_fd` at fd 3, every other descriptor from 4 closed,
/// working directory `cwd`). `quiet` sends stdout/stderr to /dev/null. Returns the pid or -errno.
pid_t bench_spawn(const char *path, char *const *argv, char *const *envp, const char *cwd, int channel_fd, int quiet);

/// waitid(P_PID, pid, WSTOPPED or WEXITED…): returns the si_code (CLD_STOPPED…) or -errno.
int bench_waitid(pid_t pid, int options);

/// pidfd_open(2).
int bench_pidfd_open(pid_t pid);

/// Waits until the pidfd is readable (the process exited) or `timeout_ms` passes: 1, 0 or -errno.
int bench_pidfd_wait(int pidfd, int timeout_ms);

/// Raises RLIMIT_NOFILE's soft limit to its hard limit; returns the new soft limit.
long bench_raise_nofile(void);

/// SEQPACKET / STREAM socketpairs, close-on-exec. Returns 0 or -errno.
int bench_seqpacket_pair(int fds[2]);
int bench_stream_pair(int fds[2]);

/// Sends `len` bytes with one descriptor attached (SCM_RIGHTS), or none when fd < 0.
ssize_t bench_send_fd(int sock, const void *buf, size_t len, int fd);

/// Blocking read/write of exactly `len` bytes: 0, or -errno (-EPIPE at end of stream).
int bench_read_full(int fd, void *buf, size_t len);
int bench_write_full(int fd, const void *buf, size_t len);

/// The echo helper: reads datagrams (or bytes) from `fd` and writes each one back, until EOF.
void bench_echo_loop(int fd);

/// sd-bus client: connects to `address` as a bus client (Hello done). Returns an opaque bus or NULL
/// (with *error set to -errno).
void *bench_dbus_open(const char *address, int *error);
/// One org.freedesktop.DBus.Peer.Ping method call to `destination` (a bus name), waiting for the
/// reply. Returns 0 or -errno.
int bench_dbus_ping(void *bus, const char *destination);
void bench_dbus_close(void *bus);
/// Manager.Begin(id, {}) on extensiond's D-Bus interface: the request's path and the channel.
int bench_dbus_begin(void *bus, const char *id, int *fd, char *path, size_t path_size);
/// Request.Dismiss on `path`.
int bench_dbus_dismiss(void *bus, const char *path);
/// sd-bus service: connects, takes `name`, writes one byte to `ready_fd`, then serves (sd-bus
/// answers org.freedesktop.DBus.Peer itself) until the bus goes away. Returns -errno on failure.
int bench_dbus_serve(const char *address, const char *name, int ready_fd);

/// Pins the calling thread to `cpu`, or lets it run on every CPU when `cpu` < 0. Returns 0 or -errno.
int bench_pin_cpu(int cpu);

/// A minimal stand-in for the supervisor on a runtime channel: answers every `acquire` with
/// `granted` (fresh assertion ids) and ignores everything else, until the channel closes. Runs
/// on the calling thread. Used to separate the runtime library's share of an acquire from the
/// daemon's.
void bench_minimal_responder(int fd);

#endif
