"""The plain vocabulary: key columns, an op column, a change-time column, the row's columns.

``op`` in ``upsert``/``insert``/``update`` (upsert), ``delete``, ``heartbeat``, ``snapshot``; the
change time a timestamp or integer column (``time_unit``); an optional integer sequence column.
The row is every column but the op (the change time and sequence stay visible). It is also the
form :func:`streamjoin.changes.to_plain` writes, with the columns of :data:`PLAIN_COLUMNS`.
"""

from __future__ import annotations

import pyarrow as pa

from streamjoin.changes.format import ChangeFormat
from streamjoin.changes.internal import (
    DELETE,
    HEARTBEAT,
    PLAIN_COLUMNS,
    SNAPSHOT,
    SNAPSHOT_OP,
    UPSERT,
    Normalised,
    top_level_changes,
)
from streamjoin.changes.vocabulary import ChangeVocabulary, is_text, is_time, require_column, require_sequence
from streamjoin.errors import JoinDefinitionError

__all__ = ["PlainVocabulary"]


class PlainVocabulary(ChangeVocabulary):
    """Plain change tables (see module docstring); detected by an ``op`` column, or by the
    ``_change_op`` and ``_change_time`` columns of the plain form (which win when both are there)."""

    name = "plain"
    needs_pre_stage = False
    snapshot_op = SNAPSHOT_OP
    ops = {"upsert": UPSERT, "insert": UPSERT, "update": UPSERT, "delete": DELETE, "heartbeat": HEARTBEAT,
           SNAPSHOT_OP: SNAPSHOT}

    def detect(self, schema: pa.Schema) -> bool:
        return _is_plain_form(schema) or "op" in schema.names

    def default_format(self, schema: pa.Schema, key: tuple[str, ...], *, time: str | None,
                       sequence: str | None, time_argument: str) -> ChangeFormat:
        """The plain form's own columns when the table has them, else ``op`` with ``time``."""
        if _is_plain_form(schema):
            seq = PLAIN_COLUMNS["sequence"] if PLAIN_COLUMNS["sequence"] in schema.names else None
            return ChangeFormat.plain(key, op=PLAIN_COLUMNS["op"], time=PLAIN_COLUMNS["time"], sequence=seq)
        if time is None:
            raise JoinDefinitionError(
                f"a plain change table (an 'op' column) needs its change-time column: pass "
                f"{time_argument}='<its change time column>', or changes=ChangeFormat.plain(...)")
        return ChangeFormat.plain(key, time=time, sequence=sequence)

    def validate(self, schema: pa.Schema, fmt: ChangeFormat) -> list[pa.Field]:
        require_column(schema, fmt.op, is_text, "a string column")
        require_column(schema, fmt.time, is_time, "a timestamp or integer column")
        require_sequence(schema, fmt.sequence)
        return [f for f in schema if f.name != fmt.op]

    def normalise(self, table: pa.Table, fmt: ChangeFormat, *, timeless_snapshots: bool = False) -> Normalised:
        return top_level_changes(table, fmt, self.ops, timeless_snapshots=timeless_snapshots)


def _is_plain_form(schema: pa.Schema) -> bool:
    return PLAIN_COLUMNS["op"] in schema.names and PLAIN_COLUMNS["time"] in schema.names
