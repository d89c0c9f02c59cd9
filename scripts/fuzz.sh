#!/usr/bin/env bash
# Fuzzes the wire decoder (the one decoder for every byte extensiond reads from a socket) with
# libFuzzer and AddressSanitizer.
#   ./scripts/fuzz.sh            bounded session of 60 s (CI runs `FUZZ_SECONDS=20`)
#   FUZZ_SECONDS=3600 ./scripts/fuzz.sh   the long run documented in docs/reliability.md
# New inputs that increase coverage are kept in .build-fuzz-corpus; a crash leaves crash-* files
# in .build-fuzz-corpus/artifacts and makes this script fail. The fuzzer is built from scratch
# every time, from a clean scratch directory.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${FUZZ_SECONDS:-60}
export SWIFT_BACKTRACE=enable=no   # the backtracer misreports under ASan
rm -rf .build-fuzz
# -sanitize-coverage is passed explicitly: SwiftPM gives --sanitize=fuzzer to the link and the
# module jobs, but not to every compile job, which then carry no coverage counters.
swift build --product wire-fuzz --sanitize=fuzzer --sanitize=address -Xswiftc -sanitize-coverage=edge,inline-8bit-counters,pc-table,trace-cmp --scratch-path .build-fuzz >/dev/null
binary="$(swift build --product wire-fuzz --sanitize=fuzzer --sanitize=address -Xswiftc -sanitize-coverage=edge,inline-8bit-counters,pc-table,trace-cmp --scratch-path .build-fuzz --show-bin-path)/wire-fuzz"
work=.build-fuzz-corpus
mkdir -p "$work/artifacts" "$work/corpus"
cp Fuzz/corpus/* "$work/corpus/"
echo "==> fuzzing the wire decoder for ${seconds}s"
if ! "$binary" "$work/corpus" Fuzz/corpus -max_total_time="$seconds" -max_len=65544 \
    -artifact_prefix="$work/artifacts/" -print_final_stats=1 > "$work/last-run.log" 2>&1; then
    tail -n 40 "$work/last-run.log"
    echo "fuzz: the decoder failed on an input; it is in $work/artifacts (add it to Fuzz/crashes)" >&2
    exit 1
fi
tail -n 8 "$work/last-run.log"
# A build without coverage instrumentation fuzzes blindly (libFuzzer warns, reports no cov):
# that is a broken fuzzer, not a clean run. Incremental sanitizer builds can produce one.
if grep -q "Is the code instrumented for coverage" "$work/last-run.log" || ! grep -q "cov: " "$work/last-run.log"; then
    echo "fuzz: the target is not instrumented for coverage" >&2
    exit 1
fi
