#!/usr/bin/env bash
# The C runtime's open URL and shared defaults, without extensiond (nor a Swift build):
#
#   Tests/Fixtures/c-defaults-check/run.sh [SECONDS]
#
#  1. check.c: the suite mapping's reader and the value decoder (runtime-c/defaults.c) over
#     mappings built in memory, with readers racing a writer for SECONDS (default 2);
#  2. the library as scripts/build-runtime-c.sh builds it (-Wall -Wextra -Werror), exporting
#     exactly the functions of include/extension_runtime.h;
#  3. roundtrip.c: open URL and defaults round trips, change handlers and the channel's close,
#     against a fake extensiond on a socketpair, linked with that library;
#  4. check_python.py: the Python package's encoder and decoder against the C decoder, Defaults
#     over the C getters, and open_url/defaults() against a fake extensiond in Python.
# Needs cc, nm, python3 (3.9 or later). Prints each step; exits non-zero at the first failure.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
cc=${CC:-cc}
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
flags=(-std=c11 -O2 -Wall -Wextra -Werror -I "$root/include" -I "$root/runtime-c" -I "$root/Tests/Fixtures/c-checks")

echo "== 1. check.c: the mapping reader and the value decoder"
"$cc" "${flags[@]}" "$here/check.c" "$root/runtime-c/defaults.c" "$root/runtime-c/wire.c" -lpthread -o "$work/check"
"$work/check" "${1:-2}"

echo "== 2. scripts/build-runtime-c.sh and the export list"
library="$(bash "$root/scripts/build-runtime-c.sh" --out "$work/lib")"
declared="$(grep -vE '^\s*(/?\*|typedef)' "$root/include/extension_runtime.h" | grep -oE '\bext_[a-z0-9_]+\(' | tr -d '(' | sort -u)"
exported="$(nm -D --defined-only "$library" | awk '{print $3}' | sed 's/@.*//' | grep '^ext_' | sort -u)"
if [ "$declared" != "$exported" ]; then
    echo "the exports differ from the header's functions (< header, > library):" >&2
    diff <(echo "$declared") <(echo "$exported") >&2 || true
    exit 1
fi
echo "exports: $(echo "$exported" | wc -l) functions, exactly the header's"

echo "== 3. roundtrip.c: round trips against a fake extensiond"
"$cc" "${flags[@]}" "$here/roundtrip.c" "$root/runtime-c/wire.c" -L "$work/lib" -lExtensionRuntimeC \
    -Wl,-rpath,"$work/lib" -lpthread -o "$work/roundtrip"
timeout 120 "$work/roundtrip"

echo "== 4. check_python.py: the Python package"
"$cc" "${flags[@]}" -fPIC -shared "$root/runtime-c/runtime.c" "$root/runtime-c/wire.c" "$root/runtime-c/defaults.c" "$root/runtime-c/secrets.c" "$here/shim.c" -lpthread -o "$work/libshim.so"
export PYTHONPATH="$root/bindings/python/src${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONDONTWRITEBYTECODE=1
timeout 300 python3 "$here/check_python.py" codec "$work/libshim.so"
timeout 120 python3 "$here/check_python.py" daemon "$library"
echo "all passed"
