// unit-restrictions: runs a program under the restrictions of a systemd unit that decide what
// a root daemon may do to files and credentials, so that the integration tests of a machine
// without systemd as PID 1 start the daemon as the system unit would (IntegrationTests'
// UnitRestrictions reads them from units/extensiond.service):
//
//   unit-restrictions [--cgroup DIR]... [--capabilities "CAP_A CAP_B ..."] [--umask 0077]
//                     [--no-new-privileges] [--restrict-suid-sgid] [--no-clone3] -- PROGRAM [ARGUMENT...]
//
//   --cgroup DIR          joins the cgroup DIR first (writes to DIR/cgroup.procs), as systemd
//                         starts a service in a cgroup of its own (Delegate=yes: one the test
//                         made, owned by root, mode 0755, which needs no CAP_DAC_OVERRIDE)
//   --capabilities        CapabilityBoundingSet=: every other capability leaves the bounding set
//   --umask               UMask=
//   --no-new-privileges   NoNewPrivileges=yes
//   --restrict-suid-sgid  RestrictSUIDSGID=yes: a seccomp filter (libseccomp) refusing with
//                         EPERM the system calls that would create a file or directory with the
//                         setuid or setgid bit, or give it one (systemd's own rule set)
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const names[] = {
    "CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER", "CAP_FSETID", "CAP_KILL", "CAP_SETGID",
    "CAP_SETUID", "CAP_SETPCAP", "CAP_LINUX_IMMUTABLE", "CAP_NET_BIND_SERVICE", "CAP_NET_BROADCAST", "CAP_NET_ADMIN",
    "CAP_NET_RAW", "CAP_IPC_LOCK", "CAP_IPC_OWNER", "CAP_SYS_MODULE", "CAP_SYS_RAWIO", "CAP_SYS_CHROOT",
    "CAP_SYS_PTRACE", "CAP_SYS_PACCT", "CAP_SYS_ADMIN", "CAP_SYS_BOOT", "CAP_SYS_NICE", "CAP_SYS_RESOURCE",
    "CAP_SYS_TIME", "CAP_SYS_TTY_CONFIG", "CAP_MKNOD", "CAP_LEASE", "CAP_AUDIT_WRITE", "CAP_AUDIT_CONTROL",
    "CAP_SETFCAP", "CAP_MAC_OVERRIDE", "CAP_MAC_ADMIN", "CAP_SYSLOG", "CAP_WAKE_ALARM", "CAP_BLOCK_SUSPEND",
    "CAP_AUDIT_READ", "CAP_PERFMON", "CAP_BPF", "CAP_CHECKPOINT_RESTORE",
};
#define NCAPS ((int)(sizeof(names) / sizeof(names[0])))

static void die(const char *what, int e) {
    fprintf(stderr, "unit-restrictions: %s: %s\n", what, strerror(e));
    exit(127);
}

// Whether the capability `cap` is named in the space- or comma-separated `list`.
static int listed(const char *list, int cap) {
    size_t n = strlen(names[cap]);
    for (const char *p = list; (p = strstr(p, names[cap])) != NULL; p += n) {
        int starts = p == list || p[-1] == ' ' || p[-1] == ',';
        int ends = p[n] == '\0' || p[n] == ' ' || p[n] == ',';
        if (starts && ends) return 1;
    }
    return 0;
}

// One rule per bit: the call is refused when argument `arg` has S_ISUID, or S_ISGID; with
// `flags_arg` >= 0, only when that argument also has O_CREAT (open, openat).
static void refuse_bits(scmp_filter_ctx ctx, int syscall, unsigned arg, int flags_arg) {
    const unsigned long bits[] = { S_ISUID, S_ISGID };
    for (int i = 0; i < 2; i++) {
        int rc;
        if (flags_arg >= 0) {
            rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), syscall, 2, SCMP_CMP((unsigned)flags_arg, SCMP_CMP_MASKED_EQ, O_CREAT, O_CREAT),
                                  SCMP_CMP(arg, SCMP_CMP_MASKED_EQ, bits[i], bits[i]));
        } else {
            rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), syscall, 1, SCMP_CMP(arg, SCMP_CMP_MASKED_EQ, bits[i], bits[i]));
        }
        if (rc != 0) die("seccomp_rule_add", -rc);
    }
}

static void restrict_suid_sgid(void) {
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
    if (ctx == NULL) die("seccomp_init", ENOMEM);
    refuse_bits(ctx, SCMP_SYS(chmod), 1, -1);
    refuse_bits(ctx, SCMP_SYS(fchmod), 1, -1);
    refuse_bits(ctx, SCMP_SYS(fchmodat), 2, -1);
    refuse_bits(ctx, SCMP_SYS(mkdir), 1, -1);
    refuse_bits(ctx, SCMP_SYS(mkdirat), 2, -1);
    refuse_bits(ctx, SCMP_SYS(mknod), 1, -1);
    refuse_bits(ctx, SCMP_SYS(mknodat), 2, -1);
    refuse_bits(ctx, SCMP_SYS(creat), 1, -1);
    refuse_bits(ctx, SCMP_SYS(open), 2, 1);
    refuse_bits(ctx, SCMP_SYS(openat), 3, 2);
    int rc = seccomp_load(ctx);
    if (rc != 0) die("seccomp_load", -rc);
    seccomp_release(ctx);
}

// clone3 answers ENOSYS, as under a container runtime's or an older systemd's filter: the
// daemon then has no CLONE_INTO_CGROUP, and spawns with fork.
static void refuse_clone3(void) {
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
    if (ctx == NULL) die("seccomp_init", ENOMEM);
    int rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
    if (rc != 0) die("seccomp_rule_add", -rc);
    rc = seccomp_load(ctx);
    if (rc != 0) die("seccomp_load", -rc);
    seccomp_release(ctx);
}

int main(int argc, char **argv) {
    const char *capabilities = NULL;
    int nnp = 0, suid = 0, noclone3 = 0, i = 1;
    for (; i < argc && strcmp(argv[i], "--") != 0; i++) {
        if (strcmp(argv[i], "--cgroup") == 0 && i + 1 < argc) {
            char path[4096];
            snprintf(path, sizeof(path), "%s/cgroup.procs", argv[++i]);
            FILE *procs = fopen(path, "w");
            if (procs == NULL) die(path, errno);
            if (fputs("0", procs) == EOF || fclose(procs) != 0) die(path, errno);
        } else if (strcmp(argv[i], "--capabilities") == 0 && i + 1 < argc) {
            capabilities = argv[++i];
        } else if (strcmp(argv[i], "--umask") == 0 && i + 1 < argc) {
            umask((mode_t)strtoul(argv[++i], NULL, 8));
        } else if (strcmp(argv[i], "--no-new-privileges") == 0) {
            nnp = 1;
        } else if (strcmp(argv[i], "--restrict-suid-sgid") == 0) {
            suid = 1;
        } else if (strcmp(argv[i], "--no-clone3") == 0) {
            noclone3 = 1;
        } else {
            fprintf(stderr, "unit-restrictions: unknown argument %s\n", argv[i]);
            return 2;
        }
    }
    if (i + 1 >= argc) {
        fprintf(stderr, "unit-restrictions: no program after --\n");
        return 2;
    }
    if (capabilities != NULL) {
        for (int cap = 0; cap < NCAPS; cap++) {
            if (listed(capabilities, cap)) continue;
            if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno != EINVAL) die(names[cap], errno);
        }
        for (int cap = NCAPS; prctl(PR_CAPBSET_READ, cap, 0, 0, 0) >= 0; cap++) {
            if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0) die("PR_CAPBSET_DROP", errno);
        }
    }
    if (nnp && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) die("PR_SET_NO_NEW_PRIVS", errno);
    if (suid) restrict_suid_sgid();
    if (noclone3) refuse_clone3();
    execv(argv[i + 1], argv + i + 1);
    die(argv[i + 1], errno);
}
