#!/usr/bin/env bash
# Builds the base Debian 12 (bookworm) root file system for the VM harness, once:
#   $VM_DIR/base/rootfs      the debootstrapped tree (systemd as PID 1, unified cgroup v2 by default)
#   $VM_DIR/base/vmlinuz     the guest kernel, copied from rootfs/boot
#   $VM_DIR/base/initrd.img  its initramfs
# run.sh adds guest/vmtest.service (enabled) and guest/vmtest-run to a copy of it for each run.
# The tree carries what the
# extensiond packages depend on (and a C compiler and pkg-config for the examples), so that
# `apt-get install ./x.deb` works offline inside the guest.
#
#   build-base.sh            (VM_DIR as run.sh; MIRROR: the host's own Debian source by default)
#   build-base.sh --force    rebuild even if the base exists
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
VM_DIR=${VM_DIR:-/var/tmp/extensiond-vm}
MIRROR=${MIRROR:-$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)}
[ -n "$MIRROR" ] || MIRROR=$(awk '/^deb / {print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
[ -n "$MIRROR" ] || { echo "build-base: no Debian mirror found in the host's apt sources; set MIRROR" >&2; exit 1; }
base=$VM_DIR/base
root=$base/rootfs

# systemd as PID 1 (systemd-sysv), dbus, the kernel (its initramfs is made by initramfs-tools
# with MODULES=most: virtio_blk and ext4 are in it), and the packages' run-time dependencies
# (libseccomp2, libacl1, libsodium23, libcurl4, libstdc++6, libsystemd0, python3, slirp4netns) plus the tools the
# scenarios use.
include=systemd,systemd-sysv,dbus,udev,linux-image-amd64,initramfs-tools,kmod,
include+=libseccomp2,libacl1,libsodium23,libcurl4,libstdc++6,libgcc-s1,libsystemd0,python3,slirp4netns,bash-completion,
include+=gcc,libc6-dev,pkg-config,procps,psmisc,iproute2,util-linux,less,ca-certificates,passwd,
include+=libpam-systemd,dbus-user-session

# A base made with another package list is made again.
if [ "${1:-}" != "--force" ] && [ -f "$base/.complete" ] && [ "$(cat "$base/.complete")" = "$include" ]; then
    echo "build-base: $base is complete (--force to rebuild)"
    exit 0
fi
for tool in debootstrap mkfs.ext4 qemu-system-x86_64; do
    command -v "$tool" >/dev/null || { echo "build-base: $tool missing: apt-get install debootstrap e2fsprogs qemu-system-x86" >&2; exit 1; }
done

umount_all() { for m in dev/pts dev proc sys; do mountpoint -q "$root/$m" 2>/dev/null && umount -l "$root/$m" || true; done; }
trap umount_all EXIT

rm -rf "$base"
mkdir -p "$base"
echo "==> debootstrap bookworm into $root"
time debootstrap --variant=minbase --include="$include" bookworm "$root" "$MIRROR" >"$base/debootstrap.log" 2>&1 \
    || { tail -30 "$base/debootstrap.log" >&2; echo "build-base: debootstrap failed (log: $base/debootstrap.log)" >&2; exit 1; }

echo "==> configuring the guest"
echo vmtest >"$root/etc/hostname"
printf '127.0.0.1 localhost\n127.0.1.1 vmtest\n' >"$root/etc/hosts"
printf '/dev/vda / ext4 rw,errors=remount-ro 0 1\n' >"$root/etc/fstab"
# A machine id now, so the first boot is not a "first boot" (no systemd-firstboot prompts).
rm -f "$root/etc/machine-id"
chroot "$root" systemd-machine-id-setup >/dev/null
# root without a password on the serial console (for a person debugging with run.sh -i).
chroot "$root" passwd -d root >/dev/null
# A persistent journal, so that a scenario can read the previous boot (journalctl -b -1).
mkdir -p "$root/var/log/journal"
# apt inside the guest has no network: only local .deb files are installed there.
printf 'deb %s bookworm main\n' "$MIRROR" >"$root/etc/apt/sources.list"
chroot "$root" apt-get clean

kernel=$(ls "$root"/boot/vmlinuz-* | sort -V | tail -1)
initrd=$(ls "$root"/boot/initrd.img-* | sort -V | tail -1)
[ -f "$kernel" ] && [ -f "$initrd" ] || { echo "build-base: no kernel or initrd in $root/boot" >&2; exit 1; }
cp "$kernel" "$base/vmlinuz"
cp "$initrd" "$base/initrd.img"
du -sh "$root" | sed 's/^/rootfs size: /'
echo "kernel: ${kernel##*/}"
echo "$include" >"$base/.complete"
