#!/usr/bin/env python3
"""secret-app: an app's process for SecretTests, speaking extensiond's control protocol by hand
(docs/protocol.md) with nothing but the standard library.

  app.py SOCKET copy SERVICE ACCOUNT   -> secretCopy (automatic search, generic password, return
                                          data): prints "found <length> <sha256 of the data> in <group>"
                                          (never the data), or "failure <code> <text>"
"""
import hashlib
import socket
import struct
import sys


def string(s: str) -> bytes:
    b = s.encode()
    return struct.pack("<H", len(b)) + b


def message(kind: int, payload: bytes) -> bytes:
    return struct.pack("<BBHI", 1, kind, 0, len(payload)) + payload


def main() -> int:
    path, command, service, account = sys.argv[1:5]
    assert command == "copy"
    attributes = bytes([1]) + string("") + bytes([1 | 2]) + string(service) + string(account)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    sock.connect(path)
    sock.send(message(76, struct.pack("<I", 7) + attributes + bytes([1, 0])))
    reply = sock.recv(65536)
    kind = reply[1]
    body = reply[8:]
    if kind == 34:  # failure
        _, code, length = struct.unpack_from("<IHH", body)
        print(f"failure {code} {body[8:8 + length].decode()}")
        return 0
    assert kind == 105, kind  # secretItems
    offset = 4 + 2
    offset += 1  # class
    (glen,) = struct.unpack_from("<H", body, offset)
    group = body[offset + 2:offset + 2 + glen].decode()
    offset += 2 + glen
    fields = body[offset]
    offset += 1
    for bit in (1, 2, 4, 8, 16, 32, 64):
        if fields & bit:
            if bit == 16:
                offset += 2
            else:
                (n,) = struct.unpack_from("<H", body, offset)
                offset += 2 + n
    has_data = body[offset]
    offset += 1
    assert has_data == 1
    (n,) = struct.unpack_from("<I", body, offset)
    data = body[offset + 4:offset + 4 + n]
    print(f"found {len(data)} {hashlib.sha256(data).hexdigest()} in {group}")
    return 0


sys.exit(main())
