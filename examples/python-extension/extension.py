#!/usr/bin/env python3
"""python-extension: an extension written in Python against the C ABI of ExtensionRuntime
(include/extension_runtime.h), through ctypes.

Each request channel takes line commands:
  ping         -> "pong <pid>"
  save <text>  -> saves <text> to $PY_EXTENSION_STATE under a task assertion, atomically
                  (temporary file, fsync, rename; abandoned when expired); "saved" or "not saved"

The library is found through $EXTENSION_RUNTIME_LIB (default: libExtensionRuntimeC.so on the
loader's path).
"""
import ctypes
import os
import sys
import threading

runtime = ctypes.CDLL(os.environ.get("EXTENSION_RUNTIME_LIB", "libExtensionRuntimeC.so"))
REQUEST = ctypes.CFUNCTYPE(None, ctypes.c_uint64, ctypes.c_int, ctypes.c_void_p)
BLOCK = ctypes.CFUNCTYPE(None, ctypes.c_bool, ctypes.c_void_p)
CLEANUP = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
runtime.ext_runtime_start.argtypes = [REQUEST, ctypes.c_void_p]
runtime.ext_perform_expiring_activity_with_cleanup.argtypes = [ctypes.c_char_p, BLOCK, CLEANUP, ctypes.c_void_p]

# ctypes callbacks must stay referenced until the runtime is done with them.
_live = {}
_live_lock = threading.Lock()


def save(text: str) -> bool:
    """Runs the write under an assertion; returns whether it completed."""
    state = os.environ.get("PY_EXTENSION_STATE", "/tmp/python-extension.state")
    expired = threading.Event()
    done = threading.Event()
    result = []

    def block(is_expired, _context):
        if is_expired:
            expired.set()  # ask the writer to stop; return at once
            if not result:
                result.append(False)
                done.set()
            return
        temporary = state + ".tmp"
        with open(temporary, "w") as f:
            f.write(text + "\n")
            f.flush()
            os.fsync(f.fileno())
        ok = not expired.is_set()
        if ok:
            os.rename(temporary, state)
        if not result:
            result.append(ok)
        done.set()

    key = object()

    def cleanup(_context):
        # Every call of the block has returned: the callbacks may be freed.
        with _live_lock:
            _live.pop(key, None)

    c_block, c_cleanup = BLOCK(block), CLEANUP(cleanup)
    with _live_lock:
        _live[key] = (c_block, c_cleanup)
    if runtime.ext_perform_expiring_activity_with_cleanup(b"python save", c_block, c_cleanup, None) != 0:
        return False
    done.wait()
    return result[0]


def serve(fd: int) -> None:
    with os.fdopen(fd, "rb+", buffering=0) as channel:
        for line in iter(channel.readline, b""):
            command = line.decode().strip()
            if command == "ping":
                channel.write(f"pong {os.getpid()}\n".encode())
            elif command.startswith("save "):
                channel.write(b"saved\n" if save(command[5:]) else b"not saved\n")


@REQUEST
def on_request(_request_id, fd, _context):
    threading.Thread(target=serve, args=(fd,), daemon=True).start()


if runtime.ext_runtime_start(on_request, None) != 0:
    print("python-extension: not launched by extensiond", file=sys.stderr)
    sys.exit(1)
threading.Event().wait()
