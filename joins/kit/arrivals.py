"""Sorting out a batch's arriving rows: heartbeats, late, null event time, null key, and those to process.

A stream join sees each input row once, in the batch it arrives in. Before joining, the rows are
put in the canonical order (:mod:`streamjoin.kit.order`) and sorted out, each row in exactly one
group (docs/design/semantics.md, "Time"):

* ``heartbeat`` (only when the join accepts heartbeats): every column but the event time is
  null and the event time is not. Its time is progress (the runtime counts it in the input's
  largest event time like any row's); the row itself is never joined, stored, output or set
  aside, late or not;
* ``null_time``: the event time is null (reason ``"null event time"``);
* ``late``: the event time is below the watermark (reason ``"late"``);
* ``null_key``: otherwise, a key column is null. A join that outputs such a row unmatched
  (an outer side) keeps it aside to emit; any other sets it aside (reason ``"null key"``);
* the rest are processed.

Rows set aside carry their reason in :data:`streamjoin.kit.columns.REASON_COLUMN`
(:func:`set_aside`). Nothing here loops over rows in Python.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pyarrow as pa

from streamjoin.errors import JoinDefinitionError
from streamjoin.kit.columns import REASON_COLUMN, conform
from streamjoin.kit.order import SortKeys, sort_canonically
from streamjoin.kit.times import times_of

__all__ = ["REASON_LATE", "REASON_NULL_TIME", "REASON_NULL_KEY", "Arrivals", "sort_out", "set_aside", "heartbeat_rows",
           "check_heartbeats"]

REASON_LATE, REASON_NULL_TIME, REASON_NULL_KEY = "late", "null event time", "null key"


@dataclass(frozen=True)
class Arrivals:
    """One input's rows of one batch, in canonical order, sorted out (see module).

    ``times`` are the rows' event times in µs (0 where null); the four masks are disjoint.
    """

    table: pa.Table
    times: np.ndarray
    null_time: np.ndarray
    late: np.ndarray
    null_key: np.ndarray
    heartbeat: np.ndarray

    @property
    def keep(self) -> np.ndarray:
        """The rows to process: none of the four groups."""
        return ~(self.null_time | self.late | self.null_key | self.heartbeat)

    def aside(self, keyless_kept: bool) -> pa.Table:
        """The rows set aside with their reason; null-key rows too unless ``keyless_kept`` (the
        join outputs them unmatched)."""
        groups = [(self.null_time, REASON_NULL_TIME), (self.late, REASON_LATE)]
        return set_aside(self.table, groups if keyless_kept else [*groups, (self.null_key, REASON_NULL_KEY)])

    def counts(self) -> dict[str, int]:
        """How many rows each group has: ``late``, ``null_time``, ``null_key``, ``heartbeat``."""
        return {"late": int(self.late.sum()), "null_time": int(self.null_time.sum()),
                "null_key": int(self.null_key.sum()), "heartbeat": int(self.heartbeat.sum())}


def sort_out(
    table: pa.Table, *, schema: pa.Schema, name: str, order: SortKeys, time: str, key: Sequence[str],
    watermark: int, heartbeats: bool = False,
) -> Arrivals:
    """``table`` (input ``name``, conformed to ``schema``) in the canonical ``order``, sorted out
    by its ``time`` column against ``watermark`` and by its ``key`` columns (see module); with
    ``heartbeats``, a row whose only non-null column is ``time`` is a heartbeat."""
    table = sort_canonically(conform(table, schema, name), order)
    null_time = table.column(time).is_null().to_numpy(zero_copy_only=False)
    times = times_of(table, time)
    heartbeat = heartbeat_rows(table, time) if heartbeats else np.zeros(table.num_rows, dtype=bool)
    late = ~null_time & ~heartbeat & (times < watermark)
    null_key = np.zeros(table.num_rows, dtype=bool)
    for column in key:
        null_key |= table.column(column).is_null().to_numpy(zero_copy_only=False)
    null_key &= ~null_time & ~late & ~heartbeat
    return Arrivals(table, times, null_time, late, null_key, heartbeat)


def check_heartbeats(value: object) -> bool:
    """``value`` of a join's ``heartbeats`` argument, refused with a JoinDefinitionError unless a bool."""
    if not isinstance(value, bool):
        raise JoinDefinitionError(
            f"heartbeats must be True or False, not {value!r}: True makes an event row whose every column "
            "but its event time is null a heartbeat (progress only, never joined or output)")
    return value


def heartbeat_rows(table: pa.Table, time: str) -> np.ndarray:
    """Whether each row of ``table`` is a heartbeat: its ``time`` is not null and every other
    column is."""
    beat = ~table.column(time).is_null().to_numpy(zero_copy_only=False)
    for column in table.column_names:
        if column != time:
            beat &= table.column(column).is_null().to_numpy(zero_copy_only=False)
    return beat


def set_aside(table: pa.Table, groups: list[tuple[np.ndarray, str]]) -> pa.Table:
    """The rows of ``table`` selected by each mask, with the mask's reason in
    :data:`REASON_COLUMN`, group after group (empty, with that column, when none is selected)."""
    parts = []
    for mask, reason in groups:
        if mask.any():
            rows = table.filter(mask)
            parts.append(rows.append_column(REASON_COLUMN, pa.repeat(pa.scalar(reason), rows.num_rows)))
    if not parts:
        return table.schema.append(pa.field(REASON_COLUMN, pa.string())).empty_table()
    return pa.concat_tables(parts)
