#!/usr/bin/env bash
# Fuzzes the wire decoder (the one decoder for every byte extensiond reads from a socket) with
# libFuzzer and AddressSanitizer.
#   ./scripts/fuzz.sh            bounded session of 60 s (CI runs `FUZZ_SECONDS=20`)
#   FUZZ_SECONDS=3600 ./scripts/fuzz.sh   the long run documented in docs/reliability.md
# New inputs that increase coverage are added to Fuzz/corpus; a crash leaves crash-* files in
# .build-fuzz/artifacts and makes this script fail.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${FUZZ_SECONDS:-60}
export SWIFT_BACKTRACE=enable=no   # the backtracer misreports under ASan
swift build --product wire-fuzz --sanitize=fuzzer --sanitize=address --scratch-path .build-fuzz >/dev/null
binary="$(swift build --product wire-fuzz --sanitize=fuzzer --sanitize=address --scratch-path .build-fuzz --show-bin-path)/wire-fuzz"
mkdir -p .build-fuzz/artifacts .build-fuzz/corpus
cp Fuzz/corpus/* .build-fuzz/corpus/
echo "==> fuzzing the wire decoder for ${seconds}s"
if ! "$binary" .build-fuzz/corpus Fuzz/corpus -max_total_time="$seconds" -max_len=65544 \
    -artifact_prefix=.build-fuzz/artifacts/ -print_final_stats=1 > .build-fuzz/last-run.log 2>&1; then
    tail -n 40 .build-fuzz/last-run.log
    echo "fuzz: the decoder failed on an input; it is in .build-fuzz/artifacts (add it to Fuzz/crashes)" >&2
    exit 1
fi
tail -n 8 .build-fuzz/last-run.log
# A build without coverage instrumentation fuzzes blindly (libFuzzer warns, reports no cov):
# that is a broken fuzzer, not a clean run. Incremental sanitizer builds can produce one.
if grep -q "Is the code instrumented for coverage" .build-fuzz/last-run.log || ! grep -q "cov: " .build-fuzz/last-run.log; then
    echo "fuzz: the target is not instrumented for coverage; remove .build-fuzz and run again" >&2
    exit 1
fi
