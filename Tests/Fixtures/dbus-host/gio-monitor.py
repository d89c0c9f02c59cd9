#!/usr/bin/python3
"""gio-monitor: records the PropertiesChanged signals of extensiond's extension objects
(org.extensiond1, docs/dbus.md) on GLib's Gio (python3-gi), for
Tests/IntegrationTests/DBusTests.swift.

Usage: gio-monitor.py ADDRESS [--reexecuted]

Connects to the message bus at ADDRESS and asks it (AddMatch, answered before anything else
is printed) for every org.freedesktop.DBus.Properties.PropertiesChanged signal under
/org/extensiond1/extension (path_namespace). Prints one JSON object per line on stdout:

  {"event": "subscribed"}
        The bus has the match rule: every later signal reaches this process.
  {"event": "changed", "path": PATH, "interface": NAME, "changed": {PROPERTY: VALUE, ...},
   "invalidated": [PROPERTY, ...]}
        One signal, in the order the bus delivered them.
  {"event": "reexecuted", "succeeded": B, "version": V, "previous_version": P, "detail": D}
        With --reexecuted: the manager's Reexecuted signal (asked for with a match rule of
        its own, added before "subscribed").

It runs until it is killed or its bus connection closes (then it prints {"event": "closed"}
and exits 0).
"""
import json
import sys

import gi

gi.require_version("Gio", "2.0")
from gi.repository import Gio, GLib  # noqa: E402

RULE = ("type='signal',interface='org.freedesktop.DBus.Properties',member='PropertiesChanged',"
        "path_namespace='/org/extensiond1/extension'")
REEXECUTED = "type='signal',interface='org.extensiond1.Manager',member='Reexecuted',path='/org/extensiond1'"


def emit(**fields):
    print(json.dumps(fields, sort_keys=True, default=str), flush=True)


def main():
    if len(sys.argv) not in (2, 3) or sys.argv[2:] not in ([], ["--reexecuted"]):
        print("usage: gio-monitor.py ADDRESS [--reexecuted]", file=sys.stderr)
        return 2
    flags = Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT | Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION
    connection = Gio.DBusConnection.new_for_address_sync(sys.argv[1], flags, None, None)
    connection.set_exit_on_close(False)
    loop = GLib.MainLoop()

    def on_signal(_connection, _sender, path, _interface, _member, parameters):
        if not path.startswith("/org/extensiond1/extension/"):
            return
        interface, changed, invalidated = parameters.unpack()
        emit(event="changed", path=path, interface=interface, changed=changed, invalidated=invalidated)

    def on_closed(*_):
        emit(event="closed")
        loop.quit()

    # Our own rule (path_namespace, which signal_subscribe cannot express), added with a
    # synchronous call: once the bus has answered it, it applies to every later signal.
    connection.signal_subscribe(None, "org.freedesktop.DBus.Properties", "PropertiesChanged", None, None,
                                Gio.DBusSignalFlags.NO_MATCH_RULE, on_signal)
    connection.connect("closed", on_closed)
    connection.call_sync("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "AddMatch",
                         GLib.Variant("(s)", (RULE,)), None, Gio.DBusCallFlags.NONE, 30000, None)
    if sys.argv[2:] == ["--reexecuted"]:
        def on_reexecuted(_connection, _sender, _path, _interface, _member, parameters):
            succeeded, version, previous, detail = parameters.unpack()
            emit(event="reexecuted", succeeded=succeeded, version=version, previous_version=previous, detail=detail)
        connection.signal_subscribe(None, "org.extensiond1.Manager", "Reexecuted", "/org/extensiond1", None,
                                    Gio.DBusSignalFlags.NO_MATCH_RULE, on_reexecuted)
        connection.call_sync("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "AddMatch",
                             GLib.Variant("(s)", (REEXECUTED,)), None, Gio.DBusCallFlags.NONE, 30000, None)
    emit(event="subscribed")
    loop.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
