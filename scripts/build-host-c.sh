#!/usr/bin/env bash
# Builds libExtensionHostC, the C library for hosts of extensiond over D-Bus (host-c/,
# include/extension_host.h), with the system C compiler: on sd-bus (libsystemd), hidden
# visibility, exactly the functions of the header exported (host-c/exports.map).
#
#   scripts/build-host-c.sh [--out DIR] [--debug]
#
#   --out DIR   where to put the library (default: .build/host-c)
#   --debug     -O0 -g instead of -O2
#
# Produces DIR/libExtensionHostC.so.0 (SONAME libExtensionHostC.so.0) and the link-time name
# DIR/libExtensionHostC.so, a symbolic link to it. Prints the library's path.
# $CFLAGS and $LDFLAGS, when set, are added after the script's own flags (a distribution's
# hardening flags, for instance: debian/rules passes dpkg-buildflags').
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"

out="$root/.build/host-c"
optimize=(-O2)
while [ $# -gt 0 ]; do
    case "$1" in
        --out) out=${2:?--out needs a directory}; shift 2 ;;
        --out=*) out=${1#*=}; shift ;;
        --debug) optimize=(-O0 -g); shift ;;
        -h | --help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "build-host-c.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
cc=${CC:-cc}
command -v "$cc" >/dev/null 2>&1 || { echo "build-host-c.sh: no C compiler ($cc); run scripts/dependencies.sh" >&2; exit 1; }
systemd_cflags=$(pkg-config --cflags libsystemd 2>/dev/null) && systemd_libs=$(pkg-config --libs libsystemd 2>/dev/null) \
    || { echo "build-host-c.sh: pkg-config finds no libsystemd (install libsystemd-dev and pkg-config; run scripts/dependencies.sh)" >&2; exit 1; }
mkdir -p "$out"
# Built under a temporary name and renamed: a concurrent reader never sees a partial library.
tmp="$out/.libExtensionHostC.so.0.$$"
# shellcheck disable=SC2086 # the pkg-config flags and $CFLAGS/$LDFLAGS are words
"$cc" -std=c11 "${optimize[@]}" -Wall -Wextra -Werror -fPIC -shared -fvisibility=hidden \
    -I "$root/include" $systemd_cflags \
    -Wl,-soname,libExtensionHostC.so.0 -Wl,--version-script="$root/host-c/exports.map" \
    -Wl,-z,relro -Wl,-z,now -Wl,--as-needed \
    ${CFLAGS:-} ${LDFLAGS:-} \
    "$root/host-c/host.c" $systemd_libs -o "$tmp"
mv -f "$tmp" "$out/libExtensionHostC.so.0"
ln -sfn libExtensionHostC.so.0 "$out/libExtensionHostC.so"
echo "$out/libExtensionHostC.so.0"
