#!/usr/bin/env bash
# Boots a Debian 12 VM (systemd as PID 1, unified cgroup v2), installs the .deb files of a dist
# directory in it at first boot, runs a scenario script there, and prints its log.
# (Adopted from shared/vm/ of the project's steering repository; .ci/run runs Tests/VM/target.sh.)
#
#   run.sh SCENARIO [DIST_DIR]
#
#   SCENARIO   a path to a bash script. It runs as root in the
#              guest (vmtest.service, after multi-user.target) with VMTEST_BOOT=1, 2, …; exit
#              status 100 reboots the guest and runs it again (at most 3 boots).
#   DIST_DIR   where the .deb files are (default $SRC/dist). Installed with apt-get in the guest.
#
# Environment: VM_DIR (/var/tmp/extensiond-vm: base image, runs), SRC (the checkout you run it from: its examples/ is
# copied to /vmtest/src/examples in the guest, and Tests/VM/files/ to /vmtest/files),
# VM_UPGRADE (a directory of .deb files copied to /vmtest/upgrade, for a scenario's upgrade),
# VM_MEM (2048 MiB), VM_CPUS (2), VM_DISK (4G), VM_TIMEOUT (1800 s for the whole VM), VM_ACCEL (kvm or tcg; default kvm when it works),
# VM_APPEND (more kernel arguments), VM_KEEP=1 (keep disk.img); VMTEST_* variables are passed
# to the scenario.
# The base image is built by build-base.sh the first time (debootstrap: a few minutes).
# Output: $VM_DIR/runs/DATE-NAME/{console.log,scenario.log}; the exit status is 0 when the
# guest reached "VMTEST DONE" and no check failed (lines "CHECK FAIL").
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
VM_DIR=${VM_DIR:-/var/tmp/extensiond-vm}
SRC=${SRC:-$(git rev-parse --show-toplevel 2>/dev/null || pwd)}
[ $# -ge 1 ] || { sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
scenario=$1
[ -f "$scenario" ] || { echo "run.sh: no scenario $1" >&2; exit 2; }
dist=${2:-$SRC/dist}
name=$(basename "$scenario" .sh)
t0=$(date +%s)

VM_DIR=$VM_DIR "$here/build-base.sh"
base=$VM_DIR/base
run=$VM_DIR/runs/$(date +%Y%m%d-%H%M%S)-$name
stage=$run/rootfs
mkdir -p "$run"
echo "==> staging $run"
cp -a "$base/rootfs" "$stage"
install -m 0755 "$here/guest/vmtest-run" "$stage/usr/local/sbin/vmtest-run"
install -m 0644 "$here/guest/vmtest.service" "$stage/etc/systemd/system/vmtest.service"
ln -sf /etc/systemd/system/vmtest.service "$stage/etc/systemd/system/multi-user.target.wants/vmtest.service"
mkdir -p "$stage/vmtest/debs" "$stage/vmtest/src"
if compgen -G "$dist/*.deb" >/dev/null; then
    cp "$dist"/*.deb "$stage/vmtest/debs/"
    ls "$stage/vmtest/debs" | sed 's/^/    deb: /'
else
    echo "run.sh: warning: no .deb in $dist; nothing is installed" >&2
fi
[ ! -d "$SRC/examples" ] || cp -r "$SRC/examples" "$stage/vmtest/src/"
cp -r "$here/files" "$stage/vmtest/files"
if [ -n "${VM_UPGRADE:-}" ]; then
    mkdir -p "$stage/vmtest/upgrade"
    cp "$VM_UPGRADE"/*.deb "$stage/vmtest/upgrade/"
fi
install -m 0755 "$scenario" "$stage/vmtest/scenario.sh"
# Variables VMTEST_* of this environment reach the scenario.
env | grep '^VMTEST_' | sed "s/'/'\\\\''/g; s/=\(.*\)/='\1'/; s/^/export /" >"$stage/vmtest/env" || true
echo "==> disk image (mkfs.ext4 -d)"
truncate -s "${VM_DISK:-4G}" "$run/disk.img"
mkfs.ext4 -q -F -L vmroot -d "$stage" "$run/disk.img"
rm -rf "$stage"
t1=$(date +%s)

# KVM only where it can run the stock Debian kernel: probe it (the kernel must print its
# banner within 30 s). On a host whose /dev/kvm is PVM (kvm_pvm, no kvm_intel/kvm_amd), as on
# the machine this was written on, it cannot: "-cpu host" aborts ("failed to set MSR 0x10a"),
# other CPU models hang in the kernel's decompressor with no output. Then TCG.
# The probe's answer is kept in $VM_DIR/accel-HOSTKERNEL.
accel=${VM_ACCEL:-$(cat "$VM_DIR/accel-$(uname -r)" 2>/dev/null || true)}
if [ -z "$accel" ]; then
    accel=tcg
    if [ -w /dev/kvm ]; then
        probe=$run/kvm-probe.log
        timeout 30 qemu-system-x86_64 -accel kvm -cpu host -machine q35 -m 512 -nodefaults -no-user-config \
            -display none -no-reboot -kernel "$base/vmlinuz" -append "console=ttyS0 panic=-1" \
            -serial "file:$probe" >"$run/kvm-probe.err" 2>&1 || true
        if grep -q 'Linux version' "$probe" 2>/dev/null; then accel=kvm; else
            echo "    KVM cannot boot the guest kernel ($(ls -d /sys/module/kvm_pvm 2>/dev/null | sed 's|.*/||')$(head -c 200 "$run/kvm-probe.err" | tr '\n' ' ')): using TCG"
        fi
    fi
    echo "$accel" >"$VM_DIR/accel-$(uname -r)"
fi
if [ "$accel" = kvm ]; then cpu=(-cpu host); else cpu=(-cpu max); fi
echo "==> booting (accel=$accel, ${VM_CPUS:-2} CPUs, ${VM_MEM:-2048} MiB); console: $run/console.log"
: >"$run/scenario.log"
qemu=(qemu-system-x86_64 -accel "$accel" "${cpu[@]}" -machine q35 -m "${VM_MEM:-2048}" -smp "${VM_CPUS:-2}"
    -nodefaults -no-user-config -display none -nic none
    -kernel "$base/vmlinuz" -initrd "$base/initrd.img"
    -append "root=/dev/vda rw console=ttyS0 ${VM_APPEND:-}"
    -drive "file=$run/disk.img,if=virtio,format=raw"
    -serial "file:$run/console.log" -serial "file:$run/scenario.log")
printf '%q ' "${qemu[@]}" >"$run/qemu-command.txt"
tq=$(date +%s.%N)
timeout "${VM_TIMEOUT:-1800}" "${qemu[@]}" &
qpid=$!
# Wall-clock time from qemu's start to each boot's first line of the runner (multi-user.target).
seen=0
while kill -0 "$qpid" 2>/dev/null; do
    n=$(grep -c '^=== VMTEST boot ' "$run/scenario.log" || true)
    if [ "$n" -gt "$seen" ]; then
        seen=$n
        awk -v n="$n" -v a="$(date +%s.%N)" -v b="$tq" 'BEGIN { printf "    boot %d: runner started %.1f s after qemu started\n", n, a - b }'
    fi
    sleep 0.5
done
set +e
wait "$qpid"
qrc=$?
set -e
t2=$(date +%s)
[ "$qrc" != 124 ] || echo "run.sh: the VM ran past VM_TIMEOUT=${VM_TIMEOUT:-1800} s and was killed" >&2
[ "${VM_KEEP:-0}" = 1 ] || rm -f "$run/disk.img"

echo "==> scenario log ($run/scenario.log)"
tr -d '\r' <"$run/scenario.log"
echo
echo "==> summary"
echo "accel: $accel; qemu exit: $qrc; staging+image: $((t1 - t0)) s; VM: $((t2 - t1)) s; total: $((t2 - t0)) s"
ok=$(grep -c '^CHECK ok' "$run/scenario.log" || true)
bad=$(grep -c '^CHECK FAIL' "$run/scenario.log" || true)
echo "$ok passed, $bad failed"
grep '^CHECK FAIL' "$run/scenario.log" || true
grep -q '^=== VMTEST DONE' "$run/scenario.log" && [ "$bad" = 0 ]
