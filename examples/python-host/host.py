#!/usr/bin/env python3
"""python-host: an example host of extensiond in Python, on extension_runtime.host (over D-Bus).

    host.py [EXTENSION_ID [MESSAGE]]     (default: com.example.stocks.widget ping)

Begins a request on the extension (extensiond launches or resumes it), writes MESSAGE and a
newline on the request's channel, prints the first line the extension writes back, dismisses the
request and exits 0. The examples answer "ping": c-extension and python-extension with "pong
PID"; the stocks widget greets every request with "stocks-widget pid PID, shown N time(s)"
whatever the host writes. Any failure is printed on stderr, naming what failed, and exits 1 (2
for a usage error).

It waits on both the channel and the bus connection (selectors), as a host with an event loop
would: the request may end (the extension cancels it, or exits) before it answers.
"""
import select
import selectors
import sys
import time
from typing import List

from extension_runtime.host import Host, HostError, HostLibraryNotFoundError, Request

USAGE = """usage: host.py [EXTENSION_ID [MESSAGE]]
Begins a request on EXTENSION_ID (default com.example.stocks.widget) through extensiond's
D-Bus interface, writes MESSAGE (default "ping") on its channel, prints the first line
the extension answers, and dismisses the request. The bus: $EXTENSIOND_BUS (system or
session), else the session bus when extensiond is there, else the system bus."""

REPLY_TIMEOUT = 30.0


def fail(message: str) -> int:
    print(f"host.py: {message}", file=sys.stderr)
    return 1


def main(args: List[str]) -> int:
    if args[:1] in (["-h"], ["--help"]):
        print(USAGE)
        return 0
    if len(args) > 2 or (args and args[0].startswith("-")):
        print(USAGE, file=sys.stderr)
        return 2
    extension_id = args[0] if args else "com.example.stocks.widget"
    message = args[1] if len(args) > 1 else "ping"

    try:
        host = Host()
    except HostLibraryNotFoundError as error:
        return fail(str(error))
    except HostError as error:
        return fail(f"cannot connect to extensiond's bus: {error.text}")
    with host:
        try:
            request = host.begin(extension_id)
        except HostError as error:
            return fail(f"cannot begin a request on {extension_id}: {error.text}")
        try:
            return exchange(host, request, extension_id, message)
        except HostError as error:  # from dismiss
            return fail(f"cannot dismiss request {request.path}: {error.text}")


def exchange(host: Host, request: Request, extension_id: str, message: str) -> int:
    """Writes `message`, prints the first line answered; dismisses the request in the end."""
    with request:  # dismissed on the way out: the extension reads end-of-file
        channel = request.channel
        try:
            channel.sendall(message.encode() + b"\n")
        except OSError as error:
            return fail(f"cannot write to the channel of request {request.path}: {error.strerror or error}")
        received = b""
        deadline = time.monotonic() + REPLY_TIMEOUT
        with selectors.DefaultSelector() as selector:
            selector.register(channel, selectors.EVENT_READ)
            selector.register(host.fileno(), selectors.EVENT_READ)
            while b"\n" not in received:
                try:
                    while host.process() > 0:  # what the blocking calls queued, first
                        pass
                except HostError as error:
                    return fail(f"the bus connection failed: {error.text}")
                left = deadline - time.monotonic()
                if left <= 0:
                    return fail(f"{extension_id} did not answer within {REPLY_TIMEOUT:.0f} s")
                writing = selectors.EVENT_WRITE if host.events() & select.POLLOUT else 0
                selector.modify(host.fileno(), selectors.EVENT_READ | writing)
                # Once the request ended, only what the extension wrote before is still read.
                ready = {key.fileobj for key, _ in selector.select(0 if request.outcome else left)}
                if channel in ready:
                    data = channel.recv(4096)
                    if not data:
                        return fail(f"{extension_id} closed the request's channel without answering")
                    received += data
                elif request.outcome is not None:
                    outcome = request.outcome
                    reason = f": {outcome.reason}" if outcome.reason else ""
                    return fail(f"the request on {extension_id} was {outcome.kind} before it answered{reason}")
        print(received.split(b"\n", 1)[0].decode("utf-8", errors="replace"), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
