#!/usr/bin/env bash
# The C runtime's secrets (ext_secret_*) and extension_runtime.secrets, without extensiond (nor a
# Swift build):
#
#   Tests/Fixtures/c-secrets-check/run.sh
#
#  1. the library as scripts/build-runtime-c.sh builds it (-Wall -Wextra -Werror), exporting
#     exactly the functions of include/extension_runtime.h;
#  2. roundtrip.c: every function, each answer code's errno, the messages byte for byte, the
#     arguments refused before sending, the zeroing of the secret bytes the library copies
#     (explicit_bzero interposed), calls from a callback and from threads, the channel's close,
#     and the C codec of the secret messages, against a fake extensiond on a socketpair, linked
#     with that library; then again with the library built with -D_FORTIFY_SOURCE=2 (where
#     explicit_bzero is __explicit_bzero_chk);
#  3. check_python.py: extension_runtime.secrets against a fake extensiond in Python.
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
for name in ext_secret_add ext_secret_copy ext_secret_update ext_secret_delete ext_secret_free; do
    grep -qx "$name" <<<"$exported" || { echo "$name is not exported" >&2; exit 1; }
done
echo "exports: $(echo "$exported" | wc -l) functions, exactly the header's"

echo "== 2. roundtrip.c: secrets against a fake extensiond"
"$cc" "${flags[@]}" "$here/roundtrip.c" "$root/runtime-c/wire.c" -L "$work/lib" -lExtensionRuntimeC \
    -Wl,-rpath,"$work/lib" -lpthread -o "$work/roundtrip"
timeout 120 "$work/roundtrip"
CFLAGS="-D_FORTIFY_SOURCE=2" bash "$root/scripts/build-runtime-c.sh" --out "$work/fortified" >/dev/null
"$cc" "${flags[@]}" "$here/roundtrip.c" "$root/runtime-c/wire.c" -L "$work/fortified" -lExtensionRuntimeC \
    -Wl,-rpath,"$work/fortified" -lpthread -o "$work/roundtrip-fortified"
echo -n "fortified: "
timeout 120 "$work/roundtrip-fortified"

echo "== 3. check_python.py: extension_runtime.secrets"
export PYTHONPATH="$root/bindings/python/src${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONDONTWRITEBYTECODE=1
timeout 120 python3 "$here/check_python.py" "$library"
echo "all passed"
