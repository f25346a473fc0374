"""``PostgresSink``: write a join's output to a PostgreSQL table exactly once, from ``foreachBatch``.

    sink = PostgresSink(dsn, "public.order_lines", key=["order_id", "product_id"],
                        columns={"order_id": "order_id", "product_id": "product_id_left", ...})
    view_changes.writeStream.foreachBatch(sink).option("checkpointLocation", ...).start()

**Contract.** Each micro-batch is applied in one transaction, keyed by the table's primary key
``key``: a view change stream (``table_table_join``'s ``_change_type``, ``_commit_version``,
``_seq``, ``_change_timestamp``) is reduced to each key's last change in ``_seq`` order (``delete``/``update_preimage`` delete the
row, ``insert``/``update_postimage`` upsert it); rows without ``_change_type`` (an enrichment's
output) are upserts. The batch id is recorded in ``streamjoin_sink_progress`` (one row per sink
``name``) in the same transaction, so a batch Spark runs again after a failure (the same id, not
newer than the recorded one) is skipped. The progress table is created on a sink's first batch, in
a transaction of its own under an advisory lock, so that sinks starting together do not collide
(PostgreSQL's ``CREATE TABLE IF NOT EXISTS`` is not safe against a concurrent creator). Rows travel as CSV into a temporary table (``COPY``), then
one ``DELETE`` and one ``INSERT ... ON CONFLICT`` apply them. A lost connection is retried with
backoff (the transaction runs again from the start), then ``streamjoin.cdc.ConnectionLost``.
"""

from __future__ import annotations

import datetime
import decimal
import io
import json
import math
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as csv
from pyspark.sql import DataFrame

from streamjoin.cdc import Retry, psycopg, with_retry
from streamjoin.cdc.slot import SINK_PROGRESS_TABLE
from streamjoin.cdc.snapshot import quote_ident
from streamjoin.errors import JoinDefinitionError

__all__ = ["PostgresSink", "PROGRESS_TABLE"]

PROGRESS_TABLE = SINK_PROGRESS_TABLE
_META = ("_change_type", "_commit_version", "_seq", "_change_timestamp")
_REMOVES = ("delete", "update_preimage")
_DELETE = "_sj_delete"


class PostgresSink:
    """A ``foreachBatch`` function applying each micro-batch to a PostgreSQL table once (see module)."""

    def __init__(self, dsn: str, table: str, *, key: str | Sequence[str], columns: Mapping[str, str] | None = None,
                 name: str | None = None, retry: Retry | None = None) -> None:
        """``columns``: target column -> output column (default: every output column but the view's
        change columns, by its own name). ``name``: the sink's row in the progress table (default
        ``table``). Two queries writing one table need two names."""
        self.dsn, self.table, self.retry = dsn, table, retry or Retry()
        self.key = [key] if isinstance(key, str) else list(key)
        self.columns = dict(columns) if columns is not None else None
        self.name = name or table
        self._progress_ready = False

    def __repr__(self) -> str:
        return f"PostgresSink({self.dsn!r}, {self.table!r}, key={self.key!r}, columns={self.columns!r}, name={self.name!r})"

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        self.apply(df.toArrow(), batch_id)

    def apply(self, changes: pa.Table, batch_id: int) -> bool:
        """Apply one batch of output rows; False when batch ``batch_id`` was applied already."""
        rows = self._final_rows(changes)
        return with_retry(lambda: self._transaction(rows, batch_id), self.dsn, self.retry)

    def _final_rows(self, changes: pa.Table) -> pa.Table:
        """Each key's last change: the target's columns plus ``_DELETE``."""
        columns = self.columns or {n: n for n in changes.column_names if n not in _META}
        missing = [source for source in columns.values() if source not in changes.column_names]
        unknown_key = [k for k in self.key if k not in columns]
        if missing or unknown_key:
            raise JoinDefinitionError(f"the sink for {self.table} maps to columns {missing} that the output lacks "
                                      f"(it has {changes.column_names}), or its key {unknown_key} is not mapped")
        if "_change_type" in changes.column_names:
            changes = changes.sort_by([("_commit_version", "ascending"), ("_seq", "ascending")])
            remove = pc.is_in(changes.column("_change_type"), pa.array(_REMOVES))
        else:
            remove = pa.array([False] * changes.num_rows, pa.bool_())
        table = pa.table({target: changes.column(source) for target, source in columns.items()})
        table = table.append_column(_DELETE, remove).append_column("_sj_index", pa.array(range(table.num_rows)))
        last = table.group_by(self.key, use_threads=False).aggregate([("_sj_index", "max")])
        return table.take(last.column("_sj_index_max")).drop_columns(["_sj_index"])

    def _transaction(self, rows: pa.Table, batch_id: int) -> bool:
        with psycopg().connect(self.dsn) as conn:
            if not self._progress_ready:
                create_progress_table(conn, self.name)
                self._progress_ready = True
            return self._apply(conn, rows, batch_id)

    def _apply(self, conn, rows: pa.Table, batch_id: int) -> bool:
        with conn.transaction():
            conn.execute(f"INSERT INTO {PROGRESS_TABLE} VALUES (%s, -1) ON CONFLICT DO NOTHING", (self.name,))
            done = conn.execute(f"SELECT batch_id FROM {PROGRESS_TABLE} WHERE sink = %s FOR UPDATE",
                                (self.name,)).fetchone()[0]
            if batch_id <= done:
                return False
            if rows.num_rows:
                self._write(conn, rows)
            conn.execute(f"UPDATE {PROGRESS_TABLE} SET batch_id = %s WHERE sink = %s", (batch_id, self.name))
        return True

    def _write(self, conn, rows: pa.Table) -> None:
        target = quote_ident(self.table)
        names = [n for n in rows.column_names if n != _DELETE]
        cols = ", ".join(quote_ident(n) for n in names)
        conn.execute(f"CREATE TEMP TABLE _sj_batch ON COMMIT DROP AS SELECT {cols} FROM {target} WITH NO DATA")
        conn.execute(f"ALTER TABLE _sj_batch ADD COLUMN {_DELETE} boolean")
        nested = [n for n in names if pa.types.is_nested(rows.schema.field(n).type)]
        if nested:
            _require_json_columns(conn, self.table, nested)
        buffer = io.BytesIO()
        csv.write_csv(_as_text(rows), buffer, csv.WriteOptions(include_header=False))
        with conn.cursor().copy(f"COPY _sj_batch ({cols}, {_DELETE}) FROM STDIN (FORMAT csv)") as copy:
            copy.write(buffer.getvalue())
        match = " AND ".join(f"t.{quote_ident(k)} = b.{quote_ident(k)}" for k in self.key)
        conn.execute(f"DELETE FROM {target} t USING _sj_batch b WHERE {match} AND b.{_DELETE}")
        keys = ", ".join(quote_ident(k) for k in self.key)
        values = [n for n in names if n not in self.key]
        update = ", ".join(f"{quote_ident(n)} = EXCLUDED.{quote_ident(n)}" for n in values)
        conflict = f"DO UPDATE SET {update}" if values else "DO NOTHING"
        conn.execute(f"INSERT INTO {target} ({cols}) SELECT {cols} FROM _sj_batch WHERE NOT {_DELETE} "
                     f"ON CONFLICT ({keys}) {conflict}")


#: The column types a list, struct or map column of the output is written to (as JSON text).
_JSON_TYPES = ("json", "jsonb", "text", "character varying")


def _require_json_columns(conn, table: str, columns: list[str]) -> None:
    """Raise :class:`JoinDefinitionError` unless ``columns`` of ``table`` take JSON text."""
    found = dict(conn.execute(
        "SELECT attname, format_type(atttypid, NULL) FROM pg_attribute "
        "WHERE attrelid = %s::regclass AND attnum > 0 AND NOT attisdropped", (quote_ident(table),)).fetchall())
    wrong = {c: found.get(c) for c in columns if found.get(c) not in _JSON_TYPES}
    if wrong:
        raise JoinDefinitionError(
            f"the sink writes list, struct and map columns as JSON text, but {table}'s columns {wrong} do not "
            f"take it: make them jsonb (or json, or text), or map other columns with columns=")


def _as_text(rows: pa.Table) -> pa.Table:
    """``rows`` with the columns CSV cannot carry as PostgreSQL reads them made text: bytes as
    ``bytea``'s hex form (``\\x...``), lists, structs and maps as JSON (:func:`json_text`)."""
    for i, field in enumerate(rows.schema):
        kind = field.type
        if pa.types.is_binary(kind) or pa.types.is_large_binary(kind) or pa.types.is_fixed_size_binary(kind):
            rows = rows.set_column(i, field.name, bytea_text(rows.column(i)))
        elif pa.types.is_nested(kind):
            rows = rows.set_column(i, field.name, json_text(rows.column(i)))
    return rows


def bytea_text(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    """Binary values as PostgreSQL's ``bytea`` hex text (``\\x0aff``), column-wise; a null as null."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    wide = values.cast(pa.large_binary())
    n = len(wide)
    offsets = np.frombuffer(wide.buffers()[1], np.int64, n + 1, wide.offset * 8)
    start, end = int(offsets[0]), int(offsets[-1])
    data = np.frombuffer(wide.buffers()[2], np.uint8, end - start, start) if end > start else np.zeros(0, np.uint8)
    digits = np.empty(2 * len(data), np.uint8)
    digits[0::2], digits[1::2] = _HEX[data >> 4], _HEX[data & 15]
    hexed = pa.LargeStringArray.from_buffers(n, pa.py_buffer((offsets - start) * 2), pa.py_buffer(digits))
    text = pc.binary_join_element_wise(pa.scalar("\\x", pa.large_string()), hexed, pa.scalar("", pa.large_string()))
    return pc.if_else(wide.is_valid(), text, pa.scalar(None, pa.large_string()))


_HEX = np.frombuffer(b"0123456789abcdef", np.uint8)


def json_text(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    """Nested values as JSON text (for a ``json`` or ``jsonb`` column); a null as null. A struct is
    an object, a list an array, a map an object where its keys are strings and an array of
    ``[key, value]`` pairs where not; inside them a time, date or interval is its ISO text, a
    decimal a number, bytes their ``\\x`` hex text, and a float that is not finite ``"NaN"``,
    ``"Infinity"`` or ``"-Infinity"`` (JSON has no such numbers)."""
    write = _json_writer(values.type)
    return pa.array([None if v is None else write(v) for v in values.to_pylist()], pa.large_string())


def _json_writer(kind: pa.DataType) -> Callable[[Any], str]:
    """A function writing one non-null Python value of ``kind`` (as ``to_pylist`` gives it) as JSON."""
    def nullable(write: Callable[[Any], str]) -> Callable[[Any], str]:
        return lambda v: "null" if v is None else write(v)
    if pa.types.is_struct(kind):
        fields = [(json.dumps(kind.field(i).name), kind.field(i).name, nullable(_json_writer(kind.field(i).type)))
                  for i in range(kind.num_fields)]
        return lambda v: "{" + ",".join(f"{label}:{write(v[name])}" for label, name, write in fields) + "}"
    if pa.types.is_map(kind):
        key, item = _json_writer(kind.key_type), nullable(_json_writer(kind.item_type))
        if pa.types.is_string(kind.key_type) or pa.types.is_large_string(kind.key_type):
            return lambda v: "{" + ",".join(f"{key(k)}:{item(i)}" for k, i in v) + "}"
        return lambda v: "[" + ",".join(f"[{key(k)},{item(i)}]" for k, i in v) + "]"
    if pa.types.is_nested(kind):
        element = nullable(_json_writer(kind.value_type))
        return lambda v: "[" + ",".join(map(element, v)) + "]"
    return _json_scalar


def _json_scalar(value: Any) -> str:
    if isinstance(value, float) and not math.isfinite(value):
        return '"NaN"' if math.isnan(value) else ('"Infinity"' if value > 0 else '"-Infinity"')
    if isinstance(value, decimal.Decimal):
        return str(value) if value.is_finite() else json.dumps(str(value))
    if isinstance(value, (bytes, bytearray)):
        return json.dumps("\\x" + bytes(value).hex())
    if isinstance(value, (datetime.date, datetime.time)):   # (a datetime is a date)
        return json.dumps(value.isoformat())
    if isinstance(value, datetime.timedelta):
        return json.dumps(str(value))
    return json.dumps(value)


def create_progress_table(conn, sink: str) -> None:
    """Create the progress table unless it exists, with ``sink``'s row, in a transaction of its own.
    A transaction-level advisory lock makes concurrent creators wait for each other: without it,
    two sinks starting together can both pass ``IF NOT EXISTS`` and one fails on a duplicate type
    name. The transaction inserts the sink's row, so that a change data capture source reading
    this database sees a sink's own transaction (a change of the progress table only) and no
    micro-batch follows from it; where the table exists, only a read runs (nothing logged)."""
    with conn.transaction():
        if conn.execute("SELECT to_regclass(%s)", (PROGRESS_TABLE,)).fetchone()[0] is not None:
            return
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (PROGRESS_TABLE,))
        conn.execute(f"CREATE TABLE IF NOT EXISTS {PROGRESS_TABLE} (sink text PRIMARY KEY, batch_id bigint NOT NULL)")
        conn.execute(f"INSERT INTO {PROGRESS_TABLE} VALUES (%s, -1) ON CONFLICT DO NOTHING", (sink,))
