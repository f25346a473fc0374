"""``pack`` and ``unpack`` (:mod:`streamjoin.statestore.codecs`) column-wise, in Arrow and numpy.

The one owner of the column-wise form of ``pack``'s bytes: :func:`pack_columns` gives, for columns
of physical types (None, bool, integers, floats, strings, binaries), exactly the bytes ``pack``
gives row by row; :func:`unpack_columns` decodes them back into columns (None when some bytes are
not rows of the types asked for: the caller decodes those row-wise, which raises the error).
:data:`TAG`, :data:`INT_WIDTH`, :func:`padded_bytes` and :func:`decode_ints` are for readers of
such bytes that decode only a head of each value (the table join's key stage). :func:`pack_nested`
gives ``pack`` of a nested value's *tokens* (lists, structs and maps: :mod:`streamjoin.kit.nested`
says what they are) and :func:`unpack_nested` reads them back. The joins use these; nothing above this layer learns
``pack``'s bytes on its own.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from streamjoin.statestore.binary_concat import concat_binary, matrix_rows, value_offsets
from streamjoin.statestore.codecs import pack

__all__ = ["pack_array", "pack_nested", "pack_columns", "unpack_columns", "unpack_nested", "TAG", "INT_WIDTH",
           "padded_bytes", "decode_ints"]


# -- the bytes, column-wise -------------------------------------------------------------------
# The one place column-wise code learns the bytes of ``pack``: its tags, the width of an integer
# and how its eight bytes hold a signed value.

_NULL, _TRUE, _FALSE = pack(None), pack(True), pack(False)
_INT_TAG, _FLOAT_TAG, _BYTES_TAG, _STR_TAG = pack(0)[:1], pack(0.0)[:1], pack(b"")[:1], pack("")[:1]
_TERMINATOR = pack(b"")[1:]
_SIGN = np.uint64(1 << 63)
#: The bytes searched at a time for the end of a string or bytes value (most are shorter).
_WINDOW = 16
#: The first byte of ``pack`` of each kind of value.
TAG = {"null": _NULL[0], "true": _TRUE[0], "false": _FALSE[0], "int": _INT_TAG[0], "float": _FLOAT_TAG[0],
       "bytes": _BYTES_TAG[0], "str": _STR_TAG[0]}
#: The length of ``pack`` of one integer: a tag and eight bytes.
INT_WIDTH = len(pack(0))


def padded_bytes(data: Sequence[bytes] | pa.Array, pad: int) -> tuple[np.ndarray, np.ndarray]:
    """The concatenation of ``data`` (bytes, or a binary array without nulls) as a uint8 array
    followed by ``pad`` zeros (so a gather past a value's end stays in range), and the
    ``len(data) + 1`` offsets of the values in it."""
    n = len(data)
    packed = data.cast(pa.binary()) if isinstance(data, pa.Array) else pa.array(data, pa.binary())
    offsets = np.frombuffer(packed.buffers()[1], np.int32, n + 1, packed.offset * 4).astype(np.int64)
    size = int(offsets[-1])
    buf = np.zeros(size + pad, np.uint8)
    if size:
        buf[:size] = np.frombuffer(packed.buffers()[2], np.uint8, size)
    return buf, offsets


def decode_ints(buf: np.ndarray, at: np.ndarray) -> np.ndarray:
    """The integers whose eight ``pack`` bytes (after the tag) start at ``at`` in ``buf``."""
    return (_words(buf)[at].astype(np.uint64) ^ _SIGN).view(np.int64)


def _words(buf: np.ndarray) -> np.ndarray:
    """``buf`` (contiguous uint8) seen as the big-endian eight-byte word starting at each of its
    positions but the last seven (a view: indexing it gathers the words without an index per byte)."""
    return np.ndarray((max(len(buf) - 7, 0),), np.dtype(">u8"), buf, 0, (1,))


def _windows(buf: np.ndarray, width: int) -> np.ndarray:
    """``buf`` seen as the ``width`` bytes starting at each of its positions (a view)."""
    return np.lib.stride_tricks.as_strided(buf, (max(len(buf) - width + 1, 0), width), (1, 1), writeable=False)


# -- column-wise pack --------------------------------------------------------------------------


def pack_nested(array: pa.Array) -> pa.Array:
    """Per value of ``array`` (a list, large list, fixed-size list, struct or map type whose scalars
    are physical types), ``pack`` of its tokens, column-wise; a null value as null. A value's
    tokens: a null ``None``; a list ``True`` and the element's tokens for each element, then
    ``False``; a map the same with each entry's key's and item's tokens; a struct ``True``, then each
    field's tokens; a scalar itself. The scalars are packed as arrays (:func:`pack_array`), and each
    value's bytes put together with Arrow's binary joins."""
    return pc.if_else(array.is_valid(), _nested_bytes(array), pa.scalar(None, pa.binary()))


def _nested_bytes(array: pa.Array) -> pa.Array:
    """The bytes of each value of ``array`` (:func:`pack_nested`), a null as ``pack(None)``."""
    kind, n = array.type, len(array)
    if not pa.types.is_nested(kind):
        return pack_array([array], n)
    if pa.types.is_struct(kind):
        fields = array.flatten()   # (the struct's own offset applied)
        body = concat_binary(_TRUE, *map(_nested_bytes, fields)) if fields else pa.array([_TRUE] * n, pa.binary())
    else:
        if pa.types.is_fixed_size_list(kind):
            offsets = pa.array((np.arange(n + 1, dtype=np.int64) + array.offset) * kind.list_size, pa.int32())
        else:
            offsets = array.offsets   # (into the children as stored, the list's offset applied)
        child = array.values
        if pa.types.is_map(kind):
            key, item = child.flatten()
            elements = concat_binary(_TRUE, _nested_bytes(key), _nested_bytes(item))
        else:
            elements = concat_binary(_TRUE, _nested_bytes(child))
        lists = (pa.LargeListArray if pa.types.is_large_list(kind) else pa.ListArray).from_arrays(offsets, elements)
        body = concat_binary(pc.binary_join(lists, pa.scalar(b"", pa.binary())), _FALSE)
    return pc.if_else(array.is_valid(), body, pa.scalar(_NULL, pa.binary()))


def pack_columns(columns: Sequence[pa.Array | pa.ChunkedArray], length: int) -> list[bytes]:
    """``[pack(*row) for row in zip(*(c.to_pylist() for c in columns))]``, column-wise in Arrow and
    numpy: the same bytes, for columns of physical types (None, bool, integer, float, string, binary)."""
    return pack_array(columns, length).to_pylist()


def pack_array(columns: Sequence[pa.Array | pa.ChunkedArray], length: int) -> pa.Array:
    """``pack_columns`` as a ``binary`` Arrow array (no Python object per row).

    One concatenation of as few pieces as the columns allow: the ``pack`` bytes of fixed-width
    columns without nulls, and the constant bytes around them (a string's tag and terminator),
    as one matrix per run (a column of nulls only is a constant); a string or binary column
    without nulls as its values (escaped only if one holds a zero byte) between constants; any
    other column as :func:`_pack_column` encodes it."""
    if not columns:
        return pa.array([b""] * length, pa.binary())
    pieces: list[list[pa.Array | bytes] | pa.Array] = []   # a run of fixed-width parts, or values

    def add(piece: pa.Array | bytes, fixed: bool) -> None:
        if not fixed:
            pieces.append(piece)
        elif pieces and isinstance(pieces[-1], list):
            pieces[-1].append(piece)
        else:
            pieces.append([piece])

    for c in columns:
        column = c.combine_chunks() if isinstance(c, pa.ChunkedArray) else c
        if _fixed_width(column):
            add(column, True)
            continue
        if length and column.null_count == length:   # every value null: one constant byte (a change's absent sequence)
            add(_NULL, True)
            continue
        body = _string_body(column)
        if body is None:
            add(_pack_column(column), False)
        else:
            add(_STR_TAG if pa.types.is_string(column.type) else _BYTES_TAG, True)
            add(body, False)
            add(_TERMINATOR, True)
    arrays = [_fixed_run(p, length) if isinstance(p, list) else p for p in pieces]
    return arrays[0] if len(arrays) == 1 else pc.binary_join_element_wise(*arrays, b"")


def _fixed_width(column: pa.Array) -> bool:
    """Whether ``column``'s ``pack`` bytes have one width: a boolean, integer or floating-point
    column without nulls."""
    kind = column.type
    return not column.null_count and (pa.types.is_boolean(kind) or pa.types.is_integer(kind)
                                      or pa.types.is_floating(kind))


def _fixed_run(parts: list[pa.Array | bytes], n: int) -> pa.Array:
    """The ``pack`` bytes of a run of fixed-width columns (:func:`_fixed_width`) and constant
    bytes, one binary value per row, filled into one (n, width) matrix."""
    widths = [len(p) if isinstance(p, bytes) else 1 if pa.types.is_boolean(p.type) else INT_WIDTH for p in parts]
    matrix = np.empty((n, sum(widths)), np.uint8)
    at = 0
    for part, width in zip(parts, widths):
        if isinstance(part, bytes):
            matrix[:, at:at + width] = np.frombuffer(part, np.uint8)
        elif pa.types.is_boolean(part.type):
            matrix[:, at] = np.where(part.to_numpy(zero_copy_only=False), _TRUE[0], _FALSE[0])
        else:
            integer = pa.types.is_integer(part.type)
            values = part.to_numpy(zero_copy_only=False)
            matrix[:, at] = (_INT_TAG if integer else _FLOAT_TAG)[0]
            bits = _int_bits(values) if integer else _float_bits(values)
            matrix[:, at + 1:at + width] = bits.astype(">u8").view(np.uint8).reshape(n, 8)
        at += width
    return matrix_rows(matrix)


def _string_body(column: pa.Array) -> pa.Array | None:
    """A string or binary column without nulls as the bytes ``pack`` writes between its tag and
    terminator (a zero byte escaped, where there is one); None for another column."""
    if column.null_count or not (pa.types.is_string(column.type) or pa.types.is_binary(column.type)):
        return None
    body = column.cast(pa.binary())
    return pc.replace_substring(body, b"\x00", b"\x00\xff") if _has_zero(body) else body


def _int_bits(values: np.ndarray) -> np.ndarray:
    """Integers as the unsigned 64-bit values whose big-endian bytes ``pack`` writes."""
    if values.dtype == np.uint64 and len(values) and values.max() > (1 << 63) - 1:
        raise OverflowError(f"{int(values.max())} does not fit in a signed 64-bit key")
    return values.astype(np.int64).view(np.uint64) ^ _SIGN


def _float_bits(values: np.ndarray) -> np.ndarray:
    """Floats as the unsigned 64-bit values whose big-endian bytes ``pack`` writes (their order
    is the floats' order)."""
    bits = values.astype(np.float64).view(np.uint64)
    return np.where((bits & _SIGN) != 0, ~bits, bits | _SIGN)


def _fixed(tag: bytes, body: np.ndarray) -> pa.Array:
    """Binary values ``tag + body[i]`` for a (n, w) uint8 matrix ``body``."""
    n, w = body.shape
    matrix = np.empty((n, w + 1), np.uint8)
    matrix[:, 0] = tag[0]
    matrix[:, 1:] = body
    return matrix_rows(matrix)


def _pack_column(column: pa.Array) -> pa.Array:
    """One column's ``pack`` of each value, as a binary array without nulls."""
    kind, n = column.type, len(column)
    if pa.types.is_null(kind):
        return pa.array([_NULL] * n, pa.binary())
    if pa.types.is_boolean(kind):
        encoded = pc.if_else(column, pa.scalar(_TRUE, pa.binary()), pa.scalar(_FALSE, pa.binary()))
    elif pa.types.is_integer(kind):
        bits = _int_bits(column.fill_null(0).to_numpy(zero_copy_only=False))
        encoded = _fixed(_INT_TAG, bits.astype(">u8").view(np.uint8).reshape(n, 8))
    elif pa.types.is_floating(kind):
        bits = _float_bits(column.fill_null(0.0).to_numpy(zero_copy_only=False))
        encoded = _fixed(_FLOAT_TAG, bits.astype(">u8").view(np.uint8).reshape(n, 8))
    elif pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_binary(kind) \
            or pa.types.is_large_binary(kind) or pa.types.is_fixed_size_binary(kind):
        tag = _STR_TAG if pa.types.is_string(kind) or pa.types.is_large_string(kind) else _BYTES_TAG
        body = column.cast(pa.large_binary())
        body = pc.replace_substring(body, b"\x00", b"\x00\xff")
        encoded = pc.binary_join_element_wise(pa.scalar(tag, pa.large_binary()), body,
                                              pa.scalar(_TERMINATOR, pa.large_binary()),
                                              pa.scalar(b"", pa.large_binary()))
        encoded = encoded.cast(pa.binary())
    else:
        raise TypeError(f"cannot encode a column of type {kind} in a key")
    if column.null_count:
        encoded = pc.if_else(column.is_null(), pa.scalar(_NULL, pa.binary()), encoded)
    return encoded


# -- column-wise unpack ------------------------------------------------------------------------


class _Unpackable(Exception):
    """Bytes the column-wise decoder does not take (the row-wise one decides)."""


def unpack_columns(data: Sequence[bytes] | pa.Array, physical: Sequence[pa.DataType]) -> list[pa.Array] | None:
    """The columns of ``[unpack(d) for d in data]`` (bytes, or a binary array without nulls) as
    Arrow arrays of the ``physical`` types (as :func:`pack_columns` takes), decoded column-wise in
    numpy; None when some bytes are not rows of those types (the caller decodes them row-wise,
    which raises the error)."""
    n = len(data)
    buf, offsets = padded_bytes(data, max(2 * INT_WIDTH, _WINDOW + 1))
    pos, ends = offsets[:-1].copy(), offsets[1:]
    columns = []
    try:
        for kind in physical:
            if np.any(pos >= ends) and n:
                raise _Unpackable
            tag = buf[pos]
            null = tag == TAG["null"]
            columns.append(_unpack_column(kind, buf, pos, tag, null))
        if np.any(pos != ends):
            raise _Unpackable
    except _Unpackable:
        return None
    return columns


#: A list's round with fewer than :data:`FEW` values left in it costs more than those values'
#: elements read row by row (a round is a dozen numpy and Arrow calls, 50-170 µs; a token walked in
#: Python about 1 µs). A loop over a list's rounds keeps a credit, :data:`FREE_ROUNDS` such rounds
#: to start with, that each round adds its values beyond ``FEW`` to and takes its values short of
#: it from; when it runs out, the values still in the loop are left out (walked row by row).
FEW, FREE_ROUNDS = 64, 4
#: Decodes tried before every value left is left out.
_ATTEMPTS = 4


def unpack_nested(data: pa.Array | pa.ChunkedArray, physical: pa.DataType) -> tuple[pa.Array, np.ndarray] | None:
    """The values whose bytes :func:`pack_nested` gave (``data``: a binary array, a null as null),
    decoded column-wise into an Arrow array of ``physical`` (a nested type of physical scalars): a
    cursor a value, all moved a token at a time in numpy (a list's elements one position at a time
    across the values, then put in order with one ``take``). Returns that array and a mask of the
    values it leaves out (the array holds the others, in order): those with lists that run on where
    too few values' lists do (:data:`FEW`), cheaper to walk row by row. None when some bytes are
    not values of that type (the caller decodes them row-wise, which raises the error)."""
    if isinstance(data, pa.ChunkedArray):
        data = data.combine_chunks()
    data = data.cast(pa.binary())
    if data.null_count:
        data = data.fill_null(_NULL)
    left_out = np.zeros(len(data), np.bool_)
    for _ in range(_ATTEMPTS):
        taken = data if not left_out.any() else data.filter(pa.array(~left_out))
        buf, offsets = padded_bytes(taken, max(2 * INT_WIDTH, _WINDOW + 1))
        pos, ends = offsets[:-1].copy(), offsets[1:]
        try:
            values = _unpack_value(physical, buf, pos, int(offsets[-1]), np.arange(len(taken)))
            if np.any(pos != ends):
                raise _Unpackable
        except _Unpackable:
            return None
        except _Stragglers as late:
            # those values, and any as long in bytes as the shortest of them, are left out
            kept = np.flatnonzero(~left_out)
            sizes = np.diff(offsets)
            left_out[kept[sizes >= sizes[late.rows].min()]] = True
            continue
        return values, left_out
    return pa.array([], physical), np.ones(len(data), np.bool_)


class _Stragglers(Exception):
    """Values whose lists run on where few others do (``rows``: their places in the decode)."""

    def __init__(self, rows: np.ndarray) -> None:
        super().__init__()
        self.rows = rows


def _unpack_value(kind: pa.DataType, buf: np.ndarray, pos: np.ndarray, size: int, rows: np.ndarray) -> pa.Array:
    """One value of ``kind`` at each of ``pos`` (ascending, advanced past it in place); ``size``: the
    bytes' length before the padding; ``rows``: the value each cursor is in."""
    n = len(pos)
    if n and int(pos.max()) >= size:
        raise _Unpackable
    tag = buf[pos]
    null = tag == TAG["null"]
    if not pa.types.is_nested(kind):
        return _unpack_column(kind, buf, pos, tag, null)
    if pa.types.is_struct(kind):
        if not kind.num_fields or not (null | (tag == TAG["true"])).all():
            raise _Unpackable
        pos += 1
        fields = [kind.field(i) for i in range(kind.num_fields)]
        if not null.any():
            return pa.StructArray.from_arrays([_unpack_value(f.type, buf, pos, size, rows) for f in fields],
                                              fields=fields)
        valid = np.flatnonzero(~null)
        cursor = pos[valid]
        children = [_unpack_value(f.type, buf, cursor, size, rows[valid]) for f in fields]
        pos[valid] = cursor
        slots = np.zeros(n, np.int64)
        slots[valid] = np.arange(len(valid))
        spread = pa.array(slots, pa.int64(), mask=null)
        return pa.StructArray.from_arrays([c.take(spread) for c in children], fields=fields, mask=pa.array(null))
    if not (pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind)
            or pa.types.is_map(kind)):
        raise _Unpackable
    return _unpack_lists(kind, buf, pos, size, rows, null)


def _unpack_lists(kind: pa.DataType, buf: np.ndarray, pos: np.ndarray, size: int, rows: np.ndarray,
                  null: np.ndarray) -> pa.Array:
    """Lists or maps at ``pos`` (their first tags read: ``null``), advanced past them in place: each
    round reads every unfinished value's next marker and, after a ``True``, its next element."""
    n = len(pos)
    is_map = pa.types.is_map(kind)
    children = [kind.key_type, kind.item_type] if is_map else [kind.value_type]
    pos += null
    active = np.flatnonzero(~null)
    cursor = pos[active]
    owners: list[np.ndarray] = []
    parts: list[list[pa.Array]] = [[] for _ in children]
    credit = FREE_ROUNDS * FEW
    while len(active):
        credit += len(active) - FEW
        if credit < 0:
            raise _Stragglers(rows[active])
        if int(cursor.max()) >= size:
            raise _Unpackable
        marker = buf[cursor]
        more = marker == TAG["true"]
        if not (more | (marker == TAG["false"])).all():
            raise _Unpackable
        cursor += 1
        done = ~more
        pos[active[done]] = cursor[done]
        active, cursor = active[more], cursor[more]
        if len(active):
            owners.append(active)
            for part, child in zip(parts, children):
                part.append(_unpack_value(child, buf, cursor, size, rows[active]))
    owner = np.concatenate(owners) if owners else np.zeros(0, np.int64)
    order = pa.array(np.argsort(owner, kind="stable"), pa.int64())
    elements = [pa.concat_arrays(part).take(order) if part else pa.array([], child)
                for part, child in zip(parts, children)]
    counts = np.bincount(owner, minlength=n)
    mask = pa.array(null) if null.any() else None
    if pa.types.is_fixed_size_list(kind):
        if np.any(counts[~null] != kind.list_size):
            raise _Unpackable
        # a null list holds list_size null elements of its own
        start = np.zeros(n, np.int64)
        start[1:] = np.cumsum(counts)[:-1]
        slots = (start[:, None] + np.arange(kind.list_size)).ravel()
        hole = np.repeat(null, kind.list_size)
        element = elements[0].take(pa.array(np.where(hole, 0, slots), pa.int64(), mask=hole))
        return pa.FixedSizeListArray.from_arrays(element, type=kind, mask=mask)
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(counts, out=offsets[1:])
    if pa.types.is_large_list(kind):
        return pa.LargeListArray.from_arrays(pa.array(offsets, pa.int64()), elements[0], type=kind, mask=mask)
    if offsets[-1] >= 2**31:
        raise _Unpackable
    bounds = pa.array(offsets, pa.int32())
    if is_map:
        if elements[0].null_count:
            raise _Unpackable
        return pa.MapArray.from_arrays(bounds, elements[0], elements[1], type=kind, mask=mask)
    return pa.ListArray.from_arrays(bounds, elements[0], type=kind, mask=mask)


def _has_zero(values: pa.Array) -> bool:
    """Whether the bytes of a ``binary`` or ``large_binary`` array's values hold a zero byte."""
    offsets = value_offsets(values)
    start, end = int(offsets[0]), int(offsets[-1])
    return end > start and np.frombuffer(values.buffers()[2], np.uint8, end - start, start).min() == 0


def _terminators(buf: np.ndarray, start: np.ndarray) -> np.ndarray:
    """Where the first terminator (two zero bytes) at or after each of ``start`` begins in ``buf``
    (``pack``'s string and bytes values end with it; a zero byte inside one is escaped): searched a
    window of :data:`_WINDOW` bytes at a time, each value's own bytes only."""
    stop = np.empty(len(start), np.int64)
    todo, at = np.arange(len(start)), start
    windows = _windows(buf, _WINDOW + 1)
    while len(todo):
        if np.any(at >= len(windows)):
            raise _Unpackable
        zero = windows[at] == 0
        pair = zero[:, :-1] & zero[:, 1:]
        first = pair.argmax(axis=1)
        found = pair[np.arange(len(at)), first]
        stop[todo[found]] = at[found] + first[found]
        todo, at = todo[~found], at[~found] + _WINDOW
    return stop


def _unpack_column(kind: pa.DataType, buf: np.ndarray, pos: np.ndarray, tag: np.ndarray,
                   null: np.ndarray) -> pa.Array:
    """One column at ``pos`` (advanced past it in place)."""
    n = len(pos)
    mask = null if null.any() else None
    if pa.types.is_null(kind):
        if not null.all():
            raise _Unpackable
        pos += 1
        return pa.nulls(n)
    if pa.types.is_boolean(kind):
        true = tag == TAG["true"]
        if not (null | true | (tag == TAG["false"])).all():
            raise _Unpackable
        pos += 1
        return pa.array(true, pa.bool_(), mask=mask)
    if pa.types.is_integer(kind) or pa.types.is_floating(kind):
        floating = pa.types.is_floating(kind)
        if not (null | (tag == TAG["float" if floating else "int"])).all():
            raise _Unpackable
        bits = _words(buf)[pos + 1].astype(np.uint64)
        pos += np.where(null, 1, 9)
        if floating:
            negative = (bits & _SIGN) == 0
            values = np.where(negative, ~bits, bits ^ _SIGN).view(np.float64)
            return pa.array(values, pa.float64(), mask=mask).cast(kind)
        values = (bits ^ _SIGN).view(np.int64)
        if mask is not None:
            values = np.where(null, 0, values)
        return pa.array(values, pa.int64(), mask=mask).cast(kind)
    text = pa.types.is_string(kind) or pa.types.is_large_string(kind)
    if not (text or pa.types.is_binary(kind) or pa.types.is_large_binary(kind) or pa.types.is_fixed_size_binary(kind)):
        raise _Unpackable
    if not (null | (tag == TAG["str" if text else "bytes"])).all():
        raise _Unpackable
    start = pos + 1
    stop = start.copy()
    if mask is None:
        stop = _terminators(buf, start)
    else:
        stop[~null] = _terminators(buf, start[~null])
    # the rows' bytes read as 2n values, from each value's start to its stop (even) and from its
    # stop to the next one's start (odd): Arrow copies the even ones out (the rows ascend in ``buf``)
    if n > 1 and np.any(start[1:] < stop[:-1]):
        raise _Unpackable
    bounds = np.empty(2 * n + 1, np.int64)
    bounds[0:2 * n:2], bounds[1:2 * n:2], bounds[2 * n] = start, stop, stop[-1] if n else 0
    spans = pa.LargeBinaryArray.from_buffers(pa.large_binary(), 2 * n, [None, pa.py_buffer(bounds), pa.py_buffer(buf)])
    values = spans.take(pa.array(np.arange(0, 2 * n, 2), pa.int64()))
    if n and _has_zero(values):   # an escaped zero byte
        values = pc.replace_substring(values, b"\x00\xff", b"\x00")
    pos[:] = np.where(null, pos + 1, stop + 2)
    if mask is not None:
        values = pc.if_else(pa.array(null), pa.scalar(None, pa.large_binary()), values)
    try:
        return values.cast(kind)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise _Unpackable from exc
