"""Order-preserving key codecs: byte order of the encoding equals the order of the values.

Scalars:
    encode_int / decode_int        signed 64-bit, 8 bytes big-endian with the sign bit flipped,
                                   so negative numbers sort first
    encode_timestamp               microseconds since the epoch (may be negative), as encode_int
    encode_float / decode_float    IEEE-754 double, bits flipped so -inf < ... < -0.0 < 0.0 < ... < inf
    encode_uint32 / decode_uint32  unsigned 32-bit, 4 bytes big-endian (counters such as chunk numbers)

Tuples (``pack`` / ``unpack``): each element is a type tag then a self-delimiting body, so a tuple
sorts like Python sorts tuples of the same types, and a prefix tuple sorts before its extensions
(``pack("a") < pack("a", 1)``). ``None`` sorts before every other value of a position. Strings and
bytes are escaped (``00`` becomes ``00 ff``) and end in ``00 00``, so ``"a" < "a\\x00" < "ab"``.
Values at one position should have one type; across types the order is the tag order
(None, bool, int, float, bytes, str). Since each element delimits itself, ``pack(*a) + pack(*b) ==
pack(*a, *b)``: :func:`unpack_head` reads the first values of a tuple and hands back the rest as bytes.
The same bytes column-wise, in Arrow and numpy: :mod:`streamjoin.statestore.packed_columns`.
"""

from __future__ import annotations

import struct
from typing import Union

__all__ = [
    "encode_int",
    "decode_int",
    "encode_timestamp",
    "decode_timestamp",
    "encode_float",
    "decode_float",
    "encode_uint32",
    "decode_uint32",
    "pack",
    "unpack",
    "unpack_head",
    "KeyValueType",
]

KeyValueType = Union[None, bool, int, float, bytes, str]

_SIGN = 1 << 63
_INT = struct.Struct(">Q")
_UINT32 = struct.Struct(">I")
_MIN_INT, _MAX_INT = -(1 << 63), (1 << 63) - 1

_NULL, _FALSE, _TRUE, _INT_TAG, _FLOAT_TAG, _BYTES_TAG, _STR_TAG = (
    b"\x05", b"\x08", b"\x09", b"\x10", b"\x20", b"\x30", b"\x40",
)
_TERMINATOR = b"\x00\x00"
_NULL_BYTE, _FALSE_BYTE, _TRUE_BYTE, _INT_BYTE, _FLOAT_BYTE, _BYTES_BYTE, _STR_BYTE = (
    tag[0] for tag in (_NULL, _FALSE, _TRUE, _INT_TAG, _FLOAT_TAG, _BYTES_TAG, _STR_TAG)
)


def encode_int(value: int) -> bytes:
    """8 bytes whose unsigned order is the signed order of ``value`` (a 64-bit integer)."""
    if not _MIN_INT <= value <= _MAX_INT:
        raise OverflowError(f"{value} does not fit in a signed 64-bit key")
    return _INT.pack(value + _SIGN)


def decode_int(data: bytes) -> int:
    """Inverse of :func:`encode_int` (exactly 8 bytes)."""
    return _INT.unpack(data)[0] - _SIGN


encode_timestamp = encode_int
decode_timestamp = decode_int


def encode_float(value: float) -> bytes:
    """8 bytes whose unsigned order is the numeric order of ``value``."""
    (bits,) = _INT.unpack(struct.pack(">d", value))
    bits = bits ^ 0xFFFFFFFFFFFFFFFF if bits & _SIGN else bits | _SIGN
    return _INT.pack(bits)


def decode_float(data: bytes) -> float:
    """Inverse of :func:`encode_float`."""
    (bits,) = _INT.unpack(data)
    bits = bits ^ _SIGN if bits & _SIGN else bits ^ 0xFFFFFFFFFFFFFFFF
    return struct.unpack(">d", _INT.pack(bits))[0]


def encode_uint32(value: int) -> bytes:
    """4 bytes big-endian whose order is the order of ``value`` (0 <= value < 2**32)."""
    if not 0 <= value < 1 << 32:
        raise OverflowError(f"{value} does not fit in an unsigned 32-bit key")
    return _UINT32.pack(value)


def decode_uint32(data: bytes) -> int:
    """Inverse of :func:`encode_uint32` (exactly 4 bytes)."""
    return _UINT32.unpack(data)[0]


def _escape(data: bytes) -> bytes:
    return data.replace(b"\x00", b"\x00\xff") + _TERMINATOR


def pack(*values: KeyValueType) -> bytes:
    """Encode a tuple of values so that byte order equals tuple order (see module docstring)."""
    parts: list[bytes] = []
    for value in values:
        if value is None:
            parts.append(_NULL)
        elif value is True:
            parts.append(_TRUE)
        elif value is False:
            parts.append(_FALSE)
        elif isinstance(value, int):
            parts.append(_INT_TAG + encode_int(value))
        elif isinstance(value, float):
            parts.append(_FLOAT_TAG + encode_float(value))
        elif isinstance(value, (bytes, bytearray, memoryview)):
            parts.append(_BYTES_TAG + _escape(bytes(value)))
        elif isinstance(value, str):
            parts.append(_STR_TAG + _escape(value.encode("utf-8")))
        else:
            raise TypeError(f"cannot encode {type(value).__name__} in a key: {value!r}")
    return b"".join(parts)


def _unescape(data: bytes, pos: int) -> tuple[bytes, int]:
    out = bytearray()
    while True:
        nul = data.index(b"\x00", pos)
        out += data[pos:nul]
        marker = data[nul + 1]
        if marker == 0x00:
            return bytes(out), nul + 2
        if marker != 0xFF:
            raise ValueError(f"bad escape byte {marker:#x} at {nul + 1} in key {data!r}")
        out += b"\x00"
        pos = nul + 2


def unpack(data: bytes) -> tuple[KeyValueType, ...]:
    """Decode a key made by :func:`pack`. Raises ValueError on bytes that ``pack`` cannot make."""
    return tuple(_unpack_from(data, None)[0])


def unpack_head(data: bytes, count: int) -> tuple[tuple[KeyValueType, ...], bytes]:
    """The first ``count`` values of ``data`` (made by :func:`pack`), and the bytes after them.

    The rest is left encoded: for ``data == pack(*head, *tail)`` the result is ``(head,
    pack(*tail))``, so a caller can compare or store the tail as bytes without decoding it. Raises
    ValueError when ``data`` holds fewer than ``count`` values or bytes ``pack`` cannot make.
    """
    values, pos = _unpack_from(data, count)
    if len(values) < count:
        raise ValueError(f"key {data!r} holds {len(values)} values, fewer than the {count} asked for")
    return tuple(values), data[pos:]


def _unpack_from(data: bytes, count: int | None) -> tuple[list[KeyValueType], int]:
    """Up to ``count`` values (None: all) from the start of ``data``, and where they end."""
    values: list[KeyValueType] = []
    pos, size = 0, len(data)
    left = -1 if count is None else count  # values still to read; never 0 when unbounded
    try:
        while pos < size and left:
            left -= 1
            tag = data[pos]
            pos += 1
            if tag == _INT_BYTE:
                values.append(_INT.unpack_from(data, pos)[0] - _SIGN)
                pos += 8
            elif tag == _NULL_BYTE:
                values.append(None)
            elif tag == _TRUE_BYTE or tag == _FALSE_BYTE:
                values.append(tag == _TRUE_BYTE)
            elif tag == _FLOAT_BYTE:
                values.append(decode_float(data[pos : pos + 8]))
                pos += 8
            elif tag == _BYTES_BYTE or tag == _STR_BYTE:
                body, pos = _unescape(data, pos)
                values.append(body if tag == _BYTES_BYTE else body.decode("utf-8"))
            else:
                raise ValueError(f"unknown type tag {bytes([tag])!r} at {pos - 1}")
    except (IndexError, struct.error) as exc:
        raise ValueError(f"truncated key {data!r}") from exc
    return values, pos

