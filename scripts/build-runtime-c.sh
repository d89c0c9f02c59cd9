#!/usr/bin/env bash
# Builds libExtensionRuntimeC, the C runtime for extensions (runtime-c/, include/extension_runtime.h),
# with the system C compiler: libc and pthreads only, hidden visibility, exactly the functions of
# the header exported (runtime-c/exports.map).
#
#   scripts/build-runtime-c.sh [--out DIR] [--debug]
#
#   --out DIR   where to put the library (default: .build/runtime-c)
#   --debug     -O0 -g instead of -O2
#
# Produces DIR/libExtensionRuntimeC.so.0 (SONAME libExtensionRuntimeC.so.0) and the link-time
# name DIR/libExtensionRuntimeC.so, a symbolic link to it. Prints the library's path.
# $CFLAGS and $LDFLAGS, when set, are added after the script's own flags (a distribution's
# hardening flags, for instance: debian/rules passes dpkg-buildflags').
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"

out="$root/.build/runtime-c"
optimize=(-O2)
while [ $# -gt 0 ]; do
    case "$1" in
        --out) out=${2:?--out needs a directory}; shift 2 ;;
        --out=*) out=${1#*=}; shift ;;
        --debug) optimize=(-O0 -g); shift ;;
        -h | --help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "build-runtime-c.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
cc=${CC:-cc}
command -v "$cc" >/dev/null 2>&1 || { echo "build-runtime-c.sh: no C compiler ($cc); run scripts/dependencies.sh" >&2; exit 1; }
mkdir -p "$out"
# Built under a temporary name and renamed: a concurrent reader never sees a partial library.
tmp="$out/.libExtensionRuntimeC.so.0.$$"
"$cc" -std=c11 "${optimize[@]}" -Wall -Wextra -Werror -fPIC -shared -fvisibility=hidden \
    -I "$root/include" -I "$root/runtime-c" \
    -Wl,-soname,libExtensionRuntimeC.so.0 -Wl,--version-script="$root/runtime-c/exports.map" \
    -Wl,-z,relro -Wl,-z,now -Wl,--as-needed \
    ${CFLAGS:-} ${LDFLAGS:-} \
    "$root/runtime-c/wire.c" "$root/runtime-c/defaults.c" "$root/runtime-c/secrets.c" "$root/runtime-c/transfers.c" "$root/runtime-c/runtime.c" -lpthread -o "$tmp"
mv -f "$tmp" "$out/libExtensionRuntimeC.so.0"
ln -sfn libExtensionRuntimeC.so.0 "$out/libExtensionRuntimeC.so"
echo "$out/libExtensionRuntimeC.so.0"
