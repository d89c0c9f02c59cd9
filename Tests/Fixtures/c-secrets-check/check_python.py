"""check_python: extension_runtime.secrets (bindings/python) against a fake extensiond written in
Python, on a socketpair, with the built libExtensionRuntimeC. Run by run.sh with
bindings/python/src on PYTHONPATH:

  check_python.py LIB

The fake daemon parses each message by the spec (its own decoder, not the library's), keeps a
small keychain (groups "group.a", the first, and "group.b" may be used; at most 8 items) and
answers with datagrams it builds by the spec. Services that steer it: "code-N" answers code N,
"hang" never answers. It also grants task assertions (acquire -> granted), so that a secrets
call can be made from a runtime callback.

Prints "ok: ..." and exits 0, or raises.
"""
import errno
import os
import socket
import struct
import sys
import threading
from typing import Dict, List, Optional, Tuple

GROUPS = ("group.a", "group.b")
FIELDS = [("service", 1, 255), ("account", 2, 255), ("server", 4, 255), ("protocol", 8, 32), ("port", 16, None),
          ("path", 32, 1024), ("label", 64, 255)]


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

    def u16(self) -> int:
        return struct.unpack("<H", self.take(2))[0]

    def u32(self) -> int:
        return struct.unpack("<I", self.take(4))[0]

    def string(self, limit: int) -> str:
        n = self.u16()
        assert n <= limit
        return self.take(n).decode("utf-8")

    def flag(self) -> bool:
        v = self.u8()
        assert v in (0, 1)
        return v == 1

    def data_field(self) -> bytes:
        n = self.u32()
        assert n <= 60000
        return self.take(n)

    def attributes(self) -> Dict[str, object]:
        a: Dict[str, object] = {"class": self.u8(), "group": self.string(255)}
        assert a["class"] in (0, 1, 2)
        fields = self.u8()
        assert fields & 0x80 == 0
        for name, bit, limit in FIELDS:
            if fields & bit:
                a[name] = self.u16() if name == "port" else self.string(limit)
        return a


def put_string(s: str) -> bytes:
    b = s.encode()
    return struct.pack("<H", len(b)) + b


def put_item(item: Dict[str, object], with_data: bool) -> bytes:
    """An item as secretItems carries it: every field of its class, and the label."""
    out = bytes([item["class"]]) + put_string(item["group"])
    names = ["service", "account", "label"] if item["class"] == 1 else ["account", "server", "protocol", "port", "path", "label"]
    out += bytes([sum(bit for name, bit, _ in FIELDS if name in names)])
    for name, _, _ in FIELDS:
        if name in names:
            out += struct.pack("<H", item.get("port", 0)) if name == "port" else put_string(item.get(name, ""))
    out += bytes([1 if with_data else 0])
    if with_data:
        out += struct.pack("<I", len(item["data"])) + item["data"]
    return out


def identity(a: Dict[str, object]) -> Tuple:
    if a["class"] == 1:
        return (1, a["group"], a.get("service", ""), a.get("account", ""))
    return (2, a["group"], a.get("server", ""), a.get("account", ""), a.get("protocol", ""), a.get("port", 0), a.get("path", ""))


def matches(item: Dict[str, object], query: Dict[str, object]) -> bool:
    if query["class"] and query["class"] != item["class"]:
        return False
    if query["group"] and query["group"] != item["group"]:
        return False
    return all(item.get(name, 0 if name == "port" else "") == query[name] for name, _, _ in FIELDS if name in query)


class FakeDaemon(threading.Thread):
    def __init__(self, sock: socket.socket) -> None:
        super().__init__(daemon=True)
        self.sock = sock
        self.items: List[Dict[str, object]] = []
        self.received: List[bytes] = []
        self.lock = threading.Lock()

    def last(self) -> bytes:
        with self.lock:
            return self.received[-1]

    def count(self) -> int:
        with self.lock:
            return len(self.received)

    def send(self, kind: int, payload: bytes) -> None:
        self.sock.send(struct.pack("<BBHI", 1, kind, 0, len(payload)) + payload)

    def answer(self, tag: int, code: int) -> None:
        self.send(103, struct.pack("<IH", tag, code) + put_string("why" if code else ""))

    def run(self) -> None:
        while True:
            data = self.sock.recv(65536)
            if not data:
                return
            with self.lock:
                self.received.append(data)
            version, kind, reserved, length = struct.unpack_from("<BBHI", data)
            assert version == 1 and reserved == 0 and length == len(data) - 8
            r = Reader(data[8:])
            if kind == 65:  # acquire: granted
                tag = r.u32()
                self.send(98, struct.pack("<IQ", tag, 77))
                continue
            if kind not in (75, 76, 77, 78):
                continue
            tag = r.u32()
            a = r.attributes()
            if kind == 75:
                payload = {"data": r.data_field()}
            elif kind == 76:
                payload = {"return_data": r.flag(), "all": r.flag()}
            elif kind == 77:
                payload = {"label": r.string(255) if r.flag() else None}
                payload["data"] = r.data_field() if r.flag() else None
            else:
                payload = {}
            assert r.at == len(r.data), "trailing bytes"
            service = a.get("service", "")
            if service == "hang":
                continue
            if isinstance(service, str) and service.startswith("code-"):
                self.answer(tag, int(service[5:]))
                continue
            getattr(self, {75: "add", 76: "copy", 77: "update", 78: "delete"}[kind])(tag, a, payload)

    def visible(self, query: Dict[str, object]) -> List[Dict[str, object]]:
        return [i for i in self.items if i["group"] in GROUPS and matches(i, query)]

    def add(self, tag: int, a: Dict[str, object], payload: Dict[str, object]) -> None:
        if a["class"] == 0 or not payload["data"]:
            return self.answer(tag, 6)
        item = dict(a, group=a["group"] or GROUPS[0], data=payload["data"])
        if item["group"] not in GROUPS:
            return self.answer(tag, 5)
        if any(identity(i) == identity(item) for i in self.items):
            return self.answer(tag, 13)
        if len(self.items) == 8:
            return self.answer(tag, 8)
        self.items.append(item)
        self.answer(tag, 0)

    def copy(self, tag: int, a: Dict[str, object], payload: Dict[str, object]) -> None:
        found = self.visible(a)
        if not found:
            return self.answer(tag, 14)
        if payload["return_data"]:
            found = found[:1]
        body = struct.pack("<IH", tag, len(found)) + b"".join(put_item(i, payload["return_data"]) for i in found)
        self.send(105, body)

    def update(self, tag: int, a: Dict[str, object], payload: Dict[str, object]) -> None:
        found = self.visible(a)
        for item in found:
            if payload["label"] is not None:
                item["label"] = payload["label"]
            if payload["data"] is not None:
                item["data"] = payload["data"]
        self.answer(tag, 0 if found else 14)

    def delete(self, tag: int, a: Dict[str, object], payload: Dict[str, object]) -> None:
        found = self.visible(a)
        self.items = [i for i in self.items if not any(i is f for f in found)]
        self.answer(tag, 0 if found else 14)


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
    import extension_runtime.secrets as secrets
    from extension_runtime import secrets as same

    assert extension_runtime.secrets is secrets is same and "secrets" in extension_runtime.__all__
    assert issubclass(secrets.DuplicateItemError, FileExistsError) and issubclass(secrets.ItemNotFoundError, LookupError)
    for cls in (secrets.DuplicateItemError, secrets.ItemNotFoundError):
        assert issubclass(cls, extension_runtime.ExtensionRuntimeError)
    assert secrets.NotPermittedError is extension_runtime.NotPermittedError
    assert extension_runtime.is_supervised()

    # The bytes sent, by the spec: add (generic; every internet field), copy, update, delete.
    secrets.add(b"S3CRET", service="svc", account="me", label="L")
    sent = daemon.last()
    assert sent[1] == 75 and sent[12:] == bytes.fromhex("01 0000 43 0300 737663 0200 6d65 0100 4c 06000000 533343524554")
    secrets.add(bytearray(b"pw"), kind=secrets.INTERNET, group="group.b", account="a", server="example.com", protocol="https",
                port=8443, path="/p", label="é")
    assert daemon.last()[12:] == bytes.fromhex(
        "02 0700 67726f75702e62 7e 0100 61 0b00 6578616d706c652e636f6d 0500 6874747073 fb20 0200 2f70 0200 c3a9 02000000 7077")
    item = secrets.copy()
    assert daemon.last()[12:] == bytes.fromhex("00 0000 00 01 00")
    assert item == secrets.Item(kind="generic", group="group.a", service="svc", account="me", label="L", data=b"S3CRET")
    assert "S3CRET" not in repr(item) and "data" not in repr(item)
    everything = secrets.copy_all()
    assert daemon.last()[12:] == bytes.fromhex("00 0000 00 00 01")
    assert [i.kind for i in everything] == ["generic", "internet"] and all(i.data is None for i in everything)
    net = everything[1]
    assert (net.group, net.account, net.server, net.protocol, net.port, net.path, net.label, net.service) == (
        "group.b", "a", "example.com", "https", 8443, "/p", "é", None)
    assert secrets.copy(kind="internet", port=8443, group="group.b").data == b"pw"
    assert daemon.last()[12:] == bytes.fromhex("02 0700 67726f75702e62 10 fb20 01 00")
    first = secrets.copy(kind=secrets.GENERIC, return_data=False)
    assert first.data is None and first.service == "svc"
    secrets.update(service="svc", new_label="New", new_data=memoryview(b"D2"))
    assert daemon.last()[12:] == bytes.fromhex("00 0000 01 0300 737663 01 0300 4e6577 01 02000000 4432")
    secrets.update(kind="generic", service="svc", new_data=b"D3")
    assert daemon.last()[12:] == bytes.fromhex("01 0000 01 0300 737663 00 01 02000000 4433")
    secrets.update(service="svc", new_label="")
    assert daemon.last()[12:] == bytes.fromhex("00 0000 01 0300 737663 01 0000 00")
    got = secrets.copy(service="svc")
    assert got.label == "" and got.data == b"D3"
    secrets.delete(account="a", label="é")
    assert daemon.last()[12:] == bytes.fromhex("00 0000 42 0100 61 0200 c3a9")

    # Errors from extensiond.
    e = expect(secrets.DuplicateItemError, secrets.add, b"again", service="svc", account="me")
    assert e.errno == errno.EEXIST and isinstance(e, FileExistsError)
    e = expect(secrets.ItemNotFoundError, secrets.copy, service="nothing")
    assert e.errno == errno.ENOENT and isinstance(e, LookupError)
    assert secrets.copy_all(service="nothing") == []
    expect(secrets.ItemNotFoundError, secrets.copy, service="svc", group="group.c")  # never revealed
    expect(secrets.ItemNotFoundError, secrets.update, service="nothing", new_label="x")
    expect(secrets.ItemNotFoundError, secrets.delete, service="nothing")
    e = expect(secrets.NotPermittedError, secrets.add, b"x", service="s", group="group.c")
    assert e.errno == errno.EPERM and isinstance(e, PermissionError)
    for code, error, number in [(1, secrets.ItemNotFoundError, errno.ENOENT), (5, secrets.NotPermittedError, errno.EPERM),
                                (6, ValueError, None), (8, extension_runtime.ExtensionRuntimeError, errno.ENOSPC),
                                (11, extension_runtime.ExtensionRuntimeError, errno.EIO),
                                (12, extension_runtime.ExtensionRuntimeError, errno.EIO),
                                (13, secrets.DuplicateItemError, errno.EEXIST), (14, secrets.ItemNotFoundError, errno.ENOENT)]:
        service = f"code-{code}"
        for call, kwargs in [(secrets.add, {"data": b"x"}), (secrets.copy, {}), (secrets.update, {"new_label": "l"}),
                             (secrets.delete, {})]:
            e = expect(error, call, service=service, **kwargs)
            assert number is None or e.errno == number, (code, call, e)
        if number == errno.ENOENT:  # copy_all: no match is an empty list
            assert secrets.copy_all(service=service) == []
        else:
            expect(error, secrets.copy_all, service=service)
    for n in range(8 - len(daemon.items)):
        secrets.add(b"v", service=f"fill-{n}")
    e = expect(extension_runtime.ExtensionRuntimeError, secrets.add, b"v", service="one-too-many")
    assert e.errno == errno.ENOSPC
    secrets.delete()
    assert secrets.copy_all() == []

    # Refused before sending.
    before = daemon.count()
    for kwargs, error in [({"data": b""}, ValueError), ({"data": b"x" * 60001}, ValueError), ({"data": "str"}, TypeError),
                          ({"data": 5}, TypeError), ({"data": b"x", "kind": None}, ValueError),
                          ({"data": b"x", "kind": "other"}, ValueError), ({"data": b"x", "service": "s" * 256}, ValueError),
                          ({"data": b"x", "group": "g" * 256}, ValueError), ({"data": b"x", "protocol": "p" * 33}, ValueError),
                          ({"data": b"x", "path": "/" * 1025}, ValueError), ({"data": b"x", "label": "a\0b"}, ValueError),
                          ({"data": b"x", "account": "\ud800"}, ValueError), ({"data": b"x", "port": 65536}, ValueError),
                          ({"data": b"x", "port": -1}, ValueError), ({"data": b"x", "port": "80"}, TypeError),
                          ({"data": b"x", "port": True}, TypeError), ({"data": b"x", "server": 1}, TypeError)]:
        data = kwargs.pop("data")
        expect(error, secrets.add, data, **kwargs)
    expect(ValueError, secrets.update, service="s")
    expect(ValueError, secrets.update, service="s", new_data=b"")
    expect(ValueError, secrets.update, service="s", new_label="l" * 256)
    expect(ValueError, secrets.copy, kind="both")
    expect(ValueError, secrets.delete, path="/" * 1025)
    assert daemon.count() == before
    # The limits themselves are sent.
    secrets.add(bytes(range(256)) * 234 + bytes(96), service="s" * 255, label="é" * 127, path="/" * 1024, protocol="p" * 32,
                port=65535, group="group.b")
    big = secrets.copy(service="s" * 255)
    assert big.data == bytes(range(256)) * 234 + bytes(96) and len(big.data) == 60000 and big.port is None
    secrets.delete(service="s" * 255)

    # From a runtime callback: a task assertion's block runs on a runtime thread.
    done = threading.Event()
    outcome: List[Optional[bytes]] = []

    def block(expired: bool) -> None:
        if not expired:
            secrets.add(b"from-callback", service="cb")
            outcome.append(secrets.copy(service="cb").data)
            secrets.delete(service="cb")
            done.set()

    extension_runtime.perform_expiring_activity("secrets", block)
    assert done.wait(5) and outcome == [b"from-callback"]

    # Several threads at once.
    failures: List[BaseException] = []

    def worker(n: int) -> None:
        try:
            for k in range(30):
                secrets.add(f"{n}/{k}".encode(), service=f"worker-{n}")
                assert secrets.copy(service=f"worker-{n}").data == f"{n}/{k}".encode()
                secrets.delete(service=f"worker-{n}")
        except BaseException as e:  # noqa: BLE001: reported below
            failures.append(e)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures, failures

    # The channel closes while a call waits: NotSupervisedError, for it and every later call.
    waiting: List[BaseException] = []

    def hang() -> None:
        try:
            secrets.copy(service="hang")
        except BaseException as e:  # noqa: BLE001
            waiting.append(e)

    count = daemon.count()
    t = threading.Thread(target=hang)
    t.start()
    while daemon.count() == count:
        threading.Event().wait(0.001)
    daemon_end.shutdown(socket.SHUT_RDWR)
    t.join(5)
    assert not t.is_alive() and isinstance(waiting[0], extension_runtime.NotSupervisedError)
    expect(extension_runtime.NotSupervisedError, secrets.add, b"x", service="s")
    expect(extension_runtime.NotSupervisedError, secrets.copy_all)
    print("ok: extension_runtime.secrets against a fake extensiond")


if __name__ == "__main__":
    check(sys.argv[1])
