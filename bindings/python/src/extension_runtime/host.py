"""extension_runtime.host: be a host of extensiond over D-Bus (libExtensionHostC,
include/extension_host.h; the interface: docs/dbus.md)::

    from extension_runtime.host import Host

    with Host() as host:                                  # the bus: see Host
        with host.begin("com.example.stocks.widget") as request:
            reader = request.channel.makefile("rb")
            print(reader.readline().decode(), end="")    # what the extension writes
            request.channel.sendall(b"refresh\\n")
        # leaving the block dismissed the request (and closed its channel)

        for extension in host.list():
            print(extension.id, extension.state, extension.pid)

        host.monitor(lambda event: print(event.id, event.event, event.state))
        while True:
            host.wait()                                   # runs the callbacks

A Host is one connection to the bus: use it (and its requests) from one thread at a time. The
callbacks (`on_end` of begin, the monitor's) run only inside `process()` and `wait()` (and
`Request.wait()`), on the calling thread; an exception a callback raises is raised again from
that call, once the library's own call has returned. A callback may call `close()` or
`monitor()`: they would free or replace what the library is using while it runs the callback,
so they take effect once that call has returned (the host counts as closed to its callers at
once). For an event loop, wait until `fileno()` is readable (or writable, when `events()` has
`select.POLLOUT`), then call `process()` until it returns 0; after any other method (begin,
dismiss, list...), call `process()` until it returns 0 before waiting again: messages that
arrived during the call are queued in the host.

Errors: HostError (an OSError) with `errno`, the full text, and `name`, the D-Bus error's name
(`org.extensiond1.Error.UnknownExtension`; `org.freedesktop.DBus.Error.ServiceUnknown` when no
daemon runs on the bus...); ValueError for a malformed argument (a string holding NUL, an
unknown bus); HostLibraryNotFoundError (an ImportError) when libExtensionHostC cannot be loaded
(it is looked for through $EXTENSION_HOST_LIB, else the installed pkg-config file
`extension-host`, else the dynamic loader's path).
"""
import ctypes
import errno
import itertools
import os
import socket
import time
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple, Type

from . import _host_library
from ._host_library import HostLibraryNotFoundError

__all__ = [
    "CANCELLED", "COMPLETED", "INTERRUPTED", "Event", "Extension", "Host", "HostError",
    "HostLibraryNotFoundError", "Outcome", "Request",
]

COMPLETED: str = "completed"
"""Outcome.kind of a request the extension completed (with a payload)."""

CANCELLED: str = "cancelled"
"""Outcome.kind of a request the extension cancelled (with a reason)."""

INTERRUPTED: str = "interrupted"
"""Outcome.kind of a request whose extension exited, crashed or was killed with it open (with a
reason); also of every open request when the daemon that answered its begin leaves the bus
(stops, dies, re-executes: "extensiond left the bus: ...") or the host's own connection to the
bus is lost (then every later call raises HostError, name
org.freedesktop.DBus.Error.Disconnected)."""

_KINDS = {1: COMPLETED, 2: CANCELLED, 3: INTERRUPTED}
_BUSES = {None: 0, "system": 1, "session": 2}
_FOREVER = 2**64 - 1


class HostError(OSError):
    """A call of libExtensionHostC failed. `errno` is its errno value; `strerror` and `text` the
    library's text ("NAME: MESSAGE"); `name` the D-Bus error's name (the part before ':'), or ""
    when the text has none."""

    def __init__(self, code: int, text: str) -> None:
        super().__init__(code, text)
        self.text: str = text
        """The library's text of the failure."""
        head, separator, _ = text.partition(": ")
        self.name: str = head if separator and "." in head and " " not in head else ""
        """The D-Bus error's name, e.g. org.extensiond1.Error.UnknownExtension; "" when none."""


@dataclass(frozen=True)
class Outcome:
    """How a request ended: `kind` COMPLETED (with `payload`), CANCELLED or INTERRUPTED (with
    `reason`)."""
    kind: str
    payload: bytes = b""
    reason: str = ""


@dataclass(frozen=True)
class Extension:
    """One extension, as Manager.ListExtensions gives it. `state` is the state word of `extctl
    list` (not-running, launching, running, suspended, stopping...); `app` is "" and `pid` 0
    when none."""
    id: str
    point: str
    state: str
    app: str
    pid: int
    object_path: str


@dataclass(frozen=True)
class Event:
    """One lifecycle event of an extension (`extctl monitor`'s kinds: launch, suspend, resume,
    exit...). `state` and `pid` are the extension's after it (None and 0 when the daemon did not
    send them); `detail` is the event's detail (None when not sent)."""
    id: str
    event: str
    state: Optional[str]
    pid: int
    detail: Optional[str]


def _text(value: Optional[bytes]) -> Optional[str]:
    return None if value is None else value.decode("utf-8", errors="replace")


def _encode(value: str, what: str) -> bytes:
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a str, not {type(value).__name__}")
    if "\0" in value:
        raise ValueError(f"{what} must not contain NUL")
    return value.encode("utf-8")


class Request:
    """A request begun by Host.begin, until dismissed. Also a context manager that dismisses it
    on exit."""

    def __init__(self, host: "Host", handle: int, token: int,
                 on_end: Optional[Callable[["Request", Outcome], None]]) -> None:
        lib = _host_library.library()
        self._host = host
        self._handle: Optional[int] = handle
        self._token = token
        self._on_end = on_end
        self._outcome: Optional[Outcome] = None
        self.id: int = int(lib.ext_host_request_id(handle))
        """The request's id (the end of its object path)."""
        self.path: str = _text(lib.ext_host_request_path(handle)) or ""
        """The request's object path, /org/extensiond1/request/ID."""
        fd = lib.ext_host_request_channel(handle)
        self.channel: socket.socket = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM, 0, os.dup(fd))
        """The host's end of the request's channel (a duplicate of the library's descriptor), a
        connected AF_UNIX SOCK_STREAM socket whose other end the extension's runtime holds. It
        reads end-of-file at once for an extension without a runtime channel. dismiss() closes
        it. A write after the extension closed its end raises BrokenPipeError."""

    @property
    def outcome(self) -> Optional[Outcome]:
        """How the request ended; None until then."""
        return self._outcome

    def _ended(self, outcome: Outcome) -> None:
        self._outcome = outcome
        if self._on_end is not None:
            self._on_end(self, outcome)

    def _forget(self) -> None:
        self._handle = None
        self.channel.close()

    def dismiss(self) -> None:
        """Ends the request (Request.Dismiss, unless it is over already) and closes its channel,
        always; nothing is called for it afterwards. A second call does nothing. Raises HostError
        when the daemon could not be told (the request is forgotten all the same: the daemon
        dismisses it when the host's connection closes)."""
        handle = self._handle
        if handle is None:
            return
        self._forget()
        self._host._requests.pop(self._token, None)
        result = _host_library.library().ext_host_dismiss(handle)
        if result < 0:
            raise self._host._error(result)

    def wait(self, timeout: Optional[float] = None) -> Optional[Outcome]:
        """Runs the host's callbacks (Host.wait) until this request ended, or `timeout` seconds
        (None: no limit) passed: its Outcome, or None at the timeout. Raises ValueError once it
        was dismissed (unless it had ended)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self._outcome is None:
            if self._handle is None:
                raise ValueError("wait: the request was dismissed")
            if deadline is None:
                self._host.wait(None)
            else:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                self._host.wait(remaining)
        return self._outcome

    def __enter__(self) -> "Request":
        return self

    def __exit__(self, kind: Optional[Type[BaseException]], value: Optional[BaseException],
                 traceback: Optional[TracebackType]) -> None:
        self.dismiss()

    def __repr__(self) -> str:
        state = "dismissed" if self._handle is None else (self._outcome.kind if self._outcome else "open")
        return f"<Request {self.path} {state}>"


class Host:
    """A connection to the bus as a host of extensiond (ext_host_open). `bus`: "system" (the
    system daemon's), "session" (the user's daemon's) or None: $EXTENSIOND_BUS when set, else the
    session bus when org.extensiond1 has an owner there, else the system bus. The addresses come
    from $DBUS_SYSTEM_BUS_ADDRESS and $DBUS_SESSION_BUS_ADDRESS as usual. Opening does not reach
    the daemon: calls fail (HostError, name org.freedesktop.DBus.Error.ServiceUnknown) when none
    runs. A context manager that closes the host on exit.

    Raises ValueError for another `bus`, HostError when the bus cannot be reached (its text
    names the bus and its address) or $EXTENSIOND_BUS is neither "system" nor "session"."""

    def __init__(self, bus: Optional[str] = None) -> None:
        if bus not in _BUSES:
            raise ValueError(f"bus must be 'system', 'session' or None, not {bus!r}")
        self._lib = _host_library.library()
        self._handle: Optional[int] = None
        self._requests: Dict[int, Request] = {}
        self._tokens = itertools.count(1)
        self._exception: Optional[BaseException] = None
        # The ctypes callback objects stay referenced for as long as the library may call them.
        self._ended_callback = _host_library.REQUEST_ENDED(self._ended)
        self._event_callback = _host_library.EVENT()
        self._on_event: Optional[Callable[[Event], None]] = None
        # While the library runs callbacks (process, wait), closing the host or changing the
        # subscription would free what it is using: both wait until it returns.
        self._dispatching = 0
        self._close_pending = False
        self._monitor_pending: Optional[Tuple[Optional[Callable[[Event], None]]]] = None
        handle = ctypes.c_void_p()
        result = self._lib.ext_host_open(_BUSES[bus], ctypes.byref(handle))
        if result < 0:
            raise HostError(-result, _text(self._lib.ext_host_error(None)) or os.strerror(-result))
        self._handle = handle.value

    def _error(self, result: int) -> HostError:
        text = _text(self._lib.ext_host_error(self._handle)) if self._handle is not None else None
        return HostError(-result, text or os.strerror(-result))

    def _open(self) -> int:
        # A callback's close() takes effect later, but the host is closed to its callers at once.
        if self._handle is None or self._close_pending:
            raise ValueError("the host is closed")
        return self._handle

    def _check(self, result: int) -> int:
        self._raise_callback_exception()
        if result < 0:
            raise self._error(result)
        return result

    def _raise_callback_exception(self) -> None:
        exception, self._exception = self._exception, None
        if exception is not None:
            raise exception

    def _ended(self, _request: Optional[int], outcome: int, payload: Optional[int], size: int,
               reason: Optional[bytes], context: Optional[int]) -> None:
        try:
            request = None if self._close_pending else self._requests.get(context or 0)
            if request is None:
                return
            data = ctypes.string_at(payload, size) if payload and size else b""
            request._ended(Outcome(_KINDS.get(outcome, INTERRUPTED), data, _text(reason) or ""))
        except BaseException as error:  # raised again from process()/wait()
            if self._exception is None:
                self._exception = error

    def _event(self, pointer: Any, _context: Optional[int]) -> None:
        try:
            callback = None if self._close_pending else self._on_event
            if callback is None:
                return
            e = pointer.contents
            callback(Event(_text(e.id) or "", _text(e.event) or "", _text(e.state), int(e.pid), _text(e.detail)))
        except BaseException as error:  # raised again from process()/wait()
            if self._exception is None:
                self._exception = error

    def fileno(self) -> int:
        """The connection's descriptor, to wait on (it belongs to the host)."""
        return self._check(self._lib.ext_host_fd(self._open()))

    def events(self) -> int:
        """The poll events to wait for on fileno() (select.POLLIN, and POLLOUT while messages wait
        to be sent)."""
        return self._check(self._lib.ext_host_events(self._open()))

    def _dispatch(self, call: Callable[[int], int]) -> int:
        """Runs a library call that may run callbacks, then what they asked for meanwhile
        (close, monitor)."""
        handle = self._open()
        self._dispatching += 1
        try:
            return call(handle)
        finally:
            self._dispatching -= 1
            if self._dispatching == 0:
                if self._monitor_pending is not None and not self._close_pending:
                    (callback,), self._monitor_pending = self._monitor_pending, None
                    self.monitor(callback)
                if self._close_pending:
                    self._close_pending = False
                    self.close()

    def process(self) -> int:
        """Processes one step, running its callbacks: >0 when there may be more to do (call it
        again), 0 when idle (also when a callback closed the host). A callback may close the
        host or change its monitor: that is done once the step returns."""
        result = self._dispatch(self._lib.ext_host_process)
        if self._handle is None:
            self._raise_callback_exception()
            return 0
        return self._check(result)

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Processes what is queued, or else waits up to `timeout` seconds (None: no limit) for
        something to arrive and processes it, running the callbacks. True when something was
        processed, False at the timeout. A callback may close the host or change its monitor:
        that is done once this returns (True, after a close)."""
        deadline = None if timeout is None else time.monotonic() + max(0.0, timeout)
        while True:
            if deadline is None:
                usec = _FOREVER
            else:
                usec = max(0, int((deadline - time.monotonic()) * 1_000_000))
            result = self._dispatch(lambda handle: self._lib.ext_host_wait(handle, usec))
            if self._handle is None:  # a callback closed the host
                self._raise_callback_exception()
                return True
            if result == -errno.EINTR:  # PEP 475: retried after the signal handlers ran
                self._raise_callback_exception()
                continue
            return self._check(result) > 0

    def begin(self, extension_id: str, on_end: Optional[Callable[[Request, Outcome], None]] = None) -> Request:
        """Begins a request on extension `extension_id` (Manager.Begin: extensiond launches or
        resumes it first; blocks up to 120 s). `on_end(request, outcome)` is called when the
        request ends (completed, cancelled or interrupted), from process() or wait(). Raises
        HostError: name org.extensiond1.Error.UnknownExtension (errno ENOENT), ...LaunchFailed,
        ...NotPermitted..."""
        identifier = _encode(extension_id, "extension_id")
        handle = self._open()
        token = next(self._tokens)
        pointer = ctypes.c_void_p()
        result = self._lib.ext_host_begin(handle, identifier, self._ended_callback, token, ctypes.byref(pointer))
        self._check(result)
        assert pointer.value is not None
        try:
            request = Request(self, pointer.value, token, on_end)
        except BaseException:  # no descriptor left for its channel, say: not kept
            self._lib.ext_host_dismiss(pointer.value)
            raise
        self._requests[token] = request
        return request

    def list(self) -> List[Extension]:
        """Every extension (Manager.ListExtensions), sorted by id."""
        entries = ctypes.POINTER(_host_library.Extension)()
        count = ctypes.c_size_t()
        self._check(self._lib.ext_host_list(self._open(), ctypes.byref(entries), ctypes.byref(count)))
        try:
            return [Extension(_text(e.id) or "", _text(e.point) or "", _text(e.state) or "", _text(e.app) or "",
                              int(e.pid), _text(e.object_path) or "")
                    for e in (entries[i] for i in range(count.value))]
        finally:
            self._lib.ext_host_list_free(entries, count.value)

    def monitor(self, callback: Optional[Callable[[Event], None]]) -> None:
        """Calls `callback(event)` for each lifecycle event of every extension (their
        PropertiesChanged carrying LastEvent), from process() or wait(); None ends it. One
        subscription per host: a new callback replaces the previous one. Called from a callback
        (a request's on_end, the monitor's), the new callback (or None) gets the events from
        now on, and the library's subscription changes once the process() or wait() that runs
        the callback returns (replacing it while the library runs the old one would free that
        callback under it); a failure to subscribe is raised from that process() or wait()."""
        handle = self._open()
        if self._dispatching:
            self._on_event = callback
            self._monitor_pending = (callback,)
            return
        if callback is None:
            self._on_event = None
            self._check(self._lib.ext_host_monitor(handle, _host_library.EVENT(), None))
            self._event_callback = _host_library.EVENT()
            return
        event_callback = _host_library.EVENT(self._event)
        self._on_event = callback
        result = self._lib.ext_host_monitor(handle, event_callback, None)
        self._event_callback = event_callback if result >= 0 else _host_library.EVENT()
        if result < 0:
            self._on_event = None
        self._check(result)

    def prewarm(self, extension_ids: Iterable[str]) -> None:
        """Asks extensiond to launch these extensions ahead of use (Manager.Prewarm)."""
        encoded = [_encode(i, "an extension id") for i in extension_ids]
        array = (ctypes.c_char_p * (len(encoded) + 1))(*encoded, None)
        self._check(self._lib.ext_host_prewarm(self._open(), array))

    def post_hint(self, name: str) -> None:
        """Posts the notification hint `name` (Manager.PostHint): the extensions observing it are
        told."""
        self._check(self._lib.ext_host_post_hint(self._open(), _encode(name, "name")))

    def close(self) -> None:
        """Closes the connection: the daemon dismisses the requests left open; their channels
        close too. A second call does nothing. Called from a callback (a request's on_end, the
        monitor's), it takes effect once the process() or wait() that runs the callback returns
        (closing the library's host under it would free what it is still using): no later
        callback runs, and every other method raises ValueError ("the host is closed") from
        then on."""
        handle = self._handle
        if handle is None:
            return
        if self._dispatching:
            self._close_pending = True
            self._on_event = None
            return
        for request in list(self._requests.values()):
            request._forget()
        self._requests.clear()
        self._handle = None
        self._on_event = None
        self._lib.ext_host_close(handle)

    def __enter__(self) -> "Host":
        return self

    def __exit__(self, kind: Optional[Type[BaseException]], value: Optional[BaseException],
                 traceback: Optional[TracebackType]) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # interpreter shutdown: the library may be gone
            pass
