"""The Delta Lake change data feed vocabulary.

``_change_type`` in ``insert``/``update_postimage`` (upsert), ``delete``, ``heartbeat``,
``snapshot``; ``update_preimage`` rows carry the *old* row, add no new state and are skipped
(counted as ``preimages``), never set aside. The change time is ``_commit_timestamp`` unless
another timestamp column is named (a business time such as ``valid_from``, which stays a row
column); ties are broken by ``_commit_version`` unless another integer column is named. The row
is every column but ``_change_type``, ``_commit_version`` and ``_commit_timestamp``.
"""

from __future__ import annotations

import pyarrow as pa

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
        return top_level_changes(table, fmt, self.ops, timeless_snapshots=timeless_snapshots)
