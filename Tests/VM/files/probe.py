#!/usr/bin/python3
"""The VM scenario's probe: an extension on the installed `extension_runtime` package that
answers one line per command over its request channel, so that the scenario can look at the
sandbox, the limits and the containers from inside, as an extension sees them.

Commands (one line each; every answer is one line):
  ping                  -> "pong PID UID"
  home-write TEXT       -> writes TEXT to $HOME/probe.state: "written" or "error: ..."
  home-read             -> "home: TEXT", or "home: (none)" when there is no file
  home-fill NAME BYTES  -> writes BYTES zero bytes to $HOME/NAME (64 KiB at a time, then
                           fsync): "written BYTES" or "error: ..."
  tmp-write NAME        -> creates /tmp/NAME: "written" or "error: ..."
  tmp-list              -> "tmp: NAMES" (comma-separated, sorted)
  connect HOST PORT     -> "connected", or "error: ..." (a TCP connection, closed at once)
  shared-write GROUP NAME TEXT -> writes TEXT to NAME in the shared container GROUP
  shared-read GROUP NAME       -> "shared: TEXT" or "error: ..."
  lock GROUP NAME       -> takes an exclusive flock on NAME in the shared container GROUP and
                           keeps it: "locked"
  alloc MIB             -> touches MIB MiB of memory, then "allocated" (if it lives)
  spawn N               -> starts N sleeping children: "spawned K" (K < N: the rest failed)
"""
import fcntl
import os
import socket
import subprocess
import sys

import extension_runtime as rt

# Files kept open (and locked) by `lock`.
held = []


def answer(command: str) -> str:
    words = command.split(" ")
    try:
        if words[0] == "ping":
            return f"pong {os.getpid()} {os.getuid()}"
        if words[0] == "home-write":
            path = os.path.join(os.environ["HOME"], "probe.state")
            with open(path + ".tmp", "w") as f:
                f.write(" ".join(words[1:]))
                f.flush()
                os.fsync(f.fileno())
            os.rename(path + ".tmp", path)
            return "written"
        if words[0] == "home-fill":
            left = int(words[2])
            with open(os.path.join(os.environ["HOME"], words[1]), "wb") as f:
                while left > 0:
                    left -= f.write(bytes(min(left, 65536)))
                f.flush()
                os.fsync(f.fileno())
            return f"written {words[2]}"
        if words[0] == "home-read":
            path = os.path.join(os.environ["HOME"], "probe.state")
            if not os.path.exists(path):
                return "home: (none)"
            with open(path) as f:
                return "home: " + f.read()
        if words[0] == "tmp-write":
            open(os.path.join("/tmp", words[1]), "w").close()
            return "written"
        if words[0] == "tmp-list":
            return "tmp: " + ",".join(sorted(os.listdir("/tmp")))
        if words[0] == "abstract":
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.settimeout(5)
                s.connect("\0" + words[1])
                return "connected"
        if words[0] == "connect":
            with socket.create_connection((words[1], int(words[2])), timeout=5):
                return "connected"
        if words[0] == "shared-write":
            directory = rt.shared_container_path(words[1])
            if directory is None:
                return "error: no shared container " + words[1]
            with open(os.path.join(directory, words[2]), "w") as f:
                f.write(" ".join(words[3:]))
            return "written"
        if words[0] == "shared-read":
            directory = rt.shared_container_path(words[1])
            if directory is None:
                return "error: no shared container " + words[1]
            with open(os.path.join(directory, words[2])) as f:
                return "shared: " + f.read()
        if words[0] == "lock":
            directory = rt.shared_container_path(words[1])
            if directory is None:
                return "error: no shared container " + words[1]
            held.append(open(os.path.join(directory, words[2]), "w"))
            fcntl.flock(held[-1].fileno(), fcntl.LOCK_EX)
            return "locked"
        if words[0] == "open-url":
            return f"opened {rt.open_url(words[1])}"
        if words[0] == "defaults-set":
            with rt.defaults(words[1]) as suite:
                suite[words[2]] = words[3]
            return "set"
        if words[0] == "defaults-get":
            with rt.defaults(words[1]) as suite:
                return f"value {suite.get(words[2])}"
        if words[0] == "secret-add":
            from extension_runtime import secrets
            secrets.add(words[3].encode(), service=words[1], account=words[2], label=f"token of {words[2]}")
            return "added"
        if words[0] == "secret-copy":
            from extension_runtime import secrets
            item = secrets.copy(service=words[1], account=words[2])
            return f"found {item.data.decode()} in {item.group}"
        if words[0] == "transfer-download":
            from extension_runtime import transfers
            session = transfers.Session(words[1], words[2], lambda event: None)
            return f"created {session.download(words[3], words[4] if len(words) > 4 else '')}"
        if words[0] == "alloc":
            block = bytearray(int(words[1]) * 1024 * 1024)
            for i in range(0, len(block), 4096):
                block[i] = 1
            return "allocated"
        if words[0] == "spawn":
            started = 0
            for _ in range(int(words[1])):
                try:
                    subprocess.Popen(["/bin/sleep", "600"])
                    started += 1
                except OSError:
                    break
            return f"spawned {started}"
        return "error: unknown command " + words[0]
    except Exception as e:  # every failure is an answer: the scenario prints it
        return f"error: {type(e).__name__}: {e}"


@rt.request_handler
def serve(request: rt.Request) -> None:
    with request.channel as channel, channel.makefile("rb", buffering=0) as lines:
        for line in lines:
            channel.sendall((answer(line.decode().strip()) + "\n").encode())


rt.run()
