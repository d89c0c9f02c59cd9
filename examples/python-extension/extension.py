#!/usr/bin/env python3
"""python-extension: an extension written in Python on the `extension_runtime` package
(bindings/python; `pip install ./bindings/python`).

Each request channel takes line commands:
  ping         -> "pong <pid>"
  save <text>  -> saves <text> to $PY_EXTENSION_STATE under a task assertion, atomically
                  (temporary file, fsync, rename; abandoned when expired); "saved" or "not saved"
  hold         -> takes an assertion with `expiring_activity`: "holding", then keeps it until it
                  is about to expire, answers "expired" and lets it go; "denied" at once when
                  none was granted

The package finds libExtensionRuntimeC through $EXTENSION_RUNTIME_LIB or pkg-config.
"""
import os
import sys
import threading

import extension_runtime as rt

STATE = os.environ.get("PY_EXTENSION_STATE", "/tmp/python-extension.state")


def save(text: str) -> bool:
    """Runs the write under an assertion; returns whether it completed."""
    expired = threading.Event()
    done = threading.Event()
    result = []

    def block(is_expired: bool) -> None:
        if is_expired:
            expired.set()  # ask the writer to stop; return at once
            if not result:
                result.append(False)
                done.set()
            return
        temporary = STATE + ".tmp"
        with open(temporary, "w") as f:
            f.write(text + "\n")
            f.flush()
            os.fsync(f.fileno())
        ok = not expired.is_set()
        if ok:
            os.rename(temporary, STATE)
        if not result:
            result.append(ok)
        done.set()

    rt.perform_expiring_activity("python save", block)
    done.wait()
    return result[0]


def hold(answer) -> None:
    """Holds an assertion until it is about to expire (the body of a `with`)."""
    with rt.expiring_activity("python hold") as activity:
        if not activity.granted:
            answer(b"denied\n")
            return
        answer(b"holding\n")
        activity.wait_expired()
        answer(b"expired\n")


@rt.request_handler
def serve(request: rt.Request) -> None:
    with request.channel as channel, channel.makefile("rb", buffering=0) as lines:
        for line in lines:
            command = line.decode().strip()
            if command == "ping":
                channel.sendall(f"pong {os.getpid()}\n".encode())
            elif command.startswith("save "):
                channel.sendall(b"saved\n" if save(command[5:]) else b"not saved\n")
            elif command == "hold":
                threading.Thread(target=hold, args=(channel.sendall,), daemon=True).start()


try:
    rt.run()
except rt.NotSupervisedError:
    print("python-extension: not launched by extensiond", file=sys.stderr)
    sys.exit(1)
