"""Change-stream vocabularies, normalised into one internal form (docs/semantics.md "Enrichment").

A table input is a stream of changes. :class:`ChangeFormat` says how a change table is spelled;
:func:`normalise` turns a batch of it into the **internal form**::

    <key columns> | __sj_op (int8) | __sj_time (int64 µs, nullable) | __sj_seq (int64, nullable) | <value columns>

``__sj_op`` is :data:`UPSERT`, :data:`DELETE` or :data:`HEARTBEAT`. Rows are kept in input order.
``__sj_time`` is null only for a *timeless snapshot row* (below): a key's versions are ordered by
(change time, sequence) with nulls first, so such a row comes before every change of its key
without any timestamp standing for "the beginning of time".

Vocabularies (``op`` values; anything else is set aside as ``"unknown op"``):

* ``plain``: key columns, an op column (``upsert``/``insert``/``update`` -> upsert, ``delete``,
  ``heartbeat``, ``snapshot``), a change-time column, an optional sequence column, the row's columns. The value
  columns are every column but the key and the op (the change time and sequence stay visible).
* ``delta`` (Delta Lake change data feed): ``_change_type`` in ``insert``/``update_postimage``
  (upsert), ``delete``, ``heartbeat``, ``snapshot``; change time ``_commit_timestamp`` unless
  another timestamp column is named (a business time such as ``valid_from``), sequence
  ``_commit_version`` unless another integer column is named. ``update_preimage`` rows carry the *old* row: they add no new state, so they
  are skipped (counted as ``preimages``), never set aside.
* ``debezium``: ``op`` in ``c``/``u``/``r`` (upsert of ``after``), ``d`` (delete; key from
  ``before``, else ``after``), ``heartbeat``; ``before``/``after`` structs of the row's columns;
  change time ``ts_ms`` (integer milliseconds by default).
* ``debezium_json``: the same envelope as one JSON string per row (optionally wrapped in
  ``{"payload": ...}`` as Kafka Connect's JSON converter writes it); ``row_schema`` gives the row's
  columns. A null string is a Kafka tombstone: skipped, counted as ``tombstones``. Unparsable JSON
  is set aside as ``"invalid json"``, a row whose values do not fit ``row_schema`` as ``"invalid row"``.

Heartbeat rows need only a change time: they advance the table's watermark and nothing else.
**Snapshot rows** (op :data:`SNAPSHOT_OP`, written by a join's bootstrap; plain and delta) are
upserts. One with a change time is an ordinary upsert at that time; one without is a timeless
snapshot row, kept with a null ``__sj_time`` when the caller accepts them
(``normalise(..., timeless_snapshots=True)``: the enrichment join, whose first version takes its
bootstrap) and otherwise refused as below.
Every other row needs a change time (else ``"null change time"``) and a key without nulls (else
``"null key"``). Checks apply in that order: op, time, key. Set-aside rows keep the input's columns
plus :data:`streamjoin.runtime.operator.REASON_COLUMN`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import Enum
from typing import Any, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from streamjoin.errors import JoinDefinitionError
from streamjoin.runtime.operator import REASON_COLUMN

__all__ = [
    "Vocabulary", "ChangeFormat", "Normalised", "normalise", "OP", "TIME", "SEQ",
    "UPSERT", "DELETE", "HEARTBEAT", "SNAPSHOT_OP", "to_plain", "PLAIN_COLUMNS", "set_aside",
]

OP, TIME, SEQ = "__sj_op", "__sj_time", "__sj_seq"
UPSERT, DELETE, HEARTBEAT = 0, 1, 2
_SKIP, _SNAPSHOT = -1, 3
#: The op of a snapshot row (plain and delta vocabularies): an upsert; without a change time, it
#: comes before every change of its key (see module docstring).
SNAPSHOT_OP = "snapshot"
_UNITS = {"s": 1_000_000, "ms": 1_000, "us": 1}
_OPS = {
    "plain": {"upsert": UPSERT, "insert": UPSERT, "update": UPSERT, "delete": DELETE, "heartbeat": HEARTBEAT,
              SNAPSHOT_OP: _SNAPSHOT},
    "delta": {"insert": UPSERT, "update_postimage": UPSERT, "update_preimage": _SKIP, "delete": DELETE,
              "heartbeat": HEARTBEAT, SNAPSHOT_OP: _SNAPSHOT},
    "debezium": {"c": UPSERT, "u": UPSERT, "r": UPSERT, "d": DELETE, "heartbeat": HEARTBEAT},
}
#: The op, time and sequence columns :func:`to_plain` writes: ``ChangeFormat.plain(key, **PLAIN_COLUMNS)``.
PLAIN_COLUMNS = {"op": "_change_op", "time": "_change_time", "sequence": "_change_seq"}
_OP_NAMES = {UPSERT: "upsert", DELETE: "delete", HEARTBEAT: "heartbeat"}
_DELTA_META = ("_change_type", "_commit_version", "_commit_timestamp")


class Vocabulary(str, Enum):
    """How a change table spells its changes (see module docstring)."""

    PLAIN = "plain"
    DELTA = "delta"
    DEBEZIUM = "debezium"
    DEBEZIUM_JSON = "debezium_json"


@dataclass(frozen=True)
class ChangeFormat:
    """A change table's vocabulary and columns; build it with the class methods.

    ``time`` is a timestamp column, or an integer column counted in ``time_unit`` since the epoch.
    For ``debezium_json``, ``column`` is the JSON string column and ``time``/``sequence`` name
    fields of the envelope.
    """

    vocabulary: Vocabulary
    key: tuple[str, ...]
    time: str
    op: str | None = None
    sequence: str | None = None
    time_unit: str = "us"
    column: str | None = None
    row_schema: pa.Schema | None = None

    @classmethod
    def plain(cls, key: str | Sequence[str], *, time: str, op: str = "op",
              sequence: str | None = None, time_unit: str = "us") -> "ChangeFormat":
        return cls(Vocabulary.PLAIN, _names(key), time, op, sequence, time_unit)

    @classmethod
    def delta(cls, key: str | Sequence[str], *, time: str = "_commit_timestamp",
              sequence: str | None = None) -> "ChangeFormat":
        """A Delta change data feed. ``time``: the change time, ``_commit_timestamp`` or any
        timestamp column of the row (a business time such as ``valid_from``, which stays a row
        column); ties are broken by ``sequence``, ``_commit_version`` unless another integer
        column is named."""
        if not isinstance(time, str) or not (sequence is None or isinstance(sequence, str)):
            raise JoinDefinitionError(f"a Delta feed's time and sequence are column names, not {time!r}, {sequence!r}")
        return cls(Vocabulary.DELTA, _names(key), time, "_change_type", sequence or "_commit_version")

    @classmethod
    def debezium(cls, key: str | Sequence[str], *, time: str = "ts_ms", time_unit: str = "ms",
                 sequence: str | None = None) -> "ChangeFormat":
        return cls(Vocabulary.DEBEZIUM, _names(key), time, "op", sequence, time_unit)

    @classmethod
    def debezium_json(cls, key: str | Sequence[str], row_schema: pa.Schema, *, column: str = "value",
                      time: str = "ts_ms", time_unit: str = "ms", sequence: str | None = None) -> "ChangeFormat":
        return cls(Vocabulary.DEBEZIUM_JSON, _names(key), time, "op", sequence, time_unit, column, row_schema)

    def row_fields(self, schema: pa.Schema) -> list[pa.Field]:
        """The row's columns (key and values) of a change table with ``schema``, validated.

        Raises :class:`JoinDefinitionError` naming a missing column or a wrong type.
        """
        if self.time_unit not in _UNITS:
            raise JoinDefinitionError(f"time_unit must be one of {list(_UNITS)}, not {self.time_unit!r}")
        if self.vocabulary is Vocabulary.DEBEZIUM_JSON:
            _require(schema, self.column, pa.types.is_string, "a string column of JSON envelopes")
            if not isinstance(self.row_schema, pa.Schema):
                raise JoinDefinitionError("debezium_json needs row_schema, the pyarrow.Schema of before/after")
            fields = list(self.row_schema)
        elif self.vocabulary is Vocabulary.DEBEZIUM:
            _require(schema, self.op, _is_text, "a string column")
            _require(schema, self.time, _is_time, "a timestamp or integer column")
            _check_optional(schema, self.sequence)
            _require(schema, "after", pa.types.is_struct, "a struct of the row's columns")
            fields = list(schema.field("after").type)
            if "before" in schema.names and schema.field("before").type != schema.field("after").type:
                raise JoinDefinitionError("debezium: 'before' and 'after' must have the same struct type")
        else:
            _require(schema, self.op, _is_text, "a string column")
            if self.vocabulary is Vocabulary.DELTA:
                _require(schema, self.time, pa.types.is_timestamp, "a timestamp column (the change time)")
            else:
                _require(schema, self.time, _is_time, "a timestamp or integer column")
            _check_optional(schema, self.sequence)
            hidden = {self.op, *(_DELTA_META if self.vocabulary is Vocabulary.DELTA else ())}
            fields = [f for f in schema if f.name not in hidden]
        names = [f.name for f in fields]
        for column in self.key:
            if column not in names:
                raise JoinDefinitionError(f"the change table has no key column {column!r}; its row columns are {names}")
        for reserved in (OP, TIME, SEQ, REASON_COLUMN):
            if reserved in names:
                raise JoinDefinitionError(f"the change table has a column {reserved!r}, a reserved name; rename it")
        return fields

    def internal_schema(self, schema: pa.Schema) -> pa.Schema:
        """The schema of :func:`normalise`'s ``changes`` for a change table with ``schema``."""
        fields = self.row_fields(schema)
        keys = [next(f for f in fields if f.name == k) for k in self.key]
        meta = [pa.field(OP, pa.int8()), pa.field(TIME, pa.int64()), pa.field(SEQ, pa.int64())]
        return pa.schema(keys + meta + [f for f in fields if f.name not in self.key])

    def definition(self) -> dict[str, Any]:
        """JSON-serialisable description (part of a join's definition)."""
        return {"vocabulary": self.vocabulary.value, "key": list(self.key), "time": self.time, "op": self.op,
                "sequence": self.sequence, "time_unit": self.time_unit, "column": self.column}


def _names(key: str | Sequence[str]) -> tuple[str, ...]:
    names = (key,) if isinstance(key, str) else tuple(key)
    if not names or not all(isinstance(n, str) for n in names) or len(set(names)) != len(names):
        raise JoinDefinitionError(f"a change table key must be one or more distinct column names, not {key!r}")
    return names


def _is_text(kind: pa.DataType) -> bool:
    return pa.types.is_string(kind) or pa.types.is_large_string(kind)


def _is_time(kind: pa.DataType) -> bool:
    return pa.types.is_timestamp(kind) or pa.types.is_integer(kind)


def _require(schema: pa.Schema, name: str | None, check, what: str) -> None:
    if name not in schema.names:
        raise JoinDefinitionError(f"the change table has no column {name!r}; its columns are {schema.names}")
    kind = schema.field(name).type
    if not check(kind):
        raise JoinDefinitionError(f"the change table's column {name!r} must be {what}, not {kind}")


def _check_optional(schema: pa.Schema, name: str | None) -> None:
    if name is not None:
        _require(schema, name, pa.types.is_integer, "an integer column")


@dataclass
class Normalised:
    """One batch of changes in the internal form, the rows set aside, and counts by kind.

    ``index[i]`` is the input row that ``changes`` row ``i`` came from.
    """

    changes: pa.Table
    aside: pa.Table
    counts: dict[str, int]
    index: np.ndarray


def normalise(table: pa.Table, fmt: ChangeFormat, *, timeless_snapshots: bool = False) -> Normalised:
    """Normalise one batch of a change table (see module docstring); never raises on bad rows.

    ``timeless_snapshots``: keep snapshot rows without a change time (null ``__sj_time``) instead
    of setting them aside as ``"null change time"``.
    """
    if fmt.vocabulary is Vocabulary.DEBEZIUM_JSON:
        return _from_json(table, fmt)
    fields = fmt.row_fields(table.schema)
    ops = _ops(table.column(fmt.op), _OPS[fmt.vocabulary.value])
    times = _micros(table.column(fmt.time), fmt.time_unit)
    seq = table.column(fmt.sequence).cast(pa.int64()) if fmt.sequence else pa.nulls(table.num_rows, pa.int64())
    if fmt.vocabulary is Vocabulary.DEBEZIUM:
        row = _debezium_rows(table, ops, fields)
    else:
        row = table.select([f.name for f in fields])
    return _assemble(table, fmt, ops, times, seq, row, {}, timeless_snapshots)


def _ops(column: pa.ChunkedArray, mapping: dict[str, int]) -> np.ndarray:
    """Op codes per row; -2 for an unknown (or null) op."""
    known = pa.array(list(mapping), pa.string())
    codes = np.array(list(mapping.values()) + [-2], dtype=np.int8)
    index = pc.index_in(column.cast(pa.string()), value_set=known).fill_null(len(mapping))
    return codes[index.to_numpy()]


def _micros(column: pa.ChunkedArray, unit: str) -> pa.Array:
    """Change times as int64 µs (nulls kept)."""
    if pa.types.is_timestamp(column.type):
        return column.cast(pa.timestamp("us", column.type.tz)).cast(pa.int64()).combine_chunks()
    return pc.multiply_checked(column.cast(pa.int64()), _UNITS[unit]).combine_chunks()


def _debezium_rows(table: pa.Table, ops: np.ndarray, fields: list[pa.Field]) -> pa.Table:
    """The row of each change: ``after``, or ``before`` for deletes (when present)."""
    after = table.column("after").combine_chunks()
    if "before" in table.column_names:
        before = table.column("before").combine_chunks()
        use_before = pa.array((ops == DELETE) & before.is_valid().to_numpy(zero_copy_only=False))
        after = pc.if_else(use_before, before, after)
    columns = [pc.struct_field(after, f.name) for f in fields]
    return pa.Table.from_arrays(columns, schema=pa.schema(fields))


def _assemble(table: pa.Table, fmt: ChangeFormat, ops: np.ndarray, times: pa.Array, seq, row: pa.Table,
              counts: dict[str, int], timeless_snapshots: bool = False) -> Normalised:
    """Sort rows out (op, time, key), and build the internal form of the kept ones."""
    unknown = ops == -2
    null_time = ~unknown & (ops != _SKIP) & times.is_null().to_numpy(zero_copy_only=False)
    if timeless_snapshots:
        null_time &= ops != _SNAPSHOT
    ops = np.where(ops == _SNAPSHOT, np.int8(UPSERT), ops).astype(np.int8)
    null_key = np.zeros(table.num_rows, dtype=bool)
    for name in fmt.key:
        null_key |= row.column(name).is_null().to_numpy(zero_copy_only=False)
    null_key &= ~unknown & ~null_time & (ops != HEARTBEAT) & (ops != _SKIP)
    keep = ~(unknown | null_time | null_key) & (ops != _SKIP)
    counts = {**counts, "preimages": int((ops == _SKIP).sum()), "heartbeats": int((keep & (ops == HEARTBEAT)).sum()),
              "unknown_op": int(unknown.sum()), "null_change_time": int(null_time.sum()), "null_key": int(null_key.sum())}
    aside = set_aside(table, [(unknown, "unknown op"), (null_time, "null change time"), (null_key, "null key")])
    mask = pa.array(keep)
    keys = [row.column(k).filter(mask) for k in fmt.key]
    values = [row.column(n).filter(mask) for n in row.column_names if n not in fmt.key]
    meta = [pa.array(ops[keep], pa.int8()), times.filter(mask), pa.chunked_array(seq).filter(mask)]
    changes = pa.Table.from_arrays(keys + meta + values, schema=fmt.internal_schema(table.schema))
    return Normalised(changes, aside, counts, np.flatnonzero(keep))


def set_aside(table: pa.Table, groups: list[tuple[np.ndarray, str]]) -> pa.Table:
    """Rows of ``table`` selected by each mask, with the mask's reason in :data:`REASON_COLUMN`."""
    parts = []
    for mask, reason in groups:
        if mask.any():
            rows = table.filter(pa.array(mask))
            parts.append(rows.append_column(REASON_COLUMN, pa.repeat(pa.scalar(reason), rows.num_rows)))
    if not parts:
        return table.schema.append(pa.field(REASON_COLUMN, pa.string())).empty_table()
    return pa.concat_tables(parts)


def _from_json(table: pa.Table, fmt: ChangeFormat) -> Normalised:
    """Parse JSON envelopes into the struct form, then normalise that."""
    fields = fmt.row_fields(table.schema)
    struct = pa.struct(fields)
    texts = table.column(fmt.column).to_pylist()
    parsed = [_envelope(text, fmt) for text in texts]
    tombstone = np.array([p is None for p in parsed], dtype=bool)
    invalid = np.array([p == "invalid" for p in parsed], dtype=bool)
    envelopes = [p if isinstance(p, dict) else {} for p in parsed]
    bad_row = np.zeros(len(texts), dtype=bool)
    for i, env in enumerate(envelopes):
        try:
            pa.array([env.get("before"), env.get("after")], struct)
            int(env[fmt.time]) if env.get(fmt.time) is not None else None
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError):
            bad_row[i], envelopes[i] = not invalid[i] and not tombstone[i], {}
    ops = _ops(pa.chunked_array([pa.array([e.get("op") for e in envelopes], pa.string())]), _OPS["debezium"])
    ops[tombstone] = _SKIP
    ops[invalid | bad_row] = _SKIP
    times = pc.multiply_checked(pa.array([_int(e.get(fmt.time)) for e in envelopes], pa.int64()), _UNITS[fmt.time_unit])
    seq = pa.array([_int(e.get(fmt.sequence)) if fmt.sequence else None for e in envelopes], pa.int64())
    shaped = pa.table({"op": pa.array([e.get("op") for e in envelopes], pa.string()),
                       "before": pa.array([e.get("before") for e in envelopes], struct),
                       "after": pa.array([e.get("after") for e in envelopes], struct)})
    row = _debezium_rows(shaped, ops, fields)
    result = _assemble(table, fmt, ops, times, seq, row, {"tombstones": int(tombstone.sum())})
    extra = set_aside(table, [(invalid, "invalid json"), (bad_row, "invalid row")])
    result.aside = pa.concat_tables([result.aside, extra])
    result.counts["preimages"] -= int((tombstone | invalid | bad_row).sum())
    result.counts["invalid"] = int((invalid | bad_row).sum())
    return result


def _envelope(text: str | None, fmt: ChangeFormat) -> dict | str | None:
    """The envelope dict of one JSON string; None for a tombstone, ``"invalid"`` if unparsable."""
    if text is None:
        return None
    try:
        obj = json.loads(text)
    except ValueError:
        return "invalid"
    if isinstance(obj, dict) and isinstance(obj.get("payload"), dict):
        obj = obj["payload"]
    return obj if isinstance(obj, dict) else "invalid"


def _int(value: Any) -> int | None:
    return None if value is None else int(value)


def to_plain(changes: pa.Table, key: Sequence[str]) -> pa.Table:
    """The internal form ``changes`` (of :func:`normalise`) as a plain change table.

    Columns: the key, then :data:`PLAIN_COLUMNS` (op as a string, change time as
    ``timestamp[us, UTC]``, sequence), then the values. This is how a vocabulary whose key is not a
    top-level column (Debezium) reaches an operator that routes rows by top-level key columns.
    """
    key = list(key)
    names = pa.array([_OP_NAMES[c] for c in sorted(_OP_NAMES)], pa.string())
    ops = pc.take(names, changes.column(OP).cast(pa.int32()))
    meta = [ops, changes.column(TIME).cast(pa.timestamp("us", "UTC")), changes.column(SEQ)]
    values = [n for n in changes.column_names[len(key) + 3:]]
    arrays = [changes.column(k) for k in key] + meta + [changes.column(n) for n in values]
    return pa.Table.from_arrays(arrays, names=key + list(PLAIN_COLUMNS.values()) + values)
