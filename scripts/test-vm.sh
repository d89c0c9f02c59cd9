#!/usr/bin/env bash
# Tests the packages of dist/ (scripts/package.sh) where users install them: boots Debian 12
# under qemu (systemd as PID 1, cgroup v2 alone), installs them there with apt-get, and runs
# Tests/VM/target.sh through the units exactly as shipped (docs/operations.md, "Tested
# systems"). Installs qemu-system-x86, debootstrap and e2fsprogs when missing; the first run
# builds the guest's base image (about 2 minutes, kept in $VM_DIR, /var/tmp/extensiond-vm).
# The last line is "N passed, M failed"; the exit status is 0 only when every check passed.
#
#   scripts/test-vm.sh [DIST_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
dist=${1:-dist}
compgen -G "$dist/extensiond_*.deb" >/dev/null || { echo "test-vm: no extensiond_*.deb in $dist (run scripts/package.sh)" >&2; exit 1; }
if [ "$(id -u)" -eq 0 ]; then sudo=""; else sudo="sudo"; fi
missing=()
command -v qemu-system-x86_64 >/dev/null 2>&1 || missing+=(qemu-system-x86)
command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
command -v mkfs.ext4 >/dev/null 2>&1 || missing+=(e2fsprogs)
if [ ${#missing[@]} -gt 0 ]; then
    echo "==> installing ${missing[*]}"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
upgrade=$(mktemp -d)
# The guest's base image has the dependencies of the daemon's, the C and the Python packages,
# not Node.js or a Java runtime, and installs offline: the Node.js and Java runtimes' packages
# stay out of it (scripts/test-packages.sh installs and runs them on this machine).
vmdist=$(mktemp -d)
trap 'rm -rf "$upgrade" "$vmdist"' EXIT
for deb in "$dist"/*.deb; do
    case "$(basename "$deb")" in
        node-extension-runtime_* | libextension-runtime-java_* | libextension-runtime-jni_*) ;;
        *) cp "$deb" "$vmdist/" ;;
    esac
done
dist=$vmdist
Tests/VM/make-upgrade.sh "$dist" "$upgrade" >/dev/null
export SRC=$(pwd) VM_UPGRADE=$upgrade
if [ -n "$sudo" ]; then sudo -E bash Tests/VM/run.sh Tests/VM/target.sh "$dist"; else bash Tests/VM/run.sh Tests/VM/target.sh "$dist"; fi
