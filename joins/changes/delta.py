"""The Delta Lake change data feed vocabulary.

``_change_type`` in ``insert``/``update_postimage`` (upsert), ``delete``, ``heartbeat``,
``snapshot``; ``update_preimage`` rows carry the *old* row, add no new state and are skipped
(counted as ``preimages``), never set aside, but for one whose key has no ``update_postimage`` in
its commit (``_commit_version``, else the sequence) in the micro-batch, where the change time is the
commit's (``_commit_timestamp``): that update moved the row to another primary key, so it is a
delete of the old key at the commit's time (counted as ``key_moves``), ordered before the commit's
other changes (a null sequence), so a post-image of its key in a later micro-batch still applies.
Under another change time (a business time, which a pre-image holds the old row's value of, not
the move's) such a pre-image is skipped as the others are, and counted as ``unpaired_preimages``:
a move the join cannot apply, which the feed should write as a delete of the old key. The change
time is ``_commit_timestamp`` unless
another timestamp column is named (a business time such as ``valid_from``, which stays a row
column); ties are broken by ``_commit_version`` unless another integer column is named. The row
is every column but ``_change_type``, ``_commit_version`` and ``_commit_timestamp``.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from streamjoin.changes.format import ChangeFormat
from streamjoin.changes.internal import (
    DELETE,
    HEARTBEAT,
    SKIPPED,
    SNAPSHOT,
    SNAPSHOT_OP,
    UPSERT,
    Normalised,
    top_level_changes,
)
from streamjoin.changes.vocabulary import ChangeVocabulary, is_text, require_column, require_sequence

__all__ = ["DeltaVocabulary", "DELTA_META"]

#: The change feed's own columns, never part of the row.
DELTA_META = ("_change_type", "_commit_version", "_commit_timestamp")


class DeltaVocabulary(ChangeVocabulary):
    """A Delta change data feed (see module docstring); detected by a ``_change_type`` column."""

    name = "delta"
    needs_pre_stage = False
    snapshot_op = SNAPSHOT_OP
    ops = {"insert": UPSERT, "update_postimage": UPSERT, "update_preimage": SKIPPED, "delete": DELETE,
           "heartbeat": HEARTBEAT, SNAPSHOT_OP: SNAPSHOT}

    def detect(self, schema: pa.Schema) -> bool:
        return "_change_type" in schema.names

    def default_format(self, schema: pa.Schema, key: tuple[str, ...], *, time: str | None,
                       sequence: str | None, time_argument: str) -> ChangeFormat:
        return ChangeFormat.delta(key, time=time or "_commit_timestamp", sequence=sequence)

    def validate(self, schema: pa.Schema, fmt: ChangeFormat) -> list[pa.Field]:
        require_column(schema, fmt.op, is_text, "a string column")
        require_column(schema, fmt.time, pa.types.is_timestamp, "a timestamp column (the change time)")
        require_sequence(schema, fmt.sequence)
        return [f for f in schema if f.name not in (fmt.op, *DELTA_META)]

    def normalise(self, table: pa.Table, fmt: ChangeFormat, *, timeless_snapshots: bool = False) -> Normalised:
        unpaired = _unpaired_pre_images(table, fmt)
        moves = fmt.time == "_commit_timestamp"   # (a business time: the pre-image holds the old row's)
        if moves and len(unpaired):
            table = _as_deletes(table, fmt, unpaired)
        result = top_level_changes(table, fmt, self.ops, timeless_snapshots=timeless_snapshots)
        result.counts["key_moves"] = len(unpaired) if moves else 0
        result.counts["unpaired_preimages"] = 0 if moves else len(unpaired)
        return result


def _unpaired_pre_images(table: pa.Table, fmt: ChangeFormat) -> np.ndarray:
    """The rows of ``table`` (a Delta feed) that are ``update_preimage`` rows with a key (no null
    in it) that no ``update_postimage`` of their commit (``_commit_version``, else
    ``fmt.sequence``) has: updates that moved a row to another primary key. Ascending row
    numbers."""
    op = table.column(fmt.op)
    pre = pc.fill_null(pc.equal(op, pa.scalar("update_preimage", op.type)), False)
    for name in fmt.key:
        pre = pc.and_(pre, table.column(name).is_valid())
    if not pc.any(pre).as_py():
        return np.zeros(0, np.int64)
    commit = "_commit_version" if "_commit_version" in table.schema.names else fmt.sequence
    on = [*fmt.key, *([commit] if commit is not None else [])]
    post = pc.fill_null(pc.equal(op, pa.scalar("update_postimage", op.type)), False)
    posts = table.select(on).filter(post).group_by(on, use_threads=False).aggregate([])
    pres = table.select(on).append_column(_ROW, pa.array(np.arange(table.num_rows))).filter(pre)
    alone = pres.join(posts, keys=on, join_type="left anti", use_threads=False)
    return np.sort(alone.column(_ROW).to_numpy())


def _as_deletes(table: pa.Table, fmt: ChangeFormat, rows: np.ndarray) -> pa.Table:
    """``table`` with ``rows`` made deletes ordered before every other change of their commit: a
    null sequence (nulls first), so a post-image of that key and commit that arrives in a later
    micro-batch is still newer."""
    moved = np.zeros(table.num_rows, np.bool_)
    moved[rows] = True
    mask = pa.array(moved)
    at = table.schema.get_field_index(fmt.op)
    ops = table.column(at).combine_chunks()
    table = table.set_column(at, table.field(at), pc.if_else(mask, pa.scalar("delete", ops.type), ops))
    if fmt.sequence is not None:
        at = table.schema.get_field_index(fmt.sequence)
        seq = table.column(at).combine_chunks()
        table = table.set_column(at, table.field(at).with_nullable(True),
                                 pc.if_else(mask, pa.scalar(None, seq.type), seq))
    return table


#: The row number column of :func:`_unpaired_pre_images`' join.
_ROW = "__sj_row"
