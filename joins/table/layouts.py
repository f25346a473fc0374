"""A table-table join side's rows in state under every schema the side has had.

A join stage stores each row as ``pack`` of its values (:mod:`streamjoin.table.rows`), which
carries no schema, so a side whose columns evolved (:mod:`streamjoin.runtime.evolution`) stores
its rows in *layouts*: a list of **slots** (a column name and its stored type) that only grows.
Layout 0 is the side's columns when the join was defined; each evolution of the side's columns
makes the next layout, whose slots are the previous ones plus one for every column added or whose
type widened (a widened column's new values go to its new slot, its old slot is read for the
rows stored before). A dropped column keeps its slot, written as null from then on.

A row of layout ``n >= 1`` is ``b"\\x01" + bytes([n]) + pack(values of its slots)``; a row of
layout 0 is ``pack(values)`` as it always was (no ``pack`` tag is ``0x01``), so a join whose
columns never changed stores the same bytes as before. Every row read from state is brought to
the current layout (:meth:`LayoutCodec.upgrade`: decoded in the current columns, an absent column
its default or null (:mod:`streamjoin.runtime.defaults`), a narrower value widened, then encoded again), so rows compare as bytes whatever layout
they were written in, and a row is rewritten in the current layout whenever a version changes
it. A side has at most 255 layouts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pyarrow as pa

from streamjoin.errors import CheckpointMismatchError
from streamjoin.runtime.defaults import fill
from streamjoin.runtime.evolution import widens
from streamjoin.statestore.binary_concat import concat_binary
from streamjoin.statestore.codecs import unpack
from streamjoin.statestore.columns import binary_suffixes
from streamjoin.statestore.packed_columns import pack_array, padded_bytes, unpack_columns
from streamjoin.table.rows import RowCodec, logical_array, physical_type

__all__ = ["LayoutCodec", "MARK", "MAX_LAYOUTS"]

#: The first byte of a row stored in a layout after the first.
MARK = 0x01
MAX_LAYOUTS = 255


@dataclass(frozen=True)
class _Layout:
    """One layout: its number of slots, and the slot each of its columns is written to."""

    arity: int
    slot_of: dict[str, int]


class LayoutCodec(RowCodec):
    """A :class:`RowCodec` of the current schema (the last of ``schemas``, a side's row schemas
    oldest first) whose rows go to state in the newest layout (see module); ``encode_array`` of
    named columns (keys) stays plain ``pack``."""

    def __init__(self, schemas: Sequence[pa.Schema]) -> None:
        super().__init__(schemas[-1])
        slots: list[pa.Field] = []
        newest: dict[str, int] = {}
        layouts: list[_Layout] = []
        previous: pa.Schema | None = None
        for schema in schemas:
            if previous is not None and schema.equals(previous):
                continue
            for field in schema:
                at = newest.get(field.name)
                if at is None or slots[at].type != field.type:
                    newest[field.name] = len(slots)
                    slots.append(field)
            layouts.append(_Layout(len(slots), {f.name: newest[f.name] for f in schema}))
            previous = schema
        if len(layouts) > MAX_LAYOUTS:
            raise CheckpointMismatchError(
                f"a table-table join side's columns have changed {len(layouts) - 1} times, and its state keeps at "
                f"most {MAX_LAYOUTS - 1}: start the join from a new checkpoint location")
        self.slots, self.layouts = slots, layouts
        self.current = len(layouts) - 1
        self._prefix = pa.scalar(b"" if not self.current else bytes([MARK, self.current]), pa.binary())

    def encode_array(self, table: pa.Table, names: Sequence[str] | None = None) -> pa.Array:
        """Rows of ``table`` in the current layout (``names``: those columns' values, plain)."""
        if names is not None or not self.current:
            return super().encode_array(table, names)
        layout, n = self.layouts[self.current], table.num_rows
        live = {at: name for name, at in layout.slot_of.items()}
        columns = []
        for at in range(layout.arity):
            slot = self.slots[at]
            kind = physical_type(slot.type)
            if at in live:
                columns.append(self.physical_array(table.column(live[at]), self.schema.get_field_index(live[at])))
            else:
                columns.append(pa.nulls(n, kind))
        packed = pack_array(columns, n)
        return concat_binary(self._prefix, packed)

    def layout_of(self, data: pa.Array) -> np.ndarray:
        """The layout number of each of ``data`` (a binary array; a null counts as current)."""
        if not len(data):
            return np.zeros(0, np.int64)
        buf, offsets = padded_bytes(data, 2)
        start = offsets[:-1]
        out = np.where((offsets[1:] - start >= 2) & (buf[start] == MARK), buf[start + 1], 0).astype(np.int64)
        out[~np.asarray(data.is_valid())] = self.current
        return out

    def upgrade(self, data: pa.Array) -> pa.Array:
        """``data`` (rows as stored, a binary array; null: none) in the current layout: the rows of
        an earlier one decoded in the current columns and encoded again, the others as they are."""
        if len(self.layouts) == 1 or not len(data):
            return data
        layouts = self.layout_of(data)
        old = np.flatnonzero(layouts != self.current)
        if not len(old):
            return data
        taken = pa.array(old, pa.int64())
        table = self._decode(data.take(taken), layouts[old])
        fresh = self.encode_array(table)
        index = np.arange(len(data))
        index[old] = len(data) + np.arange(len(old))
        return pa.concat_arrays([data.cast(pa.binary()), fresh.cast(pa.binary())]).take(pa.array(index, pa.int64()))

    def decode_table(self, data: Sequence[bytes] | pa.Array) -> pa.Table:
        """Rows of any layout (a binary array without nulls, or bytes) in the current columns."""
        array = data if isinstance(data, pa.Array) else pa.array(list(data), pa.binary())
        if len(self.layouts) == 1:
            return super().decode_table(array)
        return self._decode(array, self.layout_of(array))

    def _decode(self, data: pa.Array, layouts: np.ndarray) -> pa.Table:
        """Rows of the given layouts in the current columns, in order."""
        parts, where = [], []
        for number in np.unique(layouts).tolist():
            at = np.flatnonzero(layouts == number)
            rows = data.take(pa.array(at, pa.int64()))
            if number:
                rows = binary_suffixes(rows, np.full(len(rows), 2, np.int64))
            parts.append(self._columns(rows, self.layouts[number]))
            where.append(at)
        table = pa.concat_tables(parts) if parts else self.schema.empty_table()
        order = np.empty(len(data), np.int64)
        order[np.concatenate(where) if where else np.zeros(0, np.int64)] = np.arange(len(data))
        return table.take(pa.array(order, pa.int64()))

    def _columns(self, rows: pa.Array, layout: _Layout) -> pa.Table:
        """``rows`` (``pack`` bytes of one layout) in the current columns."""
        kinds = [physical_type(self.slots[at].type) for at in range(layout.arity)]
        arrays = unpack_columns(rows, kinds)
        if arrays is None:   # bytes the column-wise decoder does not take: row by row (raises)
            values = [unpack(d) for d in rows.to_pylist()]
            arrays = [pa.array([v[j] for v in values], kind) for j, kind in enumerate(kinds)]
        columns = []
        for field in self.schema:
            at = layout.slot_of.get(field.name)
            if at is None:   # added since: its default (EXISTS_DEFAULT), or nulls
                columns.append(fill(field, len(rows)))
                continue
            slot = self.slots[at].type
            column = logical_array(arrays[at], slot)
            if slot != field.type:   # widened; or dropped, then added again as another type: a new column
                column = column.cast(field.type) if widens(slot, field.type) else fill(field, len(rows))
            columns.append(column)
        return pa.Table.from_arrays(columns, schema=self.schema)
