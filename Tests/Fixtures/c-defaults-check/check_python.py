"""check_python: the Python package's shared defaults and open URL (bindings/python) against the C
runtime, run by run.sh with bindings/python/src on PYTHONPATH:

  check_python.py codec SHIM   the Python encoder and decoder against the C decoder
                               (libshim.so: the runtime's sources and shim.c): spec vectors,
                               random nested values, mutations (both decoders agree on what is
                               well-formed), and Defaults over a mapping built in memory (reads
                               through the C getters; writes checked by C, then refused:
                               no extensiond)
  check_python.py daemon LIB   open_url and defaults() against a fake extensiond on a
                               socketpair, with the built libExtensionRuntimeC

Prints "ok: ..." and exits 0, or raises.
"""
import ctypes
import errno
import os
import random
import socket
import struct
import sys
import threading


def hexed(text: str) -> bytes:
    return bytes.fromhex(text.replace(" ", ""))


def suite_mapping(entries: dict) -> bytes:
    """A suite mapping (docs/defaults.md), entries being key -> encoded value."""
    keys = sorted(entries, key=lambda k: k.encode())
    table, body = b"", b""
    for key in keys:
        table += struct.pack("<I", len(keys) * 4 + len(body))
        k = key.encode()
        body += struct.pack("<I", len(k)) + k + struct.pack("<I", len(entries[key])) + entries[key]
    area = table + body
    header = b"EXTDFLT1" + struct.pack("<QII", 0, len(area), len(keys))
    header += bytes(64 - len(header))
    return header + area + bytes(262144 - len(area))


def normalized(value):
    """What a value reads back as: tuples as lists, bytearrays as bytes."""
    if isinstance(value, (list, tuple)):
        return [normalized(v) for v in value]
    if isinstance(value, dict):
        return {k: normalized(v) for k, v in value.items()}
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    return value


def same(a, b) -> bool:
    """Equality of types and values, floats bitwise (bool is never equal to int)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return struct.pack("<d", a) == struct.pack("<d", b)  # bitwise: NaN, -0.0
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return a == b


def random_value(rng: random.Random, depth: int = 1):
    kinds = ["bool", "int", "float", "str", "bytes"] + (["list", "tuple", "dict"] if depth < 6 else [])
    kind = rng.choice(kinds)
    if kind == "bool":
        return rng.random() < 0.5
    if kind == "int":
        return rng.choice([0, 1, -1, 2**63 - 1, -2**63, rng.randrange(-2**63, 2**63)])
    if kind == "float":
        return rng.choice([0.0, -0.0, 1.5, float("inf"), float("-inf"), float("nan"), rng.uniform(-1e300, 1e300)])
    if kind == "str":
        return "".join(rng.choice(["a", "Z", "é", "€", "𝄞", "\0", " "]) for _ in range(rng.randrange(6)))
    if kind == "bytes":
        return bytes(rng.randrange(256) for _ in range(rng.randrange(6)))
    if kind in ("list", "tuple"):
        items = [random_value(rng, depth + 1) for _ in range(rng.randrange(4))]
        return items if kind == "list" else tuple(items)
    return {"".join(rng.choice(["a", "b", "é", "𝄞", "Z"]) for _ in range(rng.randrange(4))): random_value(rng, depth + 1)
            for _ in range(rng.randrange(4))}


def check_codec(shim_path: str) -> None:
    os.environ["EXTENSION_RUNTIME_LIB"] = shim_path
    import extension_runtime as rt
    from extension_runtime import _codec, _library

    lib = _library.library()
    shim = ctypes.CDLL(shim_path)
    shim.shim_value_check.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    shim.shim_handle.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t]
    shim.shim_handle.restype = ctypes.c_void_p

    def c_accepts(data: bytes) -> bool:
        return shim.shim_value_check(data, len(data)) == 0

    # The encoding of the spec, byte for byte.
    vectors = [
        (True, "01 01"), (False, "01 00"), (1, "02 0100000000000000"), (-1, "02 ffffffffffffffff"),
        (-2**63, "02 0000000000000080"), (1.5, "03 000000000000f83f"), ("", "04 00000000"), ("é", "04 02000000 c3a9"),
        (b"\0", "05 01000000 00"), (bytearray(b"ab"), "05 02000000 6162"), ([], "06 00000000"), ((True,), "06 01000000 0101"),
        ({}, "07 00000000"),
        ({"b": 1, "é": False, "ab": [], "a": "x"},
         "07 04000000 01000000 61 04 01000000 78 02000000 6162 06 00000000 01000000 62 02 0100000000000000"
         " 02000000 c3a9 0100"),
        ([True, 1, 1.0], "06 03000000 0101 02 0100000000000000 03 000000000000f03f"),  # bool is not int
    ]
    for value, expected in vectors:
        encoded = _codec.encode(value)
        assert encoded == hexed(expected), (value, encoded.hex())
        assert c_accepts(encoded), value
        assert same(_codec.decode(encoded), normalized(value)), value
    # What cannot be encoded.
    deep = [1]
    for _ in range(30):
        deep = [deep]  # 32 levels: the deepest
    assert c_accepts(_codec.encode(deep)) and same(_codec.decode(_codec.encode(deep)), deep)
    too_deep = b"\x06\x01\x00\x00\x00" * 32 + b"\x01\x01"  # 33 levels, by hand
    assert not c_accepts(too_deep) and not c_accepts(too_deep[5:] + b"\x00")
    try:
        _codec.decode(too_deep)
        raise AssertionError("33 levels decoded")
    except ValueError:
        pass
    for bad, error in [(2**63, OverflowError), (-2**63 - 1, OverflowError), (None, TypeError), (object(), TypeError),
                       ({1: 2}, TypeError), ({"a": {(): 1}}, TypeError), (set(), TypeError), ("\ud800", ValueError),
                       ({"\udfff": 1}, ValueError), ([deep], ValueError)]:
        try:
            _codec.encode(bad)
        except error:
            pass
        else:
            raise AssertionError(f"{bad!r} was encoded")
    loop: list = []
    loop.append(loop)
    try:
        _codec.encode(loop)
        raise AssertionError("a list holding itself was encoded")
    except ValueError:
        pass

    # Random values: C accepts every Python encoding, Python decodes it back.
    rng = random.Random(40)
    encodings = []
    for _ in range(3000):
        value = random_value(rng)
        encoded = _codec.encode(value)
        assert c_accepts(encoded), (value, encoded.hex())
        assert same(_codec.decode(encoded), normalized(value)), value
        encodings.append(encoded)
    # Mutations: both decoders agree on what is well-formed.
    agreed = refused = 0
    for _ in range(20000):
        data = bytearray(rng.choice(encodings))
        how = rng.randrange(4)
        if how == 0 and data:
            data[rng.randrange(len(data))] = rng.randrange(256)
        elif how == 1 and data:
            del data[rng.randrange(len(data)):]
        elif how == 2:
            data.insert(rng.randrange(len(data) + 1), rng.choice([0, 1, 2, 6, 7, 0xC3, 0xFF]))
        elif len(data) > 5:
            data[1:5] = struct.pack("<I", rng.randrange(8))
        data = bytes(data)
        try:
            _codec.decode(data)
            python_accepts = True
        except ValueError:
            python_accepts = False
        assert python_accepts == c_accepts(data), data.hex()
        agreed += 1
        refused += not python_accepts
    assert refused > 1000

    # Defaults over a mapping built in memory: reads through the C getters.
    values = {"bool": True, "int": -7, "big": 2**63 - 1, "float": 0.1, "str": "héllo", "bytes": b"\0\xff",
              "list": [1, (2.5, "x"), {"k": [False]}], "dict": {"z": 1, "a": {"n": b""}}, "é": "last",
              "huge": "x" * 59995}
    mapping = suite_mapping({k: _codec.encode(v) for k, v in values.items()})
    handle = shim.shim_handle(b"group.test", mapping, len(mapping))
    assert handle
    d = rt.Defaults("group.test", handle)
    for key, value in values.items():
        assert same(d[key], normalized(value)), key
        assert key in d
    assert list(d) == sorted(values, key=lambda k: k.encode()) and len(d) == len(values)
    assert d.get("missing") is None and d.get("missing", 5) == 5 and "missing" not in d and 1 not in d
    for missing in ["missing", "", "a\0b", 1, "\ud800"]:
        try:
            d[missing]
            raise AssertionError(f"{missing!r} was found")
        except KeyError:
            pass
    # The typed C getters agree with the Python decoder.
    lib.ext_defaults_get_int64.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_int64)]
    lib.ext_defaults_get_double.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_double)]
    i, f = ctypes.c_int64(), ctypes.c_double()
    assert lib.ext_defaults_get_int64(handle, b"big", ctypes.byref(i)) == 0 and i.value == 2**63 - 1
    assert lib.ext_defaults_get_double(handle, b"int", ctypes.byref(f)) == 0 and f.value == -7.0
    assert lib.ext_defaults_get_int64(handle, b"bool", ctypes.byref(i)) == -errno.EDOM
    # Writes: checked (by Python, then by C: a malformed encoding would be EINVAL), then refused.
    for key, value in [("k", {"b": [1, 2.0, "é"], "a": True}), ("k", "x" * 59995), ("é", b"")]:
        try:
            d[key] = value
            raise AssertionError("written without extensiond")
        except rt.NotSupervisedError:
            pass
    for key, value, error in [("k", 2**64, OverflowError), ("", 1, ValueError), ("a\0", 1, ValueError), (1, 1, TypeError),
                              ("k" * 256, 1, ValueError), ("k", "x" * 59996, ValueError), ("k", None, TypeError),
                              ("k", {2: 1}, TypeError)]:
        try:
            d[key] = value
            raise AssertionError(f"{key!r} = {value!r} accepted")
        except error:
            pass
    try:
        del d["missing"]
        raise AssertionError("deleted a missing key")
    except KeyError:
        pass
    try:
        del d["int"]
        raise AssertionError("deleted without extensiond")
    except rt.NotSupervisedError:
        pass
    assert d.on_change(print) is print
    with d:
        assert not d.closed
    assert d.closed and "closed" in repr(d)
    d.close()
    try:
        d["int"]
        raise AssertionError("read a closed suite")
    except ValueError:
        pass
    print(f"ok: codec ({len(vectors)} vectors, {len(encodings)} random values, {agreed} mutations, "
          f"{refused} refused by both), Defaults reads over C")


# --- the fake extensiond --------------------------------------------------------------------------

MAPPING = 64 + 262144


class FakeDaemon(threading.Thread):
    def __init__(self, sock: socket.socket) -> None:
        super().__init__(daemon=True)
        self.sock = sock
        self.entries = {}
        self.memory_fd = os.memfd_create("suite")
        os.ftruncate(self.memory_fd, MAPPING)
        import mmap
        self.memory = mmap.mmap(self.memory_fd, MAPPING)
        self.memory[0:8] = b"EXTDFLT1"
        self.sequence = 0

    def publish(self) -> None:
        self.sequence += 1
        self.memory[8:16] = struct.pack("<Q", self.sequence)
        image = suite_mapping(self.entries)
        self.memory[16:64] = image[16:64]
        self.memory[64:] = image[64:]
        self.sequence += 1
        self.memory[8:16] = struct.pack("<Q", self.sequence)

    def send(self, kind: int, payload: bytes, fds=()) -> None:
        datagram = struct.pack("<BBHI", 1, kind, 0, len(payload)) + payload
        if fds:
            socket.send_fds(self.sock, [datagram], list(fds))
        else:
            self.sock.send(datagram)

    def answer(self, tag: int, code: int, fds=()) -> None:
        self.send(103, struct.pack("<IHH", tag, code, 3) + b"why", fds)

    def run(self) -> None:
        while True:
            data = self.sock.recv(65536)
            if not data:
                return
            kind, payload = data[1], data[8:]
            if kind == 72:
                tag, n = struct.unpack_from("<IH", payload)
                url = payload[6:6 + n].decode()
                self.answer(tag, 0 if url.endswith("/ok") else 5)
            elif kind == 73:
                tag, n = struct.unpack_from("<IH", payload)
                suite = payload[6:6 + n].decode()
                if suite == "group.ok":
                    ro = os.open(f"/proc/self/fd/{self.memory_fd}", os.O_RDONLY)
                    self.answer(tag, 0, [ro])
                    os.close(ro)
                else:
                    self.answer(tag, 1 if suite == "group.none" else 5)
            elif kind == 74:
                tag, n = struct.unpack_from("<IH", payload)
                at = 6 + n
                (k,) = struct.unpack_from("<H", payload, at)
                key = payload[at + 2:at + 2 + k].decode()
                at += 2 + k
                has_value = payload[at]
                if key == "bad":
                    self.answer(tag, 6)
                    continue
                if key == "full":
                    self.answer(tag, 8)
                    continue
                if has_value:
                    (length,) = struct.unpack_from("<I", payload, at + 1)
                    self.entries[key] = payload[at + 5:at + 5 + length]
                else:
                    self.entries.pop(key, None)
                self.publish()
                self.answer(tag, 0)
                if key == "poke":
                    self.send(104, struct.pack("<H", 8) + b"group.ok")


def check_daemon(library_path: str) -> None:
    runtime_end, daemon_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    os.environ["EXTENSIOND_CHANNEL_FD"] = str(runtime_end.fileno())
    os.environ["EXTENSION_RUNTIME_LIB"] = library_path
    FakeDaemon(daemon_end).start()
    import extension_runtime as rt

    assert rt.is_supervised()
    assert rt.open_url("https://example.com/ok") is True
    assert rt.open_url("https://example.com/no") is False
    for suite, error in [("group.none", rt.UnknownSuiteError), ("group.denied", rt.NotPermittedError)]:
        try:
            rt.defaults(suite)
            raise AssertionError(suite)
        except error as e:
            assert suite in str(e)
    try:
        rt.defaults("group.none")
    except LookupError:
        pass
    try:
        rt.defaults("group.denied")
    except PermissionError as e:
        assert e.errno == errno.EPERM
    values = {"b": True, "i": -5, "f": 0.25, "s": "é", "y": b"\0", "l": [1, [2, {"x": 3}]], "m": {"b": 1, "a": [True]}}
    changed = threading.Event()
    seen = []
    with rt.defaults("group.ok") as d:
        for key, value in values.items():
            d[key] = value
            assert same(d[key], normalized(value)), key  # visible on return
        assert list(d) == sorted(values) and len(d) == len(values)
        del d["s"]
        assert "s" not in d and d.get("s") is None
        try:
            d["bad"] = 1
            raise AssertionError("bad")
        except ValueError:
            pass
        try:
            d["full"] = 1
            raise AssertionError("full")
        except rt.ExtensionRuntimeError as e:
            assert e.errno == errno.ENOSPC

        @d.on_change
        def on_change(suite: str) -> None:
            d["from.callback"] = suite  # a round trip from the callback's thread
            seen.append(suite)
            changed.set()

        d["poke"] = 1
        assert changed.wait(5) and seen == ["group.ok"]
        assert d["from.callback"] == "group.ok"
        d.update({"u1": 1, "u2": [2]})
        assert d["u2"] == [2] and d.pop("u1") == 1 and "u1" not in d
    assert d.closed
    print("ok: open_url and defaults against a fake extensiond")


if __name__ == "__main__":
    mode, path = sys.argv[1], sys.argv[2]
    check_codec(path) if mode == "codec" else check_daemon(path)
