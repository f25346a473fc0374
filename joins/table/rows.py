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

import pyarrow as pa

from streamjoin.errors import JoinDefinitionError
from streamjoin.statestore.codecs import pack, unpack
from streamjoin.statestore.packed_columns import pack_array, pack_columns, unpack_columns

__all__ = ["stored_type", "physical_type", "RowCodec"]


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

    def encode_array(self, table: pa.Table, names: Sequence[str] | None = None) -> pa.Array:
        """:meth:`encode_columns` as a ``binary`` Arrow array."""
        names = self.schema.names if names is None else names
        at = {n: i for i, n in enumerate(self.schema.names)}
        return pack_array([self.physical_array(table.column(n), at[n]) for n in names], table.num_rows)

    def arrays(self, rows: Sequence[tuple | None]) -> list[pa.Array]:
        """One Arrow array per column from ``rows`` (a None row: nulls in every column)."""
        out = []
        for i, field in enumerate(self.schema):
            values = pa.array([None if r is None else r[i] for r in rows], self.physical[i])
            out.append(values if values.type == field.type else values.cast(field.type))
        return out

    def table(self, rows: Sequence[tuple | None]) -> pa.Table:
        return pa.Table.from_arrays(self.arrays(rows), schema=self.schema)

    def decode_table(self, data: Sequence[bytes] | pa.Array) -> pa.Table:
        """``self.table([self.decode(d) for d in data])``, decoded column-wise where it can be
        (``data``: bytes, or a binary array without nulls, read in place)."""
        arrays = unpack_columns(data, self.physical)
        if arrays is None:
            return self.table([unpack(d) for d in (data.to_pylist() if isinstance(data, pa.Array) else data)])
        arrays = [a if a.type == f.type else a.cast(f.type) for a, f in zip(arrays, self.schema)]
        return pa.Table.from_arrays(arrays, schema=self.schema)

    @staticmethod
    def encode(row: tuple) -> bytes:
        return pack(*row)

    @staticmethod
    def decode(data: bytes) -> tuple:
        return unpack(data)
