"""Splitting the interval join's state by key group (:mod:`streamjoin.runtime.regroup`).

A new partition's state (:mod:`streamjoin.interval.state`) from the old partitions' states:

* the watermark: the largest of theirs (every partition's is the global one, so they agree);
* per side and bucket, the stored rows of each arrival version whose key is in an owned key
  group, from every old partition, as one blob set under the same (bucket, version) keys, in
  canonical order, with new row ids ``version << 32 | n`` (``n`` counting the partition's rows of
  that version): ids of rows from several old partitions could otherwise collide;
* per side, bucket and matching version, the marks of the rows kept, as their new ids.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Iterator, Sequence

import numpy as np
import pyarrow as pa

from streamjoin.interval.spec import ROW_ID, IntervalSpec
from streamjoin.interval.state import LAYOUT, marks_put, rows_puts, watermark_put
from streamjoin.kit.order import ascending, sort_canonically
from streamjoin.runtime.areas import ARROW, Int64s
from streamjoin.runtime.evolution import as_schema
from streamjoin.runtime.regroup import Ownership, merged_scan
from streamjoin.statestore.base import KeyValue, Store

__all__ = ["regroup"]

_IDS = Int64s()
_MARKS, _ROWS = b"m", b"r"


def regroup(spec: IntervalSpec, sources: Sequence[Store], owned: Ownership) -> list[KeyValue]:
    """The entries of the key groups ``owned`` selects, from the old partitions' ``sources``, in
    key order (see module)."""
    out: list[KeyValue] = []
    watermarks = [v[0] for v in (LAYOUT["watermark"].get(s) for s in sources) if v is not None]
    if watermarks:
        out.append(watermark_put(max(watermarks)))
    for side in ("left", "right"):
        counters: dict[int, int] = defaultdict(int)
        for start, entries in _buckets(sources, side):
            out.extend(_bucket(spec, side, start, entries, owned, counters))
    return sorted(out)


def _buckets(sources: Sequence[Store], side: str) -> Iterator[tuple[int, list[tuple[int, bytes, bytes]]]]:
    """(bucket start, its (source, key, value) entries) for each bucket of ``side``, in order."""
    area = LAYOUT[side]
    at = area.offset("bucket")
    current = b""
    entries: list[tuple[int, bytes, bytes]] = []
    for source, key, value in merged_scan(sources, area.prefix, area.end):
        if key[at] != current and entries:
            yield area.decode(entries[0][1])[0], entries
            entries = []
        current = key[at]
        entries.append((source, key, value))
    if entries:
        yield area.decode(entries[0][1])[0], entries


def _bucket(
    spec: IntervalSpec, side: str, start: int, entries: list[tuple[int, bytes, bytes]], owned: Ownership,
    counters: dict[int, int],
) -> list[KeyValue]:
    area, plan = LAYOUT[side], spec.side(side)
    rows: dict[int, list[tuple[int, pa.Table]]] = defaultdict(list)
    marks: dict[int, list[tuple[int, np.ndarray]]] = defaultdict(list)
    for source, key, value in entries:
        parts = area.decode(key)
        if parts[1] == _ROWS:
            rows[parts[2]].append((source, as_schema(ARROW.decode(value), plan.stored_schema)))
        else:
            marks[parts[2]].append((source, _IDS.decode(value)))
    renamed: dict[int, tuple[np.ndarray, np.ndarray]] = {}   # source -> (old ids, new ids), sorted
    puts: list[KeyValue] = []
    for version in sorted(rows):
        pieces = []
        for source, table in rows[version]:
            kept = table.filter(pa.array(owned.rows(table, plan.key)))
            pieces.append(kept.append_column("__sj_source", pa.array(np.full(kept.num_rows, source, np.int64))))
        merged = pa.concat_tables(pieces)
        if merged.num_rows == 0:
            continue
        keys = tuple(k for k in plan.sort_keys if k[0] in merged.column_names) + ascending("__sj_source", ROW_ID)
        merged = sort_canonically(merged, keys)
        new_ids = (version << 32) + counters[version] + np.arange(merged.num_rows, dtype=np.int64)
        counters[version] += merged.num_rows
        sources_of = merged.column("__sj_source").to_numpy()
        old_ids = merged.column(ROW_ID).to_numpy()
        for source in np.unique(sources_of):
            at = sources_of == source
            known = renamed.get(int(source), (np.zeros(0, np.int64), np.zeros(0, np.int64)))
            renamed[int(source)] = (np.r_[known[0], old_ids[at]], np.r_[known[1], new_ids[at]])
        table = merged.drop_columns(["__sj_source"]).set_column(
            merged.schema.get_field_index(ROW_ID), ROW_ID, pa.array(new_ids))
        puts.extend(rows_puts(side, start, version, table, spec.blob_rows, spec.compression))
    for version in sorted(marks):
        ids = [_renamed(renamed.get(source), found) for source, found in marks[version]]
        ids = [i for i in ids if i.size]
        if ids:
            puts.append(marks_put(side, start, version, np.concatenate(ids)))
    return puts


def _renamed(mapping: tuple[np.ndarray, np.ndarray] | None, ids: np.ndarray) -> np.ndarray:
    """The new ids of the marked ``ids`` whose rows were kept."""
    if mapping is None or ids.size == 0:
        return np.zeros(0, np.int64)
    old, new = mapping
    order = np.argsort(old)
    old, new = old[order], new[order]
    at = np.minimum(np.searchsorted(old, ids), max(old.size - 1, 0))
    hit = old[at] == ids
    return new[at[hit]]
