#!/usr/bin/env bash
# Installs the Debian packages of dist/ (scripts/package.sh) on this machine, checks what they
# installed, runs a C extension built against them under the installed daemon, then purges
# them and checks that nothing of theirs is left. Needs root (or sudo). Every check that fails
# stops the script with a line naming it; the last line is the count of checks.
#
#   scripts/test-packages.sh
#
# Checks:
#   1. apt-get install ./dist/*.deb succeeds; the socket is enabled; /var/lib/extensiond exists
#      (root, 0755); the binaries need no libswift*.so and the packages depend on no Swift
#      package.
#   2. extensiond --version prints the package's upstream version; man extctl renders; the bash
#      completion is installed and defines the completion of extctl.
#   3. examples/c-extension/main.c compiles with `pkg-config --cflags --libs extension-runtime`
#      alone, and runs under the installed daemon (default directories: manifest in
#      /etc/extensiond/extensions, state in /var/lib/extensiond): ping, and a save under a task
#      assertion. examples/c-host/host.c compiles with `pkg-config --cflags --libs
#      extension-host` alone, links to the installed libExtensionHostC, and without a bus fails
#      with a message naming the bus; the D-Bus policy, interfaces and polkit action are
#      installed.
#      docs/tutorial.md runs as written (scripts/test-tutorial.py): an extension in Python, C,
#      Node.js and Java, each answering and saving in its container under an assertion (Node.js
#      and Java on the installed node-extension-runtime and libextension-runtime-java: their
#      files are where Debian's Node.js and JVM look, linked to the installed C runtime, with
#      no run path).
#   4. /usr/bin/python3 imports extension_runtime, which loads the installed libraries (through
#      pkg-config, and through the dynamic loader alone).
#   5. dpkg --purge removes every file the packages listed, the configuration (/etc/extensiond),
#      the state (/var/lib/extensiond) and the socket's enablement.
#
# The packages must not be installed already: the script refuses rather than purge an
# installation it did not make. If it fails half-way, it purges what it installed.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

packages=(extensiond libextensionruntimec0 libextensionruntimec-dev libextensionhostc0 libextensionhostc-dev python3-extension-runtime
    node-extension-runtime libextension-runtime-jni libextension-runtime-java)
if [ "$(id -u)" -eq 0 ]; then sudo=""; else sudo="sudo"; fi
checks=0
fail() { echo "test-packages: FAILED: $*" >&2; exit 1; }
ok() { checks=$((checks + 1)); echo "ok $checks - $*"; }

for p in "${packages[@]}"; do
    ls dist/"${p}"_*.deb >/dev/null 2>&1 || fail "dist/ has no ${p}_*.deb (run scripts/package.sh)"
    if dpkg-query -W -f '${Status}' "$p" 2>/dev/null | grep -qv "not-installed"; then
        fail "$p is already installed (or not purged): run 'dpkg --purge ${packages[*]}' first"
    fi
done
for d in /etc/extensiond /var/lib/extensiond /run/extensiond; do
    [ ! -e "$d" ] || fail "$d exists before the install (another installation of extensiond, or the state of a root daemon run by hand, e.g. scripts/demo.sh): move it away first"
done

work=$(mktemp -d)
chmod 0755 "$work" # the extension runs under a uid of its own and must reach its executable
daemon_pid=""
bus_pid=""
installed=false
cleanup() {
    status=$?
    [ -z "$daemon_pid" ] || { kill "$daemon_pid" 2>/dev/null || true; }
    [ -z "$bus_pid" ] || { kill "$bus_pid" 2>/dev/null || true; }
    if $installed; then
        echo "test-packages: purging what this run installed" >&2
        $sudo dpkg --purge "${packages[@]}" >/dev/null 2>&1 || true
    fi
    rm -rf "$work"
    exit $status
}
trap cleanup EXIT

echo "==> 1. apt-get install ./dist/*.deb"
$sudo apt-get update -qq
installed=true
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq ./dist/*.deb >"$work/apt.log" 2>&1 \
    || { cat "$work/apt.log" >&2; fail "apt-get install ./dist/*.deb"; }
for p in "${packages[@]}"; do
    [ "$(dpkg-query -W -f '${Status}' "$p")" = "install ok installed" ] || fail "$p is not installed"
done
ok "apt-get install ./dist/*.deb installed ${packages[*]}"
for f in /usr/bin/extensiond /usr/bin/extctl /lib/systemd/system/extensiond.service /lib/systemd/system/extensiond.socket \
    /usr/lib/systemd/user/extensiond.service /usr/lib/systemd/user/extensiond.socket; do
    [ -f "$f" ] || fail "$f is missing"
done
grep -qx "ExecStart=/usr/bin/extensiond" /lib/systemd/system/extensiond.service || fail "the system unit does not start /usr/bin/extensiond"
ok "the daemon, extctl and the system and user units are installed (ExecStart=/usr/bin/extensiond)"
[ "$(readlink /etc/systemd/system/sockets.target.wants/extensiond.socket)" = /lib/systemd/system/extensiond.socket ] \
    || fail "extensiond.socket is not enabled (no /etc/systemd/system/sockets.target.wants/extensiond.socket)"
ok "extensiond.socket is enabled"
[ "$(stat -c '%U:%G %a' /var/lib/extensiond)" = "root:root 755" ] || fail "/var/lib/extensiond is $(stat -c '%U:%G %a' /var/lib/extensiond 2>&1), not root:root 755"
ok "/var/lib/extensiond exists, root:root 0755"
for b in /usr/bin/extensiond /usr/bin/extctl; do
    needed=$(readelf -d "$b" | awk '/NEEDED/ { print $NF }')
    [ -n "$needed" ] || fail "readelf -d $b lists no needed library"
    ! grep -qi swift <<<"$needed" || fail "$b needs a Swift library: $needed"
done
depends=$(dpkg-query -W -f '${Depends}\n' "${packages[@]}")
! grep -qi swift <<<"$depends" || fail "a package depends on a Swift package: $depends"
ok "no libswift*.so needed by extensiond or extctl, and no Swift package depended on"

echo "==> 2. version, manual page, completion"
upstream=$(dpkg-query -W -f '${Version}' extensiond | sed 's/-[^-]*$//')
version=$(/usr/bin/extensiond --version) || fail "extensiond --version exited non-zero"
[ "$version" = "$upstream" ] || fail "extensiond --version prints '$version', the package is $upstream"
ok "extensiond --version prints $version"
[ "$(man -w extctl)" = /usr/share/man/man1/extctl.1.gz ] || fail "man -w extctl: $(man -w extctl 2>&1)"
page=$(MANWIDTH=80 LC_ALL=C.UTF-8 man --warnings extctl 2>"$work/man.err") || fail "man extctl exited non-zero"
[ ! -s "$work/man.err" ] || fail "man extctl warns: $(cat "$work/man.err")"
grep -q "^ *extctl . inspect and control extensiond$" <<<"$page" || fail "man extctl does not show its NAME line"
[ "$(lexgrog /usr/share/man/man1/extctl.1.gz)" = '/usr/share/man/man1/extctl.1.gz: "extctl - inspect and control extensiond"' ] \
    || fail "whatis cannot read the NAME line: $(lexgrog /usr/share/man/man1/extctl.1.gz 2>&1)"
ok "man extctl renders, with a NAME line whatis reads"
completion=/usr/share/bash-completion/completions/extctl
[ -f "$completion" ] || fail "$completion is missing"
defined=$(bash -c ". '$completion' && complete -p extctl") || fail "sourcing $completion fails"
grep -q -- "-F _extctl extctl" <<<"$defined" || fail "$completion does not define the completion of extctl: $defined"
if [ -f /usr/share/bash-completion/bash_completion ]; then # bash-completion's loader finds it on demand
    loaded=$(bash -c '. /usr/share/bash-completion/bash_completion && __load_completion extctl && complete -p extctl') \
        || fail "bash-completion does not load the completion of extctl"
    grep -q -- "-F _extctl extctl" <<<"$loaded" || fail "bash-completion loads something else for extctl: $loaded"
fi
ok "the bash completion of extctl is installed and loads"
for f in /usr/share/zsh/vendor-completions/_extctl /usr/share/fish/vendor_completions.d/extctl.fish /usr/share/doc/extensiond/operations.md; do
    [ -s "$f" ] || fail "$f is missing"
done
ok "zsh and fish completions and the docs are installed"

echo "==> 3. a C extension against the installed headers, under the installed daemon"
flags=$(pkg-config --cflags --libs extension-runtime) || fail "pkg-config --cflags --libs extension-runtime"
# shellcheck disable=SC2086 # the flags are words
cc -Wall -Werror "$root/examples/c-extension/main.c" $flags -o "$work/c-extension" 2>"$work/cc.err" \
    || fail "cc main.c \$(pkg-config --cflags --libs extension-runtime): $(cat "$work/cc.err")"
resolved=$(ldd "$work/c-extension" | awk '$1 == "libExtensionRuntimeC.so.0" { print $3 }')
# (readlink -f: with a merged /usr, the loader's path may be /lib/TRIPLET.)
[ -n "$resolved" ] && [ "$(readlink -f "$resolved")" = "$(readlink -f "/usr/lib/$(dpkg-architecture -qDEB_HOST_MULTIARCH)/libExtensionRuntimeC.so.0")" ] \
    || fail "the C extension loads libExtensionRuntimeC.so.0 from '$resolved'"
ok "cc main.c \$(pkg-config --cflags --libs extension-runtime) builds it ($flags), linked to $resolved"

# A host in C over D-Bus: built against the installed header and library; with no bus to
# reach, it fails naming the bus (running it against a daemon is the integration tests' job).
flags=$(pkg-config --cflags --libs extension-host) || fail "pkg-config --cflags --libs extension-host"
# shellcheck disable=SC2086 # the flags are words
cc -Wall -Werror "$root/examples/c-host/host.c" $flags -o "$work/c-host" 2>"$work/cc.err" \
    || fail "cc host.c \$(pkg-config --cflags --libs extension-host): $(cat "$work/cc.err")"
resolved=$(ldd "$work/c-host" | awk '$1 == "libExtensionHostC.so.0" { print $3 }')
[ -n "$resolved" ] && [ "$(readlink -f "$resolved")" = "$(readlink -f "/usr/lib/$(dpkg-architecture -qDEB_HOST_MULTIARCH)/libExtensionHostC.so.0")" ] \
    || fail "the C host loads libExtensionHostC.so.0 from '$resolved'"
"$work/c-host" --help >"$work/host.out" 2>&1 || fail "c-host --help exited non-zero: $(cat "$work/host.out")"
grep -q "^usage: host " "$work/host.out" || fail "c-host --help prints no usage: $(cat "$work/host.out")"
if env -i PATH=/usr/bin:/bin EXTENSIOND_BUS=system DBUS_SYSTEM_BUS_ADDRESS="unix:path=$work/no-bus" \
    "$work/c-host" >"$work/host.out" 2>"$work/host.err"; then
    fail "c-host succeeded without a bus"
fi
grep -q "cannot connect to the system bus (unix:path=$work/no-bus)" "$work/host.err" \
    || fail "c-host without a bus does not name the bus: $(cat "$work/host.err")"
ok "cc host.c \$(pkg-config --cflags --libs extension-host) builds the C host ($flags), linked to $resolved; without a bus it says: $(cat "$work/host.err")"
for f in /usr/share/dbus-1/system.d/org.extensiond1.conf /usr/share/dbus-1/interfaces/org.extensiond1.Manager.xml \
    /usr/share/dbus-1/interfaces/org.extensiond1.Extension.xml /usr/share/dbus-1/interfaces/org.extensiond1.Request.xml \
    /usr/share/polkit-1/actions/org.extensiond1.policy /usr/share/dbus-1/system-services/org.extensiond1.service; do
    [ -s "$f" ] || fail "$f is missing"
done
ok "the D-Bus policy, the interfaces' introspection data and the polkit action are installed"

# The extension, sandboxed under its own uid, writes its state in its own container (HOME).
container=/var/lib/extensiond/extensions/org.example.c
$sudo install -d /etc/extensiond/extensions
cat >"$work/manifest.json" <<EOF
{"id": "org.example.c", "executable": "$work/c-extension", "environment": {"C_EXTENSION_STATE": "$container/state.txt"}}
EOF
$sudo install -m 0644 "$work/manifest.json" /etc/extensiond/extensions/org.example.c.json
# The stocks widget (examples/stocks-widget, built as the packages' Swift code is, statically
# linked), for the C host below; in the work directory, which its uid can reach.
# From scripts/package.sh's copy of the tree, whose Swift build it reuses, when it is there.
tree="$root/.build-package/extensiond"
[ -d "$tree/.build-deb" ] || tree="$root"
swift build -c release --static-swift-stdlib --package-path "$tree" --scratch-path "$tree/.build-deb" --product stocks-widget \
    >"$work/stocks-build.log" 2>&1 || { cat "$work/stocks-build.log" >&2; fail "swift build --product stocks-widget"; }
install -m 0755 "$tree/.build-deb/release/stocks-widget" "$work/stocks-widget"
printf '{"id": "com.example.stocks.widget", "point": "widget", "executable": "%s"}\n' "$work/stocks-widget" >"$work/stocks.json"
$sudo install -m 0644 "$work/stocks.json" /etc/extensiond/extensions/com.example.stocks.widget.json
# A message bus of the test's own standing in for the system bus (this machine may have none):
# the root daemon takes org.extensiond1 there (--bus auto: the system bus for root).
dbus-daemon --session --address="unix:path=$work/system-bus" --fork --print-pid >"$work/bus.pid" \
    || fail "dbus-daemon did not start"
bus_pid=$(cat "$work/bus.pid")
export DBUS_SYSTEM_BUS_ADDRESS="unix:path=$work/system-bus"
# The installed daemon with its default directories, as root (XDG_RUNTIME_DIR unset: the
# system socket /run/extensiond/control.sock). Readiness is its READY=1 on a notify socket.
daemon_pid=$($sudo env -u XDG_RUNTIME_DIR -u XDG_DATA_HOME -u XDG_STATE_HOME DBUS_SYSTEM_BUS_ADDRESS="$DBUS_SYSTEM_BUS_ADDRESS" /usr/bin/python3 - "$work" <<'EOF'
import os, socket, subprocess, sys
work = sys.argv[1]
path = os.path.join(work, "notify.sock")
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(path)
s.settimeout(60)
log = open(os.path.join(work, "daemon.log"), "wb")
daemon = subprocess.Popen(["/usr/bin/extensiond", "--log-target", "console"], env=dict(os.environ, NOTIFY_SOCKET=path),
                          stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
try:
    while b"READY=1" not in s.recv(4096).split(b"\n"):
        pass
except socket.timeout:
    daemon.kill()
    sys.exit("no READY=1 from extensiond within 60 s")
print(daemon.pid)
EOF
) || fail "the installed daemon did not start: $(cat "$work/daemon.log")"
coproc host { env -u XDG_RUNTIME_DIR /usr/bin/extctl open org.example.c 2>"$work/open.err"; }
IFS= read -r -t 60 -u "${host[0]}" pid || fail "extctl open org.example.c printed no pid: $(cat "$work/open.err")"
echo ping >&"${host[1]}"
IFS= read -r -t 30 -u "${host[0]}" answer || fail "no answer to ping"
# It reports its pid in its own pid namespace (the sandbox's): the last field of its NSpid.
nspid=$(awk '/^NSpid:/ { print $NF }' "/proc/$pid/status")
[ "$answer" = "pong $nspid" ] || fail "the C extension answered '$answer' to ping, not 'pong $nspid' (pid $pid on the host)"
[ "$(readlink "/proc/$pid/exe")" = "$work/c-extension" ] || fail "pid $pid is not the C extension"
echo "save hello from the packages" >&"${host[1]}"
IFS= read -r -t 30 -u "${host[0]}" answer || fail "no answer to save"
[ "$answer" = saved ] || fail "the C extension answered '$answer' to save"
[ "$(cat "$container/state.txt")" = "hello from the packages" ] || fail "the C extension's save did not reach its file"
input=${host[1]}
exec {input}>&- # end of input: extctl dismisses the request and exits 0
wait "$host_PID" || fail "extctl open exited non-zero: $(cat "$work/open.err")"
[ -s /var/lib/extensiond/ids.json ] || fail "the daemon wrote no /var/lib/extensiond/ids.json"
ok "the C extension (pid $pid) runs under the installed daemon: ping, save under an assertion; ids.json in /var/lib/extensiond"
# The C host example, built from the installed packages (above), opens the stocks widget over
# D-Bus, twice: the second request resumes the same process.
first=$(EXTENSIOND_BUS=system "$work/c-host" com.example.stocks.widget 2>"$work/host.err") \
    || fail "the C host could not open the stocks widget: $(cat "$work/host.err") (daemon: $(tail -5 "$work/daemon.log"))"
[[ "$first" =~ ^stocks-widget\ pid\ ([0-9]+),\ shown\ 1\ time ]] || fail "the C host printed '$first'"
widget=${BASH_REMATCH[1]}
second=$(EXTENSIOND_BUS=system "$work/c-host" com.example.stocks.widget 2>"$work/host.err") || fail "the C host's second open: $(cat "$work/host.err")"
[ "$second" = "stocks-widget pid $widget, shown 2 time(s)" ] || fail "the second open printed '$second', not the same process shown a second time"
ok "the C host (pkg-config extension-host) opens the stocks widget over D-Bus under the installed daemon: '$first', then '$second'"
# The Node.js and Java runtimes' packages: in Debian's places, on the installed C runtime.
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
addon=/usr/lib/$multiarch/nodejs/extension-runtime/extension_runtime.node
jni=/usr/lib/$multiarch/jni/libextension_runtime_jni.so
for f in "$addon" /usr/lib/$multiarch/nodejs/extension-runtime/{index.js,index.d.ts,package.json} "$jni" /usr/share/java/extension-runtime.jar; do
    [ -f "$f" ] || fail "$f is missing"
done
for f in "$addon" "$jni"; do
    ! readelf -d "$f" | grep -Eq 'RPATH|RUNPATH' || fail "$f has a run path: $(readelf -d "$f" | grep -E 'RPATH|RUNPATH')"
    # (/lib is /usr/lib on a merged-/usr system: the loader may name either.)
    ldd "$f" | grep -Eq "libExtensionRuntimeC\.so\.0 => (/usr)?/lib/$multiarch/libExtensionRuntimeC\.so\.0" \
        || fail "$f does not load the installed libExtensionRuntimeC.so.0: $(ldd "$f")"
done
ok "node-extension-runtime and libextension-runtime-java/-jni install the module, the jar and the JNI library where Node.js and the JVM look, on the installed C runtime"
# docs/tutorial.md, as a reader runs it after the install: every file written, every command
# run and its output compared (Python, C, Node.js, Java; each under the default sandbox).
env -u XDG_RUNTIME_DIR /usr/bin/python3 "$root/scripts/test-tutorial.py" >"$work/tutorial.log" 2>&1 \
    || { cat "$work/tutorial.log" >&2; fail "docs/tutorial.md (scripts/test-tutorial.py; the daemon's log: $(tail -5 "$work/daemon.log"))"; }
ok "docs/tutorial.md runs as written: $(tail -1 "$work/tutorial.log")"
$sudo kill -TERM "$daemon_pid"
# Not this shell's child: tail --pid returns when it has exited (it ends its extensions first,
# within terminateGraceSeconds, 5 s by default).
timeout 60 tail --pid="$daemon_pid" -f /dev/null || true
! kill -0 "$daemon_pid" 2>/dev/null || fail "the daemon did not exit within 60 s of SIGTERM"
daemon_pid=""
ok "the daemon exits on SIGTERM"

echo "==> 4. the Python package with the system's python3"
cd "$work" # not the source tree: the package must come from the installed files
where=$(env -i /usr/bin/python3 -c 'import extension_runtime; print(extension_runtime.__file__)') \
    || fail "/usr/bin/python3 -c 'import extension_runtime' fails"
[ "$where" = /usr/lib/python3/dist-packages/extension_runtime/__init__.py ] || fail "extension_runtime comes from $where"
ok "/usr/bin/python3 imports extension_runtime from /usr/lib/python3/dist-packages"
# With pkg-config (PATH has it): the -dev package's extension-runtime.pc names the library.
loaded=$(env -i PATH=/usr/bin:/bin /usr/bin/python3 -c 'from extension_runtime import _library; l = _library.library(); print(l._name, l.ext_runtime_is_supervised())') \
    || fail "extension_runtime cannot load the library through pkg-config"
[ "$loaded" = "/usr/lib/$(dpkg-architecture -qDEB_HOST_MULTIARCH)/libExtensionRuntimeC.so.0 0" ] || fail "through pkg-config it loaded: $loaded"
# Without pkg-config on PATH: the dynamic loader's own search.
loaded=$(env -i PATH=/nonexistent /usr/bin/python3 -c 'from extension_runtime import _library; l = _library.library(); print(l._name, l.ext_runtime_is_supervised())') \
    || fail "extension_runtime cannot load the library through the dynamic loader"
[ "$loaded" = "libExtensionRuntimeC.so.0 0" ] || fail "through the loader it loaded: $loaded"
ok "extension_runtime loads libExtensionRuntimeC through pkg-config and through the dynamic loader"
loaded=$(env -i PATH=/usr/bin:/bin /usr/bin/python3 -c 'from extension_runtime import _host_library; print(_host_library.library()._name)') \
    || fail "extension_runtime.host cannot load libExtensionHostC through pkg-config"
[ "$loaded" = "/usr/lib/$(dpkg-architecture -qDEB_HOST_MULTIARCH)/libExtensionHostC.so.0" ] || fail "through pkg-config it loaded: $loaded"
loaded=$(env -i PATH=/nonexistent /usr/bin/python3 -c 'from extension_runtime import _host_library; print(_host_library.library()._name)') \
    || fail "extension_runtime.host cannot load libExtensionHostC through the dynamic loader"
[ "$loaded" = "libExtensionHostC.so.0" ] || fail "through the loader it loaded: $loaded"
ok "extension_runtime.host loads libExtensionHostC through pkg-config and through the dynamic loader"
cd "$root"

echo "==> 5. dpkg --purge"
listed=$(dpkg -L "${packages[@]}" | sort -u)
$sudo dpkg --purge "${packages[@]}" >"$work/purge.log" 2>&1 || { cat "$work/purge.log" >&2; fail "dpkg --purge"; }
installed=false
for p in "${packages[@]}"; do
    dpkg-query -W -f '${Status}' "$p" 2>/dev/null | grep -qv "not-installed" && fail "$p is still known to dpkg after the purge"
done
left=()
while IFS= read -r path; do
    [ -n "$path" ] && [ "$path" != "/." ] || continue
    if [ -L "$path" ] || [ -e "$path" ]; then
        # A directory another installed package owns (/usr/bin, /lib/systemd/system) stays, and
        # so does /lib where it is the merged-/usr link to /usr/lib.
        if [ -d "$path" ] && { dpkg -S "$path" || dpkg -S "$(readlink -f "$path")"; } >/dev/null 2>&1; then continue; fi
        left+=("$path")
    fi
done <<<"$listed"
[ ${#left[@]} -eq 0 ] || fail "left after the purge: ${left[*]}"
ok "dpkg --purge removed all $(wc -l <<<"$listed") paths the packages listed (but directories other packages own)"
for d in /etc/extensiond /var/lib/extensiond /run/extensiond; do
    [ ! -e "$d" ] || fail "$d is left after the purge"
done
ok "the configuration (/etc/extensiond), the state (/var/lib/extensiond) and /run/extensiond are gone"
leftover=$(find /etc/systemd /var/lib/systemd/deb-systemd-helper-enabled /var/lib/systemd/deb-systemd-helper-masked \
    -name '*extensiond*' 2>/dev/null || true)
[ -z "$leftover" ] || fail "systemd enablement left after the purge: $leftover"
ok "the socket's enablement is gone"

echo "$checks passed, 0 failed"
