"""The enrichment join's state as ``read_state`` shows it (:mod:`streamjoin.runtime.views`).

``table``: every table version held (key columns, ``_op``, ``_change_time``, ``_sequence``, value
columns: the table's other columns but its op column, its sequence column too); ``events``: the
events waiting (as-of mode).
"""

from __future__ import annotations

from typing import Any, Mapping

import pyarrow as pa
import pyarrow.compute as pc

from streamjoin.changes import DELETE, OP, SEQ, TIME
from streamjoin.enrichment import runs
from streamjoin.enrichment.state import read_buckets, read_meta, scan_waiting
from streamjoin.runtime.defaults import entries_schema
from streamjoin.runtime.evolution import as_schema
from streamjoin.runtime.operator import POS_INF
from streamjoin.runtime.views import TS, StateView
from streamjoin.statestore.base import Store

__all__ = ["VIEWS"]


def _table_schema(definition: Mapping[str, Any]) -> list[pa.Field]:
    changes, table = definition["changes"], {f.name: f for f in entries_schema(definition["table"])}
    fields = [pa.field(k, table[k].type) for k in changes["key"]]
    fields += [pa.field("_op", pa.string()), pa.field("_change_time", TS), pa.field("_sequence", pa.int64())]
    skip = {*changes["key"], changes.get("op")}   # (a sequence column is a value column too)
    return fields + [f for n, f in table.items() if n not in skip]   # (with their defaults)


def _read_table(store: Store, definition: Mapping[str, Any], columns: pa.Schema) -> pa.Table:
    keys = definition["changes"]["key"]
    named = {f"__sj_k{i}": k for i, k in enumerate(keys)}
    values = [f for f in columns if f.name not in {*keys, "_op", "_change_time", "_sequence"}]
    if definition.get("layout") == runs.LAYOUT.version:
        stored = [t for _, t in runs.read_runs(store, None)]
    else:
        stored = [t for bucket in read_buckets(store, range(int(definition["buckets"])), None).values()
                  for t in bucket.tables()]
    # every blob in the current value columns, whatever schema of the table it was written under
    tables = [as_schema(t, pa.schema([t.schema.field(n) for n in (*named, OP, TIME, SEQ)] + values))
              for t in stored if t.num_rows]
    if not tables:
        return columns.empty_table()
    found = pa.concat_tables(tables, promote_options="default")
    op = pc.if_else(pc.equal(found.column(OP), DELETE), "delete", "upsert")
    arrays = []
    for field in columns:
        if field.name in keys:
            arrays.append(found.column(next(s for s, k in named.items() if k == field.name)))
        elif field.name == "_op":
            arrays.append(op)
        elif field.name == "_change_time":
            arrays.append(found.column(TIME).cast(pa.int64()).cast(TS))
        elif field.name == "_sequence":
            arrays.append(found.column(SEQ))
        elif field.name in found.column_names:
            arrays.append(found.column(field.name))
        else:
            arrays.append(pa.nulls(found.num_rows, field.type))
    return pa.Table.from_arrays([a.cast(f.type) for a, f in zip(arrays, columns)], schema=columns)


def _events_schema(definition: Mapping[str, Any]) -> list[pa.Field]:
    return list(entries_schema(definition["stream"]))


def _read_events(store: Store, definition: Mapping[str, Any], columns: pa.Schema) -> pa.Table:
    if definition.get("layout") == runs.LAYOUT.version:   # a file's events before the bound have left
        meta, grace = read_meta(store), definition.get("grace_us")
        tables = [runs.still_waiting(as_schema(t, columns), definition["stream_time"], meta, grace)
                  for _, t in runs.read_waiting(store, None)]
    else:
        tables = [as_schema(t, columns) for _, t in scan_waiting(store, POS_INF, 1)]
    return pa.concat_tables(tables) if tables else columns.empty_table()


VIEWS = {"table": StateView(_table_schema, _read_table), "events": StateView(_events_schema, _read_events)}
