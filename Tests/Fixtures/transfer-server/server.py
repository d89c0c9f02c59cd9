#!/usr/bin/env python3
"""The HTTP(S) server of the background-transfer tests (Python 3.11, standard library only).

    server.py --dir DIR [--tls] [--port PORT]

It listens on 127.0.0.1 (PORT 0, the default, lets the kernel choose), prints exactly one line
``READY <port>`` on stdout once it listens, and from then on logs one line per request on stderr
only. It exits on SIGTERM, SIGINT, or end of file on stdin when stdin is a pipe, a socket or a
terminal (the test's pipe closing), so it never outlives the test. With ``--tls`` it serves HTTPS
with a certificate for 127.0.0.1 and localhost signed by a CA of its own, made with the
``openssl`` command on the first start and reused afterwards: ``DIR/ca.pem`` (give it to the
client as its trust anchor), ``DIR/ca.key``, ``DIR/server.pem``, ``DIR/server.key``.
HTTP/1.1 with keep-alive: every answer has a Content-Length.

Content
-------
The content of ``name`` of size ``N`` is, with ``sha256`` the raw 32-byte digest::

    sha256(f"{name}:0".encode()) + sha256(f"{name}:1".encode()) + ...   truncated to N bytes

(``name`` is the percent-decoded path component, UTF-8 encoded.) So the content of a size is a
prefix of the content of any larger size, and a test can compute it independently; ``GET
/_sha256/<name>?size=N`` answers the hex SHA-256 of the whole content (64 characters, no newline).
The content is generated on the fly in blocks of 256 KiB (in parallel by worker processes, this
program with ``--generate-worker``, when there are several CPUs; they end with the server) and
kept, as it is generated, in ``DIR/content-cache/`` (a file per name), from which it is sent
(``sendfile`` on plain HTTP): memory stays small whatever N (1 GB is fine), and a second pass
runs at disk-cache speed.

Endpoints
---------
``GET|HEAD /file/<name>?size=N[&options]``  the content, with ``ETag: "<name>-<N>-v<version>"``,
    ``Last-Modified: Fri, 02 Jan 2026 00:00:00 GMT`` (fixed), ``Accept-Ranges: bytes``,
    ``Content-Type: application/octet-stream``. ``Range: bytes=A-``, ``bytes=A-B`` and ``bytes=-S``
    answer 206 with ``Content-Range: bytes A-B/N``; a range starting at or beyond N answers 416
    with ``Content-Range: bytes */N``; a malformed or multiple range is ignored (200). An
    ``If-Range`` that equals neither the current ETag nor the Last-Modified answers 200 with
    everything. Options:

    ``range=0``            Range is ignored: 200 with everything, no Accept-Ranges header.
    ``version=V``          the version in the ETag (default 1); ``/_set`` overrides it.
    ``chunk=C``            the body is written C bytes at a time (default 65536).
    ``rate=R``             at most R bytes per second (the server sleeps between chunks).
    ``fail=K``             the first K requests of that name that reach this point answer
    ``fail_status=S``      S (default 503) with a short body and ``Retry-After: 0``.
    ``drop=K&drop_at=B``   the next K requests of that name (after any failures) send their
                           headers and then close the connection abruptly (shutdown and close,
                           nothing more) as soon as the file offset (range start + body bytes
                           sent) is at least B: right after the headers when the range starts at
                           or beyond B, after the whole body when B is the end; a request whose
                           range ends before B is complete (and still one of the K).
    ``hold_at=B[,B2...]``  when the file offset of the body reaches B (a request whose range
                           starts at or before B and ends after it), the server stops sending
                           until the test releases the hold (``/_release``), at most 120 s, then
                           closes the connection. Each point holds only the first request that
                           reaches it (the point is then spent), unless ``hold_every=1``. After a
                           release, a client that closed its end meanwhile is sent nothing more.
    ``hold_every=1``       every request that reaches a hold point holds.
    ``redirect=1``         302 to the same URL without ``redirect=1`` (nothing else is applied).

    The counters of ``fail`` and ``drop`` are per name (``/_reset`` forgets them): a request
    answered by a failure is not one of the ``drop`` requests. HEAD applies none of fail, drop,
    hold or redirect.

``PUT|POST /upload/<name>[?options]``  reads the body (Content-Length or chunked; with neither,
    411), hashing it as it reads, and answers 201 ``{"size":N,"sha256":"hex"}``, recorded in the
    name's ``uploads``. ``fail=K[&fail_status=S]``: the body is read (and thrown away) and the
    first K requests answer S (default 503) with ``Retry-After: 0``.
    ``drop=K&drop_at=B``: the next K requests close the connection (no answer) once B bytes of
    the body are read (B may be the whole body). ``hold_at=B[,B2...]`` (``hold_every=1``): stop
    reading at B until released (B may be the whole body: held before the answer).

Control endpoints (answered while transfers hold):

``GET /_stats/<name>``   ``{"requests":[{"method","range","if_range","status","sent","received",
    "outcome"}...], "sent_total":..., "uploads":[{"size","sha256"}...], "holding":bool}``.
    ``range``/``if_range`` are the request's headers (null when absent, recorded even when
    ignored), ``status`` the status answered (0 for an upload not answered yet), ``sent`` the
    body bytes handed to the socket (counted after each write returns), ``received`` the upload
    body bytes read, ``outcome`` one of ``sending``, ``holding``, ``complete``, ``dropped``,
    ``hold_timeout``, ``client_closed``. Live while requests run.
``GET /_wait_hold/<name>?timeout=S``  200 ``{"holding":true}`` as soon as a request of that name
    holds (at once if one does), 408 ``{"holding":false}`` after S seconds (default 60).
``POST /_release/<name>``  releases the requests of that name that hold (200 ``{"released":n}``);
    they no longer count as holding once this answers.
``POST /_set/<name>?version=V``  the current version of that name (its ETag changes).
``POST /_reset/<name>``  forgets the name's requests, uploads, sent_total, fail and drop counters
    and spent hold points (not its version, nor the hold of a request holding now).
``GET /_sha256/<name>?size=N``  the hex SHA-256 of the content (text/plain).
"""

import argparse
import hashlib
import http.server
import json
import os
import select
import signal
import socket
import ssl
import stat
import subprocess
import sys
import threading
import time
import urllib.parse

# A test runner that blocks signals (extensiond's tests block them for sd-event) passes its
# mask on: unblocked here, so that SIGTERM ends this process and the ones it starts.
signal.pthread_sigmask(signal.SIG_SETMASK, set())

LAST_MODIFIED = "Fri, 02 Jan 2026 00:00:00 GMT"
DEFAULT_CHUNK = 65536
HOLD_LIMIT = 120.0
DIGEST = 32
BLOCK = 256 * 1024  # generation block: a multiple of DIGEST
POOL_TASKS = 8  # blocks per worker and batch when generating in parallel


# ---------------------------------------------------------------------------------------------
# Content


def generate_block(prefix: bytes, index: int) -> bytes:
    """Block `index` (BLOCK bytes) of the content whose digests are sha256(prefix + b"k")."""
    first = index * (BLOCK // DIGEST)
    new = hashlib.sha256
    return b"".join([new(prefix + b"%d" % k).digest() for k in range(first, first + BLOCK // DIGEST)])


class Pool:
    """Worker processes (this program with --generate-worker) that generate blocks in parallel,
    started on first use when the machine has more than one CPU. Each reads "<prefix hex>
    <index>" lines on stdin and writes the blocks in order on stdout; it exits at end of file on
    stdin, so with this server whatever way it ends."""

    _lock = threading.Lock()
    _workers = None
    _failed = False

    @classmethod
    def acquire(cls):
        """The workers, locked for one batch (release with Pool.release()), or None: one CPU,
        no workers, or they are busy with another name's batch (then generate in the thread)."""
        if (os.cpu_count() or 1) < 2 or cls._failed or not cls._lock.acquire(blocking=False):
            return None
        if cls._workers is None:
            try:
                count = min(os.cpu_count() or 1, 8)
                cls._workers = [
                    subprocess.Popen([sys.executable, os.path.abspath(__file__), "--generate-worker"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
                    for _ in range(count)]
            except OSError as error:
                log(f"no generation workers: {error}")
                cls._failed = True
                cls._lock.release()
                return None
        return cls._workers

    @classmethod
    def release(cls):
        cls._lock.release()

    @classmethod
    def broken(cls, error):
        log(f"generation workers failed ({error}): generating in the threads")
        cls._failed = True
        for worker in cls._workers or []:
            try:
                worker.kill()
            except OSError:
                pass


def generate_worker():
    """The loop of a generation worker (see Pool)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    out = sys.stdout.buffer
    for line in sys.stdin.buffer:
        prefix, index = line.split()
        out.write(generate_block(bytes.fromhex(prefix.decode()), int(index)))
        out.flush()


def read_exactly(stream, n):
    parts = []
    while n > 0:
        data = stream.read(n)
        if not data:
            raise EOFError("a worker ended")
        parts.append(data)
        n -= len(data)
    return b"".join(parts)


class Content:
    """The content of one name, generated on demand into a cache file (a valid prefix of it)."""

    _all = {}
    _all_lock = threading.Lock()
    directory = None

    @classmethod
    def of(cls, name):
        with cls._all_lock:
            content = cls._all.get(name)
            if content is None:
                content = cls._all[name] = Content(name)
            return content

    def __init__(self, name):
        self.prefix = name.encode("utf-8", "surrogateescape") + b":"
        path = os.path.join(Content.directory, hashlib.sha256(self.prefix).hexdigest()[:40] + ".bin")
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        size = os.fstat(self.fd).st_size
        self.length = size - size % BLOCK  # whole blocks only: what is there is right
        self.cond = threading.Condition()
        self.generating = False
        self.digests = {}

    def ensure(self, upto, ahead=0):
        """Returns once bytes [0, upto) are in the cache file; generates up to `ahead` if it has
        to generate at all (in parallel when that is worth it)."""
        if self.length >= upto:
            return
        with self.cond:
            while self.length < upto:
                if self.generating:
                    self.cond.wait()
                    continue
                self.generating = True
                start = self.length
                self.cond.release()
                try:
                    self._generate(start, max(upto, ahead))
                finally:
                    self.cond.acquire()
                    self.generating = False
                    self.cond.notify_all()

    def _generate(self, start, target):
        first = start // BLOCK
        last = -(-target // BLOCK)  # exclusive
        workers = Pool.acquire() if last - first > 1 else None
        if workers is None:
            for index in range(first, min(last, first + 8)):
                self._store(index, generate_block(self.prefix, index))
            return
        try:
            last = min(last, first + len(workers) * POOL_TASKS)
            prefix = self.prefix.hex().encode()
            for w, worker in enumerate(workers):
                lines = b"".join(b"%s %d\n" % (prefix, i) for i in range(first + w, last, len(workers)))
                if lines:
                    worker.stdin.write(lines)
            for index in range(first, last):
                self._store(index, read_exactly(workers[(index - first) % len(workers)].stdout, BLOCK))
        except (OSError, EOFError, ValueError) as error:
            Pool.broken(error)
        finally:
            Pool.release()

    def _store(self, index, data):
        os.pwrite(self.fd, data, index * BLOCK)
        with self.cond:
            self.length = max(self.length, (index + 1) * BLOCK)
            self.cond.notify_all()

    def read(self, offset, count):
        self.ensure(offset + count)
        return os.pread(self.fd, count, offset)

    def sha256(self, size):
        with self.cond:
            known = self.digests.get(size)
        if known:
            return known
        h = hashlib.sha256()
        offset = 0
        step = 4 << 20
        while offset < size:
            n = min(step, size - offset)
            self.ensure(offset + n, size)
            h.update(os.pread(self.fd, n, offset))
            offset += n
        digest = h.hexdigest()
        with self.cond:
            self.digests[size] = digest
        return digest


# ---------------------------------------------------------------------------------------------
# What the server did, per name


class Hold:
    def __init__(self):
        self.released = False


class NameState:
    def __init__(self):
        self.version = None
        self.epoch = 0
        self.holders = []
        self.reset()

    def reset(self):
        self.epoch += 1
        self.requests = []
        self.sent_total = 0
        self.uploads = []
        self.fails = 0
        self.drops = 0
        self.spent = set()


STATE = threading.Condition()
NAMES = {}


def state(name):
    """The NameState of name; call with STATE held."""
    s = NAMES.get(name)
    if s is None:
        s = NAMES[name] = NameState()
    return s


class Record:
    """A request's entry in its name's stats, updated as it goes."""

    def __init__(self, name, method, headers, status):
        self.name = name
        self.entry = {
            "method": method,
            "range": headers.get("Range"),
            "if_range": headers.get("If-Range"),
            "status": status,
            "sent": 0,
            "received": 0,
            "outcome": "sending",
        }
        with STATE:
            s = state(name)
            self.epoch = s.epoch
            s.requests.append(self.entry)

    def sent(self, n):
        with STATE:
            self.entry["sent"] += n
            s = state(self.name)
            if s.epoch == self.epoch:
                s.sent_total += n

    def received(self, n):
        with STATE:
            self.entry["received"] += n

    def outcome(self, value):
        with STATE:
            self.entry["outcome"] = value


def log(message):
    try:
        sys.stderr.write(message.rstrip("\n") + "\n")
        sys.stderr.flush()
    except Exception:
        pass


class Abort(Exception):
    """The connection is closed, the answer goes no further."""


# ---------------------------------------------------------------------------------------------
# The handler


def int_option(query, key, default=None):
    values = query.get(key)
    if not values:
        return default
    try:
        return int(values[-1])
    except ValueError:
        raise BadRequest(f"{key} must be an integer: {values[-1]!r}")


def hold_points(query):
    values = query.get("hold_at")
    if not values:
        return []
    try:
        return sorted({int(part) for value in values for part in value.split(",") if part.strip()})
    except ValueError:
        raise BadRequest(f"hold_at must be integers: {values!r}")


class BadRequest(Exception):
    pass


def parse_range(header, size):
    """(start, end exclusive) for a single-range header, "unsatisfiable", or None (ignored)."""
    if header is None:
        return None
    value = header.strip()
    if not value.startswith("bytes=") or "," in value:
        return None
    first, dash, last = value[6:].strip().partition("-")
    first, last = first.strip(), last.strip()
    if not dash or not (first.isdigit() or (first == "" and last.isdigit())):
        return None
    if first == "":
        suffix = int(last)
        if suffix == 0:
            return "unsatisfiable"
        return (max(0, size - suffix), size)
    start = int(first)
    if last != "" and not last.isdigit():
        return None
    if last != "" and int(last) < start:
        return None
    if start >= size:
        return "unsatisfiable"
    end = size if last == "" else min(size, int(last) + 1)
    return (start, end)


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "transfer-server/1"

    # -- connection ------------------------------------------------------------------------------

    def setup(self):
        context = self.server.tls_context
        if context is not None:
            self.request.settimeout(30)
            self.request = context.wrap_socket(self.request, server_side=True)
            self.request.settimeout(None)
        self.connection = self.request
        super().setup()

    def finish(self):
        try:
            super().finish()
        except OSError:
            pass
        if self.server.tls_context is not None:
            try:
                self.request.close()
            except OSError:
                pass

    def abort(self):
        """Closes the connection abruptly: shutdown and close, nothing more is sent."""
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        try:
            self.connection.close()
        except OSError:
            pass
        raise Abort()

    def peer_closed(self):
        """Whether the client closed its end (without waiting)."""
        try:
            fd = self.connection.fileno()
            if fd < 0:
                return True
            readable, _, _ = select.select([fd], [], [], 0)
            if not readable:
                return False
            return socket.socket.recv(self.connection, 1, socket.MSG_PEEK) == b""
        except (OSError, ValueError):
            return True

    def log_message(self, format, *args):
        log("%s [%s] %s" % (self.address_string(), self.log_date_time_string(), format % args))

    # -- small answers -------------------------------------------------------------------------------

    def answer(self, status, body=b"", content_type="text/plain; charset=utf-8", headers=()):
        if isinstance(body, str):
            body = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for key, value in headers:
            self.send_header(key, value)
        self.end_headers()
        if self.command != "HEAD" and body:
            self.wfile.write(body)

    def answer_json(self, status, value):
        self.answer(status, json.dumps(value, separators=(",", ":")), "application/json")

    def discard_body(self):
        """Reads and drops a request body of the control endpoints (Content-Length or chunked)."""
        reader = BodyReader(self)
        while reader.read(1 << 16):
            pass

    # -- dispatch ----------------------------------------------------------------------------------

    def route(self):
        url = urllib.parse.urlsplit(self.path)
        parts = url.path.split("/", 2)
        kind = parts[1] if len(parts) > 1 else ""
        name = urllib.parse.unquote(parts[2]) if len(parts) > 2 else ""
        query = urllib.parse.parse_qs(url.query, keep_blank_values=True)
        return url, kind, name, query

    def handle_one(self):
        url, kind, name, query = self.route()
        method = self.command
        try:
            if kind == "file" and name and method in ("GET", "HEAD"):
                return self.serve_file(url, name, query)
            if kind == "upload" and name and method in ("PUT", "POST"):
                return self.receive_upload(name, query)
            if method in ("POST", "PUT"):
                self.discard_body()
            if kind == "_stats" and name and method == "GET":
                with STATE:
                    s = state(name)
                    value = {
                        "requests": [dict(entry) for entry in s.requests],
                        "sent_total": s.sent_total,
                        "uploads": [dict(upload) for upload in s.uploads],
                        "holding": bool(s.holders),
                    }
                return self.answer_json(200, value)
            if kind == "_wait_hold" and name and method == "GET":
                try:
                    timeout = float(query.get("timeout", ["60"])[-1])
                except ValueError:
                    raise BadRequest("timeout must be a number of seconds")
                with STATE:
                    holding = STATE.wait_for(lambda: bool(state(name).holders), timeout)
                return self.answer_json(200 if holding else 408, {"holding": bool(holding)})
            if kind == "_release" and name and method == "POST":
                with STATE:
                    s = state(name)
                    holders, s.holders = s.holders, []
                    for hold in holders:
                        hold.released = True
                    STATE.notify_all()
                return self.answer_json(200, {"released": len(holders)})
            if kind == "_set" and name and method == "POST":
                version = query.get("version")
                if not version or not version[-1]:
                    raise BadRequest("version is missing")
                with STATE:
                    state(name).version = version[-1]
                return self.answer_json(200, {"version": version[-1]})
            if kind == "_reset" and name and method == "POST":
                with STATE:
                    state(name).reset()
                return self.answer_json(200, {"reset": True})
            if kind == "_sha256" and name and method == "GET":
                size = int_option(query, "size")
                if size is None or size < 0:
                    raise BadRequest("size is missing")
                return self.answer(200, Content.of(name).sha256(size))
            self.answer(404, f"no such endpoint: {method} {url.path}\n")
        except BadRequest as error:
            self.close_connection = True  # a body may be left unread
            self.answer(400, f"{error}\n")

    def do_GET(self):
        self.run(self.handle_one)

    do_HEAD = do_POST = do_PUT = do_GET

    def run(self, action):
        try:
            action()
        except Abort:
            self.close_connection = True
        except (ConnectionError, ssl.SSLError, TimeoutError, OSError) as error:
            self.close_connection = True
            log(f"{self.command} {self.path}: connection ended: {error}")

    # -- holds -----------------------------------------------------------------------------------------

    def maybe_hold(self, name, point, every, record):
        """Holds at `point` if it is not spent (or `every`); returns once released, or aborts
        after HOLD_LIMIT seconds."""
        with STATE:
            s = state(name)
            if not every:
                if point in s.spent:
                    return
                s.spent.add(point)
            hold = Hold()
            s.holders.append(hold)
            record.entry["outcome"] = "holding"
            STATE.notify_all()
            deadline = time.monotonic() + HOLD_LIMIT
            while not hold.released:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                STATE.wait(remaining)
            released = hold.released
            if not released and hold in s.holders:
                s.holders.remove(hold)
            record.entry["outcome"] = "sending" if released else "hold_timeout"
        if not released:
            log(f"{self.command} {self.path}: held {HOLD_LIMIT:.0f}s at {point} without a release: closed")
            self.abort()
        if self.peer_closed():
            record.outcome("client_closed")
            log(f"{self.command} {self.path}: the client closed its end during the hold at {point}")
            self.abort()

    # -- downloads ----------------------------------------------------------------------------------

    def serve_file(self, url, name, query):
        size = int_option(query, "size")
        if size is None or size < 0:
            raise BadRequest("size is missing")
        head = self.command == "HEAD"
        if not head and query.get("redirect", [""])[-1] == "1":
            kept = [(k, v) for k, v in urllib.parse.parse_qsl(url.query, keep_blank_values=True) if k != "redirect"]
            location = url.path + ("?" + urllib.parse.urlencode(kept) if kept else "")
            record = Record(name, self.command, self.headers, 302)
            self.answer(302, b"", headers=[("Location", location)])
            record.outcome("complete")
            return
        ranges = query.get("range", ["1"])[-1] != "0"
        chunk = int_option(query, "chunk", DEFAULT_CHUNK)
        if chunk <= 0:
            raise BadRequest("chunk must be positive")
        rate = int_option(query, "rate", 0)
        fail = int_option(query, "fail", 0)
        fail_status = int_option(query, "fail_status", 503)
        drop = int_option(query, "drop", 0)
        drop_at = int_option(query, "drop_at", None)
        holds = hold_points(query)
        every = query.get("hold_every", ["0"])[-1] == "1"
        with STATE:
            s = state(name)
            version = s.version if s.version is not None else query.get("version", ["1"])[-1]
            failing = not head and s.fails < fail
            if failing:
                s.fails += 1
                failure = s.fails
        etag = f'"{name}-{size}-v{version}"'

        if failing:
            record = Record(name, self.command, self.headers, fail_status)
            self.answer(fail_status, f"failure {failure} of {fail}, as asked\n", headers=[("Retry-After", "0")])
            record.outcome("complete")
            return

        start, end, status = 0, size, 200
        if ranges:
            wanted = parse_range(self.headers.get("Range"), size)
            if_range = self.headers.get("If-Range")
            if wanted is not None and if_range is not None and if_range.strip() not in (etag, LAST_MODIFIED):
                wanted = None
            if wanted == "unsatisfiable":
                record = Record(name, self.command, self.headers, 416)
                self.answer(416, b"", headers=[("Content-Range", f"bytes */{size}"), ("Accept-Ranges", "bytes"), ("ETag", etag)])
                record.outcome("complete")
                return
            if wanted is not None:
                start, end, status = wanted[0], wanted[1], 206

        dropping = False
        if not head and drop_at is not None:
            with STATE:
                s = state(name)
                if s.drops < drop:
                    s.drops += 1
                    dropping = True

        record = Record(name, self.command, self.headers, status)
        self.send_response(status)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(end - start))
        self.send_header("ETag", etag)
        self.send_header("Last-Modified", LAST_MODIFIED)
        if ranges:
            self.send_header("Accept-Ranges", "bytes")
        if status == 206:
            self.send_header("Content-Range", f"bytes {start}-{end - 1}/{size}")
        self.end_headers()
        if head:
            record.outcome("complete")
            return

        content = Content.of(name)
        points = [p for p in holds if start <= p < end]
        plain = self.server.tls_context is None
        out = self.connection.fileno() if plain else None
        pos = start
        began, base = time.monotonic(), pos
        try:
            while True:
                if dropping and pos >= drop_at:
                    record.outcome("dropped")
                    self.abort()
                if pos >= end:
                    break
                if points and points[0] == pos:
                    self.maybe_hold(name, points.pop(0), every, record)
                    began, base = time.monotonic(), pos
                n = min(chunk, end - pos)
                if dropping and drop_at > pos:
                    n = min(n, drop_at - pos)
                if points:
                    n = min(n, points[0] - pos)
                content.ensure(pos + n, min(end, pos + (8 << 20)))
                if plain:
                    done = 0
                    while done < n:
                        done += os.sendfile(out, content.fd, pos + done, n - done) or self.short_write()
                else:
                    self.connection.sendall(os.pread(content.fd, n, pos))
                pos += n
                record.sent(n)
                if rate > 0:
                    due = began + (pos - base) / rate
                    delay = due - time.monotonic()
                    if delay > 0:
                        time.sleep(delay)
        except Abort:
            raise
        except (ConnectionError, ssl.SSLError, OSError):
            record.outcome("client_closed")
            raise
        record.outcome("complete")

    def short_write(self):
        raise ConnectionResetError("sendfile sent nothing: the client is gone")

    # -- uploads ----------------------------------------------------------------------------------------

    def receive_upload(self, name, query):
        fail = int_option(query, "fail", 0)
        fail_status = int_option(query, "fail_status", 503)
        drop = int_option(query, "drop", 0)
        drop_at = int_option(query, "drop_at", None)
        holds = hold_points(query)
        every = query.get("hold_every", ["0"])[-1] == "1"
        if "Content-Length" not in self.headers and "chunked" not in self.headers.get("Transfer-Encoding", "").lower():
            record = Record(name, self.command, self.headers, 411)
            self.close_connection = True
            self.answer(411, "a Content-Length or a chunked body is needed\n")
            record.outcome("complete")
            return
        reader = BodyReader(self)
        with STATE:
            s = state(name)
            failing = s.fails < fail
            if failing:
                s.fails += 1
                failure = s.fails
            dropping = False
            if not failing and drop_at is not None and s.drops < drop:
                s.drops += 1
                dropping = True
        if failing:
            record = Record(name, self.command, self.headers, fail_status)
            try:
                while True:
                    data = reader.read(1 << 16)
                    if not data:
                        break
                    record.received(len(data))
            except (ConnectionError, OSError, ValueError):
                record.outcome("client_closed")
                raise
            self.answer(fail_status, f"failure {failure} of {fail}, as asked\n", headers=[("Retry-After", "0")])
            record.outcome("complete")
            return
        record = Record(name, self.command, self.headers, 0)  # 0: not answered yet
        digest = hashlib.sha256()
        pos = 0
        try:
            while True:
                if dropping and pos >= drop_at:
                    record.outcome("dropped")
                    self.abort()
                if holds and holds[0] == pos:
                    self.maybe_hold(name, holds.pop(0), every, record)
                while holds and holds[0] < pos:
                    holds.pop(0)
                n = 1 << 16
                if dropping and drop_at > pos:
                    n = min(n, drop_at - pos)
                if holds:
                    n = min(n, holds[0] - pos)
                data = reader.read(n)
                if not data:
                    break
                digest.update(data)
                pos += len(data)
                record.received(len(data))
        except Abort:
            raise
        except (ConnectionError, ssl.SSLError, OSError, ValueError) as error:
            record.outcome("client_closed")
            raise ConnectionError(str(error))
        upload = {"size": pos, "sha256": digest.hexdigest()}
        with STATE:
            s = state(name)
            if s.epoch == record.epoch:
                s.uploads.append(upload)
            record.entry["status"] = 201
        self.answer_json(201, upload)
        record.outcome("complete")


class BodyReader:
    """A request body, by Content-Length or chunked, read a piece at a time."""

    def __init__(self, handler):
        self.rfile = handler.rfile
        self.chunked = "chunked" in handler.headers.get("Transfer-Encoding", "").lower()
        self.left = 0 if self.chunked else int(handler.headers.get("Content-Length") or 0)
        self.done = False

    def read(self, n):
        if self.done or n <= 0:
            return b""
        if self.chunked and self.left == 0:
            line = self.rfile.readline(1024)
            if not line:
                raise ConnectionError("the body ended early")
            size = int(line.split(b";", 1)[0].strip() or b"0", 16)
            if size == 0:
                while True:  # trailers, up to the empty line
                    line = self.rfile.readline(8192)
                    if line in (b"\r\n", b"\n", b""):
                        break
                self.done = True
                return b""
            self.left = size
        if self.left == 0:
            self.done = True
            return b""
        data = self.rfile.read1(min(n, self.left)) if hasattr(self.rfile, "read1") else self.rfile.read(min(n, self.left))
        if not data:
            raise ConnectionError("the body ended early")
        self.left -= len(data)
        if self.chunked and self.left == 0:
            self.rfile.readline(16)  # the CRLF after the chunk
        return data


# ---------------------------------------------------------------------------------------------
# The server


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128
    tls_context = None

    def server_bind(self):
        # No reverse lookup of the address (HTTPServer.server_bind calls getfqdn).
        import socketserver

        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]

    def handle_error(self, request, client_address):
        error = sys.exc_info()[1]
        log(f"{client_address[0]}:{client_address[1]}: {type(error).__name__}: {error}")


def make_certificates(directory):
    """DIR/ca.pem, ca.key, server.pem, server.key, made with openssl unless they exist."""
    ca, ca_key = os.path.join(directory, "ca.pem"), os.path.join(directory, "ca.key")
    cert, key = os.path.join(directory, "server.pem"), os.path.join(directory, "server.key")
    import fcntl

    with open(os.path.join(directory, ".tls.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        config = os.path.join(directory, "openssl.cnf")
        with open(config, "w") as f:
            f.write(
                "[req]\ndistinguished_name = dn\nprompt = no\n"
                "[dn]\nCN = extensiond transfer tests CA\n"
                "[v3_ca]\nbasicConstraints = critical, CA:TRUE\nkeyUsage = critical, keyCertSign, cRLSign\n"
                "subjectKeyIdentifier = hash\n"
                "[v3_server]\nbasicConstraints = critical, CA:FALSE\n"
                "keyUsage = critical, digitalSignature, keyEncipherment\nextendedKeyUsage = serverAuth\n"
                "subjectAltName = IP:127.0.0.1, DNS:localhost\n"
                "subjectKeyIdentifier = hash\nauthorityKeyIdentifier = keyid, issuer\n")

        def openssl(*arguments):
            r = subprocess.run(["openssl", *arguments], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
            if r.returncode != 0:
                raise SystemExit(f"openssl {' '.join(arguments)} failed: {r.stderr.strip()}")

        made_ca = False
        if not (os.path.exists(ca) and os.path.exists(ca_key)):
            openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-sha256", "-days", "3650",
                    "-config", config, "-extensions", "v3_ca", "-keyout", ca_key + ".tmp", "-out", ca + ".tmp")
            os.replace(ca_key + ".tmp", ca_key)
            os.replace(ca + ".tmp", ca)
            made_ca = True
        if made_ca or not (os.path.exists(cert) and os.path.exists(key)):
            csr = os.path.join(directory, "server.csr")
            openssl("req", "-new", "-newkey", "rsa:2048", "-nodes", "-sha256", "-config", config,
                    "-subj", "/CN=localhost", "-keyout", key + ".tmp", "-out", csr)
            openssl("x509", "-req", "-sha256", "-days", "825", "-in", csr, "-CA", ca, "-CAkey", ca_key,
                    "-set_serial", str(int.from_bytes(os.urandom(8), "big")),
                    "-extfile", config, "-extensions", "v3_server", "-out", cert + ".tmp")
            os.replace(key + ".tmp", key)
            os.replace(cert + ".tmp", cert)
            os.unlink(csr)
    return cert, key


def watch_stdin():
    """Exits at end of file on stdin, when stdin is a pipe, a socket or a terminal."""
    try:
        mode = os.fstat(0).st_mode
    except OSError:
        return
    if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or os.isatty(0)):
        return

    def run():
        try:
            while os.read(0, 65536):
                pass
        except OSError:
            pass
        log("stdin closed: exiting")
        os._exit(0)

    threading.Thread(target=run, name="stdin", daemon=True).start()


def main():
    if sys.argv[1:] == ["--generate-worker"]:
        return generate_worker()
    parser = argparse.ArgumentParser(description="The HTTP(S) server of the transfer tests.")
    parser.add_argument("--dir", required=True, help="its directory (certificates, content cache)")
    parser.add_argument("--tls", action="store_true", help="serve HTTPS with a certificate of its own CA")
    parser.add_argument("--port", type=int, default=0, help="the port (0: the kernel chooses)")
    options = parser.parse_args()

    def leave(signum, frame):
        log(f"signal {signum}: exiting")
        os._exit(0)

    signal.signal(signal.SIGTERM, leave)
    signal.signal(signal.SIGINT, leave)

    directory = os.path.abspath(options.dir)
    os.makedirs(directory, exist_ok=True)
    Content.directory = os.path.join(directory, "content-cache")
    os.makedirs(Content.directory, exist_ok=True)

    context = None
    if options.tls:
        cert, key = make_certificates(directory)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        context.set_alpn_protocols(["http/1.1"])

    server = Server(("127.0.0.1", options.port), Handler)
    server.tls_context = context
    watch_stdin()
    sys.stdout.write(f"READY {server.server_address[1]}\n")
    sys.stdout.flush()
    server.serve_forever()


if __name__ == "__main__":
    main()
