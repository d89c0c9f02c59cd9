"""check_python: extension_runtime.transfers (bindings/python) against a fake extensiond written in
Python, on a socketpair, with the built libExtensionRuntimeC. Run by run.sh with
bindings/python/src on PYTHONPATH:

  check_python.py LIB

The fake daemon parses each message by the spec (its own decoder, not the library's) and answers
with datagrams it builds by the spec: transferCreate with transferCreated (tasks from FIRST_TASK
up), cancel, claim and transferHandled with answer 0 (transferHandled in "group.b": no answer, the
runtime must not wait for it); it records each transferHandled with the number of on_event calls
returned by then. What steers it: a url ending in "/code-N" answers code N, "/hang" never
answers, "/answer-0" answers code 0 (out of protocol for a create); a cancel of task 900 + N
answers code N; a claim of session "code-N" answers code N. The test sends the events itself.

Prints "ok: ..." and exits 0, or raises.
"""
import errno
import os
import socket
import struct
import sys
import threading
import time
from dataclasses import FrozenInstanceError, fields
from typing import Callable, List, Tuple

FIRST_TASK = 0x100000001


class Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.at = data, 0

    def take(self, n: int) -> bytes:
        assert self.at + n <= len(self.data), "truncated"
        chunk = self.data[self.at:self.at + n]
        self.at += n
        return chunk

    def u8(self) -> int:
        return self.take(1)[0]

    def u32(self) -> int:
        return struct.unpack("<I", self.take(4))[0]

    def u64(self) -> int:
        return struct.unpack("<Q", self.take(8))[0]

    def string(self, limit: int) -> str:
        n = struct.unpack("<H", self.take(2))[0]
        assert n <= limit
        return self.take(n).decode("utf-8")

    def flag(self) -> bool:
        v = self.u8()
        assert v in (0, 1)
        return v == 1


def put_string(s: str) -> bytes:
    b = s.encode()
    return struct.pack("<H", len(b)) + b


def put_event(sequence: int, task: int, kind: int, done: int = 0, total: int = -1, status: int = 0, path: str = "",
              domain: str = "", code: int = 0, text: str = "") -> bytes:
    return (struct.pack("<QQBQqH", sequence, task, kind, done, total, status) + put_string(path) + put_string(domain)
            + struct.pack("<i", code) + put_string(text))


class FakeDaemon(threading.Thread):
    def __init__(self, sock: socket.socket) -> None:
        super().__init__(daemon=True)
        self.sock = sock
        self.received: List[bytes] = []
        self.handled: List[Tuple[str, str, int, int]] = []  # session, group, through, returned
        self.returned = 0  # on_event calls returned (counted by the test's callbacks)
        self.lock = threading.Condition()
        self.next_task = FIRST_TASK

    def last(self) -> bytes:
        with self.lock:
            return self.received[-1]

    def count(self) -> int:
        with self.lock:
            return len(self.received)

    def returned_one(self) -> None:
        with self.lock:
            self.returned += 1
            self.lock.notify_all()

    def wait(self, predicate: Callable[[], bool]) -> None:
        with self.lock:
            assert self.lock.wait_for(predicate, 5), "timed out"

    def send(self, kind: int, payload: bytes) -> None:
        self.sock.send(struct.pack("<BBHI", 1, kind, 0, len(payload)) + payload)

    def answer(self, tag: int, code: int) -> None:
        self.send(103, struct.pack("<IH", tag, code) + put_string("why" if code else ""))

    def events(self, group: str, session: str, events: List[bytes]) -> None:
        self.send(107, put_string(session) + put_string(group) + struct.pack("<H", len(events)) + b"".join(events))

    def run(self) -> None:
        while True:
            data = self.sock.recv(65536)
            if not data:
                return
            version, kind, reserved, length = struct.unpack_from("<BBHI", data)
            assert version == 1 and reserved == 0 and length == len(data) - 8
            r = Reader(data[8:])
            tag = r.u32()
            assert tag != 0
            if kind == 79:
                session, group, method = r.string(255), r.string(255), r.u8()
                url, path, _ = r.string(8192), r.string(1024), r.flag()
                assert method in (1, 2, 3) and (path or method == 1)
            elif kind == 80:
                task = r.u64()
            elif kind in (81, 82):
                session, group = r.string(255), r.string(255)
                through = r.u64() if kind == 82 else 0
            else:
                raise AssertionError(f"unexpected kind {kind}")
            assert r.at == len(r.data), "trailing bytes"
            with self.lock:
                self.received.append(data)
                if kind == 82:
                    self.handled.append((session, group, through, self.returned))
                self.lock.notify_all()
            if kind == 79:
                if url.endswith("/hang"):
                    continue
                if url.endswith("/answer-0"):
                    self.answer(tag, 0)
                elif "/code-" in url:
                    self.answer(tag, int(url.rsplit("/code-", 1)[1]))
                else:
                    self.send(106, struct.pack("<IQ", tag, self.next_task))
                    self.next_task += 1
            elif kind == 80:
                self.answer(tag, task - 900 if 900 <= task < 916 else 0)
            elif kind == 81:
                self.answer(tag, int(session[5:]) if session.startswith("code-") else 0)
            elif group != "group.b":
                self.answer(tag, 0)


def expect(error: type, function, *args, **kwargs) -> BaseException:
    try:
        function(*args, **kwargs)
    except error as e:
        return e
    raise AssertionError(f"{function.__name__}{args}{kwargs} did not raise {error.__name__}")


def check(library_path: str) -> None:
    runtime_end, daemon_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    os.environ["EXTENSIOND_CHANNEL_FD"] = str(runtime_end.fileno())
    os.environ["EXTENSION_RUNTIME_LIB"] = library_path
    daemon = FakeDaemon(daemon_end)
    daemon.start()
    import extension_runtime
    import extension_runtime.transfers as transfers
    from extension_runtime import transfers as same

    assert extension_runtime.transfers is transfers is same and "transfers" in extension_runtime.__all__
    assert issubclass(transfers.TransferError, Exception) and issubclass(transfers.TransferError, extension_runtime.ExtensionRuntimeError)
    assert [f.name for f in fields(transfers.Event)] == [
        "sequence", "task", "kind", "bytes", "total", "status", "path", "domain", "code", "text"]
    e = transfers.TransferError(errno.EPERM, "why")
    assert (e.code, e.message, e.errno) == (errno.EPERM, "why", errno.EPERM)
    assert extension_runtime.is_supervised()

    delivered: List[Tuple[str, "transfers.Event"]] = []
    main = threading.get_ident()

    def recorder(name: str) -> Callable[["transfers.Event"], None]:
        def on_event(event: "transfers.Event") -> None:
            assert threading.get_ident() != main
            with daemon.lock:
                delivered.append((name, event))
            daemon.returned_one()
        return on_event

    # The bytes sent, by the spec (session before group).
    s1 = transfers.Session("group.a", "s1", recorder("s1"))
    assert (s1.group, s1.identifier) == ("group.a", "s1")
    assert s1.download("https://e.com/f") == FIRST_TASK
    sent = daemon.last()
    assert sent[:2] == bytes([1, 79]) and sent[12:] == bytes.fromhex(
        "0200 7331 0700 67726f75702e61 01 0f00 68747470733a2f2f652e636f6d2f66 0000 00")
    assert s1.download("https://e.com/f", "d/é.json", discretionary=True) == FIRST_TASK + 1
    assert daemon.last()[12:] == bytes.fromhex(
        "0200 7331 0700 67726f75702e61 01 0f00 68747470733a2f2f652e636f6d2f66 0900 642fc3a92e6a736f6e 01")
    up = transfers.Session("group.b", "up", recorder("up"))
    assert up.upload("out/a.txt", "https://e.com/u") == FIRST_TASK + 2
    assert daemon.last()[12:] == bytes.fromhex(
        "0200 7570 0700 67726f75702e62 02 0f00 68747470733a2f2f652e636f6d2f75 0900 6f75742f612e747874 00")
    assert up.upload("out/a.txt", "https://e.com/u", post=True, discretionary=1) == FIRST_TASK + 3
    assert daemon.last()[12:] == bytes.fromhex(
        "0200 7570 0700 67726f75702e62 03 0f00 68747470733a2f2f652e636f6d2f75 0900 6f75742f612e747874 01")
    s1.cancel(0x0102030405060708)
    assert daemon.last()[1] == 80 and daemon.last()[12:] == bytes.fromhex("0807060504030201")
    s1.cancel(2**64 - 1)
    assert daemon.last()[12:] == bytes.fromhex("ffffffffffffffff")
    s1.claim()
    assert daemon.last()[1] == 81 and daemon.last()[12:] == bytes.fromhex("0200 7331 0700 67726f75702e61")

    # Each answer code's errno, for each call; out of protocol: EIO.
    for code, number in [(5, errno.EPERM), (6, errno.EINVAL), (7, errno.ENOENT), (8, errno.ENOSPC), (11, errno.EIO),
                         (1, errno.EIO), (10, errno.EIO), (13, errno.EIO), (14, errno.EIO)]:
        for call, args in [(s1.download, (f"https://e.com/code-{code}",)), (s1.upload, ("f", f"https://e.com/code-{code}")),
                           (s1.cancel, (900 + code,)), (transfers.Session("group.a", f"code-{code}", print).claim, ())]:
            e = expect(transfers.TransferError, call, *args)
            assert e.code == number and e.errno == number and e.message, (code, call, e)
    assert expect(transfers.TransferError, s1.download, "https://e.com/answer-0").code == errno.EIO
    assert s1.download("https://e.com/ok") >= FIRST_TASK

    # Refused before sending.
    before = daemon.count()
    for group, identifier in [("", "s"), ("g", ""), ("g" * 256, "s"), ("g", "s" * 256), ("a\0b", "s"), ("g", "\ud800")]:
        assert expect(transfers.TransferError, transfers.Session, group, identifier, print).code == errno.EINVAL
    for group, identifier in [(None, "s"), ("g", 5), (b"g", "s")]:
        expect(TypeError, transfers.Session, group, identifier, print)
    expect(TypeError, transfers.Session, "g", "s", None)
    for url in ["", "https://e.com/" + "u" * (8192 - 13), "https://e.com/\0", "https://e.com/\udc80"]:
        assert expect(transfers.TransferError, s1.download, url).code == errno.EINVAL
        assert expect(transfers.TransferError, s1.upload, "f", url).code == errno.EINVAL
    for path in ["p" * 1025, "a\0b", "\ud800"]:
        assert expect(transfers.TransferError, s1.download, "https://e.com/f", path).code == errno.EINVAL
        assert expect(transfers.TransferError, s1.upload, path, "https://e.com/f").code == errno.EINVAL
    assert expect(transfers.TransferError, s1.upload, "", "https://e.com/f").code == errno.EINVAL
    assert expect(transfers.TransferError, s1.upload, "", "https://e.com/f", post=True).code == errno.EINVAL
    expect(TypeError, s1.download, b"https://e.com/f")
    expect(TypeError, s1.download, "https://e.com/f", None)
    expect(TypeError, s1.upload, 5, "https://e.com/f")
    for task in [-1, 2**64]:
        assert expect(transfers.TransferError, s1.cancel, task).code == errno.EINVAL
    for task in [True, 1.0, "1", None]:
        expect(TypeError, s1.cancel, task)
    assert daemon.count() == before
    # The limits themselves are sent.
    limit = transfers.Session("g" * 255, "é" * 127, print)
    assert limit.upload("p" * 1024, "https://e.com/" + "u" * (8192 - 14)) >= FIRST_TASK
    assert len(daemon.last()) == 12 + 2 + 254 + 2 + 255 + 1 + 2 + 8192 + 2 + 1024 + 1
    assert daemon.count() == before + 1

    # Events: delivered with their fields, on a runtime thread; transferHandled once every
    # on_event returned, through the highest sequence.
    def wait_handled(n: int) -> None:
        daemon.wait(lambda: len(daemon.handled) >= n)

    def wait_delivered(n: int) -> None:
        daemon.wait(lambda: len(delivered) >= n)

    Event = transfers.Event
    daemon.events("group.a", "s1", [
        put_event(0, 2**63 + 5, 1, 10, -1),
        put_event(1, 2**63 + 5, 2, 2**40, 2**40, 200, "/srv/shared/group.a/quotes/été.json"),
        put_event(2, 6, 3, 5, 50, 503, domain="http", code=503, text="too many 5xx answers"),
        put_event(3, 2**64 - 1, 3, 0, -2**63, 0, domain="posix", code=-2),
    ])
    wait_handled(1)
    assert [e for _, e in delivered] == [
        Event(0, 2**63 + 5, "progress", 10, -1, 0, "", "", 0, ""),
        Event(1, 2**63 + 5, "completed", 2**40, 2**40, 200, "/srv/shared/group.a/quotes/été.json", "", 0, ""),
        Event(2, 6, "failed", 5, 50, 503, "", "http", 503, "too many 5xx answers"),
        Event(3, 2**64 - 1, "failed", 0, -2**63, 0, "", "posix", -2, ""),
    ], delivered
    assert transfers.PROGRESS == "progress" and transfers.COMPLETED == "completed" and transfers.FAILED == "failed"
    assert all(name == "s1" for name, _ in delivered)
    assert daemon.handled == [("s1", "group.a", 3, 4)]
    assert daemon.last()[1] == 82 and daemon.last()[12:] == bytes.fromhex("0200 7331 0700 67726f75702e61 0300000000000000")
    event = delivered[1][1]
    expect(FrozenInstanceError, setattr, event, "task", 1)

    # A duplicate skipped; the message's highest sequence acknowledged.
    daemon.events("group.a", "s1", [put_event(2, 7, 2), put_event(5, 7, 2), put_event(4, 7, 2)])
    wait_handled(2)
    assert [e.sequence for _, e in delivered[4:]] == [5] and daemon.handled[1][2] == 5
    # Progress only: delivered, never acknowledged.
    daemon.events("group.a", "s1", [put_event(0, 7, 1, 1, 9), put_event(0, 7, 1, 2, 9)])
    daemon.events("group.a", "s1", [put_event(6, 7, 2)])
    wait_handled(3)
    wait_delivered(8)
    assert [(e.sequence, e.bytes) for _, e in delivered[5:8]] == [(0, 1), (0, 2), (6, 0)]
    assert len(daemon.handled) == 3 and daemon.handled[2][2] == 6
    # In order, each message acknowledged.
    for s in range(10, 40):
        daemon.events("group.a", "s1", [put_event(s, 7, 2)])
    wait_handled(33)
    wait_delivered(38)
    assert [e.sequence for _, e in delivered[8:38]] == list(range(10, 40))
    assert [h[2] for h in daemon.handled[3:33]] == list(range(10, 40))
    # group.b's transferHandled is never answered: nothing waits for it.
    daemon.events("group.b", "up", [put_event(1, 3, 2)])
    daemon.events("group.b", "up", [put_event(2, 3, 2)])
    wait_handled(35)
    assert [h[:3] for h in daemon.handled[33:35]] == [("up", "group.b", 1), ("up", "group.b", 2)]
    assert [name for name, _ in delivered[38:40]] == ["up", "up"]

    # A session without a Session: dropped, never acknowledged (seen once a later message of
    # another session was delivered).
    daemon.events("group.a", "nobody", [put_event(1, 3, 2)])
    daemon.events("group.a", "s1", [put_event(40, 7, 2)])
    wait_handled(36)
    assert daemon.handled[35][:3] == ("s1", "group.a", 40) and len(delivered) == 41

    # A new Session of the same group and identifier replaces the callback; sequences delivered
    # before are still skipped.
    replaced: List["transfers.Event"] = []

    def on_replaced(event: "transfers.Event") -> None:
        replaced.append(event)
        daemon.returned_one()

    again = transfers.Session("group.a", "s1", on_replaced)
    daemon.events("group.a", "s1", [put_event(40, 7, 2), put_event(41, 7, 2)])
    wait_handled(37)
    assert [e.sequence for e in replaced] == [41] and len(delivered) == 41 and daemon.handled[36][2] == 41

    # An exception raised by on_event is reported (as any ctypes callback's) and the event counts
    # as handled.
    unraisable: List[BaseException] = []
    previous_hook = sys.unraisablehook
    sys.unraisablehook = lambda u: unraisable.append(u.exc_value)

    def failing(event: "transfers.Event") -> None:
        daemon.returned_one()
        raise RuntimeError(f"on_event failed for {event.sequence}")

    try:
        transfers.Session("group.a", "failing", failing)
        daemon.events("group.a", "failing", [put_event(1, 3, 2)])
        wait_handled(38)
        assert daemon.handled[37][:3] == ("failing", "group.a", 1)
        assert len(unraisable) == 1 and "on_event failed for 1" in str(unraisable[0])
    finally:
        sys.unraisablehook = previous_hook

    # Calls from on_event (a runtime thread).
    results: List[object] = []
    calling = transfers.Session("group.a", "calling", lambda event: results.extend([
        calling.download("https://e.com/next"), calling.claim(),
        expect(transfers.TransferError, calling.cancel, 908).code]))
    daemon.events("group.a", "calling", [put_event(1, 3, 2)])
    wait_handled(39)
    assert len(results) == 3 and results[0] >= FIRST_TASK and results[1] is None and results[2] == errno.ENOSPC

    # Several threads at once.
    failures: List[BaseException] = []

    def worker(n: int) -> None:
        try:
            session = transfers.Session("group.a", f"worker-{n}", print)
            for k in range(30):
                task = session.download("https://e.com/w", discretionary=bool(k & 1))
                assert task >= FIRST_TASK
                session.cancel(task)
                session.claim()
                assert expect(transfers.TransferError, session.cancel, 907).code == errno.ENOENT
        except BaseException as e:  # noqa: BLE001: reported below
            failures.append(e)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures, failures
    assert again.identifier == "s1"

    # The channel closes while a call waits: TransferError ENOTCONN, for it and every later call.
    waiting: List[BaseException] = []

    def hang() -> None:
        try:
            s1.download("https://e.com/hang")
        except BaseException as e:  # noqa: BLE001
            waiting.append(e)

    count = daemon.count()
    t = threading.Thread(target=hang)
    t.start()
    while daemon.count() == count:
        time.sleep(0.001)
    daemon_end.shutdown(socket.SHUT_RDWR)
    t.join(5)
    assert not t.is_alive() and isinstance(waiting[0], transfers.TransferError) and waiting[0].code == errno.ENOTCONN
    for call, args in [(s1.download, ("https://e.com/f",)), (s1.upload, ("f", "https://e.com/f")), (s1.cancel, (1,)),
                       (s1.claim, ())]:
        assert expect(transfers.TransferError, call, *args).code == errno.ENOTCONN
    transfers.Session("group.a", "later", print)  # needs no channel
    print("ok: extension_runtime.transfers against a fake extensiond")


if __name__ == "__main__":
    check(sys.argv[1])
