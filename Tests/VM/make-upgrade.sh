#!/usr/bin/env bash
# Makes the "newer" extensiond package the VM scenario upgrades to: the package of DIST_DIR
# repacked with its version raised by "+vmtest1" (same files), into OUT_DIR.
#
#   make-upgrade.sh DIST_DIR OUT_DIR
set -euo pipefail
dist=$1 out=$2
deb=$(ls "$dist"/extensiond_*.deb | head -1)
[ -f "$deb" ] || { echo "make-upgrade: no extensiond_*.deb in $dist" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
dpkg-deb -R "$deb" "$work/pkg"
version=$(awk '/^Version:/ { print $2 }' "$work/pkg/DEBIAN/control")
sed -i "s/^Version: .*/Version: ${version}+vmtest1/" "$work/pkg/DEBIAN/control"
mkdir -p "$out"
rm -f "$out"/*.deb
dpkg-deb -Zxz -b "$work/pkg" "$out/extensiond_${version}+vmtest1_amd64.deb" >/dev/null
ls "$out"
