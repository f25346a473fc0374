"""The streamjoin vocabulary: the change stream a table-table join outputs (a view's changes).

A view's change stream is the Delta change data feed vocabulary with the join's own bookkeeping:
``_change_type`` (``insert``, ``update_preimage``, ``update_postimage``, ``delete``),
``_commit_version`` (the micro-batch id), ``_seq`` (the order of a view key's changes within a
version: retractions 0, insertions 1) and ``_change_timestamp`` (the change time: the event time
of the input change that caused the view change). It is detected by those four columns, so a
join's output is accepted as it comes by the next join; the row is every other column.

**Key**: the view key (both sides' primary keys), or any of its columns that identify a view row
(the fact table's key in a chain of many-to-one joins). A null-padded side's key columns are
null, so a key is refused as ``"null key"`` only when every column of it is null.

A key that does not identify a view row shows as two changes of one key at one
(``_commit_version``, ``_seq``): they are set aside as :data:`NOT_A_VIEW_KEY` (counted as
``not_a_view_key``), never applied in an arbitrary order.

**Order**: a key's changes are ordered by (``_commit_version``, ``_seq``): that is the order the
join wrote them in. The internal sequence is ``_commit_version * 2**16 + _seq``; the change time
is ``_change_timestamp``. A view key's change times need not grow with that order (a change that
arrives late on one table causes a view change with an older time), so the table-table join
applies this vocabulary's changes in sequence order alone (:attr:`ordered_by_sequence`), while the
stream-table join orders them as any table's, by change time, then sequence (an as-of lookup in
the view's history).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from streamjoin.changes.format import ChangeFormat
from streamjoin.changes.internal import (
    DELETE,
    SEQ,
    SKIPPED,
    UPSERT,
    Normalised,
    micros,
    op_codes,
    set_aside,
    to_internal,
)
from streamjoin.changes.vocabulary import ChangeVocabulary, is_text, require_column
from streamjoin.errors import JoinDefinitionError

__all__ = ["StreamjoinVocabulary", "CHANGE_TYPE", "COMMIT_VERSION", "SEQ_COLUMN", "CHANGE_TIME", "VIEW_META",
           "SEQ_SHIFT", "NOT_A_VIEW_KEY"]

CHANGE_TYPE, COMMIT_VERSION, SEQ_COLUMN, CHANGE_TIME = "_change_type", "_commit_version", "_seq", "_change_timestamp"
#: The bookkeeping columns of a view's change stream, never part of the row.
VIEW_META = (CHANGE_TYPE, COMMIT_VERSION, SEQ_COLUMN, CHANGE_TIME)
#: ``_seq`` occupies the low bits of the internal sequence, ``_commit_version`` the others.
SEQ_SHIFT = 16
#: The reason two changes of one key at one (``_commit_version``, ``_seq``) are set aside.
NOT_A_VIEW_KEY = ("two changes of one key at one (_commit_version, _seq): the key does not identify a view row; "
                  "give the view key (both sides' primary keys) as the key")


class StreamjoinVocabulary(ChangeVocabulary):
    """A table-table join's output (see module docstring); detected by its four bookkeeping columns."""

    name = "streamjoin"
    needs_pre_stage = False
    ordered_by_sequence = True
    ops = {"insert": UPSERT, "update_postimage": UPSERT, "update_preimage": SKIPPED, "delete": DELETE}

    def detect(self, schema: pa.Schema) -> bool:
        return all(name in schema.names for name in VIEW_META)

    def default_format(self, schema: pa.Schema, key: tuple[str, ...], *, time: str | None,
                       sequence: str | None, time_argument: str) -> ChangeFormat:
        if time not in (None, CHANGE_TIME) or sequence is not None:
            raise JoinDefinitionError(
                f"a view's change stream (a table-table join's output) is ordered by {COMMIT_VERSION} and "
                f"{SEQ_COLUMN} and its change time is {CHANGE_TIME}: leave {time_argument} and the sequence out")
        return ChangeFormat.streamjoin(key)

    def validate(self, schema: pa.Schema, fmt: ChangeFormat) -> list[pa.Field]:
        require_column(schema, fmt.op, is_text, "a string column")
        require_column(schema, fmt.time, pa.types.is_timestamp, "a timestamp column (the change time)")
        for name in (COMMIT_VERSION, SEQ_COLUMN):
            require_column(schema, name, pa.types.is_integer, "an integer column")
        return [f for f in schema if f.name not in (*VIEW_META, fmt.op, fmt.time)]

    def normalise(self, table: pa.Table, fmt: ChangeFormat, *, timeless_snapshots: bool = False) -> Normalised:
        fields = fmt.row_fields(table.schema)
        codes = op_codes(table.column(fmt.op), self.ops)
        times = micros(table.column(fmt.time), fmt.time_unit)
        version = table.column(COMMIT_VERSION).cast(pa.int64())
        seq = pc.add(pc.shift_left(version, SEQ_SHIFT), table.column(SEQ_COLUMN).cast(pa.int64()))
        row = table.select([f.name for f in fields])
        result = to_internal(table, fmt, codes, times, seq, row, timeless_snapshots=timeless_snapshots,
                             partial_null_keys=True)
        return _without_ambiguous(table, fmt, result)


def _without_ambiguous(table: pa.Table, fmt: ChangeFormat, result: Normalised) -> Normalised:
    """``result`` without the changes that share a key and an order with another (see module),
    which are set aside with :data:`NOT_A_VIEW_KEY` and counted as ``not_a_view_key``."""
    changes = result.changes
    ids = changes.select([*fmt.key, SEQ]).rename_columns([f"k{i}" for i in range(len(fmt.key) + 1)])
    counts = ids.group_by(ids.column_names).aggregate([([], "count_all")])
    result.counts["not_a_view_key"] = 0
    if counts.num_rows == changes.num_rows:
        return result
    twice = {tuple(r[n] for n in ids.column_names) for r in counts.to_pylist() if r["count_all"] > 1}
    ambiguous = np.fromiter((t in twice for t in zip(*(c.to_pylist() for c in ids.columns))), bool, changes.num_rows)
    keep = pa.array(~ambiguous)
    at = np.zeros(table.num_rows, bool)
    at[result.index[ambiguous]] = True
    result.aside = pa.concat_tables([result.aside, set_aside(table, [(at, NOT_A_VIEW_KEY)])])
    result.counts["not_a_view_key"] = int(ambiguous.sum())
    result.changes = changes.filter(keep)
    result.index = result.index[~ambiguous]
    if result.snapshot is not None:
        result.snapshot = result.snapshot[~ambiguous]
    return result
