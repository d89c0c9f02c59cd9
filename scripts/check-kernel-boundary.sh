#!/usr/bin/env bash
# The daemon's one kernel boundary (docs/architecture.md): only Sources/SupervisorKernel may
# import Glibc, the C shims or libsystemd (directly, or through Foundation, which re-exports
# Glibc; FoundationEssentials does not), or read the C `errno`. Fails naming each line that
# does so in the shell (Sources/SupervisorShell) or the daemon's executable (Sources/extensiond).
set -euo pipefail
cd "$(dirname "$0")/.."
status=0
for dir in Sources/SupervisorShell Sources/extensiond; do
    # An import of Glibc/CShims/CSystemd/Foundation (with attributes such as @preconcurrency,
    # or of one declaration: `import func Glibc.getpid`), a name qualified by one of them
    # (`Glibc.errno`), or `errno` that is not a member (`e.errno`) or a label (`errno:`).
    imports='^\s*(@[A-Za-z_]+\s+)*import\s+((typealias|struct|class|enum|protocol|let|var|func)\s+)?(Glibc|CShims|CSystemd|CBus|Foundation)\b'
    qualified='(^|[^.A-Za-z_])(Glibc|CShims|CSystemd|CBus)\.'
    unqualified='(^|[^.A-Za-z_])errno([^:A-Za-z_]|$)'
    if found=$(grep -nE "$imports|$qualified|$unqualified" "$dir"/*.swift); then
        echo "kernel boundary: these lines of $dir reach the C library directly (only Sources/SupervisorKernel may):" >&2
        echo "$found" >&2
        status=1
    fi
done
[ "$status" -eq 0 ] && echo "kernel boundary: Sources/SupervisorShell and Sources/extensiond go through SupervisorKernel only"
exit "$status"
