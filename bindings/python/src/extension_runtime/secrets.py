"""extension_runtime.secrets: the app-group keychain extensiond keeps (ext_secret_* of
include/extension_runtime.h), like Apple's keychain items shared through an access group::

    from extension_runtime import secrets

    secrets.add(b"hunter2", service="mail", account="ann", label="Ann's mail")
    item = secrets.copy(service="mail", account="ann")       # the first match, with its data
    password = item.data
    for found in secrets.copy_all(kind=secrets.INTERNET):      # every match, attributes only
        print(found.server, found.account)
    secrets.update(service="mail", account="ann", new_data=b"correct horse")
    secrets.delete(service="mail", account="ann")

An item is a generic password (`kind="generic"`: service, account) or an internet password
(`kind="internet"`: server, account, protocol, port, path), both with a label, in an access
group (one of the app groups the extension may use), with 1 to MAX_DATA bytes of data. Two items
are the same item when their kind, group and kind's attributes are equal (an absent attribute
equal to an empty one; a port to 0).

Queries (copy, copy_all, update, delete) match the items whose every attribute given (not None)
is equal, of the kind given (None: either), in `group` or, when it is None or empty, in every
group the extension may use; an item of another group never matches (its existence is never
revealed).

Every call is a round trip to extensiond that blocks the calling thread until it answers (a
runtime callback may make it). The library zeroes its own copies of the data (the message it
sends, the datagram it receives, the item it returns) before freeing them; the bytes objects of
Python (the data given, Item.data) cannot be cleared.

Errors: TypeError for an argument of the wrong type (data that is not bytes-like, a str
included); ValueError for a malformed one, checked before anything is sent (an unknown kind; a
string holding NUL or a lone surrogate, or over its limit in bytes of UTF-8: MAX_NAME for group,
service, account, server, label, MAX_PROTOCOL, MAX_PATH; a port outside 0...65535; empty data or
data over MAX_DATA bytes; an update that changes nothing), and when extensiond refuses the
request as malformed; DuplicateItemError (a FileExistsError) when an add's item exists already;
ItemNotFoundError (a LookupError) when nothing matches; NotPermittedError (a PermissionError)
for an add naming a group the extension may not use, or an extension with no group;
ExtensionRuntimeError with errno ENOSPC over one of extensiond's limits (too many items), EIO
when extensiond failed; NotSupervisedError without extensiond. All but TypeError and ValueError
are ExtensionRuntimeError (an OSError).
"""
import ctypes
import errno
import os
from dataclasses import dataclass, field
from typing import Any, List, Optional, Tuple, Union

from . import ExtensionRuntimeError, NotPermittedError, NotSupervisedError, _library

__all__ = [
    "GENERIC", "INTERNET", "MAX_DATA", "MAX_NAME", "MAX_PATH", "MAX_PROTOCOL", "DuplicateItemError",
    "ExtensionRuntimeError", "Item", "ItemNotFoundError", "NotPermittedError", "NotSupervisedError",
    "add", "copy", "copy_all", "delete", "update",
]

GENERIC: str = "generic"
"""The kind of a generic password (EXT_SECRET_GENERIC_PASSWORD): service, account, label."""

INTERNET: str = "internet"
"""The kind of an internet password (EXT_SECRET_INTERNET_PASSWORD): server, account, protocol,
port, path, label."""

MAX_DATA: int = 60000
"""The largest data of an item, in bytes (EXT_SECRET_MAX_DATA)."""

MAX_NAME: int = 255
"""The longest group, service, account, server and label, in bytes of UTF-8 (EXT_SECRET_MAX_NAME)."""

MAX_PROTOCOL: int = 32
"""The longest protocol, in bytes of UTF-8 (EXT_SECRET_MAX_PROTOCOL)."""

MAX_PATH: int = 1024
"""The longest path, in bytes of UTF-8 (EXT_SECRET_MAX_PATH)."""

_CLASSES = {GENERIC: 1, INTERNET: 2}
_KINDS = {1: GENERIC, 2: INTERNET}

BytesLike = Union[bytes, bytearray, memoryview]


class DuplicateItemError(ExtensionRuntimeError, FileExistsError):
    """An item with the same identity (kind, group, and the kind's attributes) exists already
    (errSecDuplicateItem; errno EEXIST). Nothing was changed."""


class ItemNotFoundError(ExtensionRuntimeError, LookupError):
    """No item matches the query, in the groups the extension may use (errSecItemNotFound;
    errno ENOENT)."""


@dataclass(frozen=True)
class Item:
    """A secret item as copy() and copy_all() return it. The attributes of its kind are present
    (possibly empty), the others None; `data` is its data when asked for (copy() with
    return_data), else None. repr() never shows the data."""

    kind: str
    """GENERIC or INTERNET."""
    group: str
    """The access group it is in."""
    service: Optional[str] = None
    account: Optional[str] = None
    server: Optional[str] = None
    protocol: Optional[str] = None
    port: Optional[int] = None
    """The port, None when absent (or 0)."""
    path: Optional[str] = None
    label: Optional[str] = None
    data: Optional[bytes] = field(default=None, repr=False)


def _text(value: Optional[str], name: str, limit: int) -> Optional[bytes]:
    """`value` as UTF-8, or None when it is None. Raises TypeError for a non-str, ValueError for
    one holding NUL or a lone surrogate, or over `limit` bytes."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise TypeError(f"secrets: {name} must be a str, not {type(value).__name__}")
    if "\0" in value:
        raise ValueError(f"secrets: {name} {value!r} holds NUL")
    try:
        encoded = value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"secrets: {name} {value!r} cannot be UTF-8 (it holds a lone surrogate)") from None
    if len(encoded) > limit:
        raise ValueError(f"secrets: {name} is {len(encoded)} bytes of UTF-8, over the limit of {limit}")
    return encoded


def _attributes(kind: Optional[str], group: Optional[str], service: Optional[str], account: Optional[str],
                server: Optional[str], protocol: Optional[str], port: Optional[int], path: Optional[str],
                label: Optional[str], add: bool) -> "_library.SecretAttributes":
    """The C attributes (their bytes are kept alive by the structure)."""
    if kind is None and not add:
        item_class = 0
    elif isinstance(kind, str) and kind in _CLASSES:
        item_class = _CLASSES[kind]
    else:
        raise ValueError(f"secrets: kind must be {GENERIC!r} or {INTERNET!r}{'' if add else ' or None'}, not {kind!r}")
    if port is None:
        port = 0
    elif isinstance(port, bool) or not isinstance(port, int):
        raise TypeError(f"secrets: port must be an int, not {type(port).__name__}")
    elif not 0 <= port <= 65535:
        raise ValueError(f"secrets: port {port} is outside 0...65535")
    return _library.SecretAttributes(
        item_class, _text(group, "group", MAX_NAME), _text(service, "service", MAX_NAME),
        _text(account, "account", MAX_NAME), _text(server, "server", MAX_NAME),
        _text(protocol, "protocol", MAX_PROTOCOL), _text(path, "path", MAX_PATH), _text(label, "label", MAX_NAME), port)


def _data(data: BytesLike, name: str) -> Tuple[Any, int]:
    """`data` for C, without a copy when it is bytes or a writable buffer (a read-only buffer of
    another type is copied), and its length. Raises TypeError for what is not bytes-like (a str
    included), ValueError for empty data or data over MAX_DATA bytes."""
    if isinstance(data, str):
        raise TypeError(f"secrets: {name} must be bytes-like, not str (encode it first)")
    try:
        view = memoryview(data)
    except TypeError:
        raise TypeError(f"secrets: {name} must be bytes-like, not {type(data).__name__}") from None
    length = view.nbytes
    if length == 0:
        raise ValueError(f"secrets: {name} is empty")
    if length > MAX_DATA:
        raise ValueError(f"secrets: {name} is {length} bytes, over the limit of {MAX_DATA}")
    if isinstance(data, bytes):
        return data, length
    if not view.readonly and view.c_contiguous:
        return (ctypes.c_char * length).from_buffer(view.cast("B")), length
    return view.tobytes(), length


def _error(result: int, action: str) -> Exception:
    """The exception for the negative errno `result` of a secrets call."""
    code = -result
    if code == errno.ENOTCONN:
        return NotSupervisedError(code, f"{action}: not launched by extensiond, or extensiond is gone")
    if code == errno.EEXIST:
        return DuplicateItemError(code, f"{action}: an item with the same identity exists already")
    if code == errno.ENOENT:
        return ItemNotFoundError(code, f"{action}: no item matches, in the groups this extension may use")
    if code == errno.EPERM:
        return NotPermittedError(code, f"{action}: not permitted (a group this extension may not use, or no group)")
    if code in (errno.EINVAL, errno.EMSGSIZE):
        return ValueError(f"{action}: refused as malformed or too large")
    if code == errno.ENOSPC:
        return ExtensionRuntimeError(code, f"{action}: over a limit of extensiond (too many items)")
    return ExtensionRuntimeError(code, f"{action}: {errno.errorcode.get(code, code)} ({os.strerror(code)})")


def _function(name: str) -> Any:
    lib = _library.library()
    _library.require(lib, name)
    return getattr(lib, name)


def add(data: BytesLike, *, kind: str = GENERIC, service: Optional[str] = None, account: Optional[str] = None,
        server: Optional[str] = None, protocol: Optional[str] = None, port: Optional[int] = None,
        path: Optional[str] = None, label: Optional[str] = None, group: Optional[str] = None) -> None:
    """Adds an item of `kind` (GENERIC or INTERNET) with `data` (1 to MAX_DATA bytes) and the
    attributes given (SecItemAdd), in `group` (None or empty: the extension's first group).
    Returns once it is stored. Raises DuplicateItemError when an item with the same identity
    exists, NotPermittedError for a group the extension may not use, ValueError (from
    extensiond) for attributes of the other kind (a generic password with a server, protocol,
    port or path; an internet password with a service), or as the module says."""
    attributes = _attributes(kind, group, service, account, server, protocol, port, path, label, add=True)
    buffer, length = _data(data, "data")
    result = _function("ext_secret_add")(ctypes.byref(attributes), buffer, length)
    if result != 0:
        raise _error(result, "secrets.add")


def _decoded(value: Optional[bytes]) -> Optional[str]:
    return value.decode("utf-8") if value is not None else None


def _copy(attributes: "_library.SecretAttributes", return_data: bool, action: str) -> List[Item]:
    items = ctypes.POINTER(_library.SecretItem)()
    count = ctypes.c_size_t()
    copy_function = _function("ext_secret_copy")
    free = _function("ext_secret_free")
    result = copy_function(ctypes.byref(attributes), 1 if return_data else 0, ctypes.byref(items), ctypes.byref(count))
    if result != 0:
        raise _error(result, action)
    try:
        found = []
        for i in range(count.value):
            c = items[i]
            data = ctypes.string_at(c.data, c.length) if return_data and c.data else None
            found.append(Item(kind=_KINDS.get(c.item_class, str(c.item_class)), group=_decoded(c.group) or "",
                              service=_decoded(c.service), account=_decoded(c.account), server=_decoded(c.server),
                              protocol=_decoded(c.protocol), port=c.port or None, path=_decoded(c.path),
                              label=_decoded(c.label), data=data))
        return found
    finally:
        free(items, count.value)


def copy(*, kind: Optional[str] = None, service: Optional[str] = None, account: Optional[str] = None,
         server: Optional[str] = None, protocol: Optional[str] = None, port: Optional[int] = None,
         path: Optional[str] = None, label: Optional[str] = None, group: Optional[str] = None,
         return_data: bool = True) -> Item:
    """The first item matching the query (SecItemCopyMatching), with its data (Item.data) unless
    `return_data` is False. Raises ItemNotFoundError when none matches, or as the module says."""
    attributes = _attributes(kind, group, service, account, server, protocol, port, path, label, add=False)
    return _copy(attributes, bool(return_data), "secrets.copy")[0]


def copy_all(*, kind: Optional[str] = None, service: Optional[str] = None, account: Optional[str] = None,
             server: Optional[str] = None, protocol: Optional[str] = None, port: Optional[int] = None,
             path: Optional[str] = None, label: Optional[str] = None, group: Optional[str] = None) -> List[Item]:
    """Every item matching the query, attributes only (Item.data is None; at most 64 items:
    extensiond sends no more in one answer), an empty list when none matches. Raises as the
    module says."""
    attributes = _attributes(kind, group, service, account, server, protocol, port, path, label, add=False)
    try:
        return _copy(attributes, False, "secrets.copy_all")
    except ItemNotFoundError:
        return []


def update(*, kind: Optional[str] = None, service: Optional[str] = None, account: Optional[str] = None,
           server: Optional[str] = None, protocol: Optional[str] = None, port: Optional[int] = None,
           path: Optional[str] = None, label: Optional[str] = None, group: Optional[str] = None,
           new_label: Optional[str] = None, new_data: Optional[BytesLike] = None) -> None:
    """Changes every item matching the query (SecItemUpdate; `label` is part of the query): its
    label to `new_label` and/or its data to `new_data` (1 to MAX_DATA bytes), whichever is not
    None. Raises ValueError when both are None, ItemNotFoundError when none matches, or as the
    module says."""
    attributes = _attributes(kind, group, service, account, server, protocol, port, path, label, add=False)
    if new_label is None and new_data is None:
        raise ValueError("secrets.update: give new_label, new_data or both")
    encoded_label = _text(new_label, "new_label", MAX_NAME)
    buffer, length = _data(new_data, "new_data") if new_data is not None else (None, 0)
    result = _function("ext_secret_update")(ctypes.byref(attributes), encoded_label, buffer, length)
    if result != 0:
        raise _error(result, "secrets.update")


def delete(*, kind: Optional[str] = None, service: Optional[str] = None, account: Optional[str] = None,
           server: Optional[str] = None, protocol: Optional[str] = None, port: Optional[int] = None,
           path: Optional[str] = None, label: Optional[str] = None, group: Optional[str] = None) -> None:
    """Deletes every item matching the query (SecItemDelete). Raises ItemNotFoundError when none
    matches, or as the module says."""
    attributes = _attributes(kind, group, service, account, server, protocol, port, path, label, add=False)
    result = _function("ext_secret_delete")(ctypes.byref(attributes))
    if result != 0:
        raise _error(result, "secrets.delete")
