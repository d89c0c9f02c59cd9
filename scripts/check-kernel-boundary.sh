#!/usr/bin/env bash
# The daemon's one kernel boundary (docs/architecture.md): only Sources/SupervisorKernel may
# import Glibc, the C shims or libsystemd, or read the C `errno`. Fails naming each file that
# does so from the shell (Sources/SupervisorShell) or the daemon's executable (Sources/extensiond).
set -euo pipefail
cd "$(dirname "$0")/.."
status=0
for dir in Sources/SupervisorShell Sources/extensiond; do
    # An import of Glibc/CShims/CSystemd, or `errno` that is not a member (`e.errno`) or a label (`errno:`).
    if found=$(grep -nE '^\s*import (Glibc|CShims|CSystemd)\b|(^|[^.A-Za-z_])errno([^:A-Za-z_]|$)' "$dir"/*.swift); then
        echo "kernel boundary: these lines of $dir reach the C library directly (only Sources/SupervisorKernel may):" >&2
        echo "$found" >&2
        status=1
    fi
done
[ "$status" -eq 0 ] && echo "kernel boundary: Sources/SupervisorShell and Sources/extensiond go through SupervisorKernel only"
exit "$status"
