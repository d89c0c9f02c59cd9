"""extension_runtime.transfers: background downloads and uploads that extensiond performs in its
own process, whatever happens to the extension (ext_transfer_* of include/extension_runtime.h),
like Apple's background URLSession::

    from extension_runtime import transfers

    def on_event(event: transfers.Event) -> None:
        if event.kind == transfers.COMPLETED:
            print(event.task, event.status, event.path)   # a download's file, absolute
        elif event.kind == transfers.FAILED:
            print(event.task, event.domain, event.code, event.text)

    session = transfers.Session("group.com.example.stocks", "quotes", on_event)
    task = session.download("https://example.com/quotes.json", "quotes/today.json")
    session.upload("outbox/report.csv", "https://example.com/reports", post=True)
    session.cancel(task)

A session is an identifier (chosen by the extension) in an app group of its app, whose shared
container holds the files (paths are relative to it). `on_event(event)` runs on a runtime thread
for each event of the session, in order: progress (while the process runs; never queued),
completion and failure. Once it has returned for every event of one message from extensiond,
the runtime tells extensiond they were handled (the model's "did finish events"): a completion
or failure is delivered once per process, never twice. If the extension is suspended or ends
first, the completions wait for the containing app, which extensiond brings up to claim the
session. An exception raised by `on_event` is printed and ignored (the event counts as handled).
Events arrive once the session is claimed: by creating a task in it, or with claim().

Creating a Session sets the session's callback (a new Session of the same group and identifier
replaces it). download, upload, cancel and claim are round trips to extensiond that block the
calling thread until it answers (a runtime callback may make them).

Errors: TypeError for an argument of the wrong type; TransferError for everything else, its
`code` the errno: EINVAL for a malformed argument, checked before anything is sent (a group or
identifier that is empty, holds NUL or a lone surrogate, or is over MAX_NAME bytes of UTF-8; a
url that is empty or over MAX_URL bytes; a path over MAX_PATH bytes; an upload without a path; a
task outside 0...2**64-1), or when extensiond refuses the request as malformed (not an http or
https URL, a path outside the container, an upload's file it cannot read, a task already over);
EPERM when extensiond does not permit it (a group that is not one of the extension's app, an
extension point that allows no transfers); ENOENT for a task extensiond does not know (cancel);
ENOSPC over one of its limits (the app's unfinished tasks); EIO when extensiond failed; ENOTCONN
without extensiond (or once its channel closed). TransferError is an ExtensionRuntimeError (an
OSError).
"""
import ctypes
import errno
import os
import threading
from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional, Tuple

from . import ExtensionRuntimeError, _library

__all__ = [
    "COMPLETED", "FAILED", "MAX_NAME", "MAX_PATH", "MAX_URL", "PROGRESS", "Event", "Session", "TransferError",
]

MAX_URL: int = 8192
"""The longest URL of a task, in bytes of UTF-8 (EXT_TRANSFER_MAX_URL)."""

MAX_PATH: int = 1024
"""The longest path of a task in the shared container, in bytes of UTF-8 (EXT_TRANSFER_MAX_PATH)."""

MAX_NAME: int = 255
"""The longest group and session identifier, in bytes of UTF-8."""

PROGRESS: str = "progress"
"""Event.kind: `bytes` of `total` done (EXT_TRANSFER_PROGRESS; a few a second at most)."""

COMPLETED: str = "completed"
"""Event.kind: the server answered: `status`, and a download's `path` (EXT_TRANSFER_COMPLETED)."""

FAILED: str = "failed"
"""Event.kind: the task ended without an answer: `domain`, `code`, `text` (EXT_TRANSFER_FAILED)."""

_DOWNLOAD, _UPLOAD_PUT, _UPLOAD_POST = 1, 2, 3
_KINDS = {1: PROGRESS, 2: COMPLETED, 3: FAILED}


class TransferError(ExtensionRuntimeError):
    """A background transfer call failed: `code` is the errno (as the module says), `message`
    says why."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(code, message)
        self.code: int = code
        """The errno: EINVAL, EPERM, ENOENT, ENOSPC, EIO, ENOTCONN (see the module)."""
        self.message: str = message
        """What failed, and why."""


@dataclass(frozen=True)
class Event:
    """One event of a session (ext_transfer_event)."""

    sequence: int
    """A completion's or failure's number in its session; 0 for progress."""
    task: int
    """The task."""
    kind: str
    """PROGRESS, COMPLETED or FAILED."""
    bytes: int
    """Bytes done (received for a download, sent for an upload)."""
    total: int
    """Bytes expected in all, -1 if unknown."""
    status: int
    """The final HTTP status, 0 if none."""
    path: str
    """A completed download's file (absolute), "" otherwise."""
    domain: str
    """Failed: "http", "curl", "posix" or "extensiond"; "" otherwise."""
    code: int
    """Failed: the error's code in its domain."""
    text: str
    """Failed: the error for people; "" otherwise."""


def _error(result: int, action: str) -> TransferError:
    """The exception for the negative errno `result` of a transfers call."""
    code = -result
    why = {
        errno.ENOTCONN: "not launched by extensiond, or extensiond is gone",
        errno.EINVAL: "refused as malformed",
        errno.EPERM: "not permitted (a group that is not one of the extension's app, or no transfers for its point)",
        errno.ENOENT: "no such task",
        errno.ENOSPC: "over a limit of extensiond (the app's unfinished tasks)",
        errno.EIO: "extensiond failed",
    }.get(code, f"{errno.errorcode.get(code, code)} ({os.strerror(code)})")
    return TransferError(code, f"{action}: {why}")


def _text(value: Any, name: str, limit: int, action: str, empty: bool = False) -> bytes:
    """`value` as UTF-8. Raises TypeError for a non-str, TransferError (EINVAL) for one that is
    empty (unless `empty`), holds NUL or a lone surrogate, or is over `limit` bytes."""
    if not isinstance(value, str):
        raise TypeError(f"{action}: {name} must be a str, not {type(value).__name__}")
    if "\0" in value:
        raise TransferError(errno.EINVAL, f"{action}: {name} {value!r} holds NUL")
    try:
        encoded = value.encode("utf-8")
    except UnicodeEncodeError:
        raise TransferError(errno.EINVAL, f"{action}: {name} {value!r} cannot be UTF-8 (it holds a lone surrogate)") from None
    if not encoded and not empty:
        raise TransferError(errno.EINVAL, f"{action}: {name} is empty")
    if len(encoded) > limit:
        raise TransferError(errno.EINVAL, f"{action}: {name} is {len(encoded)} bytes of UTF-8, over the limit of {limit}")
    return encoded


def _function(name: str) -> Any:
    lib = _library.library()
    _library.require(lib, name)
    return getattr(lib, name)


# The sessions' callables, by (group, identifier) as UTF-8, routed by one trampoline made once and
# never freed: no callback object can be collected while the runtime may still run it.
_handlers: Dict[Tuple[bytes, bytes], Callable[[Event], None]] = {}
_handlers_lock = threading.Lock()


def _decoded(value: Optional[bytes]) -> str:
    return value.decode("utf-8", "replace") if value else ""


@_library.TRANSFER
def _on_event(group: Optional[bytes], session: Optional[bytes], event: Any, _context: Optional[int]) -> None:
    with _handlers_lock:
        handler = _handlers.get((group or b"", session or b""))
    if handler is None:
        return
    e = event.contents
    handler(Event(sequence=e.sequence, task=e.task, kind=_KINDS.get(e.kind, str(e.kind)), bytes=e.bytes, total=e.total,
                  status=e.status, path=_decoded(e.path), domain=_decoded(e.domain), code=e.code, text=_decoded(e.text)))


class Session:
    """The background session `identifier` in the app group `group`, whose events go to
    `on_event` (see the module). Raises TypeError for arguments of the wrong type, TransferError
    (EINVAL) for a malformed group or identifier."""

    def __init__(self, group: str, identifier: str, on_event: Callable[[Event], None]) -> None:
        action = "transfers.Session"
        key = (_text(group, "group", MAX_NAME, action), _text(identifier, "identifier", MAX_NAME, action))
        if not callable(on_event):
            raise TypeError(f"{action}: on_event must be callable, not {type(on_event).__name__}")
        self.group: str = group
        """The app group whose shared container holds the files."""
        self.identifier: str = identifier
        """The session's identifier."""
        self._key = key
        set_handler = _function("ext_transfer_set_handler")
        with _handlers_lock:
            previous = _handlers.get(key)
            _handlers[key] = on_event
        result = set_handler(key[0], key[1], _on_event, None)
        if result != 0:
            with _handlers_lock:
                if previous is None:
                    _handlers.pop(key, None)
                else:
                    _handlers[key] = previous
            raise _error(result, action)

    def __repr__(self) -> str:
        return f"Session(group={self.group!r}, identifier={self.identifier!r})"

    def _create(self, method: int, url: str, path: str, discretionary: bool, action: str) -> int:
        encoded_url = _text(url, "url", MAX_URL, action)
        encoded_path = _text(path, "path", MAX_PATH, action, empty=True)
        if method != _DOWNLOAD and not encoded_path:
            raise TransferError(errno.EINVAL, f"{action}: an upload needs the path of its file")
        task = ctypes.c_uint64()
        result = _function("ext_transfer_create")(self._key[0], self._key[1], method, encoded_url, encoded_path,
                                                  1 if discretionary else 0, ctypes.byref(task))
        if result != 0:
            raise _error(result, action)
        return task.value

    def download(self, url: str, path: str = "", discretionary: bool = False) -> int:
        """Downloads `url` (http or https) into the group's shared container, at `path`
        (relative to it), or at transfers/IDENTIFIER/TASK when empty; the file appears there
        whole, once complete. A `discretionary` task waits while the network is metered or the
        machine on battery. Returns the task's id. Raises as the module says."""
        return self._create(_DOWNLOAD, url, path, discretionary, "transfers.download")

    def upload(self, path: str, url: str, post: bool = False, discretionary: bool = False) -> int:
        """Uploads the file at `path` in the group's shared container to `url`, with PUT (or
        POST when `post`). Returns the task's id. Raises as the module says."""
        return self._create(_UPLOAD_POST if post else _UPLOAD_PUT, url, path, discretionary, "transfers.upload")

    def cancel(self, task: int) -> None:
        """Cancels task `task`: it ends with a failure event (domain "extensiond", code 1).
        Raises TransferError with ENOENT when extensiond knows no such task of the app, or as
        the module says."""
        action = "transfers.cancel"
        if isinstance(task, bool) or not isinstance(task, int):
            raise TypeError(f"{action}: task must be an int, not {type(task).__name__}")
        if not 0 <= task < 1 << 64:
            raise TransferError(errno.EINVAL, f"{action}: task {task} is outside 0...2**64-1")
        result = _function("ext_transfer_cancel")(task)
        if result != 0:
            raise _error(result, action)

    def claim(self) -> None:
        """Becomes the session's consumer: the completions queued for it arrive at `on_event`
        (after a relaunch, say), and new events as they happen. Creating a task does this too.
        Raises as the module says."""
        result = _function("ext_transfer_claim")(self._key[0], self._key[1])
        if result != 0:
            raise _error(result, "transfers.claim")
