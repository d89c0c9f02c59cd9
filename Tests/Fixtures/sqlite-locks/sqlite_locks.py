#!/usr/bin/env python3
"""sqlite_locks: both sides of the lock-at-suspension tests (docs/reliability.md, issue 12),
with real SQLite (the sqlite3 module) and real flock/fcntl/OFD locks.

  sqlite_locks.py extension     an extension on the C ABI of ExtensionRuntime (ctypes; the
                                library from $EXTENSION_RUNTIME_LIB). Commands on each request
                                channel, one per line:
      sqlite-write DB MODE          BEGIN IMMEDIATE + INSERT, no assertion, transaction left
                                    open -> "holding"
      sqlite-write-assertion DB D   the same under an assertion; when expired, keeps the
                                    transaction D more seconds, then commits -> "holding", later
                                    "committed"
      sqlite-open DB                an idle WAL connection (after one read) -> "open"
      lock KIND FILE                exclusive flock|posix|ofd lock on FILE, kept -> "locked"
      lock-shared KIND FILE         the same with a shared (read) lock -> "locked"
      batches DB COUNT ROWS         under one assertion, COUNT batches of ROWS rows, each in one
                                    transaction, the current one abandoned (rolled back) when
                                    expired -> "writing" once the assertion is held, "batches N"
                                    when done (N committed), "denied" without an assertion
  sqlite_locks.py app DB MODE   the containing app: opens DB (8 s busy timeout), says "open",
                                then answers lines on stdin:
      write TEXT                    BEGIN IMMEDIATE + INSERT + COMMIT -> "ok SECONDS" or
                                    "error MESSAGE SECONDS"
      check ROWS                    "integrity RESULT batches N torn T extension-rows R"
      open-file FILE                keeps FILE open -> "opened"
      lockwait KIND FILE            polls a non-blocking exclusive lock of KIND on the opened
                                    FILE every 10 ms for up to 8 s -> "locked SECONDS" or
                                    "timeout SECONDS"
"""
import ctypes
import fcntl
import os
import sqlite3
import struct
import sys
import threading
import time

SCHEMA = [
    "CREATE TABLE IF NOT EXISTS app(id INTEGER PRIMARY KEY, text TEXT)",
    "CREATE TABLE IF NOT EXISTS ext(id INTEGER PRIMARY KEY, batch INTEGER, payload TEXT)",
]


def connect(db, mode, timeout=8.0):
    c = sqlite3.connect(db, isolation_level=None, timeout=timeout, check_same_thread=False)
    c.execute(f"PRAGMA journal_mode={mode}")
    for s in SCHEMA:
        c.execute(s)
    return c


def lock(kind, fd, blocking, shared=False):
    if kind == "flock":
        fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | (0 if blocking else fcntl.LOCK_NB))
        return
    command = {"posix": fcntl.F_SETLKW if blocking else fcntl.F_SETLK,
               "ofd": fcntl.F_OFD_SETLKW if blocking else fcntl.F_OFD_SETLK}[kind]
    # struct flock: l_type, l_whence, l_start, l_len, l_pid (l_pid must be 0 for OFD locks).
    fcntl.fcntl(fd, command, struct.pack("hhqqi", fcntl.F_RDLCK if shared else fcntl.F_WRLCK, 0, 0, 0, 0))


# ---------------------------------------------------------------- the extension

kept = []  # connections, descriptors and callbacks that must outlive their request


def activity(runtime, reason, body):
    """Runs body(expired_event) under an assertion on a runtime thread; returns whether it ran."""
    expired = threading.Event()
    finished = threading.Event()
    ran = []
    BLOCK = ctypes.CFUNCTYPE(None, ctypes.c_bool, ctypes.c_void_p)
    CLEANUP = ctypes.CFUNCTYPE(None, ctypes.c_void_p)

    def block(is_expired, _context):
        if is_expired:
            expired.set()
            return
        ran.append(True)
        body(expired)

    def cleanup(_context):
        finished.set()

    callbacks = (BLOCK(block), CLEANUP(cleanup))
    if runtime.ext_perform_expiring_activity_with_cleanup(reason.encode(), callbacks[0], callbacks[1], None) != 0:
        return False
    finished.wait()
    return bool(ran)


def serve(runtime, fd):
    channel = os.fdopen(fd, "rb+", buffering=0)

    def say(text):
        channel.write((text + "\n").encode())

    for line in iter(channel.readline, b""):
        words = line.decode().split()
        if not words:
            continue
        command = words[0]
        if command == "sqlite-write":
            c = connect(words[1], words[2])
            c.execute("BEGIN IMMEDIATE")
            c.execute("INSERT INTO ext(batch, payload) VALUES (-1, 'uncommitted')")
            kept.append(c)
            say("holding")
        elif command == "sqlite-write-assertion":
            db, delay = words[1], float(words[2])

            def body(expired):
                c = connect(db, "wal")
                c.execute("BEGIN IMMEDIATE")
                c.execute("INSERT INTO ext(batch, payload) VALUES (-2, 'late')")
                say("holding")
                expired.wait()
                time.sleep(delay)  # slower to let go than the first grace allows
                c.execute("COMMIT")
                kept.append(c)

            threading.Thread(target=lambda: activity(runtime, "slow writer", body) and say("committed"), daemon=True).start()
        elif command == "sqlite-open":
            c = connect(words[1], "wal")
            c.execute("SELECT count(*) FROM ext").fetchall()
            kept.append(c)
            say("open")
        elif command in ("lock", "lock-shared"):
            f = os.open(words[2], os.O_RDWR | os.O_CREAT, 0o600)
            lock(words[1], f, blocking=True, shared=command == "lock-shared")
            kept.append(f)
            say("locked")
        elif command == "descriptors":
            # More open descriptors (of /dev/null), for the lock survey to read.
            count = int(words[1])
            null = os.open(os.devnull, os.O_RDONLY)
            kept.append(null)
            kept.extend(os.dup(null) for _ in range(count - 1))
            say(f"descriptors {count}")
        elif command == "batches":
            db, count, rows = words[1], int(words[2]), int(words[3])
            c = connect(db, "wal")
            base = os.getpid() * 1_000_000 + serve.counter
            serve.counter += count

            def body(expired):
                say("writing")  # the assertion is held from here on
                committed = 0
                for batch in range(count):
                    if expired.is_set():
                        break
                    c.execute("BEGIN IMMEDIATE")
                    for _ in range(rows):
                        if expired.is_set():
                            break
                        c.execute("INSERT INTO ext(batch, payload) VALUES (?, ?)", (base + batch, "x" * 64))
                    if expired.is_set():
                        c.execute("ROLLBACK")  # an expired batch is abandoned whole
                        break
                    c.execute("COMMIT")
                    committed += 1
                say(f"batches {committed}")  # before the assertion goes: then it may stop

            if not activity(runtime, "batches", body):
                say("denied")
            kept.append(c)


serve.counter = 0


def extension():
    runtime = ctypes.CDLL(os.environ["EXTENSION_RUNTIME_LIB"])
    REQUEST = ctypes.CFUNCTYPE(None, ctypes.c_uint64, ctypes.c_int, ctypes.c_void_p)
    runtime.ext_runtime_start.argtypes = [REQUEST, ctypes.c_void_p]
    runtime.ext_perform_expiring_activity_with_cleanup.argtypes = [
        ctypes.c_char_p, ctypes.CFUNCTYPE(None, ctypes.c_bool, ctypes.c_void_p),
        ctypes.CFUNCTYPE(None, ctypes.c_void_p), ctypes.c_void_p]

    @REQUEST
    def on_request(_request_id, fd, _context):
        threading.Thread(target=serve, args=(runtime, fd), daemon=True).start()

    kept.append(on_request)
    if runtime.ext_runtime_start(on_request, None) != 0:
        print("sqlite_locks: not launched by extensiond", file=sys.stderr)
        sys.exit(1)
    threading.Event().wait()


# ---------------------------------------------------------------- the app

def app(db, mode):
    c = connect(db, mode)
    c.execute("SELECT count(*) FROM app").fetchall()  # WAL: the -shm file is open from here on
    files = {}
    print("open", flush=True)
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        if words[0] == "write":
            started = time.monotonic()
            try:
                c.execute("BEGIN IMMEDIATE")
                c.execute("INSERT INTO app(text) VALUES (?)", (" ".join(words[1:]),))
                c.execute("COMMIT")
                print(f"ok {time.monotonic() - started:.3f}", flush=True)
            except sqlite3.Error as e:
                print(f"error {str(e).replace(' ', '-')} {time.monotonic() - started:.3f}", flush=True)
        elif words[0] == "check":
            rows = int(words[1])
            integrity = c.execute("PRAGMA integrity_check").fetchone()[0]
            counts = c.execute("SELECT batch, count(*) FROM ext WHERE batch >= 0 GROUP BY batch").fetchall()
            torn = sum(1 for _, n in counts if n != rows)
            total = c.execute("SELECT count(*) FROM ext").fetchone()[0]
            print(f"integrity {integrity} batches {len(counts)} torn {torn} extension-rows {total}", flush=True)
        elif words[0] == "open-file":
            files[words[1]] = os.open(words[1], os.O_RDWR | os.O_CREAT, 0o600)
            print("opened", flush=True)
        elif words[0] == "lockwait":
            kind, fd = words[1], files[words[2]]
            started = time.monotonic()
            while True:
                try:
                    lock(kind, fd, blocking=False)
                    print(f"locked {time.monotonic() - started:.3f}", flush=True)
                    break
                except OSError:
                    if time.monotonic() - started > 8:
                        print(f"timeout {time.monotonic() - started:.3f}", flush=True)
                        break
                    time.sleep(0.01)


if __name__ == "__main__":
    if sys.argv[1] == "extension":
        extension()
    else:
        app(sys.argv[2], sys.argv[3])
