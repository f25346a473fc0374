"""Rows of the table-table join as Python tuples, and their bytes in state.

A row is a tuple of *physical* values, one per column, each one that
:func:`streamjoin.statestore.codecs.pack` encodes (None, bool, int, float, bytes, str):

* integers, floats (32 and 64 bit), booleans, strings and binaries: their values;
* timestamps, dates, times and durations: their integer storage value (µs, days, ...);
* decimals: their text (``"1.50"``);
* dictionary-encoded columns are decoded first (their type becomes the value type).

Other types (nested lists, structs, maps, float16, ...) are refused by :func:`stored_type`. Two
rows are the same row when their encodings are equal, so NaN equals NaN and 0.0 differs from -0.0.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from streamjoin.errors import JoinDefinitionError
from streamjoin.statestore.codecs import pack, unpack

__all__ = ["stored_type", "physical_type", "RowCodec", "pack_columns", "unpack_columns", "TAG", "INT_WIDTH",
           "padded_bytes", "decode_ints"]


def stored_type(kind: pa.DataType, what: str) -> pa.DataType:
    """The type a column of ``kind`` is kept and output in (dictionaries decoded).

    Raises :class:`JoinDefinitionError` naming ``what`` for a type rows cannot hold.
    """
    if pa.types.is_dictionary(kind):
        kind = kind.value_type
    if physical_type(kind) is None:
        raise JoinDefinitionError(
            f"{what} has type {kind}, which a table-table join cannot keep in state; use a scalar type "
            "(integer, float, bool, string, binary, decimal, timestamp, date, time, duration), for "
            "example by flattening it or converting it to a JSON string"
        )
    return kind


def physical_type(kind: pa.DataType) -> pa.DataType | None:
    """The Arrow type whose Python values represent ``kind`` in a row (None: unsupported)."""
    if pa.types.is_timestamp(kind) or pa.types.is_duration(kind) or pa.types.is_date64(kind):
        return pa.int64()
    if pa.types.is_time(kind) or pa.types.is_date32(kind):
        return pa.int32() if kind.bit_width == 32 else pa.int64()
    if pa.types.is_decimal(kind):
        return pa.string()
    plain = (pa.types.is_integer, pa.types.is_boolean, pa.types.is_string, pa.types.is_large_string,
             pa.types.is_binary, pa.types.is_large_binary, pa.types.is_fixed_size_binary, pa.types.is_null)
    if any(check(kind) for check in plain):
        return kind
    if pa.types.is_float32(kind) or pa.types.is_float64(kind):
        return kind
    return None


class RowCodec:
    """Converts between Arrow columns of ``schema`` (stored types, see :func:`stored_type`) and
    rows (tuples of physical values), and between rows and bytes."""

    def __init__(self, schema: pa.Schema) -> None:
        self.schema = schema
        self.physical = [physical_type(f.type) for f in schema]

    def rows(self, table: pa.Table) -> list[tuple]:
        """``table``'s rows (it has at least the schema's columns) as physical tuples, in order."""
        columns = [self.values(table.column(f.name), i) for i, f in enumerate(self.schema)]
        if not columns:
            return [()] * table.num_rows
        return list(zip(*columns))

    def values(self, column: pa.ChunkedArray | pa.Array, index: int) -> list:
        """The physical Python values of ``column``, stored as the schema's column ``index``."""
        return self.physical_array(column, index).to_pylist()

    def physical_array(self, column: pa.ChunkedArray | pa.Array, index: int) -> pa.ChunkedArray | pa.Array:
        """``column`` (stored as the schema's column ``index``) cast to its physical type."""
        field = self.schema.field(index)
        if pa.types.is_dictionary(column.type):
            column = column.cast(column.type.value_type)
        if column.type != field.type:
            column = column.cast(field.type)
        physical = self.physical[index]
        return column if physical == field.type else column.cast(physical)

    def encode_columns(self, table: pa.Table, names: Sequence[str] | None = None) -> list[bytes]:
        """Per row of ``table``, ``pack`` of the values of columns ``names`` (default: every
        column of the schema, i.e. :meth:`encode` of each row), computed column-wise."""
        names = self.schema.names if names is None else names
        at = {n: i for i, n in enumerate(self.schema.names)}
        return pack_columns([self.physical_array(table.column(n), at[n]) for n in names], table.num_rows)

    def arrays(self, rows: Sequence[tuple | None]) -> list[pa.Array]:
        """One Arrow array per column from ``rows`` (a None row: nulls in every column)."""
        out = []
        for i, field in enumerate(self.schema):
            values = pa.array([None if r is None else r[i] for r in rows], self.physical[i])
            out.append(values if values.type == field.type else values.cast(field.type))
        return out

    def table(self, rows: Sequence[tuple | None]) -> pa.Table:
        return pa.Table.from_arrays(self.arrays(rows), schema=self.schema)

    def decode_table(self, data: Sequence[bytes]) -> pa.Table:
        """``self.table([self.decode(d) for d in data])``, decoded column-wise where it can be."""
        arrays = unpack_columns(data, self.physical)
        if arrays is None:
            return self.table([unpack(d) for d in data])
        arrays = [a if a.type == f.type else a.cast(f.type) for a, f in zip(arrays, self.schema)]
        return pa.Table.from_arrays(arrays, schema=self.schema)

    @staticmethod
    def encode(row: tuple) -> bytes:
        return pack(*row)

    @staticmethod
    def decode(data: bytes) -> tuple:
        return unpack(data)


# -- the bytes, column-wise -------------------------------------------------------------------
# The one place the column-wise code (here and :mod:`streamjoin.table.held`) learns the bytes of
# ``pack``: its tags, the width of an integer and how its eight bytes hold a signed value.

_NULL, _TRUE, _FALSE = pack(None), pack(True), pack(False)
_INT_TAG, _FLOAT_TAG, _BYTES_TAG, _STR_TAG = pack(0)[:1], pack(0.0)[:1], pack(b"")[:1], pack("")[:1]
_TERMINATOR = pack(b"")[1:]
_SIGN = np.uint64(1 << 63)
#: The first byte of ``pack`` of each kind of value.
TAG = {"null": _NULL[0], "true": _TRUE[0], "false": _FALSE[0], "int": _INT_TAG[0], "float": _FLOAT_TAG[0],
       "bytes": _BYTES_TAG[0], "str": _STR_TAG[0]}
#: The length of ``pack`` of one integer: a tag and eight bytes.
INT_WIDTH = len(pack(0))


def padded_bytes(data: Sequence[bytes], pad: int) -> tuple[np.ndarray, np.ndarray]:
    """The concatenation of ``data`` as a uint8 array followed by ``pad`` zeros (so a gather past a
    value's end stays in range), and the ``len(data) + 1`` offsets of the values in it."""
    n = len(data)
    packed = pa.array(data, pa.binary())
    offsets = np.frombuffer(packed.buffers()[1], np.int32, n + 1).astype(np.int64)
    size = int(offsets[-1])
    buf = np.zeros(size + pad, np.uint8)
    if size:
        buf[:size] = np.frombuffer(packed.buffers()[2], np.uint8, size)
    return buf, offsets


def decode_ints(buf: np.ndarray, at: np.ndarray) -> np.ndarray:
    """The integers whose eight ``pack`` bytes (after the tag) start at ``at`` in ``buf``."""
    bits = buf[at[:, None] + np.arange(8)].view(">u8").reshape(len(at)).astype(np.uint64)
    return (bits ^ _SIGN).view(np.int64)


# -- column-wise pack --------------------------------------------------------------------------


def pack_columns(columns: Sequence[pa.Array | pa.ChunkedArray], length: int) -> list[bytes]:
    """``[pack(*row) for row in zip(*(c.to_pylist() for c in columns))]``, column-wise in Arrow and
    numpy: the same bytes, for columns of physical types (:func:`physical_type`)."""
    if not columns:
        return [b""] * length
    parts = [_pack_column(c.combine_chunks() if isinstance(c, pa.ChunkedArray) else c) for c in columns]
    joined = parts[0] if len(parts) == 1 else pc.binary_join_element_wise(*parts, pa.scalar(b"", pa.binary()))
    return joined.to_pylist()


def _fixed(tag: bytes, body: np.ndarray) -> pa.Array:
    """Binary values ``tag + body[i]`` for a (n, w) uint8 matrix ``body``."""
    n, w = body.shape
    matrix = np.empty((n, w + 1), np.uint8)
    matrix[:, 0] = tag[0]
    matrix[:, 1:] = body
    fixed = pa.FixedSizeBinaryArray.from_buffers(pa.binary(w + 1), n, [None, pa.py_buffer(matrix.tobytes())])
    return fixed.cast(pa.binary())


def _pack_column(column: pa.Array) -> pa.Array:
    """One column's ``pack`` of each value, as a binary array without nulls."""
    kind, n = column.type, len(column)
    if pa.types.is_null(kind):
        return pa.array([_NULL] * n, pa.binary())
    if pa.types.is_boolean(kind):
        encoded = pc.if_else(column, pa.scalar(_TRUE, pa.binary()), pa.scalar(_FALSE, pa.binary()))
    elif pa.types.is_integer(kind):
        values = column.fill_null(0).to_numpy(zero_copy_only=False)
        if values.dtype == np.uint64 and n and values.max() > (1 << 63) - 1:
            raise OverflowError(f"{int(values.max())} does not fit in a signed 64-bit key")
        bits = values.astype(np.int64).view(np.uint64) ^ _SIGN
        encoded = _fixed(_INT_TAG, bits.astype(">u8").view(np.uint8).reshape(n, 8))
    elif pa.types.is_floating(kind):
        values = column.fill_null(0.0).to_numpy(zero_copy_only=False).astype(np.float64)
        bits = values.view(np.uint64)
        negative = (bits & _SIGN) != 0
        bits = np.where(negative, ~bits, bits | _SIGN)
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


def unpack_columns(data: Sequence[bytes], physical: Sequence[pa.DataType]) -> list[pa.Array] | None:
    """The columns of ``[unpack(d) for d in data]`` as Arrow arrays of the ``physical`` types
    (:func:`physical_type`), decoded column-wise in numpy; None when some bytes are not rows of
    those types (the caller decodes them row-wise, which raises the error)."""
    n = len(data)
    buf, offsets = padded_bytes(data, 2 * INT_WIDTH)
    size = int(offsets[-1])
    pairs = np.flatnonzero((buf[:size - 1] == 0) & (buf[1:size] == 0)) if size > 1 else np.zeros(0, np.int64)
    pos, ends = offsets[:-1].copy(), offsets[1:]
    columns = []
    try:
        for kind in physical:
            if np.any(pos >= ends) and n:
                raise _Unpackable
            tag = buf[pos]
            null = tag == TAG["null"]
            columns.append(_unpack_column(kind, buf, pairs, pos, tag, null))
        if np.any(pos != ends):
            raise _Unpackable
    except _Unpackable:
        return None
    return columns


def _unpack_column(kind: pa.DataType, buf: np.ndarray, pairs: np.ndarray, pos: np.ndarray, tag: np.ndarray,
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
        body = buf[(pos + 1)[:, None] + np.arange(8)]
        bits = body.view(">u8").reshape(n).astype(np.uint64)
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
    at = np.searchsorted(pairs, start)
    if np.any(at[~null] >= len(pairs)):
        raise _Unpackable
    stop = np.where(null, start, pairs[np.minimum(at, len(pairs) - 1)] if len(pairs) else start)
    lengths = stop - start
    total = int(lengths.sum())
    value_offsets = np.zeros(n + 1, np.int64)
    np.cumsum(lengths, out=value_offsets[1:])
    index = np.repeat(start - value_offsets[:-1], lengths) + np.arange(total)
    values = pa.LargeBinaryArray.from_buffers(pa.large_binary(), n, [None, pa.py_buffer(value_offsets.tobytes()),
                                                                         pa.py_buffer(buf[index].tobytes())])
    values = pc.replace_substring(values, b"\x00\xff", b"\x00")
    pos[:] = np.where(null, pos + 1, stop + 2)
    if mask is not None:
        values = pc.if_else(pa.array(null), pa.scalar(None, pa.large_binary()), values)
    try:
        return values.cast(kind)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise _Unpackable from exc
