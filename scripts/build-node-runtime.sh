#!/usr/bin/env bash
# Builds the Node.js runtime for extensions (bindings/node, docs/node.md): the Node-API addon
# bindings/node/src/addon.c over libExtensionRuntimeC, compiled with the system C compiler and
# Node's headers (Debian: nodejs's /usr/include/node), with no node-gyp and no network.
#
#   scripts/build-node-runtime.sh [--out DIR] [--runtime-c DIR] [--node-include DIR] [--no-bundle] [--debug]
#
#   --out DIR           where to put the package (default: .build/node-runtime)
#   --runtime-c DIR     the directory of libExtensionRuntimeC.so.0 to link with (default:
#                       .build/runtime-c, built there by scripts/build-runtime-c.sh if missing)
#   --node-include DIR  Node's headers, node_api.h (default: /usr/include/node)
#   --no-bundle         do not copy libExtensionRuntimeC.so.0 into the package, and give the
#                       addon no run path: it finds the installed library through the dynamic
#                       loader's path (the Debian package node-extension-runtime is built so)
#   --debug             -O0 -g instead of -O2
#
# Produces the package directory DIR/extension-runtime/ (require('extension-runtime') with DIR
# on NODE_PATH, or copy it into a node_modules directory):
#   package.json, index.js, index.d.ts, README.md   from bindings/node
#   extension_runtime.node                          the addon
#   libExtensionRuntimeC.so.0                       a copy of the C runtime (not with --no-bundle)
# The addon's run path is $ORIGIN, its own directory (not with --no-bundle): the package finds
# the copy of the C runtime beside it wherever the directory is (the build tree, a
# node_modules directory, a copy under /tmp another uid can read), and, without a copy, the
# dynamic loader's path (an installed libExtensionRuntimeC.so.0). No absolute build path is recorded. Prints the
# package's path. $CFLAGS and $LDFLAGS, when set, are added after the script's own flags.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"

out="$root/.build/node-runtime"
runtime_c=""
node_include=/usr/include/node
bundle=1
optimize=(-O2)
while [ $# -gt 0 ]; do
    case "$1" in
        --out) out=${2:?--out needs a directory}; shift 2 ;;
        --out=*) out=${1#*=}; shift ;;
        --runtime-c) runtime_c=${2:?--runtime-c needs a directory}; shift 2 ;;
        --runtime-c=*) runtime_c=${1#*=}; shift ;;
        --node-include) node_include=${2:?--node-include needs a directory}; shift 2 ;;
        --node-include=*) node_include=${1#*=}; shift ;;
        --no-bundle) bundle=0; shift ;;
        --debug) optimize=(-O0 -g); shift ;;
        -h | --help) sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "build-node-runtime.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
cc=${CC:-cc}
command -v "$cc" >/dev/null 2>&1 || { echo "build-node-runtime.sh: no C compiler ($cc); run scripts/dependencies.sh" >&2; exit 1; }
[ -f "$node_include/node_api.h" ] || {
    echo "build-node-runtime.sh: no $node_include/node_api.h (Debian: apt-get install nodejs; or --node-include DIR)" >&2
    exit 1
}
if [ -z "$runtime_c" ]; then
    runtime_c="$root/.build/runtime-c"
    [ -f "$runtime_c/libExtensionRuntimeC.so.0" ] || bash "$root/scripts/build-runtime-c.sh" --out "$runtime_c" >/dev/null
fi
[ -f "$runtime_c/libExtensionRuntimeC.so.0" ] || { echo "build-node-runtime.sh: no $runtime_c/libExtensionRuntimeC.so.0" >&2; exit 1; }

package="$out/extension-runtime"
mkdir -p "$package"
chmod 0755 "$package" # readable by every uid whatever the umask: an extension runs under its own
# Built and copied under temporary names and renamed: a concurrent reader never sees a partial
# file. The addon links against the library's SONAME (libExtensionRuntimeC.so.0), named here
# by path so that no link-time symbolic link is needed.
tmp="$package/.extension_runtime.node.$$"
rpath=(-Wl,-rpath,'$ORIGIN')
[ "$bundle" = 1 ] || rpath=()
"$cc" -std=c11 "${optimize[@]}" -Wall -Wextra -Werror -fPIC -shared -fvisibility=hidden \
    -DNAPI_VERSION=8 -I "$node_include" -I "$root/include" \
    "${rpath[@]}" -Wl,-z,relro -Wl,-z,now -Wl,--as-needed \
    ${CFLAGS:-} ${LDFLAGS:-} \
    "$root/bindings/node/src/addon.c" "$runtime_c/libExtensionRuntimeC.so.0" -lpthread -o "$tmp"
chmod 0755 "$tmp"
mv -f "$tmp" "$package/extension_runtime.node"
for f in package.json index.js index.d.ts README.md; do
    install -m 0644 "$root/bindings/node/$f" "$package/.$f.$$"
    mv -f "$package/.$f.$$" "$package/$f"
done
if [ "$bundle" = 1 ]; then
    install -m 0644 "$runtime_c/libExtensionRuntimeC.so.0" "$package/.libExtensionRuntimeC.so.0.$$"
    mv -f "$package/.libExtensionRuntimeC.so.0.$$" "$package/libExtensionRuntimeC.so.0"
else
    rm -f "$package/libExtensionRuntimeC.so.0"
fi
echo "$package"
