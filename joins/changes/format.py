"""``ChangeFormat``: one change table's vocabulary and columns, the value users pass as ``changes=``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import pyarrow as pa

from streamjoin.changes.internal import OP, SEQ, SNAPSHOT_OP, TIME, UNITS
from streamjoin.changes.registry import get_vocabulary
from streamjoin.changes.vocabulary import ChangeVocabulary
from streamjoin.errors import JoinDefinitionError
from streamjoin.runtime.operator import REASON_COLUMN

__all__ = ["ChangeFormat"]


@dataclass(frozen=True)
class ChangeFormat:
    """A change table's vocabulary and columns; build it with the class methods.

    ``vocabulary``: a ``ChangeVocabulary``, or the name of a registered one. ``time`` is a
    timestamp column, or an integer column counted in ``time_unit`` (``s``, ``ms``, ``us``) since
    the epoch. ``column`` is a vocabulary's own column: for ``debezium_json`` the JSON string
    column (``time``/``sequence`` then name fields of the envelope, ``row_schema`` its row).
    """

    vocabulary: ChangeVocabulary
    key: tuple[str, ...]
    time: str
    op: str | None = None
    sequence: str | None = None
    time_unit: str = "us"
    column: str | None = None
    row_schema: pa.Schema | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.vocabulary, ChangeVocabulary):
            object.__setattr__(self, "vocabulary", get_vocabulary(self.vocabulary))
        object.__setattr__(self, "key", _names(self.key))

    @classmethod
    def plain(cls, key: str | Sequence[str], *, time: str, op: str = "op",
              sequence: str | None = None, time_unit: str = "us") -> ChangeFormat:
        """A plain change table: ``op`` in upsert/insert/update/delete/heartbeat/snapshot."""
        return cls(get_vocabulary("plain"), _names(key), time, op, sequence, time_unit)

    @classmethod
    def delta(cls, key: str | Sequence[str], *, time: str = "_commit_timestamp",
              sequence: str | None = None) -> ChangeFormat:
        """A Delta change data feed. ``time``: the change time, ``_commit_timestamp`` or any
        timestamp column of the row (a business time such as ``valid_from``, which stays a row
        column); ties are broken by ``sequence``, ``_commit_version`` unless another integer
        column is named."""
        if not isinstance(time, str) or not (sequence is None or isinstance(sequence, str)):
            raise JoinDefinitionError(f"a Delta feed's time and sequence are column names, not {time!r}, {sequence!r}")
        return cls(get_vocabulary("delta"), _names(key), time, "_change_type", sequence or "_commit_version")

    @classmethod
    def debezium(cls, key: str | Sequence[str], *, time: str = "ts_ms", time_unit: str = "ms",
                 sequence: str | None = None) -> ChangeFormat:
        """Debezium envelopes as columns: ``op``, ``before``/``after`` structs, a top-level change time."""
        return cls(get_vocabulary("debezium"), _names(key), time, "op", sequence, time_unit)

    @classmethod
    def debezium_json(cls, key: str | Sequence[str], row_schema: pa.Schema, *, column: str = "value",
                      time: str = "ts_ms", time_unit: str = "ms", sequence: str | None = None) -> ChangeFormat:
        """Debezium envelopes as one JSON string per row in ``column``; ``row_schema``: the row's."""
        return cls(get_vocabulary("debezium_json"), _names(key), time, "op", sequence, time_unit, column, row_schema)

    @classmethod
    def streamjoin(cls, key: str | Sequence[str]) -> ChangeFormat:
        """A table-table join's output (a view's change stream, in the ``streamjoin`` vocabulary):
        ``_change_type``, ``_commit_version`` and ``_seq`` (its order), ``_change_timestamp`` (its
        change time). ``key``: the view key's columns, or those of them that identify a view row."""
        from streamjoin.changes.streamjoin import CHANGE_TIME, CHANGE_TYPE, COMMIT_VERSION

        return cls(get_vocabulary("streamjoin"), _names(key), CHANGE_TIME, CHANGE_TYPE, COMMIT_VERSION)

    def row_fields(self, schema: pa.Schema) -> list[pa.Field]:
        """The row's columns (key and values) of a change table with ``schema``, validated.

        Raises ``JoinDefinitionError`` naming a missing column or a wrong type.
        """
        if self.time_unit not in UNITS:
            raise JoinDefinitionError(f"time_unit must be one of {list(UNITS)}, not {self.time_unit!r}")
        fields = self.vocabulary.validate(schema, self)
        names = [f.name for f in fields]
        for column in self.key:
            if column not in names:
                raise JoinDefinitionError(f"the change table has no key column {column!r}; its row columns are {names}")
        for reserved in (OP, TIME, SEQ, REASON_COLUMN):
            if reserved in names:
                raise JoinDefinitionError(f"the change table has a column {reserved!r}, a reserved name; rename it")
        return fields

    def internal_schema(self, schema: pa.Schema) -> pa.Schema:
        """The schema of ``streamjoin.changes.normalise``'s ``changes`` for a table with ``schema``."""
        fields = self.row_fields(schema)
        keys = [next(f for f in fields if f.name == k) for k in self.key]
        meta = [pa.field(OP, pa.int8()), pa.field(TIME, pa.int64()), pa.field(SEQ, pa.int64())]
        return pa.schema(keys + meta + [f for f in fields if f.name not in self.key])

    def snapshot_op(self) -> str:
        """The op a bootstrap row carries in this format's op column.

        Raises ``JoinDefinitionError`` if the vocabulary has no snapshot rows.
        """
        op = self.vocabulary.snapshot_op
        if op is None or self.op is None:
            raise JoinDefinitionError(
                f"{self.vocabulary.name} changes have no snapshot rows, so a bootstrap cannot be written in them; "
                f"use a vocabulary that has them (the plain form: {SNAPSHOT_OP!r})")
        return op

    @classmethod
    def from_definition(cls, definition: Mapping[str, Any]) -> ChangeFormat:
        """The format ``definition()`` describes (a ``debezium_json`` one without its row schema,
        which the description leaves out)."""
        return cls(definition["vocabulary"], tuple(definition["key"]), definition["time"], definition.get("op"),
                   definition.get("sequence"), definition.get("time_unit", "us"), definition.get("column"))

    def definition(self) -> dict[str, Any]:
        """JSON-serialisable description (part of a join's definition)."""
        return {"vocabulary": self.vocabulary.name, "key": list(self.key), "time": self.time, "op": self.op,
                "sequence": self.sequence, "time_unit": self.time_unit, "column": self.column}


def _names(key: str | Sequence[str]) -> tuple[str, ...]:
    names = (key,) if isinstance(key, str) else tuple(key)
    if not names or not all(isinstance(n, str) for n in names) or len(set(names)) != len(names):
        raise JoinDefinitionError(f"a change table key must be one or more distinct column names, not {key!r}")
    return names
