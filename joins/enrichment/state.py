"""The state layout of the enrichment join: table versions per key bucket, waiting events by time.

Keys (byte order = bucket order, see :mod:`streamjoin.statestore.codecs`), declared as the areas
of :data:`LAYOUT` (:mod:`streamjoin.runtime.areas`)::

    b"\\x00meta"                                          -> 4 x encode_int: event watermark, table
                                                            watermark, versions held, events waiting
    b"T" | encode_int(key bucket)                         -> base versions (Arrow IPC stream)
    b"T" | encode_int(key bucket) | 0x01 | encode_int(v)  -> delta: the versions version v added
    b"E" | encode_timestamp(time bucket) | encode_int(version) -> waiting events (Arrow IPC stream)
    b"X" | encode_timestamp(time slot) | encode_int(key bucket) -> b"" (table TTL: expiry index)

**Versions**: a key's bucket is a fixed 64-bit hash of its values modulo ``buckets``
(:func:`bucket_ids`, vectorized). A bucket's versions are its *base* blob plus its *deltas*, read
together by one batched seek for all the buckets a version touches (:func:`read_buckets`); each
blob holds versions of the bucket's keys:
the key columns (``__sj_k0``, ... in the common key types), op, change time, sequence
(upsert/delete: a delete is kept as a tombstone version) and the value columns, sorted by (key,
time, sequence), nulls first: a null change time is a timeless bootstrap row, before every change
of its key (no timestamp stands for it). No version appears twice across a bucket's blobs. A version
that accepts new changes for a bucket writes them as one small delta (so its writes follow its
changes, not the table's size); it *folds* the bucket (base and deltas merged, versions no longer
needed dropped, one new base written, the deltas removed by one range delete) only when the
deltas and the versions it saw to be no longer needed reach a fraction of the base, when the
bucket has many deltas, or when the bucket is the one swept in this version (``version %
buckets``), so versions no longer needed are dropped within ``buckets`` versions even for keys
nothing touches. A version no longer needed may thus stay until its bucket folds; it is older
than a version every later lookup reaches first, so it changes no result (see
:mod:`streamjoin.enrichment.step`).

**Expiry index** (with a table TTL): a version accepted with change time ``c`` files its key
bucket under the time slot ``c // width * width`` (``width`` = :func:`slot_width`; a timeless
version under NEG_INF). Once the expiry bound passes a slot's end, every version of the slot has
expired or been pruned: :func:`due_buckets` reads the entries of the slots passed (one range
scan, as many entries as are due), the step folds those buckets, dropping what expired, and
removes the entries with one range delete. So expiry reads the buckets that hold expiring
versions, not the whole state.

**Waiting events** (as-of mode) are filed by the bucket of their event time and the version they
arrived in, in canonical order, in the stream's schema. Releasing the events below a bound reads
the buckets up to it: the blobs of buckets wholly below it are released as they are (and removed
by one range delete); only a bucket the bound cuts is filtered, its released rows output and the
rest written back under the same key.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Sequence

import numpy as np
import pyarrow as pa

from streamjoin.runtime.areas import ARROW, BYTE, INT, RAW, TIMESTAMP, Area, Ints, StateLayout
from streamjoin.runtime.evolution import as_schema
from streamjoin.runtime.operator import NEG_INF, POS_INF, cast_values
from streamjoin.statestore.base import KeyValue, Store

__all__ = ["LAYOUT", "Meta", "read_meta", "meta_put", "key_columns", "bucket_ids", "version_key", "delta_key", "delta_range",
           "Bucket", "read_buckets", "blob", "unblob", "waiting_range", "event_key", "event_start", "waiting_through",
           "scan_waiting", "all_waiting", "slot_width", "slot_starts", "last_due_slot", "expiry_puts", "due_buckets"]

#: The enrichment join's state (see module); its version is the definition's ``layout``.
LAYOUT = StateLayout("enrichment join", 2, (
    Area("meta", b"\x00meta", (), Ints(4)),
    # a key bucket's base has the bucket only; a delta adds 0x01 and the version that wrote it
    Area("versions", b"T", (("key bucket", INT), ("delta", BYTE), ("version", INT)), ARROW),
    Area("events", b"E", (("time bucket", TIMESTAMP), ("version", INT)), ARROW),
    Area("expiry", b"X", (("time slot", TIMESTAMP), ("key bucket", INT)), RAW),
))
_META, _VERSIONS, _EVENTS, _EXPIRY = LAYOUT["meta"], LAYOUT["versions"], LAYOUT["events"], LAYOUT["expiry"]
_DELTA = b"\x01"


@dataclass
class Meta:
    """Per-partition progress: watermarks (µs) and the sizes reported as metrics."""

    event_watermark: int = NEG_INF
    table_watermark: int = NEG_INF
    versions_held: int = 0
    events_waiting: int = 0


def read_meta(store: Store) -> Meta:
    value = _META.get(store)
    return Meta() if value is None else Meta(*value)


def meta_put(meta: Meta) -> KeyValue:
    fields = (meta.event_watermark, meta.table_watermark, meta.versions_held, meta.events_waiting)
    return _META.put(fields)


def key_columns(table: pa.Table, columns: Sequence[str], types: Sequence[pa.DataType]) -> list[pa.Array]:
    """The key columns of ``table`` in their common types (dictionaries decoded), one chunk each."""
    out = []
    for name, kind in zip(columns, types):
        values = table.column(name)
        if pa.types.is_dictionary(values.type):
            values = values.cast(values.type.value_type)
        out.append(cast_values(values, kind, f"key column {name!r}").combine_chunks())
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
    """The key of a bucket's base blob; also the prefix of its deltas."""
    return _VERSIONS.key(bucket)


def delta_key(bucket: int, version: int) -> bytes:
    """The key of the delta version ``version`` wrote for ``bucket``."""
    return _VERSIONS.key(bucket, _DELTA, version)


def delta_range(bucket: int) -> tuple[bytes, bytes]:
    """The key range of every delta of ``bucket`` (for one range delete when it folds)."""
    return _VERSIONS.range(bucket, _DELTA)


@dataclass
class Bucket:
    """One key bucket's versions as stored: its base (maybe empty) and its deltas, oldest first."""

    base: pa.Table
    deltas: list[pa.Table]
    #: the bytes of its blobs as stored
    size: int = 0

    @property
    def delta_rows(self) -> int:
        return sum(d.num_rows for d in self.deltas)

    @property
    def rows(self) -> int:
        return self.base.num_rows + self.delta_rows

    def tables(self) -> list[pa.Table]:
        return [self.base, *self.deltas]


def read_buckets(store: Store, buckets: Sequence[int], schema: pa.Schema | None) -> dict[int, Bucket]:
    """The base and deltas of each of ``buckets`` (one batched seek for all of them,
    :meth:`Store.scan_prefixes`; an empty base where a bucket has none), as tables of ``schema``
    (the versions' columns: a blob written under an earlier schema of the table is read in it,
    :func:`streamjoin.runtime.evolution.as_schema`; None: as stored, and an empty table of no
    columns where there is no base)."""
    def read(value: bytes) -> pa.Table:
        return unblob(value) if schema is None else as_schema(unblob(value), schema)

    out = {}
    base_keys = [version_key(bucket) for bucket in buckets]
    for bucket, base_key, entries in zip(buckets, base_keys, store.scan_prefixes(base_keys)):
        base, deltas, size = (pa.table({}) if schema is None else schema.empty_table()), [], 0
        for key, value in entries:
            size += len(value)
            if key == base_key:
                base = read(value)
            else:
                deltas.append(read(value))
        out[bucket] = Bucket(base, deltas, size)
    return out


def blob(table: pa.Table) -> bytes:
    """A table of versions or of waiting events as a value (an Arrow IPC stream)."""
    return ARROW.encode(table)


def unblob(value: bytes) -> pa.Table:
    return ARROW.decode(value)


def event_key(start: int, version: int) -> bytes:
    return _EVENTS.key(start, version)


def event_start(key: bytes) -> int:
    """The time bucket start of a waiting-event key."""
    return _EVENTS.decode(key)[0]


def waiting_through(key: bytes) -> tuple[bytes, bytes]:
    """The key range of every waiting-event blob up to and including ``key``."""
    return _EVENTS.through(key)


def waiting_range(below: int, width: int) -> tuple[bytes, bytes] | None:
    """The key range of the waiting-event buckets that may hold events with time ``< below``."""
    if below == NEG_INF:
        return None
    if below == POS_INF:
        return _EVENTS.range()
    return _EVENTS.span(None, (((below - 1) // width) * width,))


def scan_waiting(store: Store, below: int, width: int) -> Iterator[tuple[bytes, pa.Table]]:
    """(key, events) of every waiting-event blob that may hold events with time ``< below``."""
    bounds = waiting_range(below, width)
    if bounds is not None:
        for key, value in store.scan(*bounds):
            yield key, unblob(value)


def all_waiting(store: Store) -> dict[bytes, tuple[pa.Table, int]]:
    """Every waiting-event blob, by key: (events, the blob's size)."""
    return {key: (unblob(value), len(value)) for key, value in store.scan(*_EVENTS.range())}


def slot_width(ttl: int) -> int:
    """The width of the expiry index's time slots for a TTL of ``ttl`` µs: versions leave the
    state at most one slot after they expire."""
    return max(ttl // 4, 1)


def slot_starts(timeless: np.ndarray, times: np.ndarray, width: int) -> np.ndarray:
    """The start of the time slot of each version (whether timeless, change times): a timeless
    one's is NEG_INF."""
    lowest = NEG_INF // width + 1          # (a slot below it would not fit int64)
    return np.where(timeless, NEG_INF, np.maximum(times // width, lowest) * width)


def last_due_slot(expire_before: int, width: int) -> int:
    """The start of the last slot that ends at or before ``expire_before`` (not NEG_INF, not
    POS_INF): its versions and every earlier slot's have expired."""
    return max(((expire_before - width) // width) * width, NEG_INF)


def expiry_puts(timeless: np.ndarray, times: np.ndarray, buckets: np.ndarray, width: int) -> list[KeyValue]:
    """The expiry index entries of versions (whether timeless, change times, key buckets): one
    per distinct (time slot, key bucket)."""
    if buckets.size == 0:
        return []
    slots = slot_starts(timeless, times, width)
    order = np.lexsort((buckets, slots))
    slots, buckets = slots[order], buckets[order]
    first = np.r_[True, (slots[1:] != slots[:-1]) | (buckets[1:] != buckets[:-1])]
    return [(_EXPIRY.key(slot, bucket), b"") for slot, bucket in zip(slots[first].tolist(), buckets[first].tolist())]


def due_buckets(store: Store, expire_before: int, width: int) -> tuple[list[int], tuple[bytes, bytes] | None]:
    """The key buckets the expiry index files under slots that end at or before
    ``expire_before`` (each once, ascending), and the key range of those entries (None: none)."""
    if expire_before == NEG_INF:
        return [], None
    if expire_before == POS_INF:
        bounds = _EXPIRY.range()
    else:
        bounds = _EXPIRY.span(None, (last_due_slot(expire_before, width),))
    found = {_EXPIRY.decode(key)[1] for key, _ in store.scan(*bounds)}
    return sorted(found), bounds if found else None
