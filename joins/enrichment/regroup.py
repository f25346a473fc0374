"""Splitting the enrichment join's state by key group (:mod:`streamjoin.runtime.regroup`).

A new partition's state (:mod:`streamjoin.enrichment.state`) from the old partitions' states:

* **versions**: per key bucket, the stored versions (every base and delta of every old
  partition) whose join key is in an owned key group, as one base blob, sorted by (key, change
  time, sequence): a key's versions are all in the one old partition that owned its key group,
  so no version appears twice, and the blob is the same whatever the old partition count (for
  the same versions held). Deltas are not kept as deltas (old partitions may have written one
  for the same bucket and version); a bucket's base and deltas are always read together and
  sorted, so only when it folds next changes, never a result (:mod:`streamjoin.enrichment.step`).
  A key bucket is a hash of the key modulo ``buckets``, whatever the partition, so a key keeps
  its bucket.
* **waiting events**: per (time bucket, arrival version), the owned events of every old
  partition as one blob, in canonical event order (releasing sorts the events it reads anyway).
* **expiry index** (with a table TTL): built again from the versions kept, one entry per (time
  slot of a version's change time, its key bucket), as the step files them. The old entries
  cannot be split (they name buckets, which hold keys of every key group), and need not be kept:
  the step files an entry for every version it accepts, and folds a bucket named by a slot once
  the slot ends at or before ``expire_before``, dropping there every version with a change time
  below that bound (expired or pruned: ``needed_versions``); so every version still held has its
  (slot, bucket) entry in its old partition, and the entries rebuilt are those entries, less the
  ones that name only versions of other key groups, or none (left by a fold that dropped them:
  such an entry only makes a bucket fold, which changes no result).
* **meta**: the watermarks, the largest of the old partitions' (each holds the global ones,
  so they agree); versions held and events waiting counted over the entries kept.
"""

from __future__ import annotations

from typing import Any, Iterator, Sequence

import numpy as np
import pyarrow as pa

from streamjoin.changes import SEQ, TIME
from streamjoin.enrichment import runs
from streamjoin.enrichment import state as st
from streamjoin.enrichment.sorted_versions import SortedVersions
from streamjoin.enrichment.spec import EnrichmentSpec
from streamjoin.kit.order import canonical_sort_keys, sort_canonically
from streamjoin.runtime.areas import Area
from streamjoin.runtime.evolution import as_schema
from streamjoin.runtime.regroup import Ownership, merged_scan
from streamjoin.statestore.base import KeyValue, Store

__all__ = ["regroup", "regroup_runs"]

_VERSIONS, _EVENTS = st.LAYOUT["versions"], st.LAYOUT["events"]


def regroup(spec: EnrichmentSpec, sources: Sequence[Store], owned: Ownership) -> list[KeyValue]:
    """The entries of the key groups ``owned`` selects, from the old partitions' ``sources``, in
    key order (see module)."""
    found = [st.LAYOUT["meta"].get(s) for s in sources]
    metas = [st.Meta(*m) for m in found if m is not None]
    out: list[KeyValue] = []
    held, expiry = 0, []
    for bucket, tables in _groups(sources, _VERSIONS, _VERSIONS.offset("key bucket")):
        versions = _owned([as_schema(t, spec.versions_schema) for t in tables], spec.keys, owned)
        if versions.num_rows == 0:
            continue
        first = [*spec.keys, TIME, SEQ]
        versions = sort_canonically(versions, canonical_sort_keys(versions.schema, first))
        out.append((st.version_key(bucket), st.blob(versions)))
        held += versions.num_rows
        if spec.ttl is not None:
            column = versions.column(TIME)
            timeless = column.is_null().to_numpy(zero_copy_only=False)
            times = column.fill_null(0).cast(pa.int64()).to_numpy()
            expiry += st.expiry_puts(timeless, times, np.full(versions.num_rows, bucket, np.int64),
                                     st.slot_width(spec.ttl))
    waiting = 0
    for key, tables in _groups(sources, _EVENTS, slice(0, None)):
        events = _owned([as_schema(t, spec.stream) for t in tables], list(spec.stream_key), owned)
        if events.num_rows:
            out.append((key, st.blob(sort_canonically(events, spec.event_sort))))
            waiting += events.num_rows
    out += expiry
    if metas:
        out.append(st.meta_put(st.Meta(max(m.event_watermark for m in metas), max(m.table_watermark for m in metas),
                                       held, waiting)))
    return sorted(out)


def regroup_runs(spec: EnrichmentSpec, sources: Sequence[Store], owned: Ownership) -> list[KeyValue]:
    """:func:`regroup` of the ``runs`` layout (:mod:`streamjoin.enrichment.runs`): the owned
    versions of every run of every old partition as one run, in version order; the owned events
    still waiting in every file of every old partition as one file, in canonical order; the meta
    as :func:`regroup` makes it. A key's versions are in one old partition, so none is there twice.
    Both are filed under version 0, before every version a partition runs: only their order among
    the files counts."""
    found = [st.LAYOUT["meta"].get(s) for s in sources]
    metas = [st.Meta(*m) for m in found if m is not None]
    out: list[KeyValue] = []
    schema = spec.versions_schema
    versions = _owned([t for s in sources for _, t in runs.read_runs(s, schema)] or [schema.empty_table()],
                      spec.keys, owned)
    if versions.num_rows:
        out += runs.base_puts(0, SortedVersions.sorted(versions, runs.codes_of(versions, spec.keys)))
    waiting = 0
    if metas:
        meta = st.Meta(max(m.event_watermark for m in metas), max(m.table_watermark for m in metas))
        events = [runs.still_waiting(t, spec.stream_time, meta, spec.grace)
                  for s in sources for _, t in runs.read_waiting(s, spec.stream)]
        kept = _owned(events or [spec.stream.empty_table()], list(spec.stream_key), owned)
        if kept.num_rows:
            out += runs.waiting_puts(0, sort_canonically(kept, spec.event_sort))
            waiting = kept.num_rows
        out.append(st.meta_put(st.Meta(meta.event_watermark, meta.table_watermark, versions.num_rows, waiting)))
    return sorted(out)


def _groups(sources: Sequence[Store], area: Area, part: slice) -> Iterator[tuple[Any, list[pa.Table]]]:
    """(``part`` of the key, decoded; the whole key for ``slice(0, None)``) and the tables of every
    entry of ``area`` in every source sharing it, in key order."""
    current: bytes = b""   # read only once ``tables`` holds an entry of it
    tables: list[pa.Table] = []
    for _, key, value in merged_scan(sources, area.prefix, area.end):
        name = key[part]
        if name != current and tables:
            yield _name(area, current, part), tables
            tables = []
        current = name
        tables.append(st.unblob(value))
    if tables:
        yield _name(area, current, part), tables


def _name(area: Area, name: bytes, part: slice) -> Any:
    return name if part == slice(0, None) else area.decode(area.prefix + name)[0]


def _owned(tables: list[pa.Table], key: list[str], owned: Ownership) -> pa.Table:
    """The rows of ``tables`` (one schema, but maybe its nullability) whose ``key`` is owned."""
    schema = tables[0].schema
    kept = []
    for table in tables:
        if table.num_rows == 0:
            continue
        table = table.filter(pa.array(owned.rows(table, key)))
        if table.num_rows:
            kept.append(table if table.schema == schema else table.cast(schema))
    return pa.concat_tables(kept).combine_chunks() if kept else schema.empty_table()
