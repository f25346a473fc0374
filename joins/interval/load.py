"""Starting the interval join from state rows (:mod:`streamjoin.runtime.initial_state`).

The rows of a side (``read_state``'s ``left`` / ``right``: the stored columns, ``_matched``,
``_watermark``) become the state that side holds (:mod:`streamjoin.interval.state`): each row is
filed under the bucket of its expiry time, as arriving in ``version - 1`` (before the first version,
so the first version's own rows meet them as state rows), in canonical order, with row ids
``(version - 1) << 32 | n``; on a side whose matches the join records (outer, semi and anti
sides), the rows with ``_matched`` true are marked matched in that version. The watermark is the
largest ``_watermark`` of every side's rows, over every partition (:func:`summary`), so every
partition judges lateness as the run that held the state did.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from streamjoin.interval.spec import ROW_ID, IntervalSpec
from streamjoin.interval.state import marks_put, rows_puts, watermark_put
from streamjoin.kit.order import sort_canonically
from streamjoin.kit.times import times_of
from streamjoin.statestore.base import KeyValue

__all__ = ["key_arrays", "summary", "entries"]

#: The summary's name of the state's watermark.
WATERMARK = "watermark"


def key_arrays(spec: IntervalSpec, side: str, rows: pa.Table) -> list[pa.Array]:
    """The side's key columns of its state rows."""
    return [rows.column(name).combine_chunks() for name in spec.side(side).key]


def summary(rows: pa.Table) -> dict[str, int]:
    """The largest watermark the rows were read at (none when every one is null: no watermark yet)."""
    found = pc.max(rows.column("_watermark").cast(pa.timestamp("us", "UTC")).cast(pa.int64())).as_py()
    return {} if found is None else {WATERMARK: int(found)}


def entries(spec: IntervalSpec, rows: Mapping[str, pa.Table], summary: Mapping[str, int], version: int) -> list[KeyValue]:
    """The partition's state holding ``rows`` (by side) before ``version`` (see module)."""
    out: list[KeyValue] = []
    if WATERMARK in summary:
        out.append(watermark_put(summary[WATERMARK]))
    arrived = version - 1
    for side in ("left", "right"):
        table = rows.get(side)
        if table is None or table.num_rows == 0:
            continue
        out += _side(spec, side, table, arrived)
    return sorted(out)


def _side(spec: IntervalSpec, side: str, table: pa.Table, arrived: int) -> list[KeyValue]:
    plan = spec.side(side)
    stored = pa.schema([f for f in plan.stored_schema if f.name != ROW_ID])
    rows = pa.Table.from_arrays([table.column(f.name).cast(f.type) for f in stored], schema=stored)
    matched = table.column("_matched").fill_null(False)
    keys = tuple(k for k in plan.sort_keys if k[0] in rows.column_names)   # (the stored columns')
    rows = sort_canonically(rows.append_column("__sj_matched", matched), keys)
    times = times_of(rows, plan.time)
    starts = (times + spec.expiry_offset(side)) // spec.bucket * spec.bucket   # (bucket_start, vectorized)
    order = np.argsort(starts, kind="stable")   # by bucket, canonical within one
    rows, starts = rows.take(pa.array(order)), starts[order]
    ids = (arrived << 32) + np.arange(rows.num_rows, dtype=np.int64)
    flags = rows.column("__sj_matched").to_numpy(zero_copy_only=False).astype(bool)
    rows = rows.drop_columns(["__sj_matched"]).append_column(ROW_ID, pa.array(ids))
    out: list[KeyValue] = []
    marked: dict[int, list[np.ndarray]] = defaultdict(list)
    bounds = np.r_[0, np.flatnonzero(np.diff(starts)) + 1, starts.size]
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        start = int(starts[lo])
        out += rows_puts(side, start, arrived, rows.slice(lo, hi - lo), spec.blob_rows, spec.compression)
        if spec.how.marks(side) and flags[lo:hi].any():
            marked[start].append(ids[lo:hi][flags[lo:hi]])
    out += [marks_put(side, start, arrived, np.concatenate(found)) for start, found in marked.items()]
    return out
