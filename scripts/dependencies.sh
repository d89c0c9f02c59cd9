#!/usr/bin/env bash
# Installs what building and testing extensiond needs beyond the Swift toolchain:
# libsystemd-dev (sd-event, sd-daemon, sd-journal) and pkg-config. Idempotent.
set -euo pipefail

missing=()
pkg-config --exists libsystemd 2>/dev/null || missing+=(libsystemd-dev)
command -v pkg-config >/dev/null 2>&1 || missing+=(pkg-config)
# A real systemd (user manager, journald, systemd-analyze, systemd-socket-activate) for the
# systemd integration tests, which enter a private mount namespace with unshare and nsenter.
[ -x /lib/systemd/systemd ] && [ -x /lib/systemd/systemd-journald ] || missing+=(systemd)
command -v nsenter >/dev/null 2>&1 && command -v unshare >/dev/null 2>&1 || missing+=(util-linux)

if [ ${#missing[@]} -gt 0 ]; then
    echo "==> installing ${missing[*]}"
    if [ "$(id -u)" -eq 0 ]; then sudo=""; else sudo="sudo"; fi
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi

command -v swift >/dev/null 2>&1 || { echo "swift is not on PATH (Swift 6.1 or later is required)" >&2; exit 1; }
