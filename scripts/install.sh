#!/usr/bin/env bash
# Installs extensiond: the daemon and extctl, the C runtime library with its header and
# pkg-config file, the systemd units (system and user) and the operations guide.
#
#   scripts/install.sh [--prefix DIR] [--destdir DIR] [--from DIR]
#
#   --prefix DIR   installation prefix (default: $PREFIX, else /usr/local)
#   --destdir DIR  staging root prepended to every path, as `make install DESTDIR=` does
#                  (default: $DESTDIR, else none); installed files still refer to PREFIX
#   --from DIR     take the built products from DIR instead of running
#                  `swift build -c release` (e.g. the output of `swift build --show-bin-path`)
#
# Layout, under DESTDIR/PREFIX:
#   bin/extensiond, bin/extctl
#   lib/libExtensionRuntimeC.so, include/extension_runtime.h, lib/pkgconfig/extension-runtime.pc
#   lib/systemd/system/extensiond.{service,socket}   (found by systemd for /usr and /usr/local)
#   lib/systemd/user/extensiond.{service,socket}
#   share/doc/extensiond/operations.md
# Unit files get PREFIX in place of /usr/local (ExecStart=, Documentation=). Nothing is
# enabled or started; the script prints the commands for that.
set -euo pipefail
cd "$(dirname "$0")/.."

prefix=${PREFIX:-/usr/local}
destdir=${DESTDIR:-}
from=""
while [ $# -gt 0 ]; do
    case "$1" in
        --prefix) prefix=${2:?--prefix needs a directory}; shift 2 ;;
        --prefix=*) prefix=${1#*=}; shift ;;
        --destdir) destdir=${2:?--destdir needs a directory}; shift 2 ;;
        --destdir=*) destdir=${1#*=}; shift ;;
        --from) from=${2:?--from needs a directory}; shift 2 ;;
        --from=*) from=${1#*=}; shift ;;
        -h | --help) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "install.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
case "$prefix" in /*) ;; *) echo "install.sh: --prefix must be absolute: $prefix" >&2; exit 2 ;; esac
prefix=${prefix%/}

if [ -z "$from" ]; then
    echo "==> building (release)"
    for product in extensiond extctl ExtensionRuntimeC; do
        swift build -c release --product "$product" >/dev/null
    done
    from=$(swift build -c release --show-bin-path)
fi
for f in extensiond extctl libExtensionRuntimeC.so; do
    [ -f "$from/$f" ] || { echo "install.sh: $from/$f is missing (build it, or pass --from)" >&2; exit 1; }
done

# The Swift runtime the library was linked against, for the rpath in the pkg-config file:
# $SWIFT_RUNTIME if set, else the toolchain of the swiftc on PATH, else the library's RUNPATH.
swift_runtime=${SWIFT_RUNTIME:-}
if [ -z "$swift_runtime" ] && command -v swiftc >/dev/null 2>&1; then
    swift_runtime="$(dirname "$(dirname "$(readlink -f "$(command -v swiftc)")")")/lib/swift/linux"
fi
if { [ -z "$swift_runtime" ] || [ ! -e "$swift_runtime/libswiftCore.so" ]; } && command -v readelf >/dev/null 2>&1; then
    swift_runtime=$(readelf -d "$from/libExtensionRuntimeC.so" | sed -n 's/.*R\(UN\)\{0,1\}PATH.*\[\(.*\)\]/\2/p' | tr ':' '\n' | grep -v ORIGIN | head -n1)
fi
[ -n "$swift_runtime" ] || { echo "install.sh: cannot find the Swift runtime; set SWIFT_RUNTIME" >&2; exit 1; }

root="$destdir$prefix"
installed() { echo "installed $1"; }
put() { # mode source target
    install -D -m "$1" "$2" "$root/$3"
    installed "$root/$3"
}
# Unit files and the pkg-config file: /usr/local (or the placeholders) replaced by the prefix.
put_text() { # mode target, text on stdin
    install -d "$(dirname "$root/$2")"
    cat >"$root/$2"
    chmod "$1" "$root/$2"
    installed "$root/$2"
}

put 0755 "$from/extensiond" bin/extensiond
put 0755 "$from/extctl" bin/extctl
put 0755 "$from/libExtensionRuntimeC.so" lib/libExtensionRuntimeC.so
put 0644 include/extension_runtime.h include/extension_runtime.h
sed -e "s|@PREFIX@|$prefix|g" -e "s|@LIBDIR@|$prefix/lib|g" -e "s|@SWIFT_RUNTIME@|$swift_runtime|g" \
    pkgconfig/extension-runtime.pc.in | put_text 0644 lib/pkgconfig/extension-runtime.pc
for unit in extensiond.service extensiond.socket; do
    sed "s|/usr/local/|$prefix/|g" "units/$unit" | put_text 0644 "lib/systemd/system/$unit"
    sed "s|/usr/local/|$prefix/|g" "units/user/$unit" | put_text 0644 "lib/systemd/user/$unit"
done
put 0644 docs/operations.md share/doc/extensiond/operations.md

cat <<EOF

Next steps (not done by this script):
  system service:  systemctl daemon-reload && systemctl enable --now extensiond.socket
  user session:    systemctl --user daemon-reload && systemctl --user enable --now extensiond.socket
  C extensions:    PKG_CONFIG_PATH=$prefix/lib/pkgconfig pkg-config --cflags --libs extension-runtime
See $prefix/share/doc/extensiond/operations.md.
EOF
