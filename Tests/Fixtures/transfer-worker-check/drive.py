#!/usr/bin/env python3
"""Drives extensiond-transfer (Sources/extensiond-transfer) the way the daemon does.

    drive.py WORKER get URL FILE [--offset N] [--if-range S] [--stall S]
    drive.py WORKER put|post URL FILE [--stall S]
    drive.py WORKER check [--big-mb N]

`get`/`put`/`post` run one task and print every message the worker sends. `check` runs the whole
self-check against `python3 -m http.server` and a small server of its own (PUT/POST, ranges,
redirects, a slow body), and exits non-zero if anything is wrong.

Build the worker first:
    cc -O2 -Wall -Wextra -std=gnu11 -o /tmp/xt Sources/extensiond-transfer/*.c -lcurl -lsystemd
"""
import argparse
import hashlib
import http.server
import os
import select
import ssl
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import signal

# A test runner that blocks signals (extensiond's tests block them for sd-event) passes its
# mask on: unblocked here, so that SIGTERM ends this process and the ones it starts.
signal.pthread_sigmask(signal.SIG_SETMASK, set())

START, CANCEL, HEADERS, PROGRESS, DONE = 1, 2, 10, 11, 12
GET, PUT, POST = 1, 2, 3


def string(b):
    return struct.pack("<H", len(b)) + b


def start_message(task, method, url, offset=0, upload_size=0, stall=30, if_range=""):
    url = url.encode() if isinstance(url, str) else url
    return (struct.pack("<BQBQQI", START, task, method, offset, upload_size, stall)
            + string(url) + string(if_range.encode()))


def parse(data):
    kind = data[0]

    def take_str(at):
        (n,) = struct.unpack_from("<H", data, at)
        return data[at + 2:at + 2 + n].decode("utf-8", "replace"), at + 2 + n

    if kind == HEADERS:
        task, status, restarted, total = struct.unpack_from("<QIBq", data, 1)
        etag, at = take_str(1 + 21)
        last_modified, at = take_str(at)
        assert at == len(data), "HEADERS: trailing bytes"
        return dict(type="HEADERS", task=task, status=status, restarted=restarted, total=total,
                    etag=etag, last_modified=last_modified)
    if kind == PROGRESS:
        task, done, total = struct.unpack_from("<QQq", data, 1)
        assert len(data) == 25, "PROGRESS: wrong length"
        return dict(type="PROGRESS", task=task, done=done, total=total)
    if kind == DONE:
        task, status, code, done = struct.unpack_from("<QIiQ", data, 1)
        error, at = take_str(1 + 24)
        assert at == len(data), "DONE: trailing bytes"
        return dict(type="DONE", task=task, status=status, curl_code=code, done=done, error=error)
    raise AssertionError("unknown message type %d" % kind)


class Worker:
    def __init__(self, path, env=None):
        self.sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        fd = theirs.fileno()
        if fd == 3:
            self.proc = subprocess.Popen([path], pass_fds=[3], env=env)
        else:
            # Python's descriptors are close-on-exec: only the 3 that dup2 makes survives exec.
            self.proc = subprocess.Popen([path], close_fds=False, preexec_fn=lambda: os.dup2(fd, 3), env=env)
        theirs.close()
        self.messages = []  # every message received, with its arrival time

    def send(self, data, fd=None):
        if fd is None:
            self.sock.send(data)
        else:
            socket.send_fds(self.sock, [data], [fd])

    def start(self, task, method, url, fd, **kw):
        self.send(start_message(task, method, url, **kw), fd)

    def cancel(self, task):
        self.send(struct.pack("<BQ", CANCEL, task))

    def receive(self, timeout=30.0):
        """The next message, or None after `timeout` seconds without one."""
        ready, _, _ = select.select([self.sock], [], [], timeout)
        if not ready:
            return None
        data = self.sock.recv(70000)
        if not data:
            raise EOFError("the worker closed the socket")
        m = parse(data)
        m["at"] = time.monotonic()
        self.messages.append(m)
        return m

    def until_done(self, tasks, timeout=120.0, echo=False):
        """All messages until every task of `tasks` has its DONE: {task: [messages]}."""
        tasks = set(tasks) if not isinstance(tasks, int) else {tasks}
        got = {t: [] for t in tasks}
        deadline = time.monotonic() + timeout
        pending = set(tasks)
        while pending:
            m = self.receive(max(0.0, deadline - time.monotonic()))
            if m is None:
                raise TimeoutError("no DONE for %s" % sorted(pending))
            if echo:
                print({k: v for k, v in m.items() if k != "at"})
            got.setdefault(m["task"], []).append(m)
            if m["type"] == "DONE":
                pending.discard(m["task"])
        return got

    def status(self):
        with open("/proc/%d/status" % self.proc.pid) as f:
            return dict(line.split(":", 1) for line in f if ":" in line)

    def close(self, timeout=5.0):
        self.sock.close()
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise


# ---- A small server for what http.server does not do ----

class Handler(http.server.SimpleHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    uploads = {}  # path -> (length, sha256, method, headers)

    def log_message(self, *args):
        pass

    def _send(self, code, body=b"", headers=()):
        self.send_response(code)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _upload(self):
        length = int(self.headers.get("Content-Length", "0"))
        h, got = hashlib.sha256(), 0
        while got < length:
            chunk = self.rfile.read(min(1 << 20, length - got))
            if not chunk:
                break
            h.update(chunk)
            got += len(chunk)
        Handler.uploads[self.path] = (got, h.hexdigest(), self.command, dict(self.headers))
        if self.path.startswith("/redirect-upload"):
            return self._send(307, headers=[("Location", "/upload-after-redirect")])
        self._send(201, ("%d %s" % (got, h.hexdigest())).encode())

    do_PUT = do_POST = _upload

    def do_GET(self):
        p = self.path
        if p.startswith("/redirect/"):
            # /redirect/N/rest: N more redirects, then /rest
            _, _, n, rest = p.split("/", 3)
            target = "/" + rest if n == "0" else "/redirect/%d/%s" % (int(n) - 1, rest)
            return self._send(302, b"moved", [("Location", target)])
        if p.startswith("/range/"):
            return self._range(os.path.join(self.directory, p[len("/range/"):]), shift=0)
        if p.startswith("/badrange/"):
            return self._range(os.path.join(self.directory, p[len("/badrange/"):]), shift=1)
        if p.startswith("/slow"):
            # 100 KiB at 20 KiB/s-ish
            self.send_response(200)
            self.send_header("Content-Length", str(100 * 1024))
            self.end_headers()
            try:
                for _ in range(100):
                    self.wfile.write(b"s" * 1024)
                    self.wfile.flush()
                    time.sleep(0.05)
            except OSError:
                pass
            return
        if p.startswith("/stall"):
            # headers, then nothing
            self.send_response(200)
            self.send_header("Content-Length", "1000")
            self.end_headers()
            self.wfile.flush()
            time.sleep(8)
            return
        if p.startswith("/gen/"):
            # /gen/N: N MiB of generated bytes (nothing on the server's disk)
            n = int(p[len("/gen/"):]) << 20
            self.send_response(200)
            self.send_header("Content-Length", str(n))
            self.end_headers()
            block = bytes(range(256)) * 4096  # 1 MiB
            try:
                for _ in range(n >> 20):
                    self.wfile.write(block)
            except OSError:
                pass
            return
        if p.startswith("/chunked"):
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for part in (b"hello ", b"chunked ", b"world"):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
            self.wfile.write(b"0\r\nX-Trailer: t\r\n\r\n")
            return
        return super().do_GET()

    def _range(self, path, shift):
        with open(path, "rb") as f:
            data = f.read()
        st = os.stat(path)
        etag = '"%x-%x"' % (st.st_size, int(st.st_mtime))
        r = self.headers.get("Range")
        if_range = self.headers.get("If-Range")
        if r and r.startswith("bytes=") and (if_range is None or if_range == etag):
            start = int(r[6:].split("-")[0])
            body = data[start:]
            return self._send(206, body, [("ETag", etag),
                                          ("Content-Range", "bytes %d-%d/%d" % (start + shift, len(data) - 1, len(data)))])
        return self._send(200, data, [("ETag", etag)])


def serve(directory, tls=None):
    class H(Handler):
        def __init__(self, *a, **kw):
            super().__init__(*a, directory=directory, **kw)
    class Server(http.server.ThreadingHTTPServer):
        request_queue_size = 256  # the default 5 drops connections when 64 arrive at once

        def handle_error(self, request, client_address):
            pass  # the worker hung up (a cancel, an abort): expected

    server = Server(("127.0.0.1", 0), H)
    server.daemon_threads = True
    if tls:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(*tls)
        server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, "%s://127.0.0.1:%d" % ("https" if tls else "http", server.server_address[1])


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            b = f.read(1 << 20)
            if not b:
                return h.hexdigest()
            h.update(b)


# ---- The self-check ----

class Check:
    def __init__(self, worker_path, big_mb):
        self.worker_path = worker_path
        self.big_mb = big_mb
        self.failures = 0
        self.dir = tempfile.mkdtemp(prefix="xt-check-")
        self.www = os.path.join(self.dir, "www")
        self.out = os.path.join(self.dir, "out")
        os.makedirs(self.www)
        os.makedirs(self.out)

    def ok(self, cond, what):
        print(("  ok    " if cond else "  FAIL  ") + what)
        if not cond:
            self.failures += 1

    def dest(self, name, content=b""):
        path = os.path.join(self.out, name)
        with open(path, "wb") as f:
            f.write(content)
        return path, os.open(path, os.O_WRONLY)

    def check_messages(self, msgs, task):
        """The invariants of one task's messages: HEADERS at most once and before PROGRESS of the
        final body, PROGRESS at most every 250 ms, the last progress equal to DONE's done, nothing
        after DONE."""
        kinds = [m["type"] for m in msgs]
        self.ok(kinds.count("DONE") == 1 and kinds[-1] == "DONE", "task %d: one DONE, last" % task)
        self.ok(kinds.count("HEADERS") <= 1, "task %d: HEADERS at most once" % task)
        progress = [m for m in msgs if m["type"] == "PROGRESS"]
        # The flush right before DONE is exempt from the 250 ms rule; measured on arrival here,
        # so allow a little scheduling jitter.
        final_flush = len(progress) >= 2 and msgs[-2] is progress[-1]
        gaps = [b["at"] - a["at"] for a, b in zip(progress, progress[1:])]
        rule = gaps[:-1] if final_flush else gaps
        self.ok(all(g >= 0.24 for g in rule), "task %d: %d PROGRESS, min gap %.3f s (final flush %s)" % (
            task, len(progress), min(rule) if rule else float("nan"), "%.3f s" % gaps[-1] if final_flush else "none"))
        done = msgs[-1]
        if progress and done["curl_code"] == 0:
            self.ok(progress[-1]["done"] == done["done"], "task %d: last PROGRESS (%d) = DONE's done (%d)" % (
                task, progress[-1]["done"], done["done"]))
        return done

    def run(self):
        data = os.urandom(1 << 20) * 24 + os.urandom(12345)  # 24 MiB + a bit
        src = os.path.join(self.www, "file.bin")
        with open(src, "wb") as f:
            f.write(data)
        digest = hashlib.sha256(data).hexdigest()
        hs_port = socket.socket()
        hs_port.bind(("127.0.0.1", 0))
        port = hs_port.getsockname()[1]
        hs_port.close()
        hs = subprocess.Popen([sys.executable, "-m", "http.server", "--bind", "127.0.0.1",
                               "--directory", self.www, str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        plain = "http://127.0.0.1:%d" % port
        for _ in range(100):
            try:
                urllib.request.urlopen(plain + "/", timeout=1).read()
                break
            except OSError:
                time.sleep(0.05)
        server, own = serve(self.www)
        w = self.worker = Worker(self.worker_path)
        try:
            self.scenarios(w, plain, own, src, data, digest)
        finally:
            hs.terminate()
            hs.wait()
            server.shutdown()
            try:
                w.close()
            except Exception:
                pass
        shutil.rmtree(self.dir, ignore_errors=True)
        print("%d failure(s)" % self.failures)
        return 1 if self.failures else 0

    def scenarios(self, w, plain, own, src, data, digest):
        n = len(data)
        half = n // 2

        print("download (python3 -m http.server)")
        path, fd = self.dest("a")
        w.start(1, GET, plain + "/file.bin", fd)
        os.close(fd)
        msgs = w.until_done(1)[1]
        done = self.check_messages(msgs, 1)
        h = [m for m in msgs if m["type"] == "HEADERS"]
        self.ok(h and h[0]["status"] == 200 and h[0]["total"] == n and h[0]["restarted"] == 0,
                "HEADERS 200, total %d: %s" % (n, h and {k: h[0][k] for k in ("status", "total", "restarted")}))
        self.ok(bool(h and h[0]["last_modified"]), "HEADERS carries Last-Modified: %r" % (h and h[0]["last_modified"]))
        self.ok(done["status"] == 200 and done["curl_code"] == 0 and done["done"] == n and done["error"] == "",
                "DONE 200, 0, done %d, no error: %s" % (n, done))
        self.ok(sha256_file(path) == digest, "sha256 matches")
        last_modified = h[0]["last_modified"] if h else ""

        print("resume against http.server (no Range support: 200, restarted)")
        path, fd = self.dest("b", data[:half])
        w.start(2, GET, plain + "/file.bin", fd, offset=half, if_range=last_modified)
        os.close(fd)
        msgs = w.until_done(2)[2]
        done = self.check_messages(msgs, 2)
        h = [m for m in msgs if m["type"] == "HEADERS"]
        self.ok(h and h[0]["status"] == 200 and h[0]["restarted"] == 1 and h[0]["total"] == n,
                "HEADERS 200 restarted=1 total %d" % n)
        self.ok(done["curl_code"] == 0 and done["done"] == n and sha256_file(path) == digest,
                "DONE done %d, sha256 matches" % n)

        print("resume with ranges (206, If-Range = ETag)")
        # Learn the ETag first, as the daemon does from a first attempt's HEADERS.
        path, fd = self.dest("c0")
        w.start(3, GET, own + "/range/file.bin", fd)
        os.close(fd)
        msgs = w.until_done(3)[3]
        etag = [m for m in msgs if m["type"] == "HEADERS"][0]["etag"]
        self.ok(etag.startswith('"'), "ETag %s" % etag)
        path, fd = self.dest("c", data[:half] + b"GARBAGE-BEYOND-HALF")  # the worker must overwrite from half
        w.start(4, GET, own + "/range/file.bin", fd, offset=half, if_range=etag)
        os.close(fd)
        msgs = w.until_done(4)[4]
        done = self.check_messages(msgs, 4)
        h = [m for m in msgs if m["type"] == "HEADERS"][0]
        prog = [m for m in msgs if m["type"] == "PROGRESS"]
        self.ok(h["status"] == 206 and h["restarted"] == 0 and h["total"] == n, "HEADERS 206 restarted=0 total %d: %s" % (n, h))
        self.ok(all(p["done"] >= half for p in prog), "PROGRESS counts from the offset")
        self.ok(done["status"] == 206 and done["curl_code"] == 0 and done["done"] == n and sha256_file(path) == digest,
                "DONE 206 done %d, sha256 matches" % n)

        print("resume with a stale If-Range (200: restarted)")
        path, fd = self.dest("d", b"x" * half)
        w.start(5, GET, own + "/range/file.bin", fd, offset=half, if_range='"stale"')
        os.close(fd)
        msgs = w.until_done(5)[5]
        done = self.check_messages(msgs, 5)
        h = [m for m in msgs if m["type"] == "HEADERS"][0]
        self.ok(h["status"] == 200 and h["restarted"] == 1 and done["done"] == n and sha256_file(path) == digest,
                "HEADERS 200 restarted=1, file correct")

        print("206 with a wrong Content-Range start")
        path, fd = self.dest("e", data[:half])
        w.start(6, GET, own + "/badrange/file.bin", fd, offset=half)
        os.close(fd)
        msgs = w.until_done(6)[6]
        done = msgs[-1]
        self.ok(done["curl_code"] == -1 and done["error"] == "Content-Range starts at %d, not %d" % (half + 1, half),
                "DONE -1 %r" % done["error"])
        self.ok(not any(m["type"] == "HEADERS" for m in msgs), "no HEADERS")
        self.ok(open(path, "rb").read() == data[:half], "file untouched")

        print("404 (http.server)")
        path, fd = self.dest("f")
        w.start(7, GET, plain + "/missing", fd)
        os.close(fd)
        msgs = w.until_done(7)[7]
        done = self.check_messages(msgs, 7)
        h = [m for m in msgs if m["type"] == "HEADERS"]
        self.ok(h and h[0]["status"] == 404, "HEADERS 404")
        self.ok(done["status"] == 404 and done["curl_code"] == 0 and done["done"] == 0, "DONE 404, 0, done 0: %s" % done)
        self.ok(os.path.getsize(path) == 0, "file left empty")

        print("redirects (3 hops, then the file)")
        path, fd = self.dest("g")
        w.start(8, GET, own + "/redirect/2/file.bin", fd)
        os.close(fd)
        msgs = w.until_done(8)[8]
        done = self.check_messages(msgs, 8)
        h = [m for m in msgs if m["type"] == "HEADERS"]
        self.ok(len(h) == 1 and h[0]["status"] == 200 and h[0]["total"] == n, "one HEADERS, 200 (the final answer)")
        self.ok(done["status"] == 200 and sha256_file(path) == digest, "file correct")
        print("too many redirects (11)")
        path, fd = self.dest("g2")
        w.start(9, GET, own + "/redirect/11/file.bin", fd)
        os.close(fd)
        done = w.until_done(9)[9][-1]
        self.ok(done["curl_code"] == 47 and os.path.getsize(path) == 0, "DONE curl 47 (%r), file empty" % done["error"])

        print("chunked answer with trailers")
        path, fd = self.dest("ch")
        w.start(10, GET, own + "/chunked", fd)
        os.close(fd)
        msgs = w.until_done(10)[10]
        h = [m for m in msgs if m["type"] == "HEADERS"]
        self.ok(len(h) == 1 and h[0]["total"] == -1, "one HEADERS, total -1")
        self.ok(open(path, "rb").read() == b"hello chunked world", "body correct")

        print("CANCEL")
        path, fd = self.dest("h")
        w.start(11, GET, own + "/slow", fd)
        os.close(fd)
        first = w.receive(10)
        while first and first["type"] != "PROGRESS":
            first = w.receive(10)
        w.cancel(11)
        msgs = w.until_done(11)[11]
        done = msgs[-1]
        self.ok(done["status"] == 0 and done["curl_code"] == 42 and done["error"] == "cancelled" and done["done"] > 0,
                "DONE 0, 42, cancelled, done %d" % done["done"])
        self.ok(w.receive(1.5) is None, "nothing after DONE")
        w.cancel(11)
        w.cancel(12345)
        self.ok(w.receive(0.5) is None, "CANCEL of an unknown task ignored")

        print("stall (stall_seconds 2, the server stops sending)")
        path, fd = self.dest("st")
        t0 = time.monotonic()
        w.start(12, GET, own + "/stall", fd, stall=2)
        os.close(fd)
        done = w.until_done(12)[12][-1]
        self.ok(done["curl_code"] == 28 and time.monotonic() - t0 < 6, "DONE curl 28 after %.1f s: %r" % (
            time.monotonic() - t0, done["error"]))

        print("connection refused")
        path, fd = self.dest("cr")
        w.start(13, GET, "http://127.0.0.1:1/x", fd)
        os.close(fd)
        done = w.until_done(13)[13][-1]
        self.ok(done["curl_code"] == 7 and done["status"] == 0 and done["error"] != "", "DONE curl 7: %r" % done["error"])

        print("refused STARTs")
        path, fd = self.dest("r")
        w.send(start_message(20, GET, own + "/file.bin"))  # no descriptor
        done = w.until_done(20)[20][-1]
        self.ok(done["curl_code"] == -1 and "descriptor" in done["error"], "no descriptor: %r" % done["error"])
        w.start(21, 9, own + "/file.bin", fd)
        done = w.until_done(21)[21][-1]
        self.ok(done["curl_code"] == -1 and "method" in done["error"], "unknown method: %r" % done["error"])
        w.start(22, GET, own + "/" + "a" * 8200, fd)
        done = w.until_done(22)[22][-1]
        self.ok(done["curl_code"] == -1 and "8192" in done["error"], "long url: %r" % done["error"])
        w.start(23, GET, own + "/slow", fd)
        w.start(23, GET, own + "/slow", fd)
        m = w.receive(5)
        while m and m["type"] != "DONE":
            m = w.receive(5)
        self.ok(m and m["task"] == 23 and m["curl_code"] == -1 and "running" in m["error"], "duplicate task: %r" % (m and m["error"]))
        w.cancel(23)
        w.until_done(23)
        w.start(24, GET, "ftp://127.0.0.1/x", fd)
        done = w.until_done(24)[24][-1]
        self.ok(done["curl_code"] == 1, "ftp: curl 1 (unsupported protocol): %r" % done["error"])
        os.close(fd)

        print("upload PUT")
        up = os.path.join(self.www, "file.bin")
        fd = os.open(up, os.O_RDONLY)
        w.start(30, PUT, own + "/upload-put", fd, upload_size=n)
        os.close(fd)
        msgs = w.until_done(30)[30]
        done = self.check_messages(msgs, 30)
        h = [m for m in msgs if m["type"] == "HEADERS"]
        got = Handler.uploads.get("/upload-put")
        self.ok(h and h[0]["status"] == 201 and h[0]["total"] == n, "HEADERS 201 total %d" % n)
        self.ok(done["status"] == 201 and done["curl_code"] == 0 and done["done"] == n, "DONE 201, 0, done %d: %s" % (n, done))
        self.ok(got and got[0] == n and got[1] == digest and got[2] == "PUT", "server got %d bytes, sha256 matches" % n)
        self.ok(got and "Expect" not in got[3], "no Expect: 100-continue")

        print("upload POST, part of a file")
        fd = os.open(up, os.O_RDONLY)
        w.start(31, POST, own + "/upload-post", fd, upload_size=1000)
        os.close(fd)
        done = w.until_done(31)[31][-1]
        got = Handler.uploads.get("/upload-post")
        self.ok(done["status"] == 201 and done["curl_code"] == 0 and got and got[2] == "POST"
                and got[1] == hashlib.sha256(data[:1000]).hexdigest(), "POST 1000 bytes, sha256 matches")

        print("upload PUT with a 307 redirect (rewinds with the seek callback)")
        fd = os.open(up, os.O_RDONLY)
        w.start(32, PUT, own + "/redirect-upload", fd, upload_size=200000)
        os.close(fd)
        done = w.until_done(32)[32][-1]
        got = Handler.uploads.get("/upload-after-redirect")
        self.ok(done["status"] == 201 and got and got[0] == 200000 and got[1] == hashlib.sha256(data[:200000]).hexdigest(),
                "DONE 201 after the redirect, body resent whole: %s" % done)

        print("upload of a file shorter than upload_size")
        small = os.path.join(self.dir, "small")
        with open(small, "wb") as f:
            f.write(b"z" * 100)
        fd = os.open(small, os.O_RDONLY)
        w.start(33, PUT, own + "/upload-short", fd, upload_size=1000)
        os.close(fd)
        done = w.until_done(33)[33][-1]
        self.ok(done["curl_code"] == 26 and done["error"].startswith("read:"), "DONE curl 26: %r" % done["error"])

        print("64 downloads at once")
        ids = list(range(100, 164))
        for i in ids:
            path, fd = self.dest("m%d" % i)
            w.start(i, GET, own + "/file.bin", fd)
            os.close(fd)
        t0 = time.monotonic()
        got = w.until_done(ids, timeout=300)
        ok = all(got[i][-1]["curl_code"] == 0 and got[i][-1]["status"] == 200 and got[i][-1]["done"] == n for i in ids)
        self.ok(ok, "64 DONE 200 in %.1f s" % (time.monotonic() - t0))
        self.ok(all(sha256_file(os.path.join(self.out, "m%d" % i)) == digest for i in ids), "64 files correct")
        for i in ids:
            os.unlink(os.path.join(self.out, "m%d" % i))
        # What stays open is libcurl's cache of idle keep-alive connections, not task descriptors:
        # the descriptors of the destination files are all closed.
        files = [os.readlink("/proc/%d/fd/%s" % (w.proc.pid, f)) for f in os.listdir("/proc/%d/fd" % w.proc.pid)]
        self.ok(not any(f.startswith(self.out) for f in files), "no destination file still open (%d descriptors, %d sockets)" % (
            len(files), sum(f.startswith("socket:") for f in files)))

        print("idle: no wakeups")
        s1 = w.status()
        time.sleep(3)
        s2 = w.status()
        c1 = int(s1["voluntary_ctxt_switches"]) + int(s1["nonvoluntary_ctxt_switches"])
        c2 = int(s2["voluntary_ctxt_switches"]) + int(s2["nonvoluntary_ctxt_switches"])
        self.ok(c2 - c1 <= 1, "context switches in 3 s idle: %d" % (c2 - c1))

        print("big download (%d MiB, generated by the server): RSS, throughput vs curl -o" % self.big_mb)
        big = self.big_mb << 20
        w = Worker(self.worker_path)  # a fresh worker: its VmHWM is this download's
        time.sleep(0.3)
        idle = w.status()
        path, fd = self.dest("big")
        t0 = time.monotonic()
        w.start(40, GET, own + "/gen/%d" % self.big_mb, fd)
        os.close(fd)
        msgs = w.until_done(40, timeout=600)[40]
        t_worker = time.monotonic() - t0
        done = self.check_messages(msgs, 40)
        after = w.status()
        kb = lambda st, k: int(st[k].split()[0])
        self.ok(done["curl_code"] == 0 and done["done"] == big and os.path.getsize(path) == big,
                "DONE 200, %d bytes in %.1f s (%.0f MB/s)" % (big, t_worker, big / t_worker / 1e6))
        # The idle worker's RSS is mostly libcurl's, OpenSSL's and libsystemd's mapped pages.
        self.ok(kb(after, "VmHWM") - kb(idle, "VmHWM") < 2048,
                "VmHWM %d kB idle, %d kB after (RssAnon %d kB, RssFile %d kB)" % (
                    kb(idle, "VmHWM"), kb(after, "VmHWM"), kb(after, "RssAnon"), kb(after, "RssFile")))
        os.unlink(path)
        t0 = time.monotonic()
        subprocess.run(["curl", "-s", "-o", path, own + "/gen/%d" % self.big_mb], check=True)
        t_curl = time.monotonic() - t0
        os.unlink(path)
        print("        curl -o: %.1f s (%.0f MB/s); worker %.2fx curl's time" % (t_curl, big / t_curl / 1e6, t_worker / t_curl))

        self.ok(w.close() == 0, "the big download's worker exits when its socket closes")
        w = self.worker

        if shutil.which("openssl"):
            self.https(data, digest)

        print("closing the socket mid-transfer: the worker exits")
        path, fd = self.dest("x")
        w.start(50, GET, own + "/slow", fd)
        os.close(fd)
        w.receive(5)
        t0 = time.monotonic()
        rc = w.close()
        self.ok(rc == 0, "exit status %d after %.3f s" % (rc, time.monotonic() - t0))


    def https(self, data, digest):
        print("HTTPS with a self-signed certificate: refused, then trusted through SSL_CERT_FILE")
        key, cert = os.path.join(self.dir, "key.pem"), os.path.join(self.dir, "cert.pem")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert,
                        "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        server, url = serve(self.www, tls=(cert, key))
        try:
            w = Worker(self.worker_path)
            path, fd = self.dest("tls0")
            w.start(60, GET, url + "/file.bin", fd)
            os.close(fd)
            done = w.until_done(60)[60][-1]
            self.ok(done["curl_code"] == 60 and done["status"] == 0, "system CA store: curl 60 (%r)" % done["error"])
            w.close()
            print("a loopback address without EXTENSIOND_TRANSFER_ALLOW_LOOPBACK: refused for good")
            plain = {k: v for k, v in os.environ.items() if k != "EXTENSIOND_TRANSFER_ALLOW_LOOPBACK"}
            w = Worker(self.worker_path, env=dict(plain, SSL_CERT_FILE=cert))
            path, fd = self.dest("lo0")
            w.start(62, GET, url + "/file.bin", fd)
            os.close(fd)
            done = w.until_done(62)[62][-1]
            self.ok(done["curl_code"] == -1 and "loopback" in done["error"] and os.path.getsize(path) == 0,
                    "loopback refused: curl_code -1 (%r)" % done["error"])
            w.close()
            w = Worker(self.worker_path, env=dict(os.environ, SSL_CERT_FILE=cert))
            path, fd = self.dest("tls1")
            w.start(61, GET, url + "/file.bin", fd)
            os.close(fd)
            done = w.until_done(61)[61][-1]
            self.ok(done["curl_code"] == 0 and done["status"] == 200 and sha256_file(path) == digest,
                    "SSL_CERT_FILE: DONE 200, sha256 matches (%r)" % done["error"])
            w.close()
        finally:
            server.shutdown()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("worker")
    ap.add_argument("command", choices=["get", "put", "post", "check"])
    ap.add_argument("url", nargs="?")
    ap.add_argument("file", nargs="?")
    ap.add_argument("--offset", type=int, default=0)
    ap.add_argument("--if-range", default="")
    ap.add_argument("--stall", type=int, default=30)
    ap.add_argument("--big-mb", type=int, default=1024)
    a = ap.parse_args()
    # Every server here is on loopback, which the worker refuses unless told.
    os.environ["EXTENSIOND_TRANSFER_ALLOW_LOOPBACK"] = "1"
    if a.command == "check":
        return Check(a.worker, a.big_mb).run()
    w = Worker(a.worker)
    if a.command == "get":
        fd = os.open(a.file, os.O_WRONLY | os.O_CREAT, 0o644)
        w.start(1, GET, a.url, fd, offset=a.offset, if_range=a.if_range, stall=a.stall)
    else:
        fd = os.open(a.file, os.O_RDONLY)
        w.start(1, PUT if a.command == "put" else POST, a.url, fd, upload_size=os.fstat(fd).st_size, stall=a.stall)
    os.close(fd)
    done = w.until_done(1, echo=True)[1][-1]
    w.close()
    return 0 if done["curl_code"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
