"""Row handling of the interval join, all in Arrow: sorting, sorting out, matching, output rows.

Nothing here loops over rows in Python. Matching is one Acero hash join on the key columns of two
narrow tables (keys, event time, row index) with the time bounds as its residual filter; the wide
rows are only gathered (``take``) for the pairs that match.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from streamjoin.errors import JoinError
from streamjoin.interval.spec import ROW_ID, IntervalSpec, SidePlan
from streamjoin.kit.arrivals import sort_out
from streamjoin.kit.keys import normal_key_array
from streamjoin.kit.times import times_of

__all__ = ["Arrivals", "arrive", "times_of", "narrow", "match", "pairs", "left_padded", "right_padded",
           "left_rows"]


@dataclass
class Arrivals:
    """One side's rows of one version, sorted out.

    ``rows``: the rows to join (stored columns plus :data:`ROW_ID`, canonical order), with their
    event times ``times`` (µs) and ``matched`` flags; ``unkeyed``: rows with a null key on a side
    whose unmatched rows are output (all input columns); ``aside``: rows set aside with a reason.
    """

    rows: pa.Table
    times: np.ndarray
    matched: np.ndarray
    unkeyed: pa.Table
    aside: pa.Table
    counts: dict[str, int]


def arrive(
    spec: IntervalSpec, side: SidePlan, table: pa.Table, version: int, watermark: int
) -> Arrivals:
    """Sort ``table`` canonically, set aside null-time, late and (unless preserved) null-key rows,
    and leave out heartbeats (:func:`streamjoin.kit.arrivals.sort_out`)."""
    found = sort_out(table, schema=side.schema, name=side.name, order=side.sort_keys, time=side.time,
                     key=side.key, watermark=watermark, heartbeats=spec.heartbeats)
    keep, preserved = found.keep, spec.how.emits_unmatched(side.name)
    rows = (found.table if keep.all() else found.table.filter(keep)).select(list(side.stored))
    if rows.num_rows >= 1 << 32 or not 0 <= version < 1 << 31:
        raise JoinError(f"interval join: version {version} or {rows.num_rows} rows in one batch out of range")
    ids = np.arange(rows.num_rows, dtype=np.int64) + (version << 32)
    rows = rows.append_column(ROW_ID, pa.array(ids))
    unkeyed = found.table.filter(found.null_key) if preserved else found.table.slice(0, 0)
    return Arrivals(rows, found.times[keep], np.zeros(rows.num_rows, dtype=bool), unkeyed,
                    found.aside(keyless_kept=preserved), found.counts())


def narrow(spec: IntervalSpec, side: SidePlan, table: pa.Table, times: np.ndarray) -> pa.Table:
    """What matching needs of ``table``: keys (as the common type, floating-point ones as Spark
    compares them: :func:`streamjoin.kit.normal_key_array`), time, row index."""
    columns, names = [], []
    for i, (column, kind) in enumerate(zip(side.key, spec.key_types)):
        values = table.column(column)
        columns.append(normal_key_array(values if values.type == kind else values.cast(kind)))
        names.append(f"__k{i}")
    tag = side.name[0]
    columns += [pa.array(times), pa.array(np.arange(table.num_rows, dtype=np.int64))]
    names += [f"__{tag}t", f"__{tag}i"]
    return pa.Table.from_arrays(columns, names=names)


def match(spec: IntervalSpec, left: pa.Table, right: pa.Table) -> tuple[np.ndarray, np.ndarray]:
    """Row indices (left, right) of the pairs of two narrow tables with equal keys and
    ``left.t + lower <= right.t <= left.t + upper``."""
    if left.num_rows == 0 or right.num_rows == 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty
    lt, rt = pc.field("__lt"), pc.field("__rt")
    within = (rt >= lt + pc.scalar(spec.lower)) & (rt <= lt + pc.scalar(spec.upper))
    keys = [f"__k{i}" for i in range(len(spec.key_types))]
    joined = left.join(right, keys, join_type="inner", use_threads=False, filter_expression=within)
    li = joined.column("__li").to_numpy()
    ri = joined.column("__ri").to_numpy()
    return li, ri


def pairs(spec: IntervalSpec, left: pa.Table, li: np.ndarray, right: pa.Table, ri: np.ndarray) -> pa.Table:
    """Output rows of matched pairs: ``left`` row ``li[j]`` with ``right`` row ``ri[j]``."""
    lt, rt = left.take(pa.array(li)), right.take(pa.array(ri))
    return _assemble(spec, lt, rt, len(li), key_from="left")


def left_padded(spec: IntervalSpec, left: pa.Table, index: np.ndarray | None = None) -> pa.Table:
    """Output rows of unmatched left rows (``index`` of ``left``; None: all), right columns null."""
    rows = left if index is None else left.take(pa.array(index))
    return _assemble(spec, rows, None, rows.num_rows, key_from="left")


def right_padded(spec: IntervalSpec, right: pa.Table, index: np.ndarray | None = None) -> pa.Table:
    """Output rows of unmatched right rows, left columns null, keys from the right row."""
    rows = right if index is None else right.take(pa.array(index))
    return _assemble(spec, None, rows, rows.num_rows, key_from="right")


def left_rows(spec: IntervalSpec, left: pa.Table, index: np.ndarray | None = None) -> pa.Table:
    """Output rows of semi/anti joins: the left rows as they are."""
    rows = left if index is None else left.take(pa.array(index))
    return rows.select(spec.output_schema.names).cast(spec.output_schema)


def _assemble(
    spec: IntervalSpec, left: pa.Table | None, right: pa.Table | None, n: int, key_from: str
) -> pa.Table:
    arrays = []
    for column, field in zip(spec.output, spec.output_schema):
        if column.side == "key":
            source = left if key_from == "left" else right
            assert source is not None, "key_from names a side that has rows"
            name = column.source if key_from == "left" else spec.right.key[spec.left.key.index(column.source)]
            values = source.column(name)
        else:
            source = left if column.side == "left" else right
            values = None if source is None else source.column(column.source)
        if values is None:
            arrays.append(pa.nulls(n, field.type))
        else:
            arrays.append(values if values.type == field.type else values.cast(field.type))
    return pa.Table.from_arrays(arrays, schema=spec.output_schema)
