"""Starting the enrichment join from state rows (:mod:`streamjoin.runtime.initial_state`).

``read_state``'s rows become the state (:mod:`streamjoin.enrichment.state`) a partition holding
them has (in the ``runs`` layout, :mod:`streamjoin.enrichment.runs`, the versions as one run and
the events as one file of waiting events; the meta as below):

* ``table``: each key bucket's versions as one base blob, sorted by (key, change time,
  sequence), as :mod:`streamjoin.enrichment.regroup` writes them (``_op`` ``"delete"`` is a
  tombstone version, ``"upsert"`` a row; a null ``_change_time`` a timeless bootstrap row); with a
  table TTL, the expiry index entries of those versions;
* ``events``: the waiting events, filed by their time bucket as arriving before the first
  version, in canonical order;
* meta: no watermark (the first version's comes from the progress the join starts from,
  :meth:`streamjoin.runtime.initial_state.state_progress`), the versions and events counted.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from streamjoin.changes import DELETE, OP, SEQ, TIME, UPSERT
from streamjoin.enrichment import runs
from streamjoin.enrichment import state as st
from streamjoin.enrichment.sorted_versions import SortedVersions
from streamjoin.enrichment.spec import EnrichmentSpec
from streamjoin.errors import JoinDefinitionError
from streamjoin.kit.order import canonical_order, canonical_sort_keys, sort_canonically
from streamjoin.kit.times import times_of
from streamjoin.statestore.base import KeyValue

__all__ = ["key_arrays", "entries"]

_OPS = {"upsert": UPSERT, "delete": DELETE}


def key_arrays(spec: EnrichmentSpec, side: str, rows: pa.Table) -> list[pa.Array]:
    """The key columns of a side's state rows: the table's key (``table``), the stream's (``events``)."""
    names = spec.changes.key if side == "table" else spec.stream_key
    return [rows.column(name).combine_chunks() for name in names]


def entries(spec: EnrichmentSpec, rows: Mapping[str, pa.Table], version: int) -> list[KeyValue]:
    """The partition's state holding ``rows`` (by side) before ``version`` (see module)."""
    if spec.layout == "runs":
        return _runs_entries(spec, rows, version)
    out: list[KeyValue] = []
    held = waiting = 0
    table = rows.get("table")
    if table is not None and table.num_rows:
        versions = _versions(spec, table)
        buckets = st.bucket_ids([versions.column(k).combine_chunks() for k in spec.keys], spec.buckets)
        # canonical order, then by bucket (stable): each bucket's versions a slice, in order
        ranked = np.asarray(canonical_order(versions, canonical_sort_keys(versions.schema, [*spec.keys, TIME, SEQ])))
        ranked = ranked[np.argsort(buckets[ranked], kind="stable")]
        versions, buckets = versions.take(pa.array(ranked)), buckets[ranked]
        bounds = np.r_[0, np.flatnonzero(np.diff(buckets)) + 1, buckets.size]
        for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
            out.append((st.version_key(int(buckets[lo])), st.blob(versions.slice(lo, hi - lo))))
        held = versions.num_rows
        if spec.ttl is not None:
            column = versions.column(TIME)
            times = column.fill_null(0).cast(pa.int64()).to_numpy()
            out += st.expiry_puts(column.is_null().to_numpy(zero_copy_only=False), times, buckets,
                                  st.slot_width(spec.ttl))
    events = rows.get("events")
    if events is not None and events.num_rows:
        events = _events(spec, events)
        starts = times_of(events, spec.stream_time) // spec.event_bucket * spec.event_bucket
        ranked = np.argsort(starts, kind="stable")
        events, starts = events.take(pa.array(ranked)), starts[ranked]
        bounds = np.r_[0, np.flatnonzero(np.diff(starts)) + 1, starts.size]
        for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
            out.append((st.event_key(int(starts[lo]), version - 1), st.blob(events.slice(lo, hi - lo))))
        waiting = events.num_rows
    out.append(st.meta_put(st.Meta(versions_held=held, events_waiting=waiting)))
    return sorted(out)


def _runs_entries(spec: EnrichmentSpec, rows: Mapping[str, pa.Table], version: int) -> list[KeyValue]:
    """:func:`entries` in the ``runs`` layout (:mod:`streamjoin.enrichment.runs`): the versions as
    one run and the events as one file of waiting events, both of version ``version - 1``."""
    out: list[KeyValue] = []
    held = waiting = 0
    table = rows.get("table")
    if table is not None and table.num_rows:
        versions = _versions(spec, table)
        out += runs.base_puts(version - 1, SortedVersions.sorted(versions, runs.codes_of(versions, spec.keys)))
        held = versions.num_rows
    events = rows.get("events")
    if events is not None and events.num_rows:
        out += runs.waiting_puts(version - 1, _events(spec, events))
        waiting = events.num_rows
    out.append(st.meta_put(st.Meta(versions_held=held, events_waiting=waiting)))
    return sorted(out)


def _events(spec: EnrichmentSpec, events: pa.Table) -> pa.Table:
    """The ``events`` side's rows in the stream's schema, in canonical order."""
    return sort_canonically(pa.Table.from_arrays([events.column(f.name).cast(f.type) for f in spec.stream],
                                                 schema=spec.stream), spec.event_sort)


def _versions(spec: EnrichmentSpec, table: pa.Table) -> pa.Table:
    """The ``table`` side's rows as versions held (:attr:`EnrichmentSpec.versions_schema`)."""
    schema = spec.versions_schema
    ops = table.column("_op")
    unknown = pc.unique(pc.filter(ops, pc.invert(pc.is_in(ops, value_set=pa.array(list(_OPS)))))).to_pylist()
    if unknown:
        raise JoinDefinitionError(f"initial_state['table']: _op must be 'upsert' or 'delete', not {unknown[0]!r}")
    keys = st.key_columns(table, spec.changes.key, spec.key_types)
    arrays: list[pa.Array | pa.ChunkedArray] = list(keys)
    for field in schema:
        if field.name in spec.keys:
            continue
        if field.name == OP:
            arrays.append(pc.if_else(pc.equal(ops, "delete"), DELETE, UPSERT).cast(field.type))
        elif field.name == TIME:
            arrays.append(table.column("_change_time").cast(pa.int64()).cast(field.type))
        elif field.name == SEQ:
            arrays.append(table.column("_sequence").cast(field.type))
        elif field.name in table.column_names:
            arrays.append(table.column(field.name).cast(field.type))
        else:
            arrays.append(pa.nulls(table.num_rows, field.type))
    return pa.Table.from_arrays(arrays, schema=schema)
