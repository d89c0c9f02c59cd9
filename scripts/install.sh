#!/usr/bin/env bash
# Installs extensiond: the daemon and extctl, the C runtime library and the C host library with
# their headers and pkg-config files, the systemd units (system and user), the D-Bus policy,
# interface descriptions and polkit action, the manual pages, the shell completions and the
# operations guide.
#
#   scripts/install.sh [--prefix DIR] [--destdir DIR] [--from DIR]
#
#   --prefix DIR   installation prefix (default: $PREFIX, else /usr/local)
#   --destdir DIR  staging root prepended to every path, as `make install DESTDIR=` does
#                  (default: $DESTDIR, else none); installed files still refer to PREFIX
#   --from DIR     take extensiond, extctl and extensiond-transfer from DIR instead of running
#                  `swift build -c release` (e.g. the output of `swift build --show-bin-path`)
#
# The C runtime is built by scripts/build-runtime-c.sh (the system C compiler) unless DIR
# already holds libExtensionRuntimeC.so.0; the C host library by scripts/build-host-c.sh unless
# DIR holds libExtensionHostC.so.0.
#
# Layout, under DESTDIR/PREFIX:
#   bin/extensiond, bin/extctl, libexec/extensiond/extensiond-transfer (the transfer worker)
#   lib/libExtensionRuntimeC.so.0 (and the link-time name lib/libExtensionRuntimeC.so -> it),
#   include/extension_runtime.h, lib/pkgconfig/extension-runtime.pc
#   lib/libExtensionHostC.so.0 (and lib/libExtensionHostC.so -> it), include/extension_host.h,
#   lib/pkgconfig/extension-host.pc
#   share/dbus-1/system.d/org.extensiond1.conf   (the system bus's policy for org.extensiond1)
#   share/dbus-1/interfaces/org.extensiond1.{Manager,Extension,Request}.xml
#   share/dbus-1/system-services/org.extensiond1.service (D-Bus activation through extensiond.service)
#   share/polkit-1/actions/org.extensiond1.policy
#   lib/systemd/system/extensiond.{service,socket}   (found by systemd for /usr and /usr/local)
#   lib/systemd/user/extensiond.{service,socket}
#   share/man/man8/extensiond.8, share/man/man1/extctl.1,
#   share/man/man5/extensiond.conf.5, share/man/man5/extensiond-manifest.5, share/man/man5/extensiond.dbus.5
#   share/bash-completion/completions/extctl, share/zsh/site-functions/_extctl,
#   share/fish/vendor_completions.d/extctl.fish
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
        -h | --help) sed -n '2,36p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "install.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
case "$prefix" in /*) ;; *) echo "install.sh: --prefix must be absolute: $prefix" >&2; exit 2 ;; esac
prefix=${prefix%/}

if [ -z "$from" ]; then
    echo "==> building (release)"
    for product in extensiond extctl extensiond-transfer; do
        swift build -c release --product "$product" >/dev/null
    done
    from=$(swift build -c release --show-bin-path)
fi
for f in extensiond extctl extensiond-transfer; do
    [ -f "$from/$f" ] || { echo "install.sh: $from/$f is missing (build it, or pass --from)" >&2; exit 1; }
done
runtime_c="$from/libExtensionRuntimeC.so.0"
if [ ! -f "$runtime_c" ]; then
    echo "==> building the C runtime"
    runtime_c=$(bash scripts/build-runtime-c.sh)
fi
host_c="$from/libExtensionHostC.so.0"
if [ ! -f "$host_c" ]; then
    echo "==> building the C host library"
    host_c=$(bash scripts/build-host-c.sh)
fi

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
put 0755 "$from/extensiond-transfer" libexec/extensiond/extensiond-transfer
put 0755 "$runtime_c" lib/libExtensionRuntimeC.so.0
ln -sfn libExtensionRuntimeC.so.0 "$root/lib/libExtensionRuntimeC.so"
installed "$root/lib/libExtensionRuntimeC.so"
put 0644 include/extension_runtime.h include/extension_runtime.h
sed -e "s|@PREFIX@|$prefix|g" -e "s|@LIBDIR@|$prefix/lib|g" \
    pkgconfig/extension-runtime.pc.in | put_text 0644 lib/pkgconfig/extension-runtime.pc
put 0755 "$host_c" lib/libExtensionHostC.so.0
ln -sfn libExtensionHostC.so.0 "$root/lib/libExtensionHostC.so"
installed "$root/lib/libExtensionHostC.so"
put 0644 include/extension_host.h include/extension_host.h
sed -e "s|@PREFIX@|$prefix|g" -e "s|@LIBDIR@|$prefix/lib|g" \
    pkgconfig/extension-host.pc.in | put_text 0644 lib/pkgconfig/extension-host.pc
for unit in extensiond.service extensiond.socket; do
    sed "s|/usr/local/|$prefix/|g" "units/$unit" | put_text 0644 "lib/systemd/system/$unit"
    sed "s|/usr/local/|$prefix/|g" "units/user/$unit" | put_text 0644 "lib/systemd/user/$unit"
done
# The D-Bus interface (org.extensiond1): the system bus's policy, its interfaces' introspection
# data, the polkit action of its admin methods.
put 0644 dbus/org.extensiond1.conf share/dbus-1/system.d/org.extensiond1.conf
for interface in Manager Extension Request; do
    put 0644 "dbus/org.extensiond1.$interface.xml" "share/dbus-1/interfaces/org.extensiond1.$interface.xml"
done
put 0644 dbus/org.extensiond1.policy share/polkit-1/actions/org.extensiond1.policy
put 0644 dbus/org.extensiond1.service share/dbus-1/system-services/org.extensiond1.service
put 0644 man/extensiond.8 share/man/man8/extensiond.8
put 0644 man/extctl.1 share/man/man1/extctl.1
put 0644 man/extensiond.conf.5 share/man/man5/extensiond.conf.5
put 0644 man/extensiond-manifest.5 share/man/man5/extensiond-manifest.5
put 0644 man/extensiond.dbus.5 share/man/man5/extensiond.dbus.5
# Completions, as extctl generates them, where each shell looks for them under the prefix.
"$from/extctl" --generate-completion-script bash | put_text 0644 share/bash-completion/completions/extctl
"$from/extctl" --generate-completion-script zsh | put_text 0644 share/zsh/site-functions/_extctl
"$from/extctl" --generate-completion-script fish | put_text 0644 share/fish/vendor_completions.d/extctl.fish
put 0644 docs/operations.md share/doc/extensiond/operations.md

# The defaults need no system user or group: extensions get uids (and containers gids) from
# the configuration's extensionUIDs range, which has no passwd or group entries. Warn when
# this machine's account database already uses numbers of the default range, whose files
# extensions could otherwise own (skipped for a staged install).
if [ -z "$destdir" ] && command -v getent >/dev/null 2>&1; then
    taken=$( { getent passwd; getent group; } | awk -F: '$3 >= 1879113728 && $3 < 1879179264 { print $1 " (" $3 ")" }')
    if [ -n "$taken" ]; then
        echo "install.sh: warning: these accounts use numbers of extensiond's default extensionUIDs range" >&2
        echo "  (1879113728-1879179263); set another range in /etc/extensiond/config.json:" >&2
        echo "$taken" | sed 's/^/  /' >&2
    fi
fi

cat <<EOF

Next steps (not done by this script):
  system service:  systemctl daemon-reload && systemctl enable --now extensiond.socket
  user session:    systemctl --user daemon-reload && systemctl --user enable --now extensiond.socket
  C extensions:    PKG_CONFIG_PATH=$prefix/lib/pkgconfig pkg-config --cflags --libs extension-runtime
  C hosts:         PKG_CONFIG_PATH=$prefix/lib/pkgconfig pkg-config --cflags --libs extension-host
  Python:          pip install ./bindings/python   (finds the libraries through those pkg-config files)
  manual:          man extensiond, man extctl, man 5 extensiond.conf, man 5 extensiond-manifest
See $prefix/share/doc/extensiond/operations.md.
EOF
if [ "$prefix" != /usr ]; then
    cat <<EOF
D-Bus: the system bus reads policies from /usr/share/dbus-1/system.d and /etc/dbus-1/system.d
only, and polkit its actions from /usr/share/polkit-1/actions: for the system daemon to own
org.extensiond1 under this prefix, copy them there (then: systemctl reload dbus):
  install -m 0644 $prefix/share/dbus-1/system.d/org.extensiond1.conf /etc/dbus-1/system.d/
  install -m 0644 $prefix/share/polkit-1/actions/org.extensiond1.policy /usr/share/polkit-1/actions/
EOF
fi
