#!/bin/bash
# The real-target scenario (Tests/VM/run.sh runs it as root in a Debian 12 guest with systemd as
# PID 1 and cgroup v2 alone, after installing the packages of dist/ with apt-get). It uses the
# daemon only through the units as shipped: no drop-in, no daemon started by hand.
#
# Boot 1: install, socket activation, launch/dismiss/resume, the freezer, limits, the memory
#   limit, the sandbox, a shared container, reset, reexec, a package upgrade, restart, stop;
#   then reboots with an extension suspended.
# Boot 2: containers and uids kept across the reboot, a clean stop at shutdown, the user unit
#   under a user manager, then purge.
set -u
files=/vmtest/files
# shellcheck source=files/lib.sh
. "$files/lib.sh"
state=/var/lib/vmtest
probe=org.vmtest.probe
peer=org.vmtest.peer
group=group.org.vmtest

manifest() { # NAME JSON
    printf '%s\n' "$2" >"/etc/extensiond/extensions/$1.json"
}

boot1() {
    echo "--- install"
    for p in extensiond libextensionruntimec0 libextensionruntimec-dev libextensionhostc0 libextensionhostc-dev python3-extension-runtime; do
        check "$p installed" "install ok installed" "$(dpkg-query -W -f '${Status}' "$p" 2>&1)"
    done
    check "extensiond.socket enabled" enabled "$(systemctl is-enabled extensiond.socket)"
    check "extensiond.socket listening" active "$(systemctl is-active extensiond.socket)"
    check "extensiond.service not started before a connection" inactive "$(systemctl is-active extensiond.service)"
    check "systemd-analyze security extensiond.service ≤ 4.3" yes \
        "$(systemd-analyze security extensiond.service 2>/dev/null | awk '/Overall exposure level/ { print ($(NF-2) <= 4.3) ? "yes" : "no (" $(NF-2) ")" }')"

    echo "--- manifests (in /etc/extensiond/extensions; the probe in /opt)"
    install -d -m 0755 /opt/vmtest /etc/extensiond/extensions
    install -m 0755 "$files/probe.py" /opt/vmtest/probe.py
    install -m 0755 "$files/app.sh" /opt/vmtest/app.sh
    manifest app "{\"kind\": \"app\", \"id\": \"org.vmtest.app\", \"groups\": [\"$group\"], \"urlSchemes\": [\"vmtest\"],
        \"executable\": \"/opt/vmtest/app.sh\"}"
    manifest probe "{\"id\": \"$probe\", \"point\": \"widget\", \"executable\": \"/opt/vmtest/probe.py\", \"app\": \"org.vmtest.app\",
        \"sharedContainers\": [\"$group\"],
        \"limits\": {\"memoryMaxBytes\": 268435456, \"tasksMax\": 40, \"cpuWeight\": 30}}"
    manifest peer "{\"id\": \"$peer\", \"point\": \"widget\", \"executable\": \"/opt/vmtest/probe.py\",
        \"sharedContainers\": [\"$group\"], \"network\": false}"
    manifest frozen '{"id": "org.vmtest.frozen", "point": "widget", "executable": "/opt/vmtest/probe.py", "policy": {"suspend": "freeze"}}'
    manifest hog '{"id": "org.vmtest.hog", "point": "widget", "executable": "/opt/vmtest/probe.py", "limits": {"memoryMaxBytes": 67108864}}'
    manifest quota '{"id": "org.vmtest.quota", "point": "widget", "executable": "/opt/vmtest/probe.py", "limits": {"diskMaxBytes": 4194304}}'

    echo "--- socket activation"
    list=$(extctl list 2>&1)
    echo "$list"
    check "the first extctl starts the service" active "$(systemctl is-active extensiond.service)"
    check_match "extctl list shows the probe" "$probe +not-running" "$list"
    journalctl -b --no-pager -q | grep -iE "extensiond|vmtest" | grep -viE "vmtest-run|vmtest.service" | tail -25

    echo "--- launch, dismiss (stopped: T), resume (same pid)"
    out=$(talk "$probe" ping)
    echo "$out"
    pid=$(head -1 <<<"$out")
    # It is the first process of a pid namespace of its own: its getpid() is 1.
    check_match "the probe launches and answers, as pid 1 of its own namespace" "^pong 1 [0-9]+$" "$(sed -n 2p <<<"$out")"
    check "its NSpid on the host ends in 1" 1 "$(awk '/^NSpid:/ { print $NF }' "/proc/$pid/status")"
    # The child drops each capability of the bounding set it was cloned with (the unit's).
    check "no capability, not even in its bounding set" "0000000000000000 0000000000000000 0000000000000000" \
        "$(awk '/^CapPrm:|^CapEff:|^CapBnd:/ { printf "%s%s", sep, $2; sep = " " }' "/proc/$pid/status")"
    check_match "the daemon keeps the unit's bounding set (not empty)" "^0*[1-9a-f][0-9a-f]*$" \
        "$(awk '/^CapBnd:/ { print $2 }' "/proc/$(systemctl show -p MainPID --value extensiond.service)/status")"
    check "extctl open exits 0" "exit 0" "$(tail -1 <<<"$out")"
    wait_until 20 is_state "$probe" suspended
    check "dismissed: suspended" suspended "$(status "$probe" "e['state']")"
    check "dismissed: its process is stopped (T)" T "$(proc_state "$pid")"
    uid=$(sed -n 2p <<<"$out" | cut -d' ' -f3)
    check "the probe runs under a uid of its own" True "$(status "$probe" "e['credentials']['ownUID'] and e['credentials']['uid'] == $uid")"
    out=$(talk "$probe" ping)
    check "resumed with the same pid" "$pid" "$(head -1 <<<"$out")"
    check_match "the resumed probe answers" "^pong 1 " "$(sed -n 2p <<<"$out")"
    cgroup=$(status "$probe" "e['cgroup']")
    check_match "its cgroup is under the service's" "^/sys/fs/cgroup/system.slice/extensiond.service/.+$probe$" "$cgroup"

    echo "--- D-Bus: org.extensiond1 on the system bus (docs/dbus.md)"
    check "the daemon owns org.extensiond1" yes "$(busctl status org.extensiond1 >/dev/null 2>&1 && echo yes)"
    check_match "busctl tree lists the probe's object" "/org/extensiond1/extension/org_2evmtest_2eprobe" "$(busctl tree org.extensiond1 2>&1)"
    check "State over D-Bus is extctl's" "s \"$(status "$probe" "e['state']")\"" \
        "$(busctl get-property org.extensiond1 /org/extensiond1/extension/org_2evmtest_2eprobe org.extensiond1.Extension State 2>&1)"
    # busctl keeps the descriptor until it exits, and its leaving the bus dismisses the request.
    out=$(busctl call org.extensiond1 /org/extensiond1 org.extensiond1.Manager Begin 'sa{sv}' "$probe" 0 2>&1)
    check_match "Begin over D-Bus: a request object and a descriptor" '^oh "/org/extensiond1/request/[0-9]+" [0-9]+$' "$out"
    wait_until 20 is_state "$probe" suspended
    check "the caller gone: dismissed, suspended with the same pid" "suspended $pid" "$(status "$probe" "e['state'] + ' ' + str(e['pid'])")"
    out=$(setpriv --reuid=65534 --regid=65534 --clear-groups busctl call org.extensiond1 /org/extensiond1 org.extensiond1.Manager Kill si "$probe" 15 2>&1)
    check_match "Kill from a non-administrator is refused" "needs root" "$out"
    check_match "a non-administrator lists the extensions" "org.vmtest.probe" \
        "$(setpriv --reuid=65534 --regid=65534 --clear-groups busctl call org.extensiond1 /org/extensiond1 org.extensiond1.Manager ListExtensions 2>&1)"

    echo "--- limits (cgroup v2 controllers, delegated)"
    check "memory.max from the manifest" 268435456 "$(cat "$cgroup/memory.max" 2>&1)"
    check "pids.max from the manifest" 40 "$(cat "$cgroup/pids.max" 2>&1)"
    check "cpu.weight from the manifest" 30 "$(cat "$cgroup/cpu.weight" 2>&1)"
    check "limits enforced by the cgroup" "cgroup cgroup cgroup" \
        "$(status "$probe" "' '.join(e['limits'][k]['enforcedBy'] for k in ('memoryMaxBytes', 'tasksMax', 'cpuWeight'))")"
    out=$(talk "$probe" "spawn 60")
    check_match "tasksMax stops a fork bomb at pids.max (40 tasks)" "^spawned ([0-9]|[1-3][0-9])$" "$(sed -n 2p <<<"$out")"

    echo "--- suspend: freeze (cgroup.freeze)"
    out=$(talk org.vmtest.frozen ping)
    fpid=$(head -1 <<<"$out")
    wait_until 20 is_state org.vmtest.frozen suspended
    fcgroup=$(status org.vmtest.frozen "e['cgroup']")
    check "frozen: cgroup.freeze is 1" 1 "$(cat "$fcgroup/cgroup.freeze" 2>&1)"
    check "frozen: cgroup.events says frozen" "frozen 1" "$(grep frozen "$fcgroup/cgroup.events" 2>&1)"
    check_match "frozen: the process is not stopped (not T)" "^[SRD]$" "$(proc_state "$fpid")"
    check "the point's limits: memory.max" 2147483648 "$(cat "$fcgroup/memory.max" 2>&1)"
    check "the point's limits: pids.max" 64 "$(cat "$fcgroup/pids.max" 2>&1)"
    check "the point's limits: cpu.weight" 50 "$(cat "$fcgroup/cpu.weight" 2>&1)"
    out=$(talk org.vmtest.frozen ping)
    check "thawed with the same pid" "$fpid" "$(head -1 <<<"$out")"

    echo "--- over its memory limit: memory-limit"
    since=$(date '+%Y-%m-%d %H:%M:%S')
    out=$(talk org.vmtest.hog "alloc 200")
    echo "$out"
    wait_until 20 is_state org.vmtest.hog not-running
    check "the hog's last exit is memory-limit" memory-limit "$(status org.vmtest.hog "e['lastExit']['reason']")"
    check_no_match "no 'cannot read …/memory.events' in the journal" "memory.events" "$(journalctl -u extensiond --since "$since" --no-pager -q)"

    echo "--- the sandbox: HOME kept across a relaunch, private /tmp, network false"
    out=$(talk "$probe" "home-write kept-across-relaunch" "tmp-write probe-marker" "tmp-list")
    echo "$out"
    check "the probe writes its HOME" written "$(sed -n 2p <<<"$out")"
    check "the probe writes its /tmp" written "$(sed -n 3p <<<"$out")"
    check "the probe's /tmp has only its own file" "tmp: probe-marker" "$(sed -n 4p <<<"$out")"
    check "the host's /tmp does not have it" absent "$([ -e /tmp/probe-marker ] && echo present || echo absent)"
    home=$(status "$probe" "e['container']")
    check "HOME is owned by the probe's uid, mode 700" "$uid 700" "$(stat -c '%u %a' "$home" 2>&1)"
    extctl kill "$probe"
    wait_until 20 is_state "$probe" not-running
    out=$(talk "$probe" home-read tmp-list)
    check "HOME is kept across a relaunch" "home: kept-across-relaunch" "$(sed -n 2p <<<"$out")"
    check "/tmp is new at a relaunch" "tmp:" "$(sed -n 3p <<<"$out")"
    check_match "each sandboxed launch copies the view's template" "the shared part of the file system view made" "$(journalctl -u extensiond --no-pager -q -o cat | grep -m1 'the shared part of the file system view made')"
    check_no_match "the unit lets the child enter the template (no 'no template')" "no template of the file system view" "$(journalctl -u extensiond --no-pager -q -o cat)"
    # An address of the host that is not loopback: one end of a veth pair.
    ip link add vmtsta type veth peer name vmtstb && ip addr add 10.213.7.1/32 dev vmtsta && ip link set vmtsta up && ip link set vmtstb up
    python3 -m http.server --bind 10.213.7.1 8765 >/dev/null 2>&1 &
    server=$!
    python3 -m http.server --bind 127.0.0.1 8766 >/dev/null 2>&1 &
    loopback=$!
    python3 -c 'import signal, socket; s = socket.socket(socket.AF_UNIX); s.bind("\0vmtest-host-service"); s.listen(); signal.pause()' &
    abstract=$!
    wait_until 20 python3 -c 'import socket; socket.create_connection(("10.213.7.1", 8765), 1); socket.create_connection(("127.0.0.1", 8766), 1)'
    check "the networked probe reaches an address of the host through its point's stack" connected "$(talk "$probe" "connect 10.213.7.1 8765" | sed -n 2p)"
    check_match "the networked probe does not reach the host's loopback" "^error: ConnectionRefusedError" "$(talk "$probe" "connect 127.0.0.1 8766" | sed -n 2p)"
    check_match "nor the host's abstract unix sockets" "^error: ConnectionRefusedError" "$(talk "$probe" "abstract vmtest-host-service" | sed -n 2p)"
    check_match "\"network\": false reaches neither" "^error: (ConnectionRefusedError|OSError)" "$(talk "$peer" "connect 10.213.7.1 8765" | sed -n 2p)"
    probe_pid=$(status "$probe" "e['pid']")
    check "the networked probe has a network namespace of its own" different \
        "$([ "$(readlink "/proc/$probe_pid/ns/net")" != "$(readlink /proc/self/ns/net)" ] && echo different)"
    check_match "its point's stack is a slirp4netns, child of the daemon" "^slirp4netns$" \
        "$(ps -o comm= --ppid "$(systemctl show -p MainPID --value extensiond.service)" | grep -m1 slirp4netns)"
    kill "$server" "$loopback" "$abstract"
    ip link del vmtsta

    echo "--- the container's size: a project quota where the file system has them"
    # Its container is the root of an ext4 of its own with project quotas (mkfs -O
    # project,quota, mounted prjquota), made where the daemon makes containers, before its
    # first launch.
    qdir=/var/lib/extensiond/extensions/org.vmtest.quota
    truncate -s 64M /var/tmp/vmtest-quota.img && mkfs.ext4 -q -O project,quota /var/tmp/vmtest-quota.img
    mkdir -p "$qdir" && mount -o loop,prjquota /var/tmp/vmtest-quota.img "$qdir" && rmdir "$qdir/lost+found"
    check "the test's ext4 enforces project quotas" yes "$(findmnt -n -o OPTIONS "$qdir" | grep -q prjquota && echo yes)"
    # What it had before (an older daemon's, say): a directory it made unreadable to itself
    # (write and search only), which the daemon's walk must still tag.
    quid=$(status org.vmtest.quota "e['credentials']['uid']")
    install -d -o "$quid" -g "$quid" -m 0300 "$qdir/locked"
    out=$(talk org.vmtest.quota "home-fill first 1048576")
    echo "$out"
    check "under its limit (4 MiB) it writes 1 MiB" "written 1048576" "$(sed -n 2p <<<"$out")"
    limited() { journalctl -u extensiond --no-pager -q -o cat | grep -q "org.vmtest.quota: its container is limited to 4194304 bytes by the file system"; }
    wait_until 30 limited
    check "the daemon put its container under a project quota" yes "$(limited && echo yes)"
    check "the container is tagged with the extension's uid as project id, inherited (lsattr -p)" "$quid P" \
        "$(lsattr -d -p "$qdir" 2>&1 | awk '{ print $1, ($2 ~ /P/) ? "P" : "-" }')"
    check "so is the directory it made unreadable to itself" "$quid P" \
        "$(lsattr -d -p "$qdir/locked" 2>&1 | awk '{ print $1, ($2 ~ /P/) ? "P" : "-" }')"
    out=$(talk org.vmtest.quota "home-fill locked/second 4194304" "home-fill third 65536" ping)
    echo "$out"
    check_match "past its limit the file system refuses the write, there too" "^error: OSError: \[Errno 122\] Disk quota exceeded" "$(sed -n 2p <<<"$out")"
    check_match "it is refused, not killed: it still answers" "^pong 1 " "$(sed -n 4p <<<"$out")"
    used=$(du -sk --apparent-size "$qdir" | cut -f1)
    check "its container holds no more than its limit" yes "$([ "$used" -le 4096 ] && echo yes || echo "no: $used KiB")"
    check "nor was it ended for its size" 0 "$(journalctl -u extensiond --no-pager -q -o cat | grep -c 'org.vmtest.quota: its container holds more than')"
    extctl kill org.vmtest.quota >/dev/null 2>&1
    wait_until 20 is_state org.vmtest.quota not-running
    umount "$qdir" && rm -f /var/tmp/vmtest-quota.img

    echo "--- a shared container used by two extensions"
    out=$(talk "$probe" "shared-write $group note from-probe")
    check "the probe writes into the shared container" written "$(sed -n 2p <<<"$out")"
    out=$(talk "$peer" "shared-read $group note" "shared-write $group reply from-peer")
    check "the peer reads what the probe wrote" "shared: from-probe" "$(sed -n 2p <<<"$out")"
    check "the peer writes into it" written "$(sed -n 3p <<<"$out")"
    out=$(talk "$probe" "shared-read $group reply")
    check "the probe reads the peer's file" "shared: from-peer" "$(sed -n 2p <<<"$out")"
    shared=$(extctl container "$group" 2>&1)
    check_match "the shared container's group owns it, nobody else reads it" "^root [0-9]+ 770$" "$(stat -c '%U %g %a' "$shared" 2>&1)"

    echo "--- the containing app: its URL opens it as a transient service; shared defaults"
    rm -f /tmp/vmtest-opened
    out=$(talk "$probe" "open-url vmtest://item/42")
    echo "$out"
    journalctl -b --no-pager -o cat MESSAGE_ID=5f3c0e7e2a9b4d1c8e6f1a2b3c4d5e6f | tail -3
    check "the probe's open of its app's scheme answers True" "opened True" "$(sed -n 2p <<<"$out")"
    wait_until 20 test -s /tmp/vmtest-opened || journalctl -b --no-pager -o cat -u 'app-extensiond-*' | tail -5
    check "the app got the URL" "vmtest://item/42" "$(head -1 /tmp/vmtest-opened 2>&1)"
    check_match "the app ran as a transient service of its own" "app-extensiond-org.vmtest.app@[0-9]+.service" "$(sed -n 2p /tmp/vmtest-opened 2>&1)"
    check "the app ran as its own uid" "$(extctl list --json | python3 -c 'import json, sys; print([a["uid"] for a in json.load(sys.stdin)["apps"]][0])')" "$(sed -n 3p /tmp/vmtest-opened 2>&1)"
    check "a scheme nobody declares answers False" "opened False" "$(talk "$probe" "open-url nobody-declares://x" | sed -n 2p)"
    check "the probe writes a default of its app's group" set "$(talk "$probe" "defaults-set $group theme dark" | sed -n 2p)"
    check "extctl defaults reads it" '"dark"' "$(extctl defaults "$group" theme 2>&1)"
    extctl defaults "$group" theme light
    check "the probe reads the administrator's write" "value light" "$(talk "$probe" "defaults-get $group theme" | sed -n 2p)"
    check "the suite is kept in the state directory, 0600" "600" "$(stat -c %a "/var/lib/extensiond/defaults/$group" 2>&1)"

    echo "--- secrets: sealed with systemd-creds, never in clear"
    check "the probe adds a secret" added "$(talk "$probe" "secret-add api.example.com alice vm-SECRET-7c1e" | sed -n 2p)"
    check "the probe reads it back" "found vm-SECRET-7c1e in $group" "$(talk "$probe" "secret-copy api.example.com alice" | sed -n 2p)"
    check_match "extctl secrets list shows its label, not its data" "$group +generic-password +token of alice" "$(extctl secrets list 2>&1)"
    check "the key is sealed with systemd-creds (key.cred, no plain key)" "cred" \
        "$([ -f /var/lib/extensiond/secrets/key.cred ] && [ ! -e /var/lib/extensiond/secrets/key ] && echo cred || ls -l /var/lib/extensiond/secrets)"
    check "the secret is in no file of the state directory" "" "$(grep -r -l -a vm-SECRET-7c1e /var/lib/extensiond)"
    check "nor in the journal" "" "$(journalctl -b --no-pager -q | grep -c vm-SECRET-7c1e | grep -v '^0$')"

    echo "--- background transfers: the installed worker, its own uid, the file in the container"
    # The server is on an address of its own (the worker refuses loopback addresses by default).
    ip addr add 192.0.2.10/32 dev lo
    mkdir -p /tmp/vmtest-serve
    head -c 3000000 /dev/urandom >/tmp/vmtest-serve/payload.bin
    python3 -m http.server --bind 192.0.2.10 --directory /tmp/vmtest-serve 18080 >/dev/null 2>&1 &
    served=$!
    wait_until 20 python3 -c 'import socket; socket.create_connection(("192.0.2.10", 18080), timeout=1)'
    out=$(talk "$probe" "transfer-download $group vm1 http://192.0.2.10:18080/payload.bin inbox/payload.bin")
    check "the probe creates a download (its point allows them)" "created 1" "$(sed -n 2p <<<"$out")"
    wait_until 60 sh -c 'extctl transfers --json | grep -q "\"state\":\"completed\""' || extctl transfers
    check_match "extctl transfers lists it, completed" "^1 +org\.vmtest\.app +$group/vm1 +download +completed" "$(extctl transfers 2>&1 | sed -n 2p)"
    check "the file is in the shared container, whole" "$(sha256sum </tmp/vmtest-serve/payload.bin)" "$(sha256sum <"$shared/inbox/payload.bin" 2>&1)"
    check_match "the worker is the installed one, under a uid of its own" \
        "the transfer worker runs: /usr/libexec/extensiond/extensiond-transfer, pid [0-9]+, uid [1-9][0-9]+" \
        "$(journalctl -b --no-pager -o cat -u extensiond.service | grep 'the transfer worker runs' | tail -1)"
    check "the task is kept in the state directory" "600" "$(stat -c %a /var/lib/extensiond/transfers/tasks/1 2>&1)"
    # The probe may get (and handle) the failure before anyone lists the task: the journal says it.
    out=$(talk "$probe" "transfer-download $group vm2 http://127.0.0.1:18080/payload.bin")
    check "the probe creates a download from a loopback URL" "created 2" "$(sed -n 2p <<<"$out")"
    wait_until 60 sh -c 'journalctl -b --no-pager -o cat -u extensiond.service | grep -q "transfer 2 failed: refused: a connection to a loopback"' \
        || journalctl -b --no-pager -o cat -u extensiond.service | grep "transfer 2" | tail -5
    check_match "a loopback URL fails for good: the worker refuses it" "transfer 2 failed: refused: a connection to a loopback" \
        "$(journalctl -b --no-pager -o cat -u extensiond.service | grep 'transfer 2 failed' | tail -1)"
    kill "$served"

    echo "--- locks at suspension: an exclusive lock in a shared container ends the holder"
    out=$(talk "$peer" "lock $group app.lock")
    check "the peer takes an exclusive lock in the shared container" locked "$(sed -n 2p <<<"$out")"
    wait_until 20 is_state "$peer" not-running
    check "it is ended at the dismiss, not suspended with the lock" lock-held-at-suspend "$(status "$peer" "e['lastExit']['reason']")"

    echo "--- extctl reset"
    talk "$probe" "home-write to-be-reset" >/dev/null
    out=$(extctl reset "$probe" 2>&1; echo "exit $?")
    check "extctl reset succeeds" "exit 0" "$out"
    out=$(talk "$probe" home-read)
    check "after reset, HOME is empty" "home: (none)" "$(sed -n 2p <<<"$out")"

    echo "--- extctl reexec (extensions kept)"
    talk "$probe" "home-write kept-across-reboot" >/dev/null
    pid=$(status "$probe" "e['pid']")
    wait_until 20 is_state "$probe" suspended
    main=$(systemctl show -p MainPID --value extensiond.service)
    out=$(extctl reexec 2>&1; echo "exit $?")
    echo "$out"
    check "extctl reexec succeeds" "exit 0" "$(tail -1 <<<"$out")"
    check "the daemon keeps its pid" "$main" "$(systemctl show -p MainPID --value extensiond.service)"
    check "the probe keeps its pid and stays suspended" "$pid suspended T" "$(status "$probe" "e['pid']") $(status "$probe" "e['state']") $(proc_state "$pid")"

    echo "--- a package upgrade (extensions kept)"
    version=$(dpkg-query -W -f '${Version}' extensiond)
    DEBIAN_FRONTEND=noninteractive apt-get install -y /vmtest/upgrade/extensiond_*.deb >/tmp/upgrade.log 2>&1
    check "apt-get installs the newer package" 0 "$?"
    check_match "the version changed" "vmtest" "$(dpkg-query -W -f '${Version}' extensiond) (from $version)"
    check "the daemon keeps its pid across the upgrade" "$main" "$(systemctl show -p MainPID --value extensiond.service)"
    check "the probe keeps its pid across the upgrade" "$pid suspended" "$(status "$probe" "e['pid']") $(status "$probe" "e['state']")"
    out=$(talk "$probe" ping)
    check "the probe resumes after the upgrade" "$pid" "$(head -1 <<<"$out")"

    echo "--- restart and stop (no extension process left)"
    wait_until 20 is_state "$probe" suspended
    systemctl restart extensiond.service
    check "restart: the old probe process is gone" - "$(proc_state "$pid")"
    check "restart: the service is active" active "$(systemctl is-active extensiond.service)"
    talk "$probe" ping >/dev/null
    pid=$(status "$probe" "e['pid']")
    systemctl stop extensiond.service
    check "stop: the probe process is gone" - "$(proc_state "$pid")"
    check "stop: no process of the probe's uid is left" "" "$(pgrep -u "$uid" | tr '\n' ' ')"
    check "stop: no extension cgroup is left" absent "$([ -d /sys/fs/cgroup/system.slice/extensiond.service/extensions/$probe ] && echo present || echo absent)"

    echo "--- before the reboot: an extension suspended at shutdown"
    out=$(talk "$probe" ping)
    check_match "the socket starts the service again" "^pong " "$(sed -n 2p <<<"$out")"
    wait_until 20 is_state "$probe" suspended
    echo "$uid" >"$state/probe-uid"
    stat -c %g "$shared" >"$state/group-gid"
    return 100
}

boot2() {
    echo "--- after the reboot: containers and uids kept"
    out=$(talk "$probe" ping home-read)
    echo "$out"
    check "the probe keeps its uid" "$(cat "$state/probe-uid")" "$(sed -n 2p <<<"$out" | cut -d' ' -f3)"
    check "the probe's HOME is kept" "home: kept-across-reboot" "$(sed -n 3p <<<"$out")"
    check "the shared container keeps its group" "$(cat "$state/group-gid")" "$(stat -c %g "$(extctl container "$group")" 2>&1)"
    out=$(talk "$peer" "shared-read $group note")
    check "the shared container's files are kept" "shared: from-probe" "$(sed -n 2p <<<"$out")"
    check "the secret is kept across the reboot (its key unsealed again)" "found vm-SECRET-7c1e in $group" "$(talk "$probe" "secret-copy api.example.com alice" | sed -n 2p)"
    check "the shared default is kept" "value light" "$(talk "$probe" "defaults-get $group theme" | sed -n 2p)"

    echo "--- the previous boot's shutdown was clean"
    # From the last "Stopping" of the service in the previous boot (the shutdown) to its end.
    journal=$(journalctl -b -1 -u extensiond.service --no-pager -q -o cat 2>&1 | awk '/^Stopping /{ buf = "" } { buf = buf $0 "\n" } END { printf "%s", buf }')
    echo "$journal"
    check_match "the service was stopping at shutdown" "^Stopping " "$journal"
    check_no_match "no Failed or timeout for extensiond in the previous boot" "Failed|[Tt]ime(d)? ?out|SIGKILL|core-dump" "$journal"
    check_match "the daemon stopped at shutdown" "Stopped extensiond|Deactivated successfully|Stopped Extension" "$journal"

    echo "--- the user unit, under a user manager"
    useradd -m -s /bin/bash vmuser
    loginctl enable-linger vmuser
    vuid=$(id -u vmuser)
    wait_until 60 systemctl is-active --quiet "user@$vuid.service"
    check "vmuser's manager runs (linger)" active "$(systemctl is-active "user@$vuid.service")"
    systemctl is-active --quiet "user@$vuid.service" || journalctl -b -u "user@$vuid.service" --no-pager -q | tail -20
    as_user=(runuser -u vmuser -- env XDG_RUNTIME_DIR=/run/user/$vuid DBUS_SESSION_BUS_ADDRESS=unix:path=/run/user/$vuid/bus)
    "${as_user[@]}" systemctl --user enable --now extensiond.socket
    check "the user socket listens" active "$("${as_user[@]}" systemctl --user is-active extensiond.socket)"
    "${as_user[@]}" mkdir -p /home/vmuser/.local/share/extensiond/extensions
    "${as_user[@]}" sh -c "printf '%s' '{\"id\": \"org.vmtest.mine\", \"point\": \"widget\", \"executable\": \"/opt/vmtest/probe.py\"}' >/home/vmuser/.local/share/extensiond/extensions/mine.json"
    EXTCTL=("${as_user[@]}" extctl)
    out=$(talk org.vmtest.mine ping)
    echo "$out"
    upid=$(head -1 <<<"$out")
    [[ $upid =~ ^[0-9]+$ ]] || journalctl _UID="$vuid" --no-pager -q -o cat | tail -30
    check_match "the user's extension launches under the user daemon, as pid 1 of its own namespace" "^pong 1 $vuid$" "$(sed -n 2p <<<"$out")"
    wait_until 20 is_state org.vmtest.mine suspended
    check "the user's extension is stopped at dismiss" T "$(proc_state "$upid")"
    check_match "it has a cgroup under the user's service" "^/sys/fs/cgroup/user.slice/user-$vuid.slice/user@$vuid.service/.*org.vmtest.mine$" \
        "$(status org.vmtest.mine "e['cgroup']")"
    "${as_user[@]}" systemctl --user stop extensiond.service extensiond.socket
    check "stopping the user service ends its extension" - "$(proc_state "$upid")"
    EXTCTL=(extctl)

    echo "--- purge"
    systemctl is-active --quiet extensiond.service && talk "$probe" ping >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get purge -y extensiond libextensionruntimec0 libextensionruntimec-dev libextensionhostc0 libextensionhostc-dev python3-extension-runtime >/tmp/purge.log 2>&1
    check "apt-get purge succeeds" 0 "$?"
    for d in /var/lib/extensiond /etc/extensiond /lib/systemd/system/extensiond.service /usr/bin/extensiond; do
        check "purge removes $d" absent "$([ -e "$d" ] && echo present || echo absent)"
    done
    check "no extensiond process is left" "" "$(pgrep -x extensiond | tr '\n' ' ')"
    check "no process of the probe's uid is left" "" "$(pgrep -u "$(cat "$state/probe-uid")" | tr '\n' ' ')"
    return 0
}

case "${VMTEST_BOOT:-1}" in
    1) boot1 ;;
    2) boot2 ;;
    *) echo "unexpected boot ${VMTEST_BOOT}"; exit 1 ;;
esac
