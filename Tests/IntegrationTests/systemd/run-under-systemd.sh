#!/usr/bin/env bash
# A private systemd for the integration tests (Tests/IntegrationTests/SystemdTests.swift),
# on a machine where systemd is not PID 1 (a container, a CI runner).
#
#   unshare -m --propagation private run-under-systemd.sh WORKDIR BINDIR
#
# In the new mount namespace it mounts a fresh tmpfs on /run (so /run/systemd, /run/log and
# /run/user are private) and on /var/log/journal, starts systemd-journald, then a systemd
# user manager (systemd --user) with XDG_RUNTIME_DIR=/run/user/$UID and
# XDG_CONFIG_HOME=WORKDIR/config, in a cgroup of its own. WORKDIR is visible to the manager
# and its services as /run/extensiond-test (outside /tmp, which PrivateTmp= hides), BINDIR as
# /run/extensiond-test/bin. Unit files go in WORKDIR/config/systemd/user.
#
# It prints "READY <pid>" once the manager runs; drive it with
#   nsenter --target <pid> --mount -- env XDG_RUNTIME_DIR=/run/user/$UID systemctl --user …
# Closing its stdin (or the test runner dying) stops the manager and journald, kills what is
# left in the test cgroup and removes it, and prints "DOWN". Every wait has a deadline.
set -euo pipefail

work=${1:?usage: run-under-systemd.sh WORKDIR BINDIR}
bindir=${2:?usage: run-under-systemd.sh WORKDIR BINDIR}
uid=$(id -u)
root=/run/extensiond-test
runtime=/run/user/$uid
log=$work/session.log
manager=""
journald=""
cgroups=()

say() { echo "$*"; echo "$(date +%T.%N) $*" >>"$log"; }
fail() { say "FAILED $*"; exit 1; }

# Waits up to $1 seconds (in 20 ms steps) until the command in the rest of the arguments succeeds.
wait_for() {
    local deadline=$((SECONDS + $1)); shift
    until "$@" >/dev/null 2>&1; do
        [ $SECONDS -lt $deadline ] || return 1
        sleep 0.02
    done
}

teardown() {
    local status=$?
    set +e
    if [ -n "$manager" ] && kill -0 "$manager" 2>/dev/null; then
        # The manager stops every unit (KillMode of each applies), then exits.
        kill -TERM "$manager"
        wait_for 30 bash -c "! kill -0 $manager" || kill -KILL "$manager"
        wait "$manager" 2>/dev/null
    fi
    if [ -n "$journald" ] && kill -0 "$journald" 2>/dev/null; then
        kill -TERM "$journald"
        wait_for 10 bash -c "! kill -0 $journald" || kill -KILL "$journald"
        wait "$journald" 2>/dev/null
    fi
    # Anything still in the test's cgroups is a leftover of the test: kill it, then remove them.
    for cg in "${cgroups[@]}"; do
        [ -d "$cg" ] || continue
        for procs in $(find "$cg" -name cgroup.procs); do
            for pid in $(cat "$procs"); do say "LEFTOVER $pid $(tr '\0' ' ' </proc/$pid/cmdline 2>/dev/null)"; kill -KILL "$pid"; done
        done
        wait_for 10 bash -c "[ -z \"\$(find '$cg' -name cgroup.procs -exec cat {} +)\" ]"
        find "$cg" -depth -type d -exec rmdir {} \; 2>/dev/null
    done
    say "DOWN"
    exit $status
}
trap teardown EXIT
trap 'exit 1' TERM INT HUP

[ "$(id -u)" -eq 0 ] || fail "needs root (mount namespace, cgroups)"
[ -x /lib/systemd/systemd ] && [ -x /lib/systemd/systemd-journald ] || fail "no /lib/systemd/systemd or systemd-journald"

# A cgroup of the manager's own, so it does not take over the machine's cgroup tree (a
# user manager treats the cgroup it starts in as its root). With cgroup v1 or hybrid,
# only the named systemd hierarchy and the unified one stay visible to it.
name=extensiond-test-$$
if [ "$(stat -fc %T /sys/fs/cgroup)" = cgroup2fs ]; then
    mkdir "/sys/fs/cgroup/$name"; cgroups+=("/sys/fs/cgroup/$name")
    manager_cgroups=("/sys/fs/cgroup/$name")
else
    kept=()
    for h in systemd unified; do
        [ -d "/sys/fs/cgroup/$h" ] || continue
        mkdir -p "$work/.cgroup-$h"
        mount --bind "/sys/fs/cgroup/$h" "$work/.cgroup-$h"
        kept+=("$h")
    done
    [ ${#kept[@]} -gt 0 ] || fail "no systemd cgroup hierarchy"
    mount -t tmpfs -o mode=0755 tmpfs /sys/fs/cgroup
    manager_cgroups=()
    for h in "${kept[@]}"; do
        mkdir "/sys/fs/cgroup/$h"
        mount --move "$work/.cgroup-$h" "/sys/fs/cgroup/$h"
        rmdir "$work/.cgroup-$h"
        mkdir "/sys/fs/cgroup/$h/$name"
        cgroups+=("/sys/fs/cgroup/$h/$name")
        manager_cgroups+=("/sys/fs/cgroup/$h/$name")
    done
fi

# A fresh /run: no trace of the host's /run/systemd, /run/user or /run/log.
mount -t tmpfs -o mode=0755 tmpfs /run
mkdir -p /run/systemd/system "$runtime" "$root"
chmod 0700 "$runtime"
mount --bind "$work" "$root"
mkdir -p "$root/bin"
mount --bind "$bindir" "$root/bin"
# The journal stays in memory, and private, even where /var/log/journal exists.
if [ -d /var/log/journal ]; then mount -t tmpfs tmpfs /var/log/journal; fi

/lib/systemd/systemd-journald >>"$log" 2>&1 &
journald=$!
wait_for 10 test -S /run/systemd/journal/socket || fail "journald did not start"
wait_for 10 test -S /run/systemd/journal/stdout || fail "journald has no stdout socket"

export XDG_RUNTIME_DIR=$runtime XDG_CONFIG_HOME=$root/config
# StateDirectory= of the user unit (ids.json) lands in the work directory, not in ~/.local/state.
export XDG_STATE_HOME=$root/state
# Only the test's units and the stock ones (targets, slices): not the host's enabled user
# units (/etc/systemd/user: gpg-agent, dbus…).
export SYSTEMD_UNIT_PATH=$XDG_CONFIG_HOME/systemd/user:/usr/lib/systemd/user
# The manager's own messages (unit failures, watchdog timeouts) go to the journal too.
export SYSTEMD_LOG_TARGET=journal
mkdir -p "$XDG_CONFIG_HOME/systemd/user"
unset DBUS_SESSION_BUS_ADDRESS NOTIFY_SOCKET LISTEN_FDS LISTEN_PID WATCHDOG_USEC WATCHDOG_PID JOURNAL_STREAM INVOCATION_ID
cgroup_list="${manager_cgroups[*]}"
bash -c 'for cg in '"$cgroup_list"'; do echo $$ >"$cg/cgroup.procs"; done; exec /lib/systemd/systemd --user' </dev/null >>"$log" 2>&1 &
manager=$!
running() { case "$(systemctl --user is-system-running 2>/dev/null)" in running | degraded) return 0 ;; esac; return 1; }
wait_for 30 running || fail "the user manager did not reach running: $(systemctl --user is-system-running 2>&1)"
# A booted PID 1 provides /run/systemd/inaccessible (the nodes masking paths in service
# namespaces, e.g. for ProtectKernelTunables=); a root user manager uses them too. Lend it
# the set the manager made in its runtime directory.
mkdir -p /run/systemd/inaccessible
mount --bind "$runtime/systemd/inaccessible" /run/systemd/inaccessible

say "READY $$"
# Serve until stdin closes.
while read -r line; do
    [ "$line" = stop ] && break
done
