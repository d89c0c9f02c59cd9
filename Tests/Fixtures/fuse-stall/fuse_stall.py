#!/usr/bin/env python3
"""fuse_stall: a FUSE file system whose server stops answering, for the test that a lock
survey never waits on a file system (Tests/SupervisorShellTests/StalledFileSystemTests.swift).
Pure Python 3 on /dev/fuse, with mount(2) through ctypes: no libfuse, no packages.

  fuse_stall.py probe           mounts a FUSE file system and unmounts it: exit 0 if FUSE can
                                be used here, else exit 1 with the reason on stderr
  fuse_stall.py serve [--default-permissions] MOUNTPOINT
                                in a mount namespace of its own (no other process sees the
                                mount: nothing else on the system can trip over it), mounts a
                                file system holding one empty regular file, MOUNTPOINT/file,
                                with entries and attributes valid for 0 s (every stat of it
                                asks the server again), and serves it -> "ready". With
                                --default-permissions the kernel checks permissions itself,
                                from attributes it asks the server for first (so every
                                permission check asks the server too). Others reach
                                the file as /proc/PID/root/MOUNTPOINT/file. Then:
        a line on stdin, or SIGUSR1     stops answering: /dev/fuse stays open, nothing more is
                                        read or answered, so a request for the file waits in
                                        the kernel for ever -> "stalled"
        EOF on stdin, SIGTERM, or a     closes /dev/fuse (the kernel then fails every request
        second SIGUSR1                  still waiting, which frees its caller), unmounts
                                        (lazily) and exits
  fuse_stall.py open [--lock] [--namespace-of PID] FILE...
                                opens each FILE read-write, in order, and with --lock takes an
                                exclusive POSIX (fcntl) lock on each -> "opened FD:STATE ...",
                                one FD:STATE per file, STATE "open", "locked" or
                                "unlocked:ERRNO"; keeps them until EOF on stdin. With
                                --namespace-of it first joins the mount namespace of PID (a
                                `serve`: its mount is then in this process's own mount table)
"""
import ctypes
import errno
import fcntl
import os
import select
import signal
import struct
import sys
import tempfile
import threading
import time

libc = ctypes.CDLL(None, use_errno=True)
libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
CLONE_NEWNS, MS_NOSUID, MS_NODEV, MS_REC, MS_PRIVATE, MNT_DETACH = 0x20000, 2, 4, 0x4000, 1 << 18, 2


def check(rc, what):
    if rc != 0:
        e = ctypes.get_errno()
        raise OSError(e, f"{what}: {os.strerror(e)}")


def mount(mountpoint, default_permissions=False):
    """Mounts a FUSE file system at mountpoint in a new private mount namespace (before any
    thread starts: unshare(CLONE_NEWNS) refuses a process whose threads share its fs_struct).
    Returns the /dev/fuse descriptor that serves it."""
    check(libc.unshare(CLONE_NEWNS), "unshare(CLONE_NEWNS)")
    check(libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "making / private")
    fd = os.open("/dev/fuse", os.O_RDWR)  # close-on-exec, as Python opens every file
    options = f"fd={fd},rootmode=40000,user_id={os.getuid()},group_id={os.getgid()}"
    if default_permissions:
        options += ",default_permissions"
    check(libc.mount(b"fuse_stall", mountpoint.encode(), b"fuse", MS_NOSUID | MS_NODEV, options.encode()), "mount -t fuse")
    return fd


def unmount(fd, mountpoint):
    os.close(fd)  # the last /dev/fuse descriptor: the kernel aborts the connection
    libc.umount2(mountpoint.encode(), MNT_DETACH)


# ------------------------------------------------------------------- the protocol (linux/fuse.h)

IN_HEADER = struct.Struct("<IIQQIIIHH")  # len, opcode, unique, nodeid, uid, gid, pid, extlen, pad
OUT_HEADER = struct.Struct("<IiQ")  # len, error (-errno), unique
ATTR = struct.Struct("<QQQQQQIIIIIIIIII")  # ino size blocks a/m/ctime, their nsec, mode nlink uid gid rdev blksize flags
ENTRY_OUT = struct.Struct("<QQQQII")  # nodeid, generation, entry_valid, attr_valid, their nsec; then ATTR
ATTR_OUT = struct.Struct("<QII")  # attr_valid, attr_valid_nsec, dummy; then ATTR
OPEN_OUT = struct.Struct("<QIi")  # fh, open_flags, backing_id
INIT_IN = struct.Struct("<IIII")  # major, minor, max_readahead, flags
# major minor max_readahead flags max_background congestion_threshold max_write time_gran
# max_pages map_alignment flags2 max_stack_depth, then 24 unused bytes: 64 in all.
INIT_OUT = struct.Struct("<IIIIHHIIHHII24x")

LOOKUP, FORGET, GETATTR, OPEN, READ, RELEASE, FLUSH, INIT = 1, 2, 3, 14, 15, 18, 25, 26
OPENDIR, READDIR, RELEASEDIR, INTERRUPT, DESTROY, BATCH_FORGET = 27, 28, 29, 36, 38, 42
ROOT, FILE = 1, 2  # node ids: the root directory (FUSE_ROOT_ID) and its one file
MAX_WRITE = 65536
BUFFER = MAX_WRITE + 4096  # a read of /dev/fuse must have room for the largest request


def attributes(node):
    now = int(time.time())
    mode, nlink = (0o40755, 2) if node == ROOT else (0o100644, 1)
    return ATTR.pack(node, 0, 0, now, now, now, 0, 0, 0, mode, nlink, os.getuid(), os.getgid(), 0, 4096, 0)


def answer(opcode, node, body):
    """The reply to one request: (error, payload), or None for those that take none."""
    if opcode == INIT:
        major, minor, readahead, _ = INIT_IN.unpack_from(body)
        # No capability flags: among others no FUSE_POSIX_LOCKS or FUSE_FLOCK_LOCKS, so the
        # kernel keeps locks of the files locally (as /proc/locks shows them).
        return 0, INIT_OUT.pack(7, min(minor, 31), readahead, 0, 0, 0, MAX_WRITE, 1, 0, 0, 0, 0)
    if opcode in (FORGET, BATCH_FORGET, INTERRUPT):
        return None
    if opcode == LOOKUP:
        if node != ROOT or body.split(b"\0")[0] != b"file":
            return -errno.ENOENT, b""
        return 0, ENTRY_OUT.pack(FILE, 0, 0, 0, 0, 0) + attributes(FILE)  # valid for 0 s
    if opcode == GETATTR:
        return 0, ATTR_OUT.pack(0, 0, 0) + attributes(node)  # valid for 0 s
    if opcode in (OPEN, OPENDIR):
        return 0, OPEN_OUT.pack(0, 0, 0)
    if opcode in (READ, READDIR, FLUSH, RELEASE, RELEASEDIR, DESTROY):
        return 0, b""  # an empty file, an empty directory
    return -errno.ENOSYS, b""  # GETXATTR, ACCESS, STATFS, ...: not implemented


def serve(fd, wake, stop):
    """Answers requests until `stop` is set (and `wake` readable): then returns without
    reading another one, leaving those that arrive unanswered."""
    while True:
        select.select([fd, wake], [], [])
        if stop.is_set():
            return
        try:
            request = os.read(fd, BUFFER)
        except OSError as e:
            if e.errno in (errno.EINTR, errno.EAGAIN, errno.ENOENT):  # ENOENT: interrupted
                continue
            return  # ENODEV: unmounted
        _, opcode, unique, node, _, _, _, _, _ = IN_HEADER.unpack_from(request)
        reply = answer(opcode, node, request[IN_HEADER.size:])
        if reply is not None:
            error, payload = reply
            try:
                os.write(fd, OUT_HEADER.pack(OUT_HEADER.size + len(payload), error, unique) + payload)
            except OSError:
                pass  # the request was interrupted meanwhile


class Release(Exception):
    pass


def serve_until_released(mountpoint, default_permissions):
    fd = mount(mountpoint, default_permissions)
    wake_r, wake_w = os.pipe()
    stop = threading.Event()
    server = threading.Thread(target=serve, args=(fd, wake_r, stop), daemon=True)
    server.start()

    def halt():
        stop.set()
        os.write(wake_w, b"x")
        server.join()

    def stall():
        halt()
        print("stalled", flush=True)

    def on_signal(signum, _frame):
        if signum == signal.SIGUSR1 and not stop.is_set():
            stall()
        else:
            raise Release()

    signal.signal(signal.SIGUSR1, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    # Ready once FUSE_INIT is answered: a stat of the root waits for it.
    os.stat(mountpoint)
    print("ready", flush=True)
    try:
        while sys.stdin.buffer.readline():
            if not stop.is_set():
                stall()
    except Release:
        pass
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    halt()  # the server thread no longer polls /dev/fuse (a poll holds a reference to it)
    unmount(fd, mountpoint)


def probe():
    mountpoint = tempfile.mkdtemp(prefix="fuse-stall-probe-")
    try:
        unmount(mount(mountpoint), mountpoint)
    finally:
        os.rmdir(mountpoint)


def open_files(arguments):
    lock = False
    while arguments and arguments[0].startswith("--"):
        if arguments[0] == "--lock":
            lock, arguments = True, arguments[1:]
        elif arguments[0] == "--namespace-of":
            namespace = os.open(f"/proc/{arguments[1]}/ns/mnt", os.O_RDONLY)
            check(libc.setns(namespace, CLONE_NEWNS), "setns(CLONE_NEWNS)")
            os.close(namespace)
            arguments = arguments[2:]
        else:
            sys.exit(f"fuse_stall.py open: unknown option {arguments[0]}")
    states = []
    kept = []
    for path in arguments:
        fd = os.open(path, os.O_RDWR)
        kept.append(fd)
        state = "open"
        if lock:
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # F_SETLK, F_WRLCK, whole file
                state = "locked"
            except OSError as e:
                state = "unlocked:" + errno.errorcode.get(e.errno, str(e.errno))
        states.append(f"{fd}:{state}")
    print("opened", *states, flush=True)
    sys.stdin.buffer.read()


def main():
    command, arguments = sys.argv[1], sys.argv[2:]
    if command == "probe":
        try:
            probe()
        except OSError as e:
            print(f"fuse_stall.py probe: {e}", file=sys.stderr)
            sys.exit(1)
    elif command == "serve":
        default_permissions = arguments[:1] == ["--default-permissions"]
        serve_until_released(arguments[-1], default_permissions)
    elif command == "open":
        open_files(arguments)
    else:
        sys.exit(f"fuse_stall.py: unknown command {command}")


if __name__ == "__main__":
    main()
