#!/usr/bin/env bash
# The performance suite (docs/performance.md): builds the daemon and the benchmark package in
# release mode, then measures every figure against its baseline in one run and prints the table.
#
#   ./scripts/bench.sh            full suite: 1,000 extensions, ~2 minutes on 2 cores
#   ./scripts/bench.sh --quick    CI smoke form: few iterations, 100 extensions, < 1 minute;
#                                 fails on errors, asserts nothing about timing
#
# Other arguments go to extensiond-bench (--help lists them, e.g. --only, --profile DIR).
# Installs what it needs when missing (idempotent): libsystemd-dev, libseccomp-dev, libacl1-dev, libsodium-dev, libcurl4-openssl-dev (the transfer worker), curl (the transfers baseline) and
# pkg-config (build), dbus (dbus-daemon, for the D-Bus baseline of the control-plane figure), and
# slirp4netns (the network stack of the sandboxed extensions' point, which a root daemon needs).
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
pkg-config --exists libsystemd 2>/dev/null || missing+=(libsystemd-dev)
pkg-config --exists libseccomp 2>/dev/null || missing+=(libseccomp-dev)
command -v pkg-config >/dev/null 2>&1 || missing+=(pkg-config)
[ -x /usr/bin/dbus-daemon ] || missing+=(dbus)
[ -f /usr/include/sys/acl.h ] || missing+=(libacl1-dev)
pkg-config --exists libsodium 2>/dev/null || missing+=(libsodium-dev)
pkg-config --exists libcurl 2>/dev/null || missing+=(libcurl4-openssl-dev)
command -v curl >/dev/null 2>&1 || missing+=(curl)
[ -x /usr/bin/slirp4netns ] || missing+=(slirp4netns)
command -v cc >/dev/null 2>&1 || missing+=(gcc libc6-dev)
if [ ${#missing[@]} -gt 0 ]; then
    echo "==> installing ${missing[*]}"
    if [ "$(id -u)" -eq 0 ]; then sudo=""; else sudo="sudo"; fi
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi
command -v swift >/dev/null 2>&1 || { echo "swift is not on PATH (Swift 6.1 or later is required)" >&2; exit 1; }

echo "==> building (release): extensiond, bench-extension, extensiond-bench"
# SwiftPM 6.3 reuses a cached build plan without noticing that the root Package.swift (a path
# dependency of Benchmarks/) changed, e.g. its linker flags: drop the plan so it is recomputed.
rm -f Benchmarks/.build/*/release/description.json
swift build -c release --package-path Benchmarks --product extensiond
swift build -c release --package-path Benchmarks --product extensiond-transfer
swift build -c release --package-path Benchmarks
bin="$(swift build -c release --package-path Benchmarks --show-bin-path)"

echo "==> building (cc): libExtensionRuntimeC, bench-c-extension on it, bench-c-raw (no runtime)"
# The library's name in the extension is its absolute path (its SONAME here): the loader opens
# it at once, as an installed extension's loader finds the packaged library through
# /etc/ld.so.cache. A run path instead would have it try 14 directories first (glibc-hwcaps/*,
# tls/*, x86_64/*), which no installed extension does.
LDFLAGS="-Wl,-soname,$bin/runtime-c/libExtensionRuntimeC.so.0" bash scripts/build-runtime-c.sh --out "$bin/runtime-c" >/dev/null
cc -O2 -Wall -Werror Benchmarks/c/c-extension.c -I include "$bin/runtime-c/libExtensionRuntimeC.so.0" -lpthread -o "$bin/bench-c-extension"
cc -O2 -Wall -Werror Benchmarks/c/raw-extension.c -o "$bin/bench-c-raw"

# 1,000 extensions need about 4 descriptors each in the daemon and the bench (the daemon and
# the extensions inherit this limit).
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"

echo "==> $(swift --version 2>/dev/null | head -1)"
# The daemon runs from a copy in a directory every uid can search, beside its transfer worker:
# a root daemon runs the worker under a uid of its own, which cannot reach a checkout below a
# private directory (a clone in a 0700 temporary directory, or under /root).
reach="$(mktemp -d /tmp/extensiond-bench-bin-XXXXXX)"
chmod 755 "$reach"
trap 'rm -rf "$reach"' EXIT
cp "$bin/extensiond" "$bin/extensiond-transfer" "$reach/"
"$bin/extensiond-bench" --daemon "$reach/extensiond" "$@"
