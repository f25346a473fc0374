"""The Debezium vocabularies: envelopes as columns (``debezium``) and as JSON strings (``debezium_json``).

``op`` in ``c``/``u``/``r`` (upsert of ``after``), ``d`` (delete; key from ``before``, else
``after``), ``heartbeat``; a ``u`` whose ``before`` holds another whole key is a delete of that key
too (:func:`_with_key_moves`); ``before``/``after`` structs of the row's columns; the change time
``ts_ms`` (integer milliseconds) unless another top-level column is named (``ts_us``: micro-
seconds). The key sits inside the envelope, so both need a pre-stage before routing.

``debezium_json`` is the same envelope as one JSON string per row (optionally wrapped in
``{"payload": ...}`` as Kafka Connect's JSON converter writes it); the format's ``row_schema``
gives the row's columns, ``time``/``sequence`` name fields of the envelope. A null string is a
Kafka tombstone: skipped, counted as ``tombstones``. Unparsable JSON is set aside as
``"invalid json"``, an envelope whose values do not fit ``row_schema`` as ``"invalid row"``. It is
never detected (a string column says too little): name it with ``ChangeFormat.debezium_json``.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from streamjoin.changes.format import ChangeFormat
from streamjoin.changes.internal import (
    DELETE,
    HEARTBEAT,
    SKIPPED,
    UNITS,
    UPSERT,
    Normalised,
    micros,
    op_codes,
    sequence_numbers,
    set_aside,
    struct_rows,
    to_internal,
)
from streamjoin.changes.vocabulary import ChangeVocabulary, is_text, is_time, require_column, require_sequence
from streamjoin.errors import JoinDefinitionError

__all__ = ["DebeziumVocabulary", "DebeziumJsonVocabulary"]

_OPS = {"c": UPSERT, "u": UPSERT, "r": UPSERT, "d": DELETE, "heartbeat": HEARTBEAT}


class DebeziumVocabulary(ChangeVocabulary):
    """Debezium envelopes as columns; detected by an ``op`` column beside an ``after`` struct."""

    name = "debezium"
    ops = _OPS

    def detect(self, schema: pa.Schema) -> bool:
        return "op" in schema.names and "after" in schema.names and pa.types.is_struct(schema.field("after").type)

    def default_format(self, schema: pa.Schema, key: tuple[str, ...], *, time: str | None,
                       sequence: str | None, time_argument: str) -> ChangeFormat:
        time = time or "ts_ms"
        return ChangeFormat.debezium(key, time=time, time_unit="us" if time == "ts_us" else "ms", sequence=sequence)

    def validate(self, schema: pa.Schema, fmt: ChangeFormat) -> list[pa.Field]:
        require_column(schema, fmt.op, is_text, "a string column")
        require_column(schema, fmt.time, is_time, "a timestamp or integer column")
        require_sequence(schema, fmt.sequence)
        require_column(schema, "after", pa.types.is_struct, "a struct of the row's columns")
        if "before" in schema.names and schema.field("before").type != schema.field("after").type:
            raise JoinDefinitionError("debezium: 'before' and 'after' must have the same struct type")
        return list(schema.field("after").type)

    def normalise(self, table: pa.Table, fmt: ChangeFormat, *, timeless_snapshots: bool = False) -> Normalised:
        fields = fmt.row_fields(table.schema)
        ops = op_codes(table.column(fmt.op), self.ops)
        times = micros(table.column(fmt.time), fmt.time_unit)
        row = envelope_rows(table, ops, fields)
        return _with_key_moves(table, fmt, ops, times, sequence_numbers(table, fmt), row, table,
                              timeless_snapshots=timeless_snapshots)


def envelope_rows(table: pa.Table, ops: np.ndarray, fields: list[pa.Field]) -> pa.Table:
    """The row of each change: ``after``, or ``before`` for deletes (when present)."""
    after = table.column("after").combine_chunks()
    if "before" in table.column_names:
        before = table.column("before").combine_chunks()
        use_before = pa.array((ops == DELETE) & before.is_valid().to_numpy(zero_copy_only=False))
        after = pc.if_else(use_before, before, after)
    return struct_rows(after, fields)


def _with_key_moves(table: pa.Table, fmt: ChangeFormat, ops: np.ndarray, times: pa.Array, seq: pa.Array | pa.ChunkedArray,
                   row: pa.Table, envelopes: pa.Table, counts: dict[str, int] | None = None, *,
                   timeless_snapshots: bool = False) -> Normalised:
    """:func:`to_internal` of the changes, with a delete of the old key before each update that moved
    its row to another key: a ``u`` whose ``before`` (of ``envelopes``, per row of ``table``) holds
    a whole key other than ``after``'s (Debezium writes a change of the table's primary key as a
    ``d`` and a ``c``, but a join's key may be another unique column). The delete has the update's
    change time and sequence, so it is newer than every earlier change of the old key, those of
    the update's own transaction (one ``ts_ms``) too when a sequence such as the LSN is named,
    and comes from the update's input row; they are counted as ``key_moves``."""
    moved = _moved_keys(envelopes, fmt, ops, times)
    counts = {**(counts or {}), "key_moves": len(moved)}
    if not len(moved):
        return to_internal(table, fmt, ops, times, seq, row, counts, timeless_snapshots=timeless_snapshots)
    n = table.num_rows
    at = pa.array(moved, pa.int64())
    times = times.combine_chunks() if isinstance(times, pa.ChunkedArray) else times
    seq = pa.chunked_array(seq)
    old = struct_rows(envelopes.column("before").combine_chunks().take(at), list(row.schema))
    result = to_internal(
        table.take(pa.array(np.concatenate([np.arange(n), moved]), pa.int64())), fmt,
        np.concatenate([ops, np.full(len(moved), DELETE, ops.dtype)]),
        pa.concat_arrays([times, times.take(at)]),
        pa.chunked_array([*seq.chunks, *seq.take(at).chunks], seq.type),
        pa.concat_tables([row, old.cast(row.schema)]), counts, timeless_snapshots=timeless_snapshots)
    result.index = np.where(result.index < n, result.index, moved[np.maximum(result.index - n, 0)])
    return result


def _moved_keys(envelopes: pa.Table, fmt: ChangeFormat, ops: np.ndarray, times: pa.Array) -> np.ndarray:
    """The rows that are ``u`` upserts with a change time whose ``before`` holds a whole key (no
    null in it) other than ``after``'s. Ascending row numbers."""
    if "before" not in envelopes.column_names or not len(ops):
        return np.zeros(0, np.int64)
    before, after = envelopes.column("before").combine_chunks(), envelopes.column("after").combine_chunks()
    update = pc.fill_null(pc.equal(envelopes.column(fmt.op), "u"), False).to_numpy(zero_copy_only=False)
    moved = update & (ops == UPSERT) & before.is_valid().to_numpy(zero_copy_only=False) \
        & times.is_valid().to_numpy(zero_copy_only=False)
    differ = np.zeros(len(ops), np.bool_)
    for name in fmt.key:
        old, new = pc.struct_field(before, name), pc.struct_field(after, name)
        moved &= old.is_valid().to_numpy(zero_copy_only=False)
        differ |= pc.fill_null(pc.not_equal(old, new), True).to_numpy(zero_copy_only=False)
    return np.flatnonzero(moved & differ)


class DebeziumJsonVocabulary(ChangeVocabulary):
    """Debezium envelopes as JSON strings (see module docstring); never detected."""

    name = "debezium_json"
    ops = _OPS

    def detect(self, schema: pa.Schema) -> bool:
        return False

    def default_format(self, schema: pa.Schema, key: tuple[str, ...], *, time: str | None,
                       sequence: str | None, time_argument: str) -> ChangeFormat:
        raise JoinDefinitionError("JSON Debezium envelopes need their row schema: pass "
                                  "changes=ChangeFormat.debezium_json(key, row_schema)")

    def validate(self, schema: pa.Schema, fmt: ChangeFormat) -> list[pa.Field]:
        require_column(schema, fmt.column, pa.types.is_string,
                       "a string column of JSON envelopes (in Spark, read files with spark.readStream.text)")
        if not isinstance(fmt.row_schema, pa.Schema):
            raise JoinDefinitionError("debezium_json needs row_schema, the pyarrow.Schema of before/after")
        return list(fmt.row_schema)

    def normalise(self, table: pa.Table, fmt: ChangeFormat, *, timeless_snapshots: bool = False) -> Normalised:
        """Parse the envelopes into the struct form, then normalise that (see module docstring)."""
        fields = fmt.row_fields(table.schema)
        struct = pa.struct(fields)
        texts = table.column(fmt.column).to_pylist()
        parsed = [_envelope(text) for text in texts]
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
        op_names = pa.array([e.get("op") for e in envelopes], pa.string())
        ops = op_codes(op_names, self.ops)
        ops[tombstone | invalid | bad_row] = SKIPPED
        times = pc.multiply_checked(pa.array([_int(e.get(fmt.time)) for e in envelopes], pa.int64()),
                                    UNITS[fmt.time_unit])
        seq = pa.array([_int(e.get(fmt.sequence)) if fmt.sequence else None for e in envelopes], pa.int64())
        shaped = pa.table({"op": op_names, "before": pa.array([e.get("before") for e in envelopes], struct),
                           "after": pa.array([e.get("after") for e in envelopes], struct)})
        row = envelope_rows(shaped, ops, fields)
        result = _with_key_moves(table, fmt, ops, times, seq, row, shaped, {"tombstones": int(tombstone.sum())})
        extra = set_aside(table, [(invalid, "invalid json"), (bad_row, "invalid row")])
        result.aside = pa.concat_tables([result.aside, extra])
        result.counts["preimages"] -= int((tombstone | invalid | bad_row).sum())
        result.counts["invalid"] = int((invalid | bad_row).sum())
        return result


def _envelope(text: str | None) -> dict | str | None:
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
