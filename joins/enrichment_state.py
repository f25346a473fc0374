"""The state layout of the enrichment join: table versions per key bucket, waiting events by time.

Keys (byte order = bucket order, see :mod:`statestore.codecs`)::

    b"\\x00meta"                                          -> 4 x encode_int: event watermark, table
                                                            watermark, versions held, events waiting
    b"T" | encode_int(key bucket)                         -> versions (Arrow IPC stream)
    b"E" | encode_timestamp(time bucket) | encode_int(version) -> waiting events (Arrow IPC stream)

**Versions**: a key's bucket is a fixed 64-bit hash of its values modulo ``buckets``
(:func:`bucket_ids`, vectorized). A bucket's blob holds every version still kept of its keys: the
key columns (``__sj_k0``, ... in the common key types), op, change time, sequence (upsert/delete: a delete is kept as a tombstone version) and the value columns, sorted
by (key, time, sequence with nulls first). A version reads and rewrites only the buckets of the keys
it touches (new changes, released events), so its cost follows its rows, not the table's size;
each version also sweeps bucket ``version % buckets``, so versions no longer needed are dropped
within ``buckets`` versions even for keys nothing touches.

**Waiting events** (as-of mode) are filed by the bucket of their event time and the version they
arrived in, in canonical order, in the stream's schema. Releasing the events below a bound reads
the buckets up to it, outputs the released rows and writes the rest back under the same key.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Sequence

import numpy as np
import pyarrow as pa

from joins.operator import NEG_INF, POS_INF
from statestore.base import KeyValue, Store, prefix_end
from statestore.codecs import decode_int, encode_int

__all__ = ["Meta", "read_meta", "meta_put", "key_columns", "bucket_ids", "version_key", "read_versions",
           "blob", "unblob", "waiting_range", "event_key", "scan_waiting"]

META_KEY = b"\x00meta"
_VERSIONS, _EVENTS = b"T", b"E"


@dataclass
class Meta:
    """Per-partition progress: watermarks (µs) and the sizes reported as metrics."""

    event_watermark: int = NEG_INF
    table_watermark: int = NEG_INF
    versions_held: int = 0
    events_waiting: int = 0


def read_meta(store: Store) -> Meta:
    value = store.get(META_KEY)
    if value is None:
        return Meta()
    return Meta(*(decode_int(value[i:i + 8]) for i in range(0, 32, 8)))


def meta_put(meta: Meta) -> KeyValue:
    fields = (meta.event_watermark, meta.table_watermark, meta.versions_held, meta.events_waiting)
    return META_KEY, b"".join(encode_int(v) for v in fields)


def key_columns(table: pa.Table, columns: Sequence[str], types: Sequence[pa.DataType]) -> list[pa.Array]:
    """The key columns of ``table`` in their common types (dictionaries decoded), one chunk each."""
    out = []
    for name, kind in zip(columns, types):
        values = table.column(name)
        if pa.types.is_dictionary(values.type):
            values = values.cast(values.type.value_type)
        out.append((values if values.type == kind else values.cast(kind)).combine_chunks())
    return out


_MIX = np.uint64(0x9E3779B97F4A7C15)
_PRIME = np.uint64(0x100000001B3)


def bucket_ids(keys: Sequence[pa.Array], buckets: int) -> np.ndarray:
    """The key bucket of each row: a fixed 64-bit hash of its key values (none null), modulo
    ``buckets``. Equal values hash equally whatever their width (int32 1 == int64 1)."""
    n = len(keys[0]) if keys else 0
    h = np.zeros(n, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for column in keys:
            h = (h ^ _column_hash(column)) * _MIX
            h ^= h >> np.uint64(29)
    return (h % np.uint64(buckets)).astype(np.int64)


def _column_hash(column: pa.Array) -> np.ndarray:
    if pa.types.is_integer(column.type) or pa.types.is_boolean(column.type):
        return column.cast(pa.int64()).to_numpy(zero_copy_only=False).view(np.uint64)
    values = column.cast(pa.large_binary())
    offsets = np.frombuffer(values.buffers()[1], dtype=np.int64)[values.offset:values.offset + len(values) + 1]
    lengths = np.diff(offsets)
    data = values.buffers()[2]
    body = (np.frombuffer(data, dtype=np.uint8) if data is not None else np.zeros(0, np.uint8))[offsets[0]:offsets[-1]]
    position = np.arange(body.size) - np.repeat(offsets[:-1] - offsets[0], lengths)
    powers = np.cumprod(np.full(int(lengths.max(initial=0)) + 1, _PRIME, dtype=np.uint64))
    terms = (body.astype(np.uint64) + np.uint64(1)) * powers[position]
    h = lengths.astype(np.uint64)
    present = lengths > 0
    if present.any():
        h[present] += np.add.reduceat(terms, (offsets[:-1] - offsets[0])[present])
    return h


def version_key(bucket: int) -> bytes:
    return _VERSIONS + encode_int(bucket)


def read_versions(store: Store, buckets: Sequence[int], schema: pa.Schema) -> dict[int, pa.Table]:
    """The version blobs of ``buckets`` (an empty table for a bucket without one)."""
    values = store.multi_get([version_key(b) for b in buckets])
    return {b: schema.empty_table() if v is None else unblob(v) for b, v in zip(buckets, values)}


def blob(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def unblob(value: bytes) -> pa.Table:
    return pa.ipc.open_stream(value).read_all()


def event_key(start: int, version: int) -> bytes:
    return _EVENTS + encode_int(start) + encode_int(version)


def waiting_range(below: int, width: int) -> tuple[bytes, bytes] | None:
    """The key range of the waiting-event buckets that may hold events with time ``< below``."""
    if below == NEG_INF:
        return None
    if below == POS_INF:
        return _EVENTS, prefix_end(_EVENTS)
    last = ((below - 1) // width) * width
    return _EVENTS, _EVENTS + encode_int(last) + b"\xff" * 9


def scan_waiting(store: Store, below: int, width: int) -> Iterator[tuple[bytes, pa.Table]]:
    """(key, events) of every waiting-event blob that may hold events with time ``< below``."""
    bounds = waiting_range(below, width)
    if bounds is not None:
        for key, value in store.scan(*bounds):
            yield key, unblob(value)
