#!/usr/bin/python3
"""extension-caller: an extension (run by extensiond, `readiness: "exec"`) that calls
extensiond's D-Bus interface itself, for Tests/IntegrationTests/DBusTests.swift: a caller that
is an extension's process is refused (org.extensiond1.Error.NotPermitted) unless its manifest
sets hostAccess (docs/dbus.md, "Identity and access").

Usage: /usr/bin/python3 extension-caller.py RECORD_FILE TARGET_ID
Environment: DBUS_SESSION_BUS_ADDRESS, the bus extensiond is on (given by the manifest's
`environment`).

Connects with GLib's Gio (python3-gi), calls org.extensiond1.Manager.ListExtensions() and then
Begin(TARGET_ID, {}), and writes RECORD_FILE (through a temporary file renamed into place, so it
is complete once it exists): a JSON object {"ListExtensions": RESULT, "Begin": RESULT, "pid": N}
where each RESULT is {"error": D-BUS ERROR NAME or null, "message": TEXT or null, "value": what
the call returned (the extension ids, or the request's object path) or null}. Then it exits 0
(its connection closes with it: a request it began is dismissed).
"""
import json
import os
import sys

import gi

gi.require_version("Gio", "2.0")
from gi.repository import Gio, GLib  # noqa: E402

NAME = "org.extensiond1"


def call(connection, method, parameters, reply_type, convert):
    try:
        reply, _fds = connection.call_with_unix_fd_list_sync(
            NAME, "/org/extensiond1", NAME + ".Manager", method, parameters, GLib.VariantType.new(reply_type),
            Gio.DBusCallFlags.NONE, 30000, None, None)
        return {"error": None, "message": None, "value": convert(reply.unpack())}
    except GLib.Error as e:
        text = e.message
        name = ""
        if text.startswith("GDBus.Error:"):
            name, _, text = text[len("GDBus.Error:"):].partition(": ")
        return {"error": name, "message": text, "value": None}


def main():
    record, target = sys.argv[1], sys.argv[2]
    flags = Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT | Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION
    connection = Gio.DBusConnection.new_for_address_sync(os.environ["DBUS_SESSION_BUS_ADDRESS"], flags, None, None)
    result = {
        "pid": os.getpid(),
        "ListExtensions": call(connection, "ListExtensions", None, "(a(ssssuo))", lambda r: [e[0] for e in r[0]]),
        "Begin": call(connection, "Begin", GLib.Variant("(sa{sv})", (target, {})), "(oh)", lambda r: r[0]),
    }
    partial = record + ".partial"
    with open(partial, "w") as f:
        json.dump(result, f, sort_keys=True)
    os.rename(partial, record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
