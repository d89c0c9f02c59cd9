#!/usr/bin/env bash
# Builds the Java runtime for extensions (bindings/java, docs/java.md): the JNI library
# libextension_runtime_jni.so over libExtensionRuntimeC, and extension-runtime.jar, with the
# system C compiler and the JDK's javac and jar (no Maven or Gradle, no network).
#
#   scripts/build-java-runtime.sh [--out DIR] [--debug] [--runtime-c DIR] [--rpath VALUE]
#
#   --out DIR        where to put everything (default: .build/java-runtime)
#   --debug          -O0 -g instead of -O2
#   --runtime-c DIR  link against DIR/libExtensionRuntimeC.so (an installed or already built
#                    one) instead of building the C runtime into DIR of --out
#   --rpath VALUE    the JNI library's RUNPATH (default: $ORIGIN, the directory it lies in;
#                    "" for none, as for a library installed beside libExtensionRuntimeC in the
#                    system's library path)
#
# Produces DIR/libextension_runtime_jni.so, DIR/extension-runtime.jar and, unless --runtime-c
# is given, DIR/libExtensionRuntimeC.so.0 (scripts/build-runtime-c.sh --out DIR): DIR is then
# self-contained, and `java -cp DIR/extension-runtime.jar:...` finds the JNI library beside the
# jar, which finds the C runtime beside itself. Prints the jar's path.
# The JDK is $JAVA_HOME, else /usr/lib/jvm/java-17-openjdk-amd64, else the one of `java` on the
# PATH; its include/jni.h is needed (Debian: openjdk-17-jdk-headless). Without bin/javac or
# bin/jar the JDK's modules are run with `java -m` instead. $CFLAGS and $LDFLAGS, when set,
# are added after the script's own flags (a distribution's hardening flags, for instance).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"

out="$root/.build/java-runtime"
optimize=(-O2)
debug=()
runtime_c=""
rpath='$ORIGIN'
while [ $# -gt 0 ]; do
    case "$1" in
        --out) out=${2:?--out needs a directory}; shift 2 ;;
        --out=*) out=${1#*=}; shift ;;
        --debug) optimize=(-O0 -g); debug=(--debug); shift ;;
        --runtime-c) runtime_c=${2:?--runtime-c needs a directory}; shift 2 ;;
        --runtime-c=*) runtime_c=${1#*=}; shift ;;
        --rpath) rpath=${2?--rpath needs a value}; shift 2 ;;
        --rpath=*) rpath=${1#*=}; shift ;;
        -h | --help) sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "build-java-runtime.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done

# The JDK.
jdk=${JAVA_HOME:-}
if [ -z "$jdk" ] && [ -d /usr/lib/jvm/java-17-openjdk-amd64 ]; then jdk=/usr/lib/jvm/java-17-openjdk-amd64; fi
if [ -z "$jdk" ] && command -v java >/dev/null 2>&1; then jdk=$(dirname "$(dirname "$(readlink -f "$(command -v java)")")"); fi
[ -n "$jdk" ] && [ -x "$jdk/bin/java" ] || { echo "build-java-runtime.sh: no JDK found (set JAVA_HOME); run scripts/dependencies.sh" >&2; exit 1; }
[ -f "$jdk/include/jni.h" ] || { echo "build-java-runtime.sh: $jdk/include/jni.h is missing: install the JDK (Debian: openjdk-17-jdk-headless)" >&2; exit 1; }
if [ -x "$jdk/bin/javac" ]; then javac=("$jdk/bin/javac"); else javac=("$jdk/bin/java" -m jdk.compiler/com.sun.tools.javac.Main); fi
if [ -x "$jdk/bin/jar" ]; then jar=("$jdk/bin/jar"); else jar=("$jdk/bin/java" -m jdk.jartool/sun.tools.jar.Main); fi
cc=${CC:-cc}
command -v "$cc" >/dev/null 2>&1 || { echo "build-java-runtime.sh: no C compiler ($cc); run scripts/dependencies.sh" >&2; exit 1; }

mkdir -p "$out"
out=$(cd "$out" && pwd)

# The C runtime: built into DIR, or the one given.
if [ -z "$runtime_c" ]; then
    bash "$root/scripts/build-runtime-c.sh" --out "$out" "${debug[@]}" >/dev/null
    runtime_c=$out
fi
[ -e "$runtime_c/libExtensionRuntimeC.so" ] || { echo "build-java-runtime.sh: no libExtensionRuntimeC.so in $runtime_c" >&2; exit 1; }

# The JNI library, built under a temporary name and renamed (a concurrent reader never sees a
# partial library).
rpath_flags=()
[ -n "$rpath" ] && rpath_flags=("-Wl,-rpath,$rpath")
tmp="$out/.libextension_runtime_jni.so.$$"
"$cc" -std=c11 "${optimize[@]}" -Wall -Wextra -Werror -fPIC -shared -fvisibility=hidden \
    -I "$root/include" -I "$jdk/include" -I "$jdk/include/linux" \
    -Wl,-soname,libextension_runtime_jni.so -Wl,-z,relro -Wl,-z,now -Wl,--as-needed -Wl,--no-undefined \
    "${rpath_flags[@]}" \
    ${CFLAGS:-} ${LDFLAGS:-} \
    "$root/bindings/java/src/main/c/extension_runtime_jni.c" -L "$runtime_c" -lExtensionRuntimeC -lpthread -o "$tmp"
chmod 0755 "$tmp"
mv -f "$tmp" "$out/libextension_runtime_jni.so"

# The jar: the classes compiled for Java 17, in a fresh directory.
classes=$(mktemp -d "$out/.classes.XXXXXX")
trap 'rm -rf "$classes"' EXIT
"${javac[@]}" --release 17 -encoding UTF-8 -Xlint:all -Werror -d "$classes" \
    "$root"/bindings/java/src/main/java/org/extensiond/runtime/*.java
tmp="$out/.extension-runtime.jar.$$"
"${jar[@]}" --create --file "$tmp" -C "$classes" .
chmod 0644 "$tmp"
mv -f "$tmp" "$out/extension-runtime.jar"
echo "$out/extension-runtime.jar"
