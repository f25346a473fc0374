"""A join's state as a DataFrame, decoded from its changelog: for debugging and audits.

``read_state(spark, checkpoint, version=None, side=...)`` runs one Spark task per partition. Each
task restores its partition's changelog (newest snapshot, then deltas, through
:func:`streamjoin.changelog.restore`) into an in-memory map, so no local store is opened and a
running query is not disturbed, and decodes it with the state modules' public read functions:

===================  =========================================================================
kind / ``side``      rows
===================  =========================================================================
interval_join        ``left`` / ``right``: the buffered rows of that side (its stored columns,
                     with their event time), ``_matched`` (null on a side whose matches the
                     join does not record: only outer, semi and anti sides) and ``_watermark`` (the partition's watermark after the version)
enrichment_join      ``table``: every table version held (key columns, ``_op``, ``_change_time``,
                     ``_sequence``, value columns); ``events``: the events waiting (as-of mode)
table_join_keys      ``keys``: per primary key, the last change applied (``_change_time``,
                     ``_sequence``, ``_has_row``) and the row's join key (JSON arrays)
table_join           ``left`` / ``right``: each table's current rows by (join key, primary key),
                     as JSON arrays of the stored values
===================  =========================================================================

Every row also has ``_partition`` and ``_version`` (the version restored). A table_table_join's
checkpoint holds three stages: pass ``<checkpoint>/left_keys``, ``right_keys`` or ``join``.
"""

from __future__ import annotations

import json
import os
import posixpath
import threading
from typing import Any, Iterator

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.pandas.types import from_arrow_schema

from streamjoin.changelog import Changelog, restore
from streamjoin.changes import DELETE, OP, SEQ, TIME
from streamjoin.enrichment.state import read_buckets, scan_waiting
from streamjoin.errors import JoinDefinitionError
from streamjoin.interval.spec import ROW_ID
from streamjoin.interval.state import read_watermark, scan_groups
from streamjoin.runtime.checkpoint import Checkpoint
from streamjoin.runtime.inspect import stage_checkpoints
from streamjoin.runtime.operator import NEG_INF, POS_INF
from streamjoin.runtime.rescale import changelog_uri, current_epoch
from streamjoin.statestore import destroy_store
from streamjoin.statestore.base import Store, prefix_end
from streamjoin.statestore.codecs import unpack
from streamjoin.statestore.registry import open_store

__all__ = ["read_state", "SIDES"]

#: The sides each kind of join's state can be read as.
SIDES: dict[str, tuple[str, ...]] = {
    "interval_join": ("left", "right"),
    "enrichment_join": ("table", "events"),
    "table_join_keys": ("keys",),
    "table_join": ("left", "right"),
}
_TS = pa.timestamp("us", "UTC")
#: The sides whose matches an interval join records (those whose unmatched rows it outputs).
_MARKED = {"left": ("left",), "right": ("right",), "full": ("left", "right"), "left_semi": ("left",),
           "left_anti": ("left",)}
_TABLE_SIDES = {"left": b"L", "right": b"R"}   # a table_join stage's key prefixes
_COUNTER = iter(range(1 << 62))
_LOCK = threading.Lock()


def read_state(spark: SparkSession, checkpoint: str, version: int | None = None, side: str | None = None) -> DataFrame:
    """The state of ``side`` (see the module's table) of the join checkpoint at ``checkpoint`` as of
    ``version`` (None: each partition's newest), one task per partition. Raises
    :class:`JoinDefinitionError` when ``checkpoint`` is not a join checkpoint or ``side`` not one of
    its kind's sides (both named in the message)."""
    stages = stage_checkpoints(checkpoint)
    if len(stages) != 1:
        raise JoinDefinitionError(f"read_state: {checkpoint} is a table_table_join's checkpoint: pass one of "
                                  f"its stages, {stages}")
    cp = Checkpoint(stages[0])
    binding = _binding(cp)
    definition, partitions = binding.get("definition", {}), current_epoch(cp).partitions   # the newest partitioning
    kind = definition.get("kind")
    sides = SIDES.get(kind, ())
    if side is None and len(sides) == 1:
        side = sides[0]
    if side not in sides:
        raise JoinDefinitionError(f"read_state: {checkpoint} holds the state of a {kind}, whose sides are "
                                  f"{list(sides)}; side={side!r} is not one of them")
    schema = state_schema(definition, side)
    reader = _StateReader(cp.uri, definition, side, version, schema)
    ids = spark.range(0, partitions, 1, max(partitions, 1))
    return ids.mapInArrow(reader, from_arrow_schema(schema, prefer_timestamp_ntz=True))


def state_schema(definition: dict[str, Any], side: str) -> pa.Schema:
    """The columns of ``side``'s state rows of a join with ``definition``."""
    kind = definition["kind"]
    if kind == "interval_join":
        plan = definition[side]
        columns = dict((n, _arrow_type(t)) for n, t in plan["columns"])
        fields = [pa.field(n, columns[n]) for n in plan["stored"]]
        fields += [pa.field("_matched", pa.bool_()), pa.field("_watermark", _TS)]
    elif kind == "enrichment_join" and side == "events":
        fields = [pa.field(n, _arrow_type(t)) for n, t in definition["stream"]]
    elif kind == "enrichment_join":
        changes, table = definition["changes"], dict((n, _arrow_type(t)) for n, t in definition["table"])
        fields = [pa.field(k, table[k]) for k in changes["key"]]
        fields += [pa.field("_op", pa.string()), pa.field("_change_time", _TS), pa.field("_sequence", pa.int64())]
        skip = {*changes["key"], changes.get("op"), changes.get("sequence")}
        fields += [pa.field(n, t) for n, t in table.items() if n not in skip]
    elif kind == "table_join_keys":
        fields = [pa.field("primary_key", pa.string()), pa.field("_change_time", _TS),
                  pa.field("_sequence", pa.int64()), pa.field("_has_row", pa.bool_()), pa.field("join_key", pa.string())]
    else:
        fields = [pa.field("join_key", pa.string()), pa.field("primary_key", pa.string()), pa.field("row", pa.string())]
    return pa.schema(fields + [pa.field("_partition", pa.int32()), pa.field("_version", pa.int64())])


class _StateReader:
    """The task: restore partition ``p``'s changelog in memory and decode ``side``."""

    def __init__(self, uri: str, definition: dict[str, Any], side: str, version: int | None, schema: pa.Schema):
        self.uri, self.definition, self.side, self.version, self.schema = uri, definition, side, version, schema

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for partition in batch.column(0).to_pylist():
                yield from self._partition(int(partition))

    def _partition(self, partition: int) -> Iterator[pa.RecordBatch]:
        checkpoint = Checkpoint(self.uri)
        log = Changelog(changelog_uri(checkpoint, current_epoch(checkpoint), partition))
        if log.listing().empty:
            return
        with _LOCK:
            name = f"streamjoin-read-state-{os.getpid()}-{next(_COUNTER)}"
        store = open_store("memory", name)
        try:
            version = restore(log, store, self.version).version
            table = decode(store, self.definition, self.side, self.schema)
        finally:
            store.close()
            destroy_store("memory", name)
        table = table.append_column("_partition", pa.array([partition] * table.num_rows, pa.int32()))
        table = table.append_column("_version", pa.array([version] * table.num_rows, pa.int64()))
        yield from table.cast(self.schema).to_batches()


def decode(store: Store, definition: dict[str, Any], side: str, schema: pa.Schema) -> pa.Table:
    """``side``'s state rows in ``store`` (restored), in ``schema`` without the last two columns."""
    columns = pa.schema(list(schema)[:-2])
    kind = definition["kind"]
    if kind == "interval_join":
        return _interval(store, side, side in _MARKED.get(definition["how"], ()), columns)
    if kind == "enrichment_join" and side == "events":
        tables = [t.select(columns.names).cast(columns) for _, t in scan_waiting(store, POS_INF, 1)]
        return pa.concat_tables(tables) if tables else columns.empty_table()
    if kind == "enrichment_join":
        return _table_versions(store, definition, columns)
    if kind == "table_join_keys":
        return _keys(store, columns)
    return _rows(store, side, len(definition[side]["on"]), columns)


def _interval(store: Store, side: str, marked_side: bool, columns: pa.Schema) -> pa.Table:
    watermark = read_watermark(store)
    out = []
    for group in scan_groups(store, side, [(None, None)], max_rows=1 << 20):
        marked = pa.array(sorted({int(i) for ids in group.marks for i in ids}), pa.int64())
        for table in group.tables:
            matched = pc.is_in(table.column(ROW_ID), value_set=marked) if marked_side \
                else pa.nulls(table.num_rows, pa.bool_())
            out.append(table.append_column("_matched", matched))
    rows = pa.concat_tables(out, promote_options="default") if out else None
    if rows is None:
        return columns.empty_table()
    mark = None if watermark in (NEG_INF, POS_INF) else watermark
    rows = rows.append_column("_watermark", pa.array([mark] * rows.num_rows, pa.int64()).cast(_TS))
    return rows.select(columns.names).cast(columns)


def _table_versions(store: Store, definition: dict[str, Any], columns: pa.Schema) -> pa.Table:
    buckets = read_buckets(store, range(int(definition["buckets"])), pa.schema([]))
    tables = [t for bucket in buckets.values() for t in bucket.tables() if t.num_rows]
    if not tables:
        return columns.empty_table()
    found = pa.concat_tables(tables, promote_options="default")
    keys = definition["changes"]["key"]
    named = {f"__sj_k{i}": k for i, k in enumerate(keys)}
    op = pc.if_else(pc.equal(found.column(OP), DELETE), "delete", "upsert")
    arrays = []
    for field in columns:
        if field.name in keys:
            arrays.append(found.column(next(s for s, k in named.items() if k == field.name)))
        elif field.name == "_op":
            arrays.append(op)
        elif field.name == "_change_time":
            arrays.append(found.column(TIME).cast(pa.int64()).cast(_TS))
        elif field.name == "_sequence":
            arrays.append(found.column(SEQ))
        elif field.name in found.column_names:
            arrays.append(found.column(field.name))
        else:
            arrays.append(pa.nulls(found.num_rows, field.type))
    return pa.Table.from_arrays([a.cast(f.type) for a, f in zip(arrays, columns)], schema=columns)


def _keys(store: Store, columns: pa.Schema) -> pa.Table:
    """The key index of a table_join_keys stage: ``b"K" | pack(primary key)`` -> ``pack(change
    time, sequence, has row, *join key)`` (decoded here, as that module keeps it private)."""
    rows = []
    for key, value in store.scan(b"K", prefix_end(b"K")):
        time, seq, has_row, *join_key = unpack(value)
        rows.append({"primary_key": _json(unpack(key[1:])), "_change_time": time, "_sequence": seq,
                     "_has_row": bool(has_row), "join_key": _json(join_key)})
    return _from_rows(rows, columns)


def _rows(store: Store, side: str, width: int, columns: pa.Schema) -> pa.Table:
    """A table_join stage's rows of ``side``: ``side | pack(join key) | pack(primary key)`` ->
    ``pack(row)`` (the first ``width`` key values are the join key's)."""
    prefix = _TABLE_SIDES[side]
    rows = []
    for key, value in store.scan(prefix, prefix_end(prefix)):
        values = unpack(key[1:])
        rows.append({"join_key": _json(values[:width]), "primary_key": _json(values[width:]),
                     "row": _json(unpack(value))})
    return _from_rows(rows, columns)


def _from_rows(rows: list[dict[str, Any]], columns: pa.Schema) -> pa.Table:
    if not rows:
        return columns.empty_table()
    table = pa.Table.from_pylist(rows)
    return pa.Table.from_arrays([table.column(f.name).cast(f.type) if f.type != _TS else
                                 table.column(f.name).cast(pa.int64()).cast(_TS) for f in columns], schema=columns)


def _json(values: Any) -> str:
    return json.dumps(list(values), default=lambda v: v.hex() if isinstance(v, bytes) else str(v))


def _arrow_type(name: str) -> pa.DataType:
    """The Arrow type a definition names (``str(type)``: ``int64``, ``timestamp[us, tz=UTC]``...)."""
    if name.startswith("timestamp["):
        unit, _, tz = name[len("timestamp["):-1].partition(", tz=")
        return pa.timestamp(unit, tz or None)
    if name.startswith(("date32", "date64")):
        return pa.date32() if name.startswith("date32") else pa.date64()
    try:
        return pa.type_for_alias(name)
    except ValueError as exc:
        raise JoinDefinitionError(f"read_state: cannot read a state column of type {name}") from exc


def _binding(cp: Checkpoint) -> dict[str, Any]:
    with cp.fs.open_input_stream(posixpath.join(cp.root, "streamjoin.json")) as fh:
        return json.loads(fh.read())
