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

Shared defaults and opening URLs::

    with rt.defaults("group.com.example.stocks") as settings:
        settings["symbols"] = ["AAPL", "GOOG"]    # visible to the app and its extensions on return
        theme = settings.get("theme", "light")

    rt.open_url("stocks://quote/AAPL")             # True when extensiond handed it over

Secrets, an app-group keychain extensiond keeps (extension_runtime.secrets)::

    from extension_runtime import secrets

    secrets.add(b"hunter2", service="mail", account="ann")
    password = secrets.copy(service="mail", account="ann").data

Background transfers, downloads and uploads extensiond performs (extension_runtime.transfers)::

    from extension_runtime import transfers

    session = transfers.Session("group.com.example.stocks", "quotes", print)
    task = session.download("https://example.com/quotes.json", "quotes.json")

Hosts of extensiond (begin requests on extensions, list and follow them, over D-Bus) use
extension_runtime.host, on libExtensionHostC::

    from extension_runtime.host import Host

    with Host() as host, host.begin("com.example.stocks.widget") as request:
        print(request.channel.makefile("rb").readline())

(libExtensionHostC is found through $EXTENSION_HOST_LIB, else `pkg-config extension-host`, else
the dynamic loader's path.) libExtensionRuntimeC is found through $EXTENSION_RUNTIME_LIB, else the installed pkg-config file
(`extension-runtime`), else the dynamic loader's path; it is loaded on first use, which removes
$EXTENSIOND_CHANNEL_FD from the environment (os.environ included).
"""
import collections.abc
import ctypes
import enum
import errno
import itertools
import os
import socket
import threading
from types import TracebackType
from typing import Callable, Dict, Iterator, List, Optional, Type, TypeVar

from . import _codec, _library
from ._library import LibraryNotFoundError

__all__ = [
    "ACTIVITY_MAX_REASON", "DEFAULTS_MAX_KEY", "DEFAULTS_MAX_VALUE", "OBSERVE_MAX_NAMES",
    "REQUEST_MAX_PAYLOAD", "URL_MAX", "Defaults", "ExtensionRuntimeError", "ExpiringActivity",
    "LibraryNotFoundError", "NotPermittedError", "NotSupervisedError", "RefreshResult", "Request",
    "UnknownSuiteError", "defaults", "expiring_activity", "is_supervised", "observe", "on_refresh",
    "open_url", "perform_expiring_activity", "refresh_complete", "request_handler", "run",
    "secrets", "shared_container_path", "container_path", "start", "transfers", "host",
]

REQUEST_MAX_PAYLOAD: int = 60000
"""The largest result Request.complete accepts, in bytes (EXT_REQUEST_MAX_PAYLOAD)."""

ACTIVITY_MAX_REASON: int = 1024
"""The longest reason perform_expiring_activity accepts, in bytes of UTF-8
(EXT_ACTIVITY_MAX_REASON)."""

OBSERVE_MAX_NAMES: int = 256
"""The most distinct names one process may observe (EXT_OBSERVE_MAX_NAMES)."""

URL_MAX: int = 2048
"""The longest URL open_url accepts, in bytes of UTF-8 (EXT_URL_MAX)."""

DEFAULTS_MAX_KEY: int = 255
"""The longest key of a defaults suite, in bytes of UTF-8 (EXT_DEFAULTS_MAX_KEY)."""

DEFAULTS_MAX_VALUE: int = 60000
"""The largest value of a defaults suite, in bytes encoded (EXT_DEFAULTS_MAX_VALUE)."""


class ExtensionRuntimeError(OSError):
    """A call into the runtime failed; `errno` is the error the C interface returned."""


class NotSupervisedError(ExtensionRuntimeError):
    """The process was not launched by extensiond (or its channel to extensiond is closed)."""


class UnknownSuiteError(ExtensionRuntimeError, LookupError):
    """No app declares the group a defaults suite is named after (errno ENOENT)."""


class NotPermittedError(ExtensionRuntimeError, PermissionError):
    """extensiond refused: the defaults suite is not a group of the extension's app (errno
    EPERM)."""


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


# Open URL and defaults change callbacks go through two trampolines made once (never freed, so
# that no callback object can be collected while the runtime still runs it), with the Python
# callable routed by the context pointer: a number, registered here.
_routes: Dict[int, Callable[..., None]] = {}
_route_numbers = itertools.count(1)


def _route(function: Callable[..., None]) -> int:
    with _kept_lock:
        number = next(_route_numbers)
        _routes[number] = function
        return number


def _unroute(number: int) -> None:
    with _kept_lock:
        _routes.pop(number, None)


@_library.OPENED
def _on_opened(opened: bool, context: Optional[int]) -> None:
    with _kept_lock:
        function = _routes.pop(context or 0, None)  # called exactly once
    if function is not None:
        function(bool(opened))


@_library.SUITE_CHANGED
def _on_suite_changed(suite: bytes, context: Optional[int]) -> None:
    with _kept_lock:
        function = _routes.get(context or 0)
    if function is not None:
        function(suite.decode("utf-8"))


def open_url(url: str) -> bool:
    """Asks the system to open `url` for the extension (Apple's NSExtensionContext.open): the app
    that declares its scheme, else the session's handler for it. Blocks until extensiond answers;
    returns True when it handed the URL over, False when it did not (no app or handler takes the
    scheme, the host's session is locked, the extension point does not allow opening URLs, the
    extension has no open request from a host, or it is over the rate limit: the reason is in
    extensiond's journal record) or when the channel to extensiond closed first. Raises
    ValueError for an empty URL, one holding a control character (below U+0020, or U+007F) or a
    lone surrogate, or one over URL_MAX bytes of UTF-8, and NotSupervisedError without
    extensiond."""
    if not isinstance(url, str):
        raise TypeError(f"open_url: the URL must be a str, not {type(url).__name__}")
    if not url or any(ord(c) < 0x20 or c == "\x7f" for c in url):
        raise ValueError(f"open_url: {url!r} is not a URL to open: empty, or holding a control character")
    try:
        encoded = url.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"open_url: {url!r} cannot be UTF-8 (it holds a lone surrogate)") from None
    if len(encoded) > URL_MAX:
        raise ValueError(f"open_url: the URL is {len(encoded)} bytes, over the limit of {URL_MAX}")
    lib = _library.library()
    _library.require(lib, "ext_open_url")
    done = threading.Event()
    outcome: List[bool] = []

    def opened(value: bool) -> None:
        outcome.append(value)
        done.set()

    context = _route(opened)
    result = lib.ext_open_url(encoded, _on_opened, context)
    if result != 0:
        _unroute(context)
        if result in (-errno.EINVAL, -errno.EMSGSIZE):
            raise ValueError(f"open_url: {url!r} was refused as malformed")
        _check(result, "open_url")
    done.wait()
    return outcome[0]


def _defaults_error(result: int, action: str, suite: str, key: Optional[str] = None) -> Exception:
    """The exception for the negative errno `result` of a defaults call."""
    code = -result
    where = f"defaults suite {suite!r}" + (f", key {key!r}" if key is not None else "")
    if code == errno.ENOTCONN:
        return NotSupervisedError(code, f"{action} {where}: not launched by extensiond, or extensiond is gone")
    if code == errno.EPERM:
        return NotPermittedError(code, f"{action} {where}: not permitted (not a group of this extension's app)")
    if code == errno.ENOENT:
        return UnknownSuiteError(code, f"{action} {where}: no app declares the group {suite!r}")
    if code in (errno.EINVAL, errno.EMSGSIZE):
        return ValueError(f"{action} {where}: refused as malformed or too large")
    if code == errno.ENOSPC:
        return ExtensionRuntimeError(
            code, f"{action} {where}: over a limit (the suite's 262144 bytes, or the rate of writes)")
    return ExtensionRuntimeError(code, f"{action} {where}: {errno.errorcode.get(code, code)} ({os.strerror(code)})")


def _key_bytes(key: str, suite: str) -> bytes:
    """`key` as UTF-8; raises TypeError for a non-str, ValueError for an empty key, one holding
    NUL or a lone surrogate, or one over DEFAULTS_MAX_KEY bytes."""
    if not isinstance(key, str):
        raise TypeError(f"defaults suite {suite!r}: a key must be a str, not {type(key).__name__}")
    if not key or "\0" in key:
        raise ValueError(f"defaults suite {suite!r}: key {key!r} is empty or holds NUL")
    try:
        encoded = key.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"defaults suite {suite!r}: key {key!r} cannot be UTF-8 (it holds a lone surrogate)") from None
    if len(encoded) > DEFAULTS_MAX_KEY:
        raise ValueError(f"defaults suite {suite!r}: key {key!r} is {len(encoded)} bytes, over {DEFAULTS_MAX_KEY}")
    return encoded


class Defaults(collections.abc.MutableMapping[str, object]):
    """A shared defaults suite (Apple's NSUserDefaults(suiteName:) for an app group): small
    typed settings an app and its extensions share, as a mutable mapping of str keys to values
    (bool, int in the int64 range, float, str, bytes, and lists and dicts with str keys of these,
    nested at most 32 levels). Open it with defaults(suite).

    Reads (`d[key]`, `get`, `in`, iteration, `len`) come from a read-only mapping of the suite,
    with no round trip: each is current as of the read, other members' writes included.
    Iteration and `len` work on a snapshot of the keys, sorted by their UTF-8 bytes. A tuple or
    bytearray reads back as a list or bytes.

    Writes (`d[key] = value`, `del d[key]`) are round trips to extensiond: they return once
    every member sees the change. They raise TypeError for a key that is not a str or a value of
    another type, OverflowError for an int outside int64, ValueError for an empty key, one
    holding NUL or over DEFAULTS_MAX_KEY bytes, a value over DEFAULTS_MAX_VALUE bytes encoded or
    nested too deep, NotPermittedError when the extension is no longer a member,
    ExtensionRuntimeError with errno ENOSPC over the suite's size or the rate of writes,
    NotSupervisedError once extensiond is gone, and ExtensionRuntimeError otherwise.

    A closed suite raises ValueError on use. It closes itself when collected; `with` closes it
    at the end of the block."""

    def __init__(self, suite: str, handle: int) -> None:
        """Wraps an open ext_defaults handle; use defaults(suite) to open one."""
        self._suite = suite
        self._handle: Optional[int] = handle
        self._state = threading.Condition()
        self._busy = 0
        self._routes: List[int] = []

    @property
    def suite(self) -> str:
        """The suite's name: a group of the extension's app."""
        return self._suite

    @property
    def closed(self) -> bool:
        """Whether close() was called."""
        return self._handle is None

    def _enter(self) -> int:
        with self._state:
            if self._handle is None:
                raise ValueError(f"the defaults suite {self._suite!r} is closed")
            self._busy += 1
            return self._handle

    def _leave(self) -> None:
        with self._state:
            self._busy -= 1
            if self._busy == 0:
                self._state.notify_all()

    def __getitem__(self, key: str) -> object:
        if not isinstance(key, str) or not key or "\0" in key:
            raise KeyError(key)
        try:
            encoded = key.encode("utf-8")
        except UnicodeEncodeError:
            raise KeyError(key) from None
        lib = _library.library()
        pointer, length = ctypes.c_void_p(), ctypes.c_size_t()
        handle = self._enter()
        try:
            result = lib.ext_defaults_get_encoded(handle, encoded, ctypes.byref(pointer), ctypes.byref(length))
        finally:
            self._leave()
        if result == -errno.ENOENT:
            raise KeyError(key)
        if result != 0:
            raise _defaults_error(result, "read", self._suite, key)
        try:
            data = ctypes.string_at(pointer.value, length.value) if length.value else b""
        finally:
            _library.free(pointer.value)
        return _codec.decode(data)

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, str) or not key or "\0" in key:
            return False
        try:
            encoded = key.encode("utf-8")
        except UnicodeEncodeError:
            return False
        handle = self._enter()
        try:
            result = _library.library().ext_defaults_type(handle, encoded)
        finally:
            self._leave()
        if result == -errno.ENOENT:
            return False
        if result < 0:
            raise _defaults_error(result, "read", self._suite, key)
        return True

    def __setitem__(self, key: str, value: object) -> None:
        encoded_key = _key_bytes(key, self._suite)
        try:
            encoded = _codec.encode(value)
        except OverflowError as error:
            raise OverflowError(f"defaults suite {self._suite!r}, key {key!r}: {error}") from None
        except TypeError as error:
            raise TypeError(f"defaults suite {self._suite!r}, key {key!r}: {error}") from None
        except ValueError as error:
            raise ValueError(f"defaults suite {self._suite!r}, key {key!r}: {error}") from None
        if len(encoded) > DEFAULTS_MAX_VALUE:
            raise ValueError(f"defaults suite {self._suite!r}, key {key!r}: the value is {len(encoded)} bytes "
                             f"encoded, over the limit of {DEFAULTS_MAX_VALUE}")
        lib = _library.library()
        handle = self._enter()
        try:
            result = lib.ext_defaults_set_encoded(handle, encoded_key, encoded, len(encoded))
        finally:
            self._leave()
        if result != 0:
            raise _defaults_error(result, "write", self._suite, key)

    def __delitem__(self, key: str) -> None:
        if key not in self:
            raise KeyError(key)
        encoded_key = _key_bytes(key, self._suite)
        handle = self._enter()
        try:
            result = _library.library().ext_defaults_remove(handle, encoded_key)
        finally:
            self._leave()
        if result != 0:
            raise _defaults_error(result, "remove", self._suite, key)

    def keys_snapshot(self) -> List[str]:
        """The suite's keys as of one moment, sorted by their UTF-8 bytes."""
        lib = _library.library()
        keys, count = ctypes.POINTER(ctypes.c_char_p)(), ctypes.c_size_t()
        handle = self._enter()
        try:
            result = lib.ext_defaults_keys(handle, ctypes.byref(keys), ctypes.byref(count))
        finally:
            self._leave()
        if result != 0:
            raise _defaults_error(result, "list the keys of", self._suite)
        try:
            return [keys[i].decode("utf-8") for i in range(count.value)]
        finally:
            lib.ext_defaults_free_keys(keys, count.value)

    def __iter__(self) -> Iterator[str]:
        return iter(self.keys_snapshot())

    def __len__(self) -> int:
        return len(self.keys_snapshot())

    def on_change(self, callback: Callable[[str], None]) -> Callable[[str], None]:
        """Calls `callback(suite)` on a runtime thread when another member (an app, another
        extension, an administrator) changed the suite: at once while the extension runs, and
        once for all the changes made while it was suspended, when it is resumed. Not for this
        process's own writes. Callbacks are called in the order they were added, until close().
        Usable as a decorator; returns `callback`. An exception it raises is printed and
        ignored (as for any ctypes callback)."""

        lib = _library.library()
        context = _route(callback)
        handle = self._enter()
        try:
            result = lib.ext_defaults_on_change(handle, _on_suite_changed, context)
            if result == 0:
                self._routes.append(context)
        finally:
            self._leave()
        if result != 0:
            _unroute(context)
            raise _defaults_error(result, "watch", self._suite)
        return callback

    def close(self) -> None:
        """Closes the suite (waiting for reads and writes under way on other threads, and for
        change callbacks running on them): no callback is called once it returns, and the suite
        can no longer be used. Closing again does nothing."""
        with self._state:
            handle = self._handle
            if handle is None:
                return
            self._handle = None
            while self._busy:
                self._state.wait()
        _library.library().ext_defaults_close(handle)
        for context in self._routes:
            _unroute(context)
        self._routes = []

    def __enter__(self) -> "Defaults":
        return self

    def __exit__(self, kind: Optional[Type[BaseException]], value: Optional[BaseException],
                 traceback: Optional[TracebackType]) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # interpreter shutdown: the library may be gone
            pass

    def __repr__(self) -> str:
        return f"<extension_runtime.Defaults {self._suite!r}{' (closed)' if self._handle is None else ''}>"


def defaults(suite: str) -> Defaults:
    """Opens the shared defaults suite `suite`, a group of the app the extension's manifest names
    ("app"): one round trip to extensiond. Raises ValueError for a malformed name (letters,
    digits, '.', '-', '_', at most 255 bytes, not starting or ending with '.', no '..'),
    UnknownSuiteError (a LookupError) when no app declares the group, NotPermittedError (a
    PermissionError) when it is not a group of the extension's app, NotSupervisedError without
    extensiond, and ExtensionRuntimeError otherwise."""
    if not isinstance(suite, str):
        raise TypeError(f"defaults: the suite name must be a str, not {type(suite).__name__}")
    problem = (f"defaults: {suite!r} is not an app group name: letters, digits, '.', '-', '_', at most 255 "
               "bytes, not starting or ending with '.', no '..'")
    if "\0" in suite or not suite.isascii():
        raise ValueError(problem)
    lib = _library.library()
    _library.require(lib, "ext_defaults_open")
    handle = ctypes.c_void_p()
    result = lib.ext_defaults_open(suite.encode(), ctypes.byref(handle))
    if result == -errno.EINVAL:
        raise ValueError(problem)
    if result == -errno.ENOENT:
        raise UnknownSuiteError(errno.ENOENT, f"defaults: no app declares the group {suite!r}, so there is no such suite")
    if result != 0:
        raise _defaults_error(result, "open", suite)
    return Defaults(suite, handle.value)


# The secrets and background transfers APIs, submodules (`import extension_runtime.secrets` or
# `extension_runtime.secrets`, and the same for `transfers`); imported last: they use the
# exceptions above. `host` (the host side, over D-Bus, on libExtensionHostC) loads its library
# on first use too.
from . import secrets  # noqa: E402
from . import transfers  # noqa: E402
from . import host  # noqa: E402
