#!/usr/bin/env bash
# Installs what building and testing extensiond needs beyond the Swift toolchain:
# libsystemd-dev (sd-event, sd-daemon, sd-journal), libseccomp-dev (the extensions' system-call
# filter), libacl1-dev (the shared containers' default ACL), pkg-config, a C compiler for the C runtime (scripts/build-runtime-c.sh), man-db and
# groff for the manual page tests, python3 with venv and pip for the Python package tests,
# python3-jsonschema for the manifest schema test, and Node.js and Java 17 for the managed
# runtime tests. Idempotent.
set -euo pipefail

missing=()
pkg-config --exists libsystemd 2>/dev/null || missing+=(libsystemd-dev)
command -v pkg-config >/dev/null 2>&1 || missing+=(pkg-config)
# A real systemd (user manager, journald, systemd-analyze, systemd-socket-activate) for the
# systemd integration tests, which enter a private mount namespace with unshare and nsenter.
[ -x /lib/systemd/systemd ] && [ -x /lib/systemd/systemd-journald ] || missing+=(systemd)
command -v nsenter >/dev/null 2>&1 && command -v unshare >/dev/null 2>&1 || missing+=(util-linux)
# The open-URL integration tests run private message buses (Tests/IntegrationTests/Harness/
# PrivateBus.swift): dbus-daemon, with D-Bus activation of a fixture app and a fake logind;
# busctl, their client, comes with systemd.
[ -x /usr/bin/dbus-daemon ] || missing+=(dbus-daemon)
# The D-Bus interface's tests (Tests/IntegrationTests/DBusTests.swift) call it with real clients:
# gdbus (libglib2.0-bin) and a Python host on GLib's Gio (python3-gi).
command -v gdbus >/dev/null 2>&1 || missing+=(libglib2.0-bin)
# polkitd: DBusAccessTests run the real polkit daemon on a private system bus.
[ -x /usr/lib/polkit-1/polkitd ] || missing+=(polkitd)
/usr/bin/python3 -c 'import gi; gi.require_version("Gio", "2.0"); from gi.repository import Gio' >/dev/null 2>&1 || missing+=(python3-gi gir1.2-glib-2.0)
# The C runtime (libExtensionRuntimeC) and the C examples and tests: cc, with binutils' nm and
# readelf for the export checks.
command -v cc >/dev/null 2>&1 || missing+=(gcc libc6-dev)
command -v nm >/dev/null 2>&1 && command -v readelf >/dev/null 2>&1 || missing+=(binutils)
# The extensions' system-call filter is built with libseccomp.
pkg-config --exists libseccomp 2>/dev/null || missing+=(libseccomp-dev)
# Each extension point's network namespace is joined to the host's network by slirp4netns
# (the root daemon refuses networked sandboxed launches without it); the tests use iproute2.
command -v slirp4netns >/dev/null 2>&1 || [ -x /usr/bin/slirp4netns ] || missing+=(slirp4netns)
command -v ip >/dev/null 2>&1 || [ -x /usr/sbin/ip ] || missing+=(iproute2)
# The shared containers' default ACL is set with libacl.
[ -f /usr/include/sys/acl.h ] || missing+=(libacl1-dev)
# The secret store's cipher and key memory: libsodium.
pkg-config --exists libsodium 2>/dev/null || missing+=(libsodium-dev)
# Background transfers: the transfer worker (Sources/extensiond-transfer) is built on libcurl.
pkg-config --exists libcurl 2>/dev/null || missing+=(libcurl4-openssl-dev)
# Manual pages: `man --warnings -l` (man-db) renders them with groff.
command -v man >/dev/null 2>&1 || missing+=(man-db)
command -v groff >/dev/null 2>&1 || missing+=(groff-base)
# Python extensions: /usr/bin/python3 with venv (a fresh virtual environment per test run) and
# pip inside it (ensurepip's wheels).
[ -x /usr/bin/python3 ] || missing+=(python3)
/usr/bin/python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || missing+=(python3-venv)
# The manifest schema check (IntegrationTests/ManifestSchemaTests): a draft 2020-12 validator.
/usr/bin/python3 -c 'import jsonschema; jsonschema.Draft202012Validator' >/dev/null 2>&1 || missing+=(python3-jsonschema)

# Managed runtimes as extensions (Tests/IntegrationTests/ManagedRuntimeTests.swift): Node.js,
# and Java 17 (the JRE alone: its jdk.compiler module compiles the Java fixture, so no JDK).
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v java >/dev/null 2>&1 && java -m jdk.compiler/com.sun.tools.javac.Main -version >/dev/null 2>&1 \
    || missing+=(openjdk-17-jre-headless)

# Node.js and Java as first-class runtimes (bindings/node on Node-API, bindings/java on JNI, both
# on libExtensionRuntimeC): Node's headers, and the JDK's jni.h and javac.
[ -f /usr/include/node/node_api.h ] || missing+=(libnode-dev)
[ -f /usr/lib/jvm/java-17-openjdk-amd64/include/jni.h ] || missing+=(openjdk-17-jdk-headless)

if [ ${#missing[@]} -gt 0 ]; then
    echo "==> installing ${missing[*]}"
    if [ "$(id -u)" -eq 0 ]; then sudo=""; else sudo="sudo"; fi
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi

command -v swift >/dev/null 2>&1 || { echo "swift is not on PATH (Swift 6.1 or later is required)" >&2; exit 1; }
