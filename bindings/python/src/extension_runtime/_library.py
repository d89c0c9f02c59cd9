"""Finding and loading libExtensionRuntimeC, with the signatures of its functions."""
import ctypes
import os
import shutil
import subprocess
import threading
from typing import Optional

REQUEST = ctypes.CFUNCTYPE(None, ctypes.c_uint64, ctypes.c_int, ctypes.c_void_p)
BLOCK = ctypes.CFUNCTYPE(None, ctypes.c_bool, ctypes.c_void_p)
CLEANUP = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
HINT = ctypes.CFUNCTYPE(None, ctypes.c_char_p, ctypes.c_void_p)
REFRESH = ctypes.CFUNCTYPE(None, ctypes.c_uint64, ctypes.c_void_p)
OPENED = ctypes.CFUNCTYPE(None, ctypes.c_bool, ctypes.c_void_p)
SUITE_CHANGED = ctypes.CFUNCTYPE(None, ctypes.c_char_p, ctypes.c_void_p)


class SecretAttributes(ctypes.Structure):
    """ext_secret_attributes: an item's description or a query (NULL strings are absent)."""
    _fields_ = [
        ("item_class", ctypes.c_int),
        ("group", ctypes.c_char_p),
        ("service", ctypes.c_char_p),
        ("account", ctypes.c_char_p),
        ("server", ctypes.c_char_p),
        ("protocol", ctypes.c_char_p),
        ("path", ctypes.c_char_p),
        ("label", ctypes.c_char_p),
        ("port", ctypes.c_int),
    ]


class SecretItem(ctypes.Structure):
    """ext_secret_item: an item ext_secret_copy returned (freed by ext_secret_free)."""
    _fields_ = [
        ("item_class", ctypes.c_int),
        ("group", ctypes.c_char_p),
        ("service", ctypes.c_char_p),
        ("account", ctypes.c_char_p),
        ("server", ctypes.c_char_p),
        ("protocol", ctypes.c_char_p),
        ("path", ctypes.c_char_p),
        ("label", ctypes.c_char_p),
        ("port", ctypes.c_int),
        ("data", ctypes.c_void_p),
        ("length", ctypes.c_size_t),
    ]


class TransferEvent(ctypes.Structure):
    """ext_transfer_event: one event of a background session (valid only during the callback)."""
    _fields_ = [
        ("sequence", ctypes.c_uint64),
        ("task", ctypes.c_uint64),
        ("kind", ctypes.c_int),
        ("bytes", ctypes.c_uint64),
        ("total", ctypes.c_int64),
        ("status", ctypes.c_int),
        ("path", ctypes.c_char_p),
        ("domain", ctypes.c_char_p),
        ("code", ctypes.c_int),
        ("text", ctypes.c_char_p),
    ]


TRANSFER = ctypes.CFUNCTYPE(None, ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(TransferEvent), ctypes.c_void_p)


_lock = threading.Lock()
_library: Optional[ctypes.CDLL] = None


class LibraryNotFoundError(ImportError):
    """libExtensionRuntimeC was not found: neither $EXTENSION_RUNTIME_LIB nor pkg-config
    (`extension-runtime`) nor the dynamic loader's path names it."""


def find(variable: str, package: str, soname: str, error: type = LibraryNotFoundError) -> str:
    """The library to load: the file $`variable` names when set (`error` when it does not
    exist), else the one in the libdir of the installed pkg-config file `package`, else `soname`
    for the dynamic loader's own search. Shared by libExtensionRuntimeC and libExtensionHostC."""
    explicit = os.environ.get(variable)
    if explicit:
        if not os.path.exists(explicit):
            raise error(f"{variable} names {explicit}, which does not exist")
        return explicit
    if shutil.which("pkg-config") is not None:
        try:
            out = subprocess.run(["pkg-config", "--variable=libdir", package], capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.SubprocessError):
            out = None
        libdir = out.stdout.strip() if out is not None and out.returncode == 0 else ""
        for name in (soname, soname.rsplit(".", 1)[0]) if libdir else ():
            path = os.path.join(libdir, name)
            if os.path.exists(path):
                return path
    return soname


def locate() -> str:
    """The library to load: $EXTENSION_RUNTIME_LIB when set, else the one the installed
    pkg-config file `extension-runtime` names, else `libExtensionRuntimeC.so.0` for the dynamic
    loader's own search. Raises LibraryNotFoundError for an $EXTENSION_RUNTIME_LIB that does
    not exist."""
    return find("EXTENSION_RUNTIME_LIB", "extension-runtime", "libExtensionRuntimeC.so.0")


def _declare(lib: ctypes.CDLL) -> None:
    c = ctypes
    signatures = {
        "ext_runtime_start": ([REQUEST, c.c_void_p], c.c_int),
        "ext_runtime_is_supervised": ([], c.c_int),
        "ext_perform_expiring_activity_with_cleanup": ([c.c_char_p, BLOCK, CLEANUP, c.c_void_p], c.c_int),
        "ext_observe": ([c.c_char_p, HINT, c.c_void_p], c.c_int),
        "ext_runtime_on_refresh": ([REFRESH, c.c_void_p], c.c_int),
        "ext_refresh_complete": ([c.c_uint64, c.c_int], c.c_int),
        "ext_request_complete": ([c.c_uint64, c.c_void_p, c.c_size_t], c.c_int),
        "ext_request_cancel": ([c.c_uint64, c.c_char_p], c.c_int),
        "ext_shared_container_path": ([c.c_char_p], c.c_char_p),
        "ext_container_path": ([], c.c_char_p),
    }
    for name, (arguments, result) in signatures.items():
        function = getattr(lib, name)
        function.argtypes = arguments
        function.restype = result
    # Open URL, shared defaults, secrets and background transfers: absent from a library older
    # than this package (the calls then raise, naming the missing function; see require()).
    handle, size = c.c_void_p, c.c_size_t
    newer = {
        "ext_open_url": ([c.c_char_p, OPENED, c.c_void_p], c.c_int),
        "ext_defaults_open": ([c.c_char_p, c.POINTER(handle)], c.c_int),
        "ext_defaults_close": ([handle], None),
        "ext_defaults_type": ([handle, c.c_char_p], c.c_int),
        "ext_defaults_get_encoded": ([handle, c.c_char_p, c.POINTER(c.c_void_p), c.POINTER(size)], c.c_int),
        "ext_defaults_keys": ([handle, c.POINTER(c.POINTER(c.c_char_p)), c.POINTER(size)], c.c_int),
        "ext_defaults_free_keys": ([c.POINTER(c.c_char_p), size], None),
        "ext_defaults_set_encoded": ([handle, c.c_char_p, c.c_void_p, size], c.c_int),
        "ext_defaults_remove": ([handle, c.c_char_p], c.c_int),
        "ext_defaults_on_change": ([handle, SUITE_CHANGED, c.c_void_p], c.c_int),
        "ext_secret_add": ([c.POINTER(SecretAttributes), c.c_void_p, size], c.c_int),
        "ext_secret_copy": ([c.POINTER(SecretAttributes), c.c_int, c.POINTER(c.POINTER(SecretItem)), c.POINTER(size)], c.c_int),
        "ext_secret_update": ([c.POINTER(SecretAttributes), c.c_char_p, c.c_void_p, size], c.c_int),
        "ext_secret_delete": ([c.POINTER(SecretAttributes)], c.c_int),
        "ext_secret_free": ([c.POINTER(SecretItem), size], None),
        "ext_transfer_set_handler": ([c.c_char_p, c.c_char_p, TRANSFER, c.c_void_p], c.c_int),
        "ext_transfer_create": ([c.c_char_p, c.c_char_p, c.c_int, c.c_char_p, c.c_char_p, c.c_int, c.POINTER(c.c_uint64)], c.c_int),
        "ext_transfer_cancel": ([c.c_uint64], c.c_int),
        "ext_transfer_claim": ([c.c_char_p, c.c_char_p], c.c_int),
    }
    for name, (arguments, result) in newer.items():
        function = getattr(lib, name, None)
        if function is not None:
            function.argtypes = arguments
            function.restype = result


def require(lib: ctypes.CDLL, name: str) -> None:
    """Raises NotImplementedError when the loaded library lacks the function `name` (a library
    older than this package)."""
    if getattr(lib, name, None) is None:
        raise NotImplementedError(
            f"the loaded libExtensionRuntimeC has no {name}: it is older than this package; install a newer one")


_libc_free = None


def free(pointer: int) -> None:
    """free(3) of a block the library malloc'ed (the process's own malloc: libc's)."""
    global _libc_free
    if _libc_free is None:
        function = ctypes.CDLL(None).free
        function.argtypes = [ctypes.c_void_p]
        function.restype = None
        _libc_free = function
    _libc_free(pointer)


def library() -> ctypes.CDLL:
    """The loaded library (loaded on first use, when $EXTENSIOND_CHANNEL_FD leaves the
    environment, os.environ included). Raises LibraryNotFoundError when it cannot be loaded,
    naming where it was looked for."""
    global _library
    with _lock:
        if _library is None:
            path = locate()
            try:
                lib = ctypes.CDLL(path)
            except OSError as error:
                raise LibraryNotFoundError(
                    f"cannot load libExtensionRuntimeC ({path}): {error}; set EXTENSION_RUNTIME_LIB to "
                    "its path, or install extensiond so that `pkg-config extension-runtime` finds it") from error
            _declare(lib)
            # The runtime's first call reads $EXTENSIOND_CHANNEL_FD and removes it from the C
            # environment; os.environ, a copy made at startup, loses it too, so that children
            # started with env=os.environ do not inherit it.
            lib.ext_runtime_is_supervised()
            os.environ.pop("EXTENSIOND_CHANNEL_FD", None)
            _library = lib
        return _library
