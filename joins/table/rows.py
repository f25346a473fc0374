"""Rows of the table-table join as Python tuples, and their bytes in state.

A row is a tuple of *physical* values, one per column, each one that
:func:`streamjoin.statestore.codecs.pack` encodes (None, bool, int, float, bytes, str):

* integers, floats (32 and 64 bit), booleans, strings and binaries: their values;
* timestamps, dates, times and durations: their integer storage value (µs, days, ...);
* decimals: their text (``"1.50"``);
* lists, structs and maps of those: their bytes (:mod:`streamjoin.kit.nested`);
* dictionary-encoded columns are decoded first (their type becomes the value type).

Other types (float16, unions, nested types holding them, ...) are refused by :func:`stored_type`.
Two rows are the same row when their encodings are equal, so NaN equals NaN and 0.0 differs from
-0.0. :meth:`RowCodec.physical_array` converts a column to the type a row keeps it in and
:func:`logical_array` converts it back.
"""

from __future__ import annotations

from typing import Sequence

import pyarrow as pa

from streamjoin.errors import JoinDefinitionError
from streamjoin.kit.nested import decode_nested, encode_nested, is_nested, leaf_kind, physical_nested, plain_nested
from streamjoin.kit.typenames import type_name
from streamjoin.statestore.codecs import pack, unpack
from streamjoin.statestore.packed_columns import pack_array, pack_columns, unpack_columns

__all__ = ["stored_type", "physical_type", "logical_array", "RowCodec"]


def stored_type(kind: pa.DataType, what: str) -> pa.DataType:
    """The type a column of ``kind`` is kept and output in (dictionaries decoded).

    Raises :class:`JoinDefinitionError` naming ``what`` for a type rows cannot hold.
    """
    if pa.types.is_dictionary(kind):
        kind = kind.value_type
    if physical_type(kind) is None:
        raise JoinDefinitionError(
            f"{what} has type {type_name(kind)}, which a table-table join cannot keep in state; use a scalar type "
            "(integer, float, bool, string, binary, decimal, timestamp, date, time, duration) or a "
            "list, struct or map of them, for example by casting it or converting it to a JSON string"
        )
    return kind


def physical_type(kind: pa.DataType) -> pa.DataType | None:
    """The Arrow type whose Python values represent ``kind`` in a row (None: unsupported): a
    scalar's :func:`~streamjoin.kit.nested.leaf_kind`, binary for a nested type of those."""
    if is_nested(kind):
        return pa.binary() if physical_nested(kind) is not None else None
    return leaf_kind(kind)


def logical_array(array: pa.Array | pa.ChunkedArray, kind: pa.DataType) -> pa.Array | pa.ChunkedArray:
    """``array`` (values in the physical type of ``kind``, :func:`physical_type`) as values of ``kind``."""
    if array.type == kind:
        return array
    if is_nested(kind):
        return decode_nested(array, kind)
    return array.cast(kind)


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

    def shown(self, column: pa.ChunkedArray | pa.Array, index: int) -> list:
        """:meth:`values`, but a list, struct or map as its structure (what ``read_state`` shows,
        :func:`~streamjoin.kit.nested.plain_nested`), not its bytes."""
        kind = self.schema.field(index).type
        return plain_nested(column, kind) if is_nested(kind) else self.values(column, index)

    def physical_array(self, column: pa.ChunkedArray | pa.Array, index: int) -> pa.ChunkedArray | pa.Array:
        """``column`` (stored as the schema's column ``index``) cast to its physical type."""
        field = self.schema.field(index)
        if pa.types.is_dictionary(column.type):
            column = column.cast(column.type.value_type)
        if column.type != field.type:
            column = column.cast(field.type)
        physical = self.physical[index]
        if physical == field.type:
            return column
        return encode_nested(column, field.type) if is_nested(field.type) else column.cast(physical)

    def stored_array(self, column: pa.ChunkedArray | pa.Array, index: int) -> pa.ChunkedArray | pa.Array:
        """``column`` in the schema's type of column ``index`` (dictionaries decoded), as a row
        keeps it and gives it back (:meth:`physical_array` then :func:`logical_array`)."""
        field = self.schema.field(index)
        if is_nested(field.type):
            return column if column.type == field.type else column.cast(field.type)
        return logical_array(self.physical_array(column, index), field.type)

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
            out.append(logical_array(values, field.type))
        return out

    def table(self, rows: Sequence[tuple | None]) -> pa.Table:
        return pa.Table.from_arrays(self.arrays(rows), schema=self.schema)

    def decode_table(self, data: Sequence[bytes] | pa.Array) -> pa.Table:
        """``self.table([self.decode(d) for d in data])``, decoded column-wise where it can be
        (``data``: bytes, or a binary array without nulls, read in place)."""
        arrays = unpack_columns(data, self.physical)
        if arrays is None:
            return self.table([unpack(d) for d in (data.to_pylist() if isinstance(data, pa.Array) else data)])
        arrays = [logical_array(a, f.type) for a, f in zip(arrays, self.schema)]
        return pa.Table.from_arrays(arrays, schema=self.schema)

    @staticmethod
    def encode(row: tuple) -> bytes:
        return pack(*row)

    @staticmethod
    def decode(data: bytes) -> tuple:
        return unpack(data)
