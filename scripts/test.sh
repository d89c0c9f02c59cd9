#!/usr/bin/env bash
# Runs the whole test suite: installs dependencies, builds every target, then runs the unit
# tests (pure core, wire codec) and the integration tests (real processes, signals, sockets).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/dependencies.sh
echo "==> building"
swift build --build-tests
echo "==> testing"
swift test --skip-build 2>&1 | tee .build/test-output.txt
