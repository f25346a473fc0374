"""The state an enrichment join read or wrote, kept decoded with the open store between versions.

Every version reads the key buckets its changes and released events touch (base and deltas,
:func:`streamjoin.enrichment.state.read_buckets`); with many events that is every bucket, so
each version would read and decode the partition's whole table again. A :class:`BucketCache`
lives in the store's memo (:meth:`streamjoin.statestore.base.Store.memo`): as long as the open
store, which a streaming query keeps warm between its tasks. It holds, per bucket, exactly what
the store holds: the tables read from it, and the blobs the step wrote, decoded from the very
bytes written (zero-copy), so every decision made from it (fold or not) is the one a read would
give. It also holds every waiting-event blob (read all at once when the cache starts, then kept
up to date with the step's own puts, deletes and range delete), so releasing the events of the
previous version reads nothing.

**Validity.** The cache is labelled with the store version it describes. A step uses it only
when the label is the store's version marker, else starts an empty one: a write that did not
happen, a store rolled back or forward by the changelog, a rebuilt or handed-over store (a new
store object, a new memo) all leave a label that does not match. A step records its writes with
:meth:`BucketCache.commit` at its end, labelled with its version, which its write then carries.

**Memory.** At most :data:`LIMIT_BYTES` of decoded tables per store, counted as the bytes of the
blobs they are decoded from (zero-copy: they share those bytes);
``STREAMJOIN_ENRICHMENT_CACHE_MB`` sets it (0: no cache). Beyond it the buckets with the highest
ids are left out and read from the store each time they are needed; waiting events beyond a
quarter of it are dropped and read by a scan again.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Protocol, Sequence, TypeVar

import pyarrow as pa

from streamjoin.enrichment import state as st
from streamjoin.statestore.base import Store

__all__ = ["BucketCache", "LIMIT_BYTES", "kept"]

#: The most bytes of decoded tables a store's cache holds.
LIMIT_BYTES = int(float(os.environ.get("STREAMJOIN_ENRICHMENT_CACHE_MB", "64")) * 2**20)
_MEMO_KEY = "streamjoin.enrichment.buckets"


class _Labelled(Protocol):
    """A cache labelled with the schema and store version it describes."""

    schema: pa.Schema
    version: int | None

    def __init__(self, schema: pa.Schema, version: int | None) -> None: ...


C = TypeVar("C", bound=_Labelled)


def kept(store: Store, key: str, kind: type[C], schema: pa.Schema) -> C:
    """The cache kept in ``store``'s memo under ``key`` when it describes the store's version
    and ``schema`` (see module, "Validity"), else a new empty ``kind(schema, version)`` kept in
    its place."""
    memo, version = store.memo(), store.version
    found = memo.get(key)
    if isinstance(found, kind) and found.version == version and found.schema.equals(schema):
        return found
    made = memo[key] = kind(schema, version)
    return made


@dataclass
class BucketCache:
    """Decoded buckets as of store version ``version`` (see module)."""

    schema: pa.Schema
    version: int | None
    buckets: dict[int, st.Bucket] = field(default_factory=dict)
    #: what the running step wrote: bucket -> its content after the write
    pending: dict[int, st.Bucket] = field(default_factory=dict)
    #: every waiting-event blob the store holds, by key: (events, blob size) (None: not known)
    waiting: dict[bytes, tuple[pa.Table, int]] | None = None
    #: the running step's writes of waiting events: the range it removes, then puts ((events,
    #: blob size)) and deletes (None)
    waiting_removed: tuple[bytes, bytes] | None = None
    waiting_pending: dict[bytes, tuple[pa.Table, int] | None] = field(default_factory=dict)

    @classmethod
    def of(cls, store: Store, schema: pa.Schema) -> BucketCache:
        """The cache kept with ``store`` when it describes the store's version and ``schema``,
        else a new empty one (kept in its place)."""
        cache = kept(store, _MEMO_KEY, cls, schema)
        cache.pending, cache.waiting_removed, cache.waiting_pending = {}, None, {}
        return cache

    def read(self, store: Store, buckets: Sequence[int]) -> dict[int, st.Bucket]:
        """Each of ``buckets`` as stored: from the cache, the others read (one batched seek)."""
        missing = [b for b in buckets if b not in self.buckets]
        found = st.read_buckets(store, missing, self.schema) if missing else {}
        out = {b: self.buckets[b] if b in self.buckets else found[b] for b in buckets}
        self._keep(found)
        return out

    def appended(self, bucket: int, stored: st.Bucket, value: bytes) -> None:
        """The running step wrote ``value`` as a new delta of ``bucket`` (``stored`` before)."""
        if LIMIT_BYTES > 0:
            self.pending[bucket] = st.Bucket(stored.base, [*stored.deltas, st.unblob(value)], stored.size + len(value))

    def replaced(self, bucket: int, value: bytes | None) -> None:
        """The running step folded ``bucket`` into the base ``value`` (None: no base left)."""
        if LIMIT_BYTES > 0:
            base = self.schema.empty_table() if value is None else st.unblob(value)
            self.pending[bucket] = st.Bucket(base, [], 0 if value is None else len(value))

    def waiting_below(self, store: Store, below: int, width: int) -> list[tuple[bytes, pa.Table]]:
        """(key, events) of every waiting-event blob that may hold events with time ``< below``,
        in key order (:func:`streamjoin.enrichment.state.scan_waiting`)."""
        bounds = st.waiting_range(below, width)
        if LIMIT_BYTES <= 0:
            return list(st.scan_waiting(store, below, width))
        if self.waiting is None:
            self.waiting = st.all_waiting(store)
        if bounds is None:
            return []
        start, end = bounds
        return sorted((k, t) for k, (t, _) in self.waiting.items() if start <= k < end)

    def waiting_written(self, removed: tuple[bytes, bytes] | None,
                        puts: dict[bytes, tuple[pa.Table, int] | None]) -> None:
        """The running step removes the waiting-event blobs in ``removed`` (a key range), then
        puts each of ``puts`` (None: deletes it)."""
        self.waiting_removed, self.waiting_pending = removed, puts

    def commit(self, version: int) -> None:
        """The running step's writes are done with: the cache describes version ``version``,
        and is used once the store's version marker says so (its write happened)."""
        self.version = version
        self._keep(self.pending)
        self.pending = {}
        if self.waiting is not None:
            if self.waiting_removed is not None:
                start, end = self.waiting_removed
                self.waiting = {k: t for k, t in self.waiting.items() if not start <= k < end}
            for key, entry in self.waiting_pending.items():
                if entry is None:
                    self.waiting.pop(key, None)
                else:
                    self.waiting[key] = entry
            if sum(size for _, size in self.waiting.values()) > LIMIT_BYTES // 4:
                self.waiting = None
        self.waiting_removed, self.waiting_pending = None, {}

    def _keep(self, buckets: dict[int, st.Bucket]) -> None:
        if LIMIT_BYTES <= 0:
            self.buckets.clear()
            return
        self.buckets.update(buckets)
        total = sum(b.size for b in self.buckets.values())
        if total > LIMIT_BYTES:
            for bucket in sorted(self.buckets, reverse=True):
                total -= self.buckets.pop(bucket).size
                if total <= LIMIT_BYTES:
                    break
