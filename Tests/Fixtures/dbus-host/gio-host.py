#!/usr/bin/python3
"""gio-host: a host of extensiond's D-Bus interface (org.extensiond1, docs/dbus.md) written on
GLib's Gio (python3-gi), for Tests/IntegrationTests/DBusTests.swift. It uses no code of this
project: it checks that a client of another toolkit gets a request's channel descriptor.

Usage: gio-host.py ADDRESS EXTENSION_ID [--exit-without-dismiss | --no-reply]

Connects to the message bus at ADDRESS, subscribes to the org.extensiond1.Request signals sent
to it, and calls org.extensiond1.Manager.Begin(EXTENSION_ID, {}) with a descriptor list, keeping
the channel descriptor (the reply's handle) open. Prints one JSON object per line on stdout:

  {"event": "begun", "request": PATH, "pid": N, "unique": NAME, "pid_self": N}
        Begin answered: the request's object, its Pid property, this connection's unique
        name and this process's pid.
  {"event": "error", "call": METHOD, "name": D-BUS ERROR NAME, "message": TEXT}
        A call failed (Begin failing: then it exits with status 1).

With --no-reply it sends Begin flagged NO_REPLY_EXPECTED instead (it can never get the
channel), prints {"event": "sent"}, and stays connected until end of input, then prints
{"event": "done"}.

With --exit-without-dismiss it then writes "ping\\n" to the channel, prints the answer as
{"event": "answer", "answer": LINE} and exits at once (status 0) without dismissing: its bus
connection closes with the process. Otherwise it reads commands on stdin, one a line:

  ping           writes "ping\\n" to the channel; prints {"event": "answer", "answer": LINE}
                 (LINE null at end of stream or after 10 s)
  dismiss [PATH] calls org.extensiond1.Request.Dismiss on its request (or on PATH); prints
                 {"event": "dismissed", "request": PATH} or an error object
  wait-signal    waits (at most 10 s) for a Request signal (Completed, Cancelled, Interrupted)
                 on its request; prints {"event": "signal", "member": NAME, "request": PATH,
                 "args": [...]} or {"event": "no-signal"}
  exit           exits at once (status 0) without dismissing
At end of input it prints {"event": "done"} and exits 0.
"""
import json
import os
import select
import sys

import gi

gi.require_version("Gio", "2.0")
from gi.repository import Gio, GLib  # noqa: E402

NAME = "org.extensiond1"


def emit(**fields):
    print(json.dumps(fields, sort_keys=True, default=lambda o: list(o) if isinstance(o, (bytes, bytearray)) else str(o)), flush=True)


def error_fields(call, e):
    """The D-Bus error name and message of a GLib.Error from a call ("GDBus.Error:NAME: text")."""
    text = getattr(e, "message", str(e))
    name = ""
    if text.startswith("GDBus.Error:"):
        name, _, text = text[len("GDBus.Error:"):].partition(": ")
    return {"event": "error", "call": call, "name": name, "message": text}


def read_line(fd, timeout=10.0):
    data = b""
    deadline = GLib.get_monotonic_time() + int(timeout * 1e6)
    while not data.endswith(b"\n"):
        left = (deadline - GLib.get_monotonic_time()) / 1e6
        if left <= 0:
            return None
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            return None
        chunk = os.read(fd, 1)
        if not chunk:
            return data.decode() if data else None
        data += chunk
    return data[:-1].decode()


def ping(fd):
    os.write(fd, b"ping\n")
    emit(event="answer", answer=read_line(fd))


def main():
    if len(sys.argv) < 3:
        print("usage: gio-host.py ADDRESS EXTENSION_ID [--exit-without-dismiss | --no-reply]", file=sys.stderr)
        return 2
    address, extension_id = sys.argv[1], sys.argv[2]
    exit_without_dismiss = "--exit-without-dismiss" in sys.argv[3:]
    flags = Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT | Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION
    connection = Gio.DBusConnection.new_for_address_sync(address, flags, None, None)

    signals = []

    def on_signal(_connection, sender, path, interface, member, parameters):
        signals.append({"member": member, "request": path, "args": parameters.unpack()})

    # Subscribed before Begin, so that no signal of the request can be missed. The signals are
    # unicast (their destination is set): the bus delivers them without a match rule.
    connection.signal_subscribe(None, NAME + ".Request", None, None, None, Gio.DBusSignalFlags.NO_MATCH_RULE, on_signal)

    if "--no-reply" in sys.argv[3:]:
        message = Gio.DBusMessage.new_method_call(NAME, "/org/extensiond1", NAME + ".Manager", "Begin")
        message.set_body(GLib.Variant("(sa{sv})", (extension_id, {})))
        message.set_flags(Gio.DBusMessageFlags.NO_REPLY_EXPECTED)
        connection.send_message(message, Gio.DBusSendMessageFlags.NONE)
        connection.flush_sync(None)
        emit(event="sent", unique=connection.get_unique_name())
        sys.stdin.read()
        emit(event="done")
        return 0

    try:
        reply, fds = connection.call_with_unix_fd_list_sync(
            NAME, "/org/extensiond1", NAME + ".Manager", "Begin",
            GLib.Variant("(sa{sv})", (extension_id, {})), GLib.VariantType.new("(oh)"),
            Gio.DBusCallFlags.NONE, 30000, None, None)
    except GLib.Error as e:
        emit(**error_fields("Begin", e))
        return 1
    request, handle = reply.unpack()
    channel = fds.get(handle)  # a duplicate, ours to keep
    pid = connection.call_sync(
        NAME, request, "org.freedesktop.DBus.Properties", "Get",
        GLib.Variant("(ss)", (NAME + ".Request", "Pid")), GLib.VariantType.new("(v)"),
        Gio.DBusCallFlags.NONE, 30000, None).unpack()[0]
    emit(event="begun", request=request, pid=pid, unique=connection.get_unique_name(), pid_self=os.getpid())

    if exit_without_dismiss:
        ping(channel)
        os._exit(0)

    context = GLib.MainContext.default()
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        if words[0] == "ping":
            ping(channel)
        elif words[0] == "dismiss":
            path = words[1] if len(words) > 1 else request
            try:
                connection.call_sync(NAME, path, NAME + ".Request", "Dismiss", None, None, Gio.DBusCallFlags.NONE, 30000, None)
                emit(event="dismissed", request=path)
            except GLib.Error as e:
                emit(**error_fields("Dismiss", e))
        elif words[0] == "wait-signal":
            deadline = GLib.get_monotonic_time() + 10 * 1000000
            while not signals and GLib.get_monotonic_time() < deadline:
                # Dispatches the subscription's callbacks; a timeout source bounds the wait.
                source = GLib.timeout_source_new(100)
                source.set_callback(lambda *_: False)
                source.attach(context)
                context.iteration(True)
                source.destroy()
            if signals:
                emit(event="signal", **signals.pop(0))
            else:
                emit(event="no-signal")
        elif words[0] == "exit":
            os._exit(0)
        else:
            emit(event="unknown-command", command=line.strip())
    emit(event="done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
