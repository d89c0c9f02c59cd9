// The sandbox an extension is spawned into: its own mount namespace (a read-only system,
// private /tmp, /var/tmp and /dev/shm, a /dev of pseudo-devices, masked directories, its own
// /proc), optionally its own network namespace, and a system-call filter. Built by the
// extension's child between clone and exec (shim_spawn), from a plan the daemon computes.
// Every function returns 0 or a positive value on success and -errno on failure.
#ifndef SHIM_SANDBOX_H
#define SHIM_SANDBOX_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/// The parts of a sandbox, as bits of `shim_sandbox.parts` and of `shim_sandbox_probe`'s result.
enum {
    SHIM_SANDBOX_FILESYSTEM = 1, // a mount namespace with the view described by the plan
    SHIM_SANDBOX_PROC = 2,       // a pid namespace of its own (the extension is its pid 1), and /proc
                                 //   mounted anew for it, showing only the extension's own processes
    SHIM_SANDBOX_NETWORK = 4,    // a network namespace of its own, loopback only
    SHIM_SANDBOX_SYSCALLS = 8,   // the system-call filter
    SHIM_SANDBOX_USERNS = 16,    // namespaces created inside a new user namespace (a daemon without privilege)
    SHIM_SANDBOX_SCOPE = 32,     // Landlock scoping (ABI 6): no connection to an abstract unix socket
                                 //   made outside the extension, no signal to a process outside it
};

/// What one mount of the file system view does to its directory.
enum {
    SHIM_MOUNT_SCRATCH = 0,  // a private, empty, writable tmpfs (mode 1777): /tmp, /var/tmp
    SHIM_MOUNT_MASK = 1,     // an empty tmpfs, read-only, searchable only to reach what is kept below
    SHIM_MOUNT_KEEP_RO = 2,  // the directory as it is, read-only, even under a mask or scratch above
    SHIM_MOUNT_KEEP_RW = 3,  // the same, read-write (its container, a shared container)
};

/// One mount of the view: `path` is absolute and names an existing directory.
typedef struct {
    const char *path;
    int kind;                // SHIM_MOUNT_*
} shim_sandbox_mount;

/// A directory the view hides or replaces, or one above such a directory: its identity and its
/// real path (no link on it).
typedef struct {
    dev_t dev;
    ino_t ino;
    const char *path;
} shim_protected_dir;

/// The plan of one extension's sandbox. The mounts are applied in order, each parent before
/// what lies below it (the daemon's SandboxView orders them and drops the needless ones).
typedef struct shim_sandbox_plan {
    int parts;                         // SHIM_SANDBOX_* bits to build
    const shim_sandbox_mount *mounts;
    int nmounts;
    const void *filter;                // the struct sock_fprog of shim_seccomp_filter, with SYSCALLS
    uid_t uid;                         // with USERNS: the ids mapped to themselves in the new
    gid_t gid;                         //   user namespace (the daemon's)
    const char *scratch_options;       // mount options of each private tmpfs (/tmp, /var/tmp,
                                       //   /dev/shm): "mode=1777", and "size=N" within the memory limit
    int netns_fd;                      // with NETWORK: a network namespace to enter (its point's,
                                       //   with a user-mode stack to the host's network), or -1
                                       //   for a new one with its loopback only
    int template_fd;                   // with FILESYSTEM and without USERNS: a mount namespace
                                       //   from shim_sandbox_template, whose copy the view starts
                                       //   from, or -1 to build the whole view
    const char *const *template_masks; // the masks that template was made with (its `masks`)
    int ntemplate_masks;
    dev_t hidden_dev;                  // a directory no SHIM_MOUNT_KEEP_RO may be or lie below (the
    ino_t hidden_ino;                  //   daemon's state directory), checked on the directory
                                       //   opened, refused with EXDEV; 0 and 0 for none
    const shim_protected_dir *protected_dirs; // a SHIM_MOUNT_KEEP_RO whose directory is one of
    int nprotected_dirs;               //   these must be named by its path (the view's masks then
                                       //   lie below it): reached by another path (a link on it,
                                       //   another mount of it), it is refused with EXDEV
} shim_sandbox;

/// The steps of the sandbox in the child, as reported in shim_spawn's `*failed_step`
/// (continuing the SHIM_STEP_* numbers of shims.h).
enum {
    SHIM_STEP_SANDBOX_USERNS = 11,     // the user namespace and its id maps
    SHIM_STEP_SANDBOX_FILESYSTEM = 12, // the mount namespace and the file system view
    SHIM_STEP_SANDBOX_PROC = 13,       // /proc
    SHIM_STEP_SANDBOX_NETWORK = 14,    // the network namespace and its loopback
    SHIM_STEP_SANDBOX_SYSCALLS = 15,   // installing the system-call filter
    SHIM_STEP_SANDBOX_SCOPE = 16,      // the Landlock scope
    SHIM_STEP_SANDBOX_TEMPLATE = 17,   // entering a copy of the view's template (setns, unshare)
};

/// The CLONE_NEW* flags with which the child of `plan` must be cloned: a pid namespace can
/// only be entered at birth (the extension becomes its pid 1), and with SHIM_SANDBOX_USERNS
/// the user namespace that gives the privilege to make it comes in the same clone. 0 for
/// no plan or none of these parts.
uint64_t shim_sandbox_clone_flags(const shim_sandbox *plan);

/// The Landlock ABI this kernel offers (landlock_create_ruleset's version), 0 without Landlock
/// (or where a system-call filter refuses it).
int shim_landlock_abi(void);

/// Scopes the calling thread, and what it execs, with Landlock (SHIM_SANDBOX_SCOPE): it may
/// not connect to an abstract unix socket bound outside its domain, nor signal a process
/// outside it. Needs PR_SET_NO_NEW_PRIVS. Returns 0 or -errno.
int shim_landlock_scope(void);

/// Builds the namespaces and the file system view of `plan` in the calling process, which
/// must be single-threaded (a spawned child), cloned with `cloned` (the flags of
/// shim_sandbox_clone_flags, or 0 when it was forked). Only system calls, no allocation. On
/// failure returns -errno and sets `*step` to the SHIM_STEP_SANDBOX_* that failed.
int shim_sandbox_enter(const shim_sandbox *plan, uint64_t cloned, int *step);

/// Makes the part of a file system view every sandboxed extension shares, once, in a new mount
/// namespace (on a thread of its own: the caller's namespaces are not touched; needs
/// CAP_SYS_ADMIN): the daemon's mounts copied with nothing propagating either way, all of them
/// read-only and nosuid, the private /dev with its pseudo-devices (and an empty /dev/shm
/// directory), and the `masks` (each SHIM_MOUNT_MASK, ordered as a plan orders them) made empty
/// and read-only. Its descriptor (close-on-exec) in `*fd`, which keeps it alive. A child whose
/// plan names it (`template_fd`) enters it, takes a copy of its own (CLONE_NEWNS), and adds
/// only what is its own: /dev/shm, /tmp and /var/tmp, the directories it keeps, and the masks
/// that hold one of them. The namespace holds the mounts there were when it was made: the
/// caller makes a new one when the mount table changes. Returns 0 or -errno.
int shim_sandbox_template(const shim_sandbox_mount *masks, int nmasks, int *fd);

/// Whether the view of `plan` starts from a template (`template_fd`, with FILESYSTEM and
/// without USERNS).
int shim_sandbox_uses_template(const shim_sandbox *plan);

/// Builds the file system view of `plan` from its template, in the spawned child, while the
/// template's descriptor is open (before the child closes its descriptors): enters a copy of
/// the template's mount namespace and adds what is the extension's own. shim_sandbox_enter
/// then skips the view. Only system calls. Returns 0 or -errno, `*step` then saying whether
/// entering the template (SHIM_STEP_SANDBOX_TEMPLATE) or the rest failed.
int shim_sandbox_view_from_template(const shim_sandbox *plan, int *step);

/// Installs the system-call filter `filter` (a struct sock_fprog *) in the calling thread;
/// needs PR_SET_NO_NEW_PRIVS or CAP_SYS_ADMIN. Returns 0 or -errno.
int shim_sandbox_install_filter(const void *filter);

/// Builds, with libseccomp, the filter every sandboxed extension gets (docs/security.md lists
/// and explains it) and returns it as a struct sock_fprog * in `*filter`, allocated once for
/// the daemon's life. Returns 0 or -errno.
int shim_seccomp_filter(const void **filter);

/// The number of BPF instructions of a filter from shim_seccomp_filter.
int shim_seccomp_filter_length(const void *filter);

/// A new network namespace with its loopback up, made on a thread of its own (the caller's
/// namespaces are not touched; needs CAP_SYS_ADMIN): its descriptor (close-on-exec) in `*fd`.
/// Returns 0 or -errno.
int shim_network_namespace(int *fd);

/// Makes the network namespace `fd` reachable at `path` (a new empty file, bound over with
/// it, as `ip netns add` does), for a helper that takes a namespace by path. Returns 0 or -errno.
int shim_bind_namespace(int fd, const char *path);

/// Undoes shim_bind_namespace: detaches the mount at `path` and removes the file. Returns 0
/// or -errno.
int shim_unbind_namespace(const char *path);

/// Which parts this process can build for a child, found by building each in a throwaway
/// child: a bit set of SHIM_SANDBOX_*. With SHIM_SANDBOX_USERNS set, the namespaces come
/// from a new user namespace (no privilege). `errors[i]` receives the errno of the failure
/// of part bit i (0 FILESYSTEM, 1 PROC, 2 NETWORK, 3 SYSCALLS), 0 when it worked.
int shim_sandbox_probe(const void *filter, int errors[4]);

#ifdef __cplusplus
}
#endif

#endif
