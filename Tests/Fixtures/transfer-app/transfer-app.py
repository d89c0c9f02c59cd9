#!/usr/bin/env python3
"""transfer-app: an app's process for TransferTests, brought up for its background sessions'
events, speaking extensiond's control protocol by hand (docs/protocol.md, "Background
transfers") with nothing but the standard library.

  transfer-app.py SOCKET claim GROUP SESSION COUNT [handle]
      transferClaim, then reads transferEvents until COUNT completions or failures arrived, and
      prints one line per event: "completed TASK STATUS PATH" or "failed TASK DOMAIN CODE TEXT"
      (progress is not printed). With "handle": then transferHandled through the highest sequence
      (the model's did finish events), and prints "handled SEQ" once the daemon answered ok.
      With COUNT 0 it prints whatever completion the claim brings before the answer to a
      transferHandled through 0 sent behind it (nothing, when nothing is queued).
      A failure answer prints "failure CODE TEXT".
  transfer-app.py SOCKET upload GROUP SESSION PATH URL
      transferCreate of a PUT upload: prints "created TASK" or "failure CODE TEXT".
"""
import socket
import struct
import sys


def string(s: str) -> bytes:
    b = s.encode()
    return struct.pack("<H", len(b)) + b


def message(kind: int, payload: bytes) -> bytes:
    return struct.pack("<BBHI", 1, kind, 0, len(payload)) + payload


def read_string(body: bytes, offset: int):
    (n,) = struct.unpack_from("<H", body, offset)
    return body[offset + 2:offset + 2 + n].decode(), offset + 2 + n


def receive(sock):
    reply = sock.recv(65536)
    if not reply:
        print("closed")
        sys.exit(1)
    return reply[1], reply[8:]


def failure(body: bytes) -> str:
    _, code = struct.unpack_from("<IH", body)
    text, _ = read_string(body, 6)
    return f"failure {code} {text}"


def events(body: bytes):
    _, offset = read_string(body, 0)
    _, offset = read_string(body, offset)
    (count,) = struct.unpack_from("<H", body, offset)
    offset += 2
    for _ in range(count):
        sequence, task, kind, done, total, status = struct.unpack_from("<QQBQqH", body, offset)
        offset += 8 + 8 + 1 + 8 + 8 + 2
        path, offset = read_string(body, offset)
        domain, offset = read_string(body, offset)
        (code,) = struct.unpack_from("<i", body, offset)
        offset += 4
        text, offset = read_string(body, offset)
        yield sequence, task, kind, status, path, domain, code, text


def main() -> int:
    path, command, group, session = sys.argv[1:5]
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    sock.connect(path)
    if command == "upload":
        source, url = sys.argv[5:7]
        sock.send(message(79, struct.pack("<I", 1) + string(session) + string(group) + bytes([2]) + string(url) + string(source) + bytes([0])))
        kind, body = receive(sock)
        if kind == 34:
            print(failure(body))
        else:
            assert kind == 106, kind
            print(f"created {struct.unpack_from('<IQ', body)[1]}")
        return 0
    assert command == "claim"
    count = int(sys.argv[5])
    handle = len(sys.argv) > 6 and sys.argv[6] == "handle"
    sock.send(message(81, struct.pack("<I", 1) + string(session) + string(group)))
    seen, highest = 0, 0
    if count == 0:
        # A barrier: the daemon answers in order, so every event the claim sent comes before
        # the answer to this transferHandled (through 0: it acknowledges nothing).
        sock.send(message(82, struct.pack("<I", 3) + string(session) + string(group) + struct.pack("<Q", 0)))
    oks = 0
    while seen < count or oks < (2 if count == 0 else 1):
        kind, body = receive(sock)
        if kind == 33:  # ok
            oks += 1
        elif kind == 34:
            print(failure(body))
            return 0
        elif kind == 107:
            for sequence, task, k, status, file, domain, code, text in events(body):
                if sequence == 0:
                    continue
                highest = max(highest, sequence)
                seen += 1
                if k == 2:
                    print(f"completed {task} {status} {file or '-'}", flush=True)
                else:
                    print(f"failed {task} {domain} {code} {text}", flush=True)
    if handle:
        sock.send(message(82, struct.pack("<I", 2) + string(session) + string(group) + struct.pack("<Q", highest)))
        while True:
            kind, body = receive(sock)
            if kind == 33:
                print(f"handled {highest}")
                break
            if kind == 34:
                print(failure(body))
                break
    return 0


sys.exit(main())
