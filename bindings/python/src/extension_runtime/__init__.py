"""extension_runtime: write extensiond extensions in Python.

A thin, typed layer over libExtensionRuntimeC (include/extension_runtime.h), with the same
semantics as the C interface (docs/assertions.md)::

    import extension_runtime as rt

    @rt.request_handler
    def serve(request: rt.Request) -> None:
        with request.channel:
            ...

    def save(expired: bool) -> None:
        ...

    rt.perform_expiring_activity("save state", save)
    rt.run()

The library is found through $EXTENSION_RUNTIME_LIB, else the installed pkg-config file
(`extension-runtime`), else the dynamic loader's path; it is loaded on first use, which removes
$EXTENSIOND_CHANNEL_FD from the environment (os.environ included).
"""
import ctypes
import enum
import errno
import socket
import threading
from types import TracebackType
from typing import Callable, Dict, Optional, Type, TypeVar

from . import _library
from ._library import LibraryNotFoundError

__all__ = [
    "ACTIVITY_MAX_REASON", "OBSERVE_MAX_NAMES", "REQUEST_MAX_PAYLOAD", "ExtensionRuntimeError",
    "ExpiringActivity", "LibraryNotFoundError", "NotSupervisedError", "RefreshResult", "Request",
    "expiring_activity", "is_supervised", "observe", "on_refresh", "perform_expiring_activity",
    "refresh_complete", "request_handler", "run", "shared_container_path", "container_path", "start",
]

REQUEST_MAX_PAYLOAD: int = 60000
"""The largest result Request.complete accepts, in bytes (EXT_REQUEST_MAX_PAYLOAD)."""

ACTIVITY_MAX_REASON: int = 1024
"""The longest reason perform_expiring_activity accepts, in bytes of UTF-8
(EXT_ACTIVITY_MAX_REASON)."""

OBSERVE_MAX_NAMES: int = 256
"""The most distinct names one process may observe (EXT_OBSERVE_MAX_NAMES)."""


class ExtensionRuntimeError(OSError):
    """A call into the runtime failed; `errno` is the error the C interface returned."""


class NotSupervisedError(ExtensionRuntimeError):
    """The process was not launched by extensiond (or its channel to extensiond is closed)."""


def _check(result: int, what: str) -> None:
    if result == 0:
        return
    code = -result
    if code == errno.ENOTCONN:
        raise NotSupervisedError(code, f"{what}: not launched by extensiond, or extensiond is gone")
    raise ExtensionRuntimeError(code, f"{what}: {errno.errorcode.get(code, code)}")


# ctypes callbacks must stay referenced for as long as the runtime may call them.
_kept: Dict[object, object] = {}
_kept_lock = threading.Lock()


def _keep(key: object, value: object) -> None:
    with _kept_lock:
        _kept[key] = value


def _drop(key: object) -> None:
    with _kept_lock:
        _kept.pop(key, None)


def is_supervised() -> bool:
    """Whether this process was launched by extensiond: it inherited a runtime channel, an
    AF_UNIX SOCK_SEQPACKET socket named by $EXTENSIOND_CHANNEL_FD, which is removed from the
    environment (os.environ included) when the library is loaded."""
    return _library.library().ext_runtime_is_supervised() == 1


class Request:
    """A request a host began: its id and the extension's end of the channel to the host."""

    def __init__(self, request_id: int, fd: int) -> None:
        self.id: int = request_id
        """The request id; the host sees the same."""
        self.channel: socket.socket = socket.socket(fileno=fd)
        """The connected stream socket to the host; the handler owns it and closes it. A write
        after the host closed its end raises BrokenPipeError (Python ignores SIGPIPE)."""

    def complete(self, payload: bytes = b"") -> None:
        """Ends the request, returning `payload` (bytes, or another bytes-like object such as a
        bytearray or memoryview) to the host (Apple's completeRequest). The channel stays open
        until closed. Raises TypeError for anything else, a str included (encode it first),
        ValueError above REQUEST_MAX_PAYLOAD bytes (nothing is sent in either case), and
        NotSupervisedError without extensiond."""
        try:
            data = memoryview(payload).tobytes()
        except TypeError:
            raise TypeError(f"complete: the result must be bytes-like, not {type(payload).__name__}") from None
        if len(data) > REQUEST_MAX_PAYLOAD:
            raise ValueError(f"the result is {len(data)} bytes, over the limit of {REQUEST_MAX_PAYLOAD}")
        _check(_library.library().ext_request_complete(self.id, data, len(data)), "complete")

    def cancel(self, reason: str) -> None:
        """Ends the request without a result, telling the host `reason` (cut at 4096 bytes).
        Raises ValueError when `reason` holds a NUL character (C would see it end there; nothing
        is sent), and NotSupervisedError without extensiond."""
        if "\0" in reason:
            raise ValueError("cancel: the reason must not contain NUL")
        _check(_library.library().ext_request_cancel(self.id, reason.encode()), "cancel")


RequestHandler = Callable[[Request], None]
_handler: Optional[RequestHandler] = None


def request_handler(function: RequestHandler) -> RequestHandler:
    """Decorator: `function(request)` handles each request a host begins, on a runtime thread of
    its own (it may block, e.g. reading `request.channel`). The last one decorated is used.
    Returns `function` unchanged."""
    global _handler
    _handler = function
    return function


@_library.REQUEST
def _on_request(request_id: int, fd: int, _context: Optional[int]) -> None:
    handler = _handler
    if handler is None:
        socket.socket(fileno=fd).close()
        return
    handler(Request(request_id, fd))


def start() -> None:
    """Announces readiness to extensiond and starts delivering requests to the
    @request_handler function, once per process; returns at once. Raises NotSupervisedError
    when the process was not launched by extensiond, and ExtensionRuntimeError with errno
    EALREADY when it was started already (nothing is sent)."""
    result = _library.library().ext_runtime_start(_on_request, None)
    if result == -errno.EALREADY:
        raise ExtensionRuntimeError(errno.EALREADY, "start: the runtime was started already")
    _check(result, "start")


def run() -> None:
    """start(), then waits forever (the runtime's threads do the work). Raises as start()."""
    start()
    threading.Event().wait()


def _reason(reason: str, what: str) -> bytes:
    """`reason` as UTF-8; raises ValueError when it is empty, holds a NUL character (which would
    end it early in C) or is over ACTIVITY_MAX_REASON bytes."""
    if not reason:
        raise ValueError(f"{what}: the reason must not be empty")
    if "\0" in reason:
        raise ValueError(f"{what}: the reason must not contain NUL")
    encoded = reason.encode()
    if len(encoded) > ACTIVITY_MAX_REASON:
        raise ValueError(f"{what}: the reason is {len(encoded)} bytes, over the limit of {ACTIVITY_MAX_REASON}")
    return encoded


def perform_expiring_activity(reason: str, fn: Callable[[bool], None]) -> None:
    """Takes a task assertion held by extensiond, like ProcessInfo.performExpiringActivity:

    - granted: `fn(False)` runs on a runtime thread; the assertion is held until it returns
      (and until the expired call, if any, has returned too);
    - about to expire: `fn(True)` is called a second time, concurrently, on another thread, at
      most once: stop the work and return quickly;
    - not granted (expiring, suspending, background time spent, too many assertions held, or no
      extensiond): `fn(True)` only, at once, on a runtime thread.

    Returns at once. Raises ValueError for an empty reason, one holding NUL, or one over
    ACTIVITY_MAX_REASON bytes of UTF-8 (fn is then not called). An exception raised by `fn` is
    printed and ignored (as for any ctypes callback).
    """
    encoded = _reason(reason, "perform_expiring_activity")
    key = object()

    def block(expired: bool, _context: Optional[int]) -> None:
        fn(bool(expired))

    def cleanup(_context: Optional[int]) -> None:
        _drop(key)

    c_block, c_cleanup = _library.BLOCK(block), _library.CLEANUP(cleanup)
    _keep(key, (c_block, c_cleanup))
    result = _library.library().ext_perform_expiring_activity_with_cleanup(encoded, c_block, c_cleanup, None)
    if result != 0:
        _drop(key)
        _check(result, "perform_expiring_activity")


class ExpiringActivity:
    """A task assertion held for the body of a `with` statement (see expiring_activity)."""

    def __init__(self, reason: str) -> None:
        _reason(reason, "expiring_activity")
        self.reason: str = reason
        """The reason shown by `extctl status`."""
        self._decided = threading.Event()
        self._expired = threading.Event()
        self._finished = threading.Event()
        self._granted = False

    @property
    def granted(self) -> bool:
        """Whether an assertion was granted (False: denied, and `expired` is already True)."""
        return self._granted

    @property
    def expired(self) -> bool:
        """Whether the assertion is about to expire (or was never granted): stop and leave the
        `with` body quickly."""
        return self._expired.is_set()

    def wait_expired(self, timeout: Optional[float] = None) -> bool:
        """Blocks until the assertion is about to expire or `timeout` seconds passed; returns
        `expired`."""
        return self._expired.wait(timeout)

    def _block(self, expired: bool) -> None:
        if expired:
            self._expired.set()
            self._decided.set()
            return
        self._granted = True
        self._decided.set()
        self._finished.wait()  # the assertion is held until the body has left

    def __enter__(self) -> "ExpiringActivity":
        perform_expiring_activity(self.reason, self._block)
        self._decided.wait()
        return self

    def __exit__(self, kind: Optional[Type[BaseException]], value: Optional[BaseException],
                 traceback: Optional[TracebackType]) -> None:
        self._finished.set()


def expiring_activity(reason: str) -> ExpiringActivity:
    """A context manager holding a task assertion while its body runs::

        with expiring_activity("save state") as activity:
            for chunk in chunks:
                if activity.expired:
                    break            # about to expire (or never granted): stop quickly
                write(chunk)

    Entering waits for extensiond's answer. Granted: the body runs with `activity.granted`
    True, and `activity.expired` becomes True (on another thread's call) when the assertion is
    about to expire; the assertion is released when the body leaves. Denied: the body runs with
    `activity.expired` already True. Raises ValueError for an empty reason, one holding NUL, or
    one over ACTIVITY_MAX_REASON bytes of UTF-8."""
    return ExpiringActivity(reason)


def observe(name: str, handler: Callable[[str], None]) -> None:
    """Observes the notification hint `name`: `handler(name)` runs on a runtime thread for each
    post made while the process runs, and once for all the posts made while it was suspended.
    A name may have several handlers, called in the order they were added. Raises ValueError
    for a malformed name (letters, digits, '.', '-', '_', at most 255 bytes, not starting or
    ending with '.', no '..'), NotSupervisedError without extensiond, and ExtensionRuntimeError
    with errno ENOSPC for a new name when OBSERVE_MAX_NAMES names are observed already."""

    def hint(posted: bytes, _context: Optional[int]) -> None:
        handler(posted.decode())

    problem = (f"bad hint name {name!r}: letters, digits, '.', '-', '_', at most 255 bytes, "
               "not starting or ending with '.', no '..'")
    if "\0" in name:
        raise ValueError(problem)
    # The runtime calls the callback for the life of the process: it is kept from before the
    # call (under a key of its own: ctypes function objects cannot be hashed), and dropped only
    # when the call fails.
    key = object()
    c_hint = _library.HINT(hint)
    _keep(key, c_hint)
    result = _library.library().ext_observe(name.encode(), c_hint, None)
    if result != 0:
        _drop(key)
    if result == -errno.EINVAL:
        raise ValueError(problem)
    if result == -errno.ENOSPC:
        raise ExtensionRuntimeError(
            errno.ENOSPC, f"observe: already observing {OBSERVE_MAX_NAMES} names, the most one process may")
    _check(result, "observe")


class RefreshResult(enum.IntEnum):
    """The answer to a background refresh (EXT_REFRESH_*)."""

    NEW_DATA = 0
    """New content was fetched: hosts showing the extension are told to redraw."""
    NO_DATA = 1
    """Nothing changed."""
    FAILED = 2
    """The refresh failed: the next one is backed off."""


RefreshHandler = Callable[[int], None]
_R = TypeVar("_R", bound=RefreshHandler)


def on_refresh(handler: _R) -> _R:
    """Decorator (or plain call) handling background refreshes: `handler(refresh_id)` runs on a
    runtime thread when extensiond refreshes the extension; answer with refresh_complete within
    the policy's refreshSeconds. Call it before start(). Raises NotSupervisedError without
    extensiond. Returns `handler` unchanged."""

    def refresh(refresh_id: int, _context: Optional[int]) -> None:
        handler(refresh_id)

    c_refresh = _library.REFRESH(refresh)
    _check(_library.library().ext_runtime_on_refresh(c_refresh, None), "on_refresh")
    _keep("refresh", c_refresh)
    return handler


def refresh_complete(refresh_id: int, result: RefreshResult) -> None:
    """Answers refresh `refresh_id`. Raises ValueError for a result that is not a RefreshResult
    (or its value), and NotSupervisedError without extensiond."""
    _check(_library.library().ext_refresh_complete(refresh_id, int(RefreshResult(result))), "refresh_complete")


def container_path() -> Optional[str]:
    """The extension's own container, as extensiond passes it in $EXTENSIOND_CONTAINER: a
    directory only it can read and write, kept across relaunches until `extctl reset`, and also
    its HOME. None when that variable is unset or empty (not started by extensiond)."""
    value = _library.library().ext_container_path()
    return value.decode() if value is not None else None


def shared_container_path(group: str) -> Optional[str]:
    """The directory of the shared container `group`, as extensiond passes it in
    $EXTENSION_SHARED_CONTAINER_<NAME> (NAME: `group` upper-cased, every byte other than an
    ASCII letter or digit as '_'), or None when that variable is unset or empty. Raises
    ValueError when `group` holds a NUL character (C would see the name end there)."""
    if "\0" in group:
        raise ValueError("shared_container_path: the group must not contain NUL")
    value = _library.library().ext_shared_container_path(group.encode())
    return value.decode() if value is not None else None
