"""Finding and loading libExtensionHostC (include/extension_host.h), with the signatures of its
functions: the same lookup as _library.py's for libExtensionRuntimeC."""
import ctypes
import os
import threading
from typing import Optional

from ._library import LibraryNotFoundError, find


class Extension(ctypes.Structure):
    """ext_host_extension: one entry of ext_host_list (freed by ext_host_list_free)."""
    _fields_ = [
        ("id", ctypes.c_char_p),
        ("point", ctypes.c_char_p),
        ("state", ctypes.c_char_p),
        ("app", ctypes.c_char_p),
        ("object_path", ctypes.c_char_p),
        ("pid", ctypes.c_uint32),
    ]


class Event(ctypes.Structure):
    """ext_host_event: one lifecycle event (valid only during the callback)."""
    _fields_ = [
        ("id", ctypes.c_char_p),
        ("event", ctypes.c_char_p),
        ("state", ctypes.c_char_p),
        ("detail", ctypes.c_char_p),
        ("pid", ctypes.c_uint32),
    ]


# ext_host_request_callback(request, outcome, payload, size, reason, context)
REQUEST_ENDED = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t,
                                 ctypes.c_char_p, ctypes.c_void_p)
# ext_host_event_callback(event, context)
EVENT = ctypes.CFUNCTYPE(None, ctypes.POINTER(Event), ctypes.c_void_p)

_lock = threading.Lock()
_library: Optional[ctypes.CDLL] = None


class HostLibraryNotFoundError(LibraryNotFoundError):
    """libExtensionHostC was not found: neither $EXTENSION_HOST_LIB nor pkg-config
    (`extension-host`) nor the dynamic loader's path names it."""


def locate() -> str:
    """The library to load: $EXTENSION_HOST_LIB when set, else the one the installed pkg-config
    file `extension-host` names, else `libExtensionHostC.so.0` for the dynamic loader's own
    search. Raises HostLibraryNotFoundError for an $EXTENSION_HOST_LIB that does not exist."""
    return find("EXTENSION_HOST_LIB", "extension-host", "libExtensionHostC.so.0", HostLibraryNotFoundError)


def _declare(lib: ctypes.CDLL) -> None:
    c = ctypes
    handle, size = c.c_void_p, c.c_size_t
    signatures = {
        "ext_host_open": ([c.c_int, c.POINTER(handle)], c.c_int),
        "ext_host_close": ([handle], None),
        "ext_host_error": ([handle], c.c_char_p),
        "ext_host_fd": ([handle], c.c_int),
        "ext_host_events": ([handle], c.c_int),
        "ext_host_process": ([handle], c.c_int),
        "ext_host_wait": ([handle, c.c_uint64], c.c_int),
        "ext_host_begin": ([handle, c.c_char_p, REQUEST_ENDED, c.c_void_p, c.POINTER(handle)], c.c_int),
        "ext_host_request_channel": ([handle], c.c_int),
        "ext_host_request_id": ([handle], c.c_uint64),
        "ext_host_request_path": ([handle], c.c_char_p),
        "ext_host_request_is_over": ([handle], c.c_int),
        "ext_host_dismiss": ([handle], c.c_int),
        "ext_host_list": ([handle, c.POINTER(c.POINTER(Extension)), c.POINTER(size)], c.c_int),
        "ext_host_list_free": ([c.POINTER(Extension), size], None),
        "ext_host_monitor": ([handle, EVENT, c.c_void_p], c.c_int),
        "ext_host_prewarm": ([handle, c.POINTER(c.c_char_p)], c.c_int),
        "ext_host_post_hint": ([handle, c.c_char_p], c.c_int),
    }
    for name, (arguments, result) in signatures.items():
        function = getattr(lib, name)
        function.argtypes = arguments
        function.restype = result


def library() -> ctypes.CDLL:
    """The loaded library (loaded on first use). Raises HostLibraryNotFoundError when it cannot
    be loaded, naming where it was looked for."""
    global _library
    with _lock:
        if _library is None:
            path = locate()
            try:
                lib = ctypes.CDLL(path)
            except OSError as error:
                raise HostLibraryNotFoundError(
                    f"cannot load libExtensionHostC ({path}): {error}; set EXTENSION_HOST_LIB to its path, "
                    "or install it (libextensionhostc0, or scripts/install.sh) so that "
                    "`pkg-config extension-host` or the dynamic loader finds it") from error
            try:
                _declare(lib)
            except AttributeError as error:
                raise HostLibraryNotFoundError(f"{path} is not libExtensionHostC: {error}") from error
            _library = lib
        return _library
