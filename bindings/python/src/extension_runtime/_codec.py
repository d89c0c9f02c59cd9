"""The encoding of shared defaults values (docs/defaults.md, "Values"), in Python: what
Defaults writes through ext_defaults_set_encoded and reads back from ext_defaults_get_encoded.

One type byte, then little-endian: 1 bool (1 byte, 0 or 1), 2 integer (int64), 3 double
(IEEE-754 binary64), 4 string (u32 length, UTF-8), 5 bytes (u32 length, bytes), 6 array (u32
count, values), 7 dictionary (u32 count, then each: u32 key length, UTF-8 key, value; keys unique,
sorted by their UTF-8 bytes). At most MAX_DEPTH levels deep (a scalar alone is one level).
"""
import struct
from collections.abc import Mapping
from typing import List, Tuple

MAX_DEPTH = 32
INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1

BOOL, INTEGER, DOUBLE, STRING, BYTES, ARRAY, DICTIONARY = 1, 2, 3, 4, 5, 6, 7

_U32 = struct.Struct("<I")
_I64 = struct.Struct("<q")
_F64 = struct.Struct("<d")


def _utf8(text: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"{text!r} cannot be UTF-8 (it holds a lone surrogate)") from None


def encode(value: object) -> bytes:
    """The encoding of `value`: a bool, an int in the int64 range, a float, a str, bytes (or a
    bytearray or memoryview), a list or tuple of values, or a mapping with str keys of values.
    Raises TypeError for another type (a non-str dictionary key included), OverflowError for an
    int outside the int64 range, and ValueError for nesting deeper than MAX_DEPTH levels or a
    str that cannot be UTF-8 (a lone surrogate)."""
    out = bytearray()
    _encode(value, out, 1)
    return bytes(out)


def _encode(value: object, out: bytearray, depth: int) -> None:
    if depth > MAX_DEPTH:
        raise ValueError(f"a defaults value is nested deeper than {MAX_DEPTH} levels")
    if isinstance(value, bool):  # before int: bool is a subclass of int
        out += b"\x01\x01" if value else b"\x01\x00"
    elif isinstance(value, int):
        if not INT64_MIN <= value <= INT64_MAX:
            raise OverflowError(f"{value} is outside the range of a defaults integer (int64)")
        out.append(INTEGER)
        out += _I64.pack(value)
    elif isinstance(value, float):
        out.append(DOUBLE)
        out += _F64.pack(value)
    elif isinstance(value, str):
        data = _utf8(value)
        out.append(STRING)
        out += _U32.pack(len(data))
        out += data
    elif isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
        out.append(BYTES)
        out += _U32.pack(len(data))
        out += data
    elif isinstance(value, (list, tuple)):
        out.append(ARRAY)
        out += _U32.pack(len(value))
        for item in value:
            _encode(item, out, depth + 1)
    elif isinstance(value, Mapping):
        entries: List[Tuple[bytes, object]] = []
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(f"a defaults dictionary key must be a str, not {type(key).__name__}")
            entries.append((_utf8(key), item))
        entries.sort(key=lambda entry: entry[0])  # bytewise; str keys are unique, so their encodings are
        out.append(DICTIONARY)
        out += _U32.pack(len(entries))
        for key_bytes, item in entries:
            out += _U32.pack(len(key_bytes))
            out += key_bytes
            _encode(item, out, depth + 1)
    else:
        raise TypeError(
            f"a defaults value must be a bool, int, float, str, bytes, list, tuple or dict, not {type(value).__name__}")


def decode(data: bytes) -> object:
    """The value encoded in `data` (bool, int, float, str, bytes, list or dict). Raises
    ValueError when it is not exactly one well-formed value."""
    view = memoryview(data)
    value, end = _decode(view, 0, 1)
    if end != len(view):
        raise ValueError(f"{len(view) - end} bytes after a defaults value")
    return value


def _take(view: memoryview, at: int, n: int, what: str) -> int:
    if n > len(view) - at:
        raise ValueError(f"{what} runs past the end of a defaults value")
    return at + n


def _decode(view: memoryview, at: int, depth: int) -> Tuple[object, int]:
    if depth > MAX_DEPTH:
        raise ValueError(f"a defaults value is nested deeper than {MAX_DEPTH} levels")
    end = _take(view, at, 1, "the type")
    kind = view[at]
    at = end
    if kind == BOOL:
        end = _take(view, at, 1, "a bool")
        if view[at] > 1:
            raise ValueError(f"a defaults bool is {view[at]}, not 0 or 1")
        return view[at] == 1, end
    if kind == INTEGER:
        end = _take(view, at, 8, "an integer")
        return _I64.unpack_from(view, at)[0], end
    if kind == DOUBLE:
        end = _take(view, at, 8, "a double")
        return _F64.unpack_from(view, at)[0], end
    if kind in (STRING, BYTES):
        at = _take(view, at, 4, "a length")
        n = _U32.unpack_from(view, at - 4)[0]
        end = _take(view, at, n, "a string" if kind == STRING else "bytes")
        raw = view[at:end].tobytes()
        return (raw.decode("utf-8") if kind == STRING else raw), end  # UnicodeDecodeError is a ValueError
    if kind == ARRAY:
        at = _take(view, at, 4, "an array")
        count = _U32.unpack_from(view, at - 4)[0]
        if count > (len(view) - at) // 2:
            raise ValueError(f"a defaults array of {count} values runs past the end")
        items = []
        for _ in range(count):
            item, at = _decode(view, at, depth + 1)
            items.append(item)
        return items, at
    if kind == DICTIONARY:
        at = _take(view, at, 4, "a dictionary")
        count = _U32.unpack_from(view, at - 4)[0]
        if count > (len(view) - at) // 6:
            raise ValueError(f"a defaults dictionary of {count} entries runs past the end")
        result = {}
        previous = None
        for _ in range(count):
            at = _take(view, at, 4, "a dictionary key")
            n = _U32.unpack_from(view, at - 4)[0]
            end = _take(view, at, n, "a dictionary key")
            key_bytes = view[at:end].tobytes()
            if previous is not None and not previous < key_bytes:
                raise ValueError("a defaults dictionary's keys are out of order or repeated")
            previous = key_bytes
            item, at = _decode(view, end, depth + 1)
            result[key_bytes.decode("utf-8")] = item
        return result, at
    raise ValueError(f"unknown defaults value type {kind}")
