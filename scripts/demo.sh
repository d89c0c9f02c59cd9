#!/usr/bin/env bash
# The quick start: builds extensiond, starts it with its built-in policies on the bundled
# example extensions, and walks through launch -> dismiss -> suspended -> resume.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/dependencies.sh
echo "==> building"
swift build -c release --product extensiond >/dev/null
swift build -c release --product extctl >/dev/null
swift build -c release --product stocks-widget >/dev/null
swift build -c release --product widget-panel >/dev/null
bin=$(swift build -c release --show-bin-path)

stage=$(mktemp -d /tmp/extensiond-demo.XXXXXX)
chmod 755 "$stage"
mkdir -p "$stage/extensions/bin"
cp examples/extensions/*.json "$stage/extensions/"
cp "$bin/stocks-widget" "$stage/extensions/bin/"
socket="$stage/control.sock"

echo "==> starting extensiond (socket $socket, extensions $stage/extensions)"
# Its state (ids.json, the extensions' containers) in the stage too: the demo leaves nothing behind.
"$bin/extensiond" --socket "$socket" --extensions "$stage/extensions" --state-directory "$stage/state" 2>"$stage/extensiond.log" &
daemon=$!
cleanup() {
    kill -TERM "$daemon" 2>/dev/null && wait "$daemon" 2>/dev/null || true
    rm -rf "$stage"
}
trap cleanup EXIT
for _ in $(seq 1 200); do "$bin/extctl" list --socket "$socket" >/dev/null 2>&1 && break; sleep 0.05; done

echo
echo "==> extctl list"
"$bin/extctl" list --socket "$socket"
echo
echo "==> a host (examples/widget-panel) opens the widget twice, dismissing it each time"
"$bin/widget-panel" --socket "$socket" --cycles 2 com.example.stocks.widget
echo
echo "==> extctl status com.example.stocks.widget"
"$bin/extctl" status --socket "$socket" com.example.stocks.widget
echo
echo "==> the suspended widget is refreshed in the background (extctl refresh forces one now)"
"$bin/extctl" refresh --socket "$socket" com.example.stocks.widget | sed 's/^/    /'
# The stop follows the answer within a millisecond or so; wait for it before showing the state.
for _ in $(seq 1 100); do
    "$bin/extctl" status --socket "$socket" --json com.example.stocks.widget | grep -q '"state":"suspended"' && break
    sleep 0.02
done
"$bin/extctl" status --socket "$socket" com.example.stocks.widget | grep -E '^ *(State|Refresh):' | sed 's/^/    /'
echo
echo "==> from a shell: extctl open holds a request until stdin closes"
echo "refresh" | "$bin/extctl" open --socket "$socket" com.example.stocks.widget | sed 's/^/    /'
echo
echo "==> stopping extensiond (SIGTERM): every extension is resumed and terminated"
widget=$("$bin/extctl" list --socket "$socket" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["extensions"][0]["pid"] or "")')
kill -TERM "$daemon"; wait "$daemon"; status=$?
echo "extensiond exited with status $status"
if [ -n "$widget" ] && [ -e "/proc/$widget" ]; then echo "widget pid $widget is still alive!" >&2; exit 1; fi
echo "widget pid $widget is gone; nothing left stopped."
echo
echo "==> the daemon's log"
sed 's/^/    /' "$stage/extensiond.log"
