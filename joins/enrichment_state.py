"""The state layout of the enrichment join: table versions per key bucket, waiting events by time.

Keys (byte order = bucket order, see :mod:`statestore.codecs`)::

    b"\\x00meta"                                          -> 4 x encode_int: event watermark, table
                                                            watermark, versions held, events waiting
    b"T" | encode_int(key bucket)                         -> versions (Arrow IPC stream)
    b"E" | encode_timestamp(time bucket) | encode_int(version) -> waiting events (Arrow IPC stream)

**Versions**: a key's bucket is ``crc32(pack(key values)) % buckets``. A bucket's blob holds every
version still kept of its keys: the packed key (:data:`joins.enrichment_spec.KEY`), change time,
sequence, op (upsert/delete: a delete is kept as a tombstone version) and the value columns, sorted
by (key, time, sequence with nulls first). A version reads and rewrites only the buckets of the keys
it touches (new changes, released events), so its cost follows its rows, not the table's size.

**Waiting events** (as-of mode) are filed by the bucket of their event time and the version they
arrived in, in canonical order, in the stream's schema. Releasing the events below a bound reads
the buckets up to it, outputs the released rows and writes the rest back under the same key.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Iterator, Sequence

import numpy as np
import pyarrow as pa

from joins.operator import NEG_INF, POS_INF
from statestore.base import KeyValue, Store, prefix_end
from statestore.codecs import decode_int, encode_int, pack_many

__all__ = ["Meta", "read_meta", "meta_put", "key_column", "bucket_ids", "version_key", "read_versions",
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


def key_column(table: pa.Table, columns: Sequence[str]) -> pa.Array:
    """The packed key of each row (``pack(*values)``; a row with a null key value gets a null)."""
    values = [table.column(c).to_pylist() for c in columns]
    rows = list(zip(*values)) if values else []
    packed = pack_many(rows)
    nulls = [any(v is None for v in row) for row in rows]
    return pa.array([None if n else p for p, n in zip(packed, nulls)], pa.binary())


def bucket_ids(keys: pa.Array, buckets: int) -> np.ndarray:
    """The key bucket of each packed key (``crc32 % buckets``)."""
    return np.array([zlib.crc32(k) % buckets for k in keys.to_pylist()], dtype=np.int64)


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
