"""The internal form of changes, and the building blocks every vocabulary normalises with.

A batch of changes in the internal form is::

    <key columns> | __sj_op (int8) | __sj_time (int64 µs, nullable) | __sj_seq (int64, nullable) | <value columns>

``__sj_op`` is :data:`UPSERT`, :data:`DELETE` or :data:`HEARTBEAT`. Rows are kept in input order.
``__sj_time`` is null only for a *timeless snapshot row*: a key's versions are ordered by
(change time, sequence) with nulls first, so such a row comes before every change of its key
without any timestamp standing for "the beginning of time".

A vocabulary's ``normalise`` reads three things per input row, :func:`op_codes` (an op code per
row), :func:`micros` (the change time) and :func:`sequence_numbers`, plus the row's columns
(:func:`struct_rows` when they sit in a struct), and hands them to :func:`to_internal`, which sorts
rows out in one order: op, time, key. Rows it refuses are returned by :func:`set_aside` with the
input's columns plus :data:`streamjoin.runtime.operator.REASON_COLUMN`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from streamjoin.kit.arrivals import set_aside  # noqa: F401  (re-exported: the vocabularies set rows aside with it)
from streamjoin.kit.times import micros as timestamp_micros

if TYPE_CHECKING:
    from streamjoin.changes.format import ChangeFormat

__all__ = [
    "OP", "TIME", "SEQ", "UPSERT", "DELETE", "HEARTBEAT", "SKIPPED", "SNAPSHOT", "UNKNOWN", "SNAPSHOT_OP",
    "UNITS", "PLAIN_COLUMNS", "Normalised", "op_codes", "micros", "sequence_numbers", "struct_rows",
    "to_internal", "top_level_changes", "set_aside",
]

OP, TIME, SEQ = "__sj_op", "__sj_time", "__sj_seq"
#: Op codes of the internal form.
UPSERT, DELETE, HEARTBEAT = 0, 1, 2
#: Op codes a vocabulary's op table may also use: a row that adds no state and is dropped without
#: being set aside (a Delta pre-image), a snapshot row (an upsert that may lack a change time), and
#: what :func:`op_codes` gives an op the table does not know (set aside as ``"unknown op"``).
SKIPPED, SNAPSHOT, UNKNOWN = -1, 3, -2
#: The op of a snapshot row in the plain and Delta vocabularies (what a join's bootstrap writes).
SNAPSHOT_OP = "snapshot"
#: Integer change times: microseconds per unit.
UNITS = {"s": 1_000_000, "ms": 1_000, "us": 1}
#: The op, time and sequence columns of the plain form :func:`streamjoin.changes.to_plain` writes:
#: ``ChangeFormat.plain(key, **PLAIN_COLUMNS)`` reads it.
PLAIN_COLUMNS = {"op": "_change_op", "time": "_change_time", "sequence": "_change_seq"}


@dataclass
class Normalised:
    """One batch of changes in the internal form, the rows set aside, and counts by kind.

    ``index[i]`` is the input row that ``changes`` row ``i`` came from; ``snapshot[i]`` whether it
    was a snapshot row (a bootstrap's, or a vocabulary's snapshot read; None: not known).
    """

    changes: pa.Table
    aside: pa.Table
    counts: dict[str, int]
    index: np.ndarray
    snapshot: np.ndarray | None = None


def op_codes(column: pa.ChunkedArray | pa.Array, ops: Mapping[str, int]) -> np.ndarray:
    """The op code of each row (int8) by ``ops``; :data:`UNKNOWN` for an op not in it, or null."""
    known = pa.array(list(ops), pa.string())
    codes = np.array(list(ops.values()) + [UNKNOWN], dtype=np.int8)
    index = pc.index_in(column.cast(pa.string()), value_set=known).fill_null(len(ops))
    return codes[index.to_numpy()]


def micros(column: pa.ChunkedArray | pa.Array, unit: str) -> pa.Array:
    """Change times as int64 µs, nulls kept: a timestamp column, or integers counted in ``unit``."""
    if pa.types.is_timestamp(column.type):
        times = timestamp_micros(column)
    else:
        times = pc.multiply_checked(column.cast(pa.int64()), UNITS[unit])
    return times.combine_chunks() if isinstance(times, pa.ChunkedArray) else times


def sequence_numbers(table: pa.Table, fmt: ChangeFormat) -> pa.ChunkedArray:
    """The sequence column of ``fmt`` as int64, or nulls when ``fmt`` has none."""
    if fmt.sequence is None:
        return pa.chunked_array([pa.nulls(table.num_rows, pa.int64())])
    return table.column(fmt.sequence).cast(pa.int64())


def struct_rows(column: pa.ChunkedArray | pa.Array, fields: list[pa.Field]) -> pa.Table:
    """The ``fields`` of a struct column, as a table (a null struct gives null columns)."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    return pa.Table.from_arrays([pc.struct_field(column, f.name) for f in fields], schema=pa.schema(fields))


def to_internal(table: pa.Table, fmt: ChangeFormat, ops: np.ndarray, times: pa.Array,
                seq: pa.Array | pa.ChunkedArray, row: pa.Table, counts: Mapping[str, int] | None = None,
                timeless_snapshots: bool = False, partial_null_keys: bool = False) -> Normalised:
    """Sort the rows of ``table`` out and put the kept ones in the internal form.

    ``ops``, ``times``, ``seq`` and ``row`` (the row's columns, key included) are per input row.
    Checks apply in order: op (:data:`UNKNOWN`: ``"unknown op"``), change time (null:
    ``"null change time"``, except a snapshot row when ``timeless_snapshots``), key (a null in
    any key column of a row that is not a heartbeat, or with ``partial_null_keys`` a null in every
    key column: ``"null key"``). :data:`SKIPPED` rows are
    dropped and counted as ``preimages``; ``counts`` adds the vocabulary's own counts.
    """
    unknown = ops == UNKNOWN
    null_time = ~unknown & (ops != SKIPPED) & times.is_null().to_numpy(zero_copy_only=False)
    if timeless_snapshots:
        null_time &= ops != SNAPSHOT
    snapshot = ops == SNAPSHOT
    ops = np.where(snapshot, np.int8(UPSERT), ops).astype(np.int8)
    null_key = np.full(table.num_rows, partial_null_keys, dtype=bool)
    for name in fmt.key:
        nulls = row.column(name).is_null().to_numpy(zero_copy_only=False)
        null_key = null_key & nulls if partial_null_keys else null_key | nulls
    null_key &= ~unknown & ~null_time & (ops != HEARTBEAT) & (ops != SKIPPED)
    keep = ~(unknown | null_time | null_key) & (ops != SKIPPED)
    counts = {**(counts or {}), "preimages": int((ops == SKIPPED).sum()),
              "heartbeats": int((keep & (ops == HEARTBEAT)).sum()), "unknown_op": int(unknown.sum()),
              "null_change_time": int(null_time.sum()), "null_key": int(null_key.sum())}
    aside = set_aside(table, [(unknown, "unknown op"), (null_time, "null change time"), (null_key, "null key")])
    mask = pa.array(keep)
    keys = [row.column(k).filter(mask) for k in fmt.key]
    values = [row.column(n).filter(mask) for n in row.column_names if n not in fmt.key]
    meta = [pa.array(ops[keep], pa.int8()), times.filter(mask), pa.chunked_array(seq).filter(mask)]
    changes = pa.Table.from_arrays(keys + meta + values, schema=fmt.internal_schema(table.schema))
    return Normalised(changes, aside, counts, np.flatnonzero(keep), snapshot[keep])


def top_level_changes(table: pa.Table, fmt: ChangeFormat, ops: Mapping[str, int], *,
                      timeless_snapshots: bool = False) -> Normalised:
    """:func:`to_internal` of a vocabulary whose op, change time, sequence and row are top-level
    columns (the row: ``fmt.row_fields``), its op words mapped by ``ops``."""
    fields = fmt.row_fields(table.schema)
    codes = op_codes(table.column(fmt.op), ops)
    times = micros(table.column(fmt.time), fmt.time_unit)
    row = table.select([f.name for f in fields])
    return to_internal(table, fmt, codes, times, sequence_numbers(table, fmt), row,
                       timeless_snapshots=timeless_snapshots)
