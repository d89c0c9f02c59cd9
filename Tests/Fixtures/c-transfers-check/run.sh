#!/usr/bin/env bash
# The C runtime's background transfers (ext_transfer_*) and extension_runtime.transfers, without
# extensiond (nor a Swift build):
#
#   Tests/Fixtures/c-transfers-check/run.sh
#
#  1. the library as scripts/build-runtime-c.sh builds it (-Wall -Wextra -Werror), exporting
#     exactly the functions of include/extension_runtime.h;
#  2. roundtrip.c: every function, its messages byte for byte, each answer code's errno, the
#     arguments refused before sending, events delivered to the callback with their fields and in
#     order, the automatic transferHandled with the highest sequence once the callbacks returned,
#     duplicates skipped, progress never acknowledged, calls from a callback and from threads, the
#     channel's close, and the C codec of the transfer messages, against a fake extensiond on a
#     socketpair, linked with that library; then again with the library built with
#     -D_FORTIFY_SOURCE=2;
#  3. check_python.py: extension_runtime.transfers against a fake extensiond in Python.
# Needs cc, nm, python3 (3.9 or later). Prints each step; exits non-zero at the first failure.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
cc=${CC:-cc}
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
flags=(-std=c11 -O2 -Wall -Wextra -Werror -I "$root/include" -I "$root/runtime-c" -I "$root/Tests/Fixtures/c-checks")

echo "== 1. scripts/build-runtime-c.sh and the export list"
library="$(bash "$root/scripts/build-runtime-c.sh" --out "$work/lib")"
declared="$(grep -vE '^\s*(/?\*|typedef)' "$root/include/extension_runtime.h" | grep -oE '\bext_[a-z0-9_]+\(' | tr -d '(' | sort -u)"
exported="$(nm -D --defined-only "$library" | awk '{print $3}' | sed 's/@.*//' | grep '^ext_' | sort -u)"
if [ "$declared" != "$exported" ]; then
    echo "the exports differ from the header's functions (< header, > library):" >&2
    diff <(echo "$declared") <(echo "$exported") >&2 || true
    exit 1
fi
for name in ext_transfer_set_handler ext_transfer_create ext_transfer_cancel ext_transfer_claim; do
    grep -qx "$name" <<<"$exported" || { echo "$name is not exported" >&2; exit 1; }
done
symbols="$root/debian/libextensionruntimec0.symbols"
listed="$(grep -oE '^ ext_[a-z0-9_]+' "$symbols" | tr -d ' ' | sort -u)"
if [ "$listed" != "$exported" ]; then
    echo "debian/libextensionruntimec0.symbols differs from the exports (< symbols file, > library):" >&2
    diff <(echo "$listed") <(echo "$exported") >&2 || true
    exit 1
fi
echo "exports: $(echo "$exported" | wc -l) functions, exactly the header's (and the symbols file's)"

echo "== 2. roundtrip.c: transfers against a fake extensiond"
"$cc" "${flags[@]}" "$here/roundtrip.c" "$root/runtime-c/wire.c" -L "$work/lib" -lExtensionRuntimeC \
    -Wl,-rpath,"$work/lib" -lpthread -o "$work/roundtrip"
timeout 120 "$work/roundtrip"
CFLAGS="-D_FORTIFY_SOURCE=2" bash "$root/scripts/build-runtime-c.sh" --out "$work/fortified" >/dev/null
"$cc" "${flags[@]}" "$here/roundtrip.c" "$root/runtime-c/wire.c" -L "$work/fortified" -lExtensionRuntimeC \
    -Wl,-rpath,"$work/fortified" -lpthread -o "$work/roundtrip-fortified"
echo -n "fortified: "
timeout 120 "$work/roundtrip-fortified"

echo "== 3. check_python.py: extension_runtime.transfers"
export PYTHONPATH="$root/bindings/python/src${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONDONTWRITEBYTECODE=1
timeout 120 python3 "$here/check_python.py" "$library"
echo "all passed"
