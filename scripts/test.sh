#!/usr/bin/env bash
# Runs the whole test suite: installs dependencies, builds every target, the C runtime and the
# C host library, fuzzes the wire decoder briefly, then runs the unit tests (pure core, wire
# codec) and the integration tests (real processes, signals, sockets, a real systemd, the C
# runtime, the Python package, the manual pages). The test runner's summary is the last line.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/dependencies.sh
echo "==> checking the kernel boundary"
bash scripts/check-kernel-boundary.sh
echo "==> checking doc comments"
python3 scripts/check-doc-comments.py
echo "==> checking the format (swift format, .swift-format)"
swift format lint --strict -r Sources Tests examples
echo "==> building"
swift build --build-tests
bash scripts/build-runtime-c.sh >/dev/null
bash scripts/build-host-c.sh >/dev/null
echo "==> fuzzing the wire decoder (short run; see docs/reliability.md for the long one)"
FUZZ_SECONDS=${FUZZ_SECONDS:-20} bash scripts/fuzz.sh
echo "==> testing"
swift test --skip-build 2>&1 | tee .build/test-output.txt
