"""The ``runs`` state layout of the enrichment join: a partition's table versions as sorted runs.

Chosen with ``EnrichmentJoin(..., layout="runs")`` (the definition's ``layout`` 3). Keys::

    b"\\x00meta"                                    -> as in layout 2 (:mod:`streamjoin.enrichment.state`)
    b"R" | encode_int(version) | encode_int(chunk) -> versions (Arrow IPC stream)
    b"W" | encode_int(version) | encode_int(chunk) -> waiting events (Arrow IPC stream)

**Runs.** A version that accepts changes writes them as one *run*: its accepted versions in
version order (:mod:`streamjoin.enrichment.sorted_versions`), cut into chunks of at most
:data:`CHUNK_ROWS` rows, under the version's number. A version *folds* once the runs after the
first (the *base*) hold more than ``fold_fraction`` of its rows (and at least
:data:`MIN_FOLD_ROWS`): it writes every version still needed (base, later runs and its own
accepted changes, pruned as :func:`streamjoin.enrichment.step.needed_versions` prunes) as its run, and
removes every earlier run with one range delete. No version appears in two runs, so the versions
held are the union of the runs, whichever run holds each. So a version's writes follow its
changes, not the table's size, and versions no longer needed leave at the next fold.

**Waiting events** (as-of mode) are filed by the version they arrived in: its events not
released on arrival, in canonical event order (by event time first), cut into chunks as runs are.
A filed event waits for the release bound (:meth:`streamjoin.enrichment.step.Step._release_bound`),
which never decreases, to pass its time, so the events of a version's file still waiting are
exactly those with a time at or above the previous version's bound: releasing the events below
this version's bound is a slice of each file (two binary searches of its times), and a file is
never rewritten, only removed with its last event. A version writes at most one file of waiting
events, and the files' count follows the versions an event waits, not the spread of their times.

**In memory.** :class:`RunsCache`, kept in the store's memo as the enrichment's bucket cache is
(:mod:`streamjoin.enrichment.cache`: labelled with the store version it describes, started again
when the label does not match), holds the versions decoded and sorted: the base, and the later
runs merged into one sorted *delta*. A partition's versions are held in memory whole while its
store is open; the ``buckets`` layout, the default, reads only the key buckets a version touches.

**Table TTL.** A fold drops the versions that have expired (as the buckets layout's folds do,
:func:`streamjoin.enrichment.step.needed_versions`); besides the folds for size, one is due once the
oldest version held has expired by a slot of the TTL (:func:`expiry_due`), so expired keys
leave the state within a quarter of the TTL of table time, as in the buckets layout.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import numpy as np
import pyarrow as pa

from streamjoin.enrichment import state as st
from streamjoin.enrichment.cache import kept
from streamjoin.enrichment.sorted_versions import SortedVersions, key_codes
from streamjoin.enrichment.step import release_bound
from streamjoin.kit.times import times_of
from streamjoin.runtime.areas import ARROW, INT, Area, Ints, StateLayout
from streamjoin.runtime.evolution import as_schema
from streamjoin.runtime.operator import NEG_INF, POS_INF
from streamjoin.statestore.base import KeyValue, Store

__all__ = ["LAYOUT", "CHUNK_ROWS", "MIN_FOLD_ROWS", "run_puts", "waiting_puts", "read_runs", "read_waiting", "still_waiting", "expiry_due", "Held", "Waiting", "RunsCache", "codes_of"]

#: The enrichment join's state in the ``runs`` layout (see module).
LAYOUT = StateLayout("enrichment join", 3, (
    Area("meta", st.LAYOUT["meta"].prefix, (), Ints(4)),
    Area("runs", b"R", (("version", INT), ("chunk", INT)), ARROW),
    Area("waiting", b"W", (("version", INT), ("chunk", INT)), ARROW),
))
_RUNS, _WAITING = LAYOUT["runs"], LAYOUT["waiting"]
#: The most rows of one stored chunk of a run.
CHUNK_ROWS = 65536
#: A fold waits for at least this many rows beside the base.
MIN_FOLD_ROWS = 4096
_MEMO_KEY = "streamjoin.enrichment.runs"


def codes_of(table: pa.Table, keys: list[str]) -> np.ndarray:
    """The key codes of versions ``table`` (its key columns ``keys``)."""
    return key_codes([table.column(k).combine_chunks() for k in keys])


def run_puts(version: int, versions: pa.Table) -> list[KeyValue]:
    """The entries of the run ``version`` writes (``versions`` in version order), chunk by chunk."""
    return _chunked(_RUNS, version, versions)


def waiting_puts(version: int, events: pa.Table) -> list[KeyValue]:
    """The entries of the waiting events that arrived in ``version`` (in canonical order)."""
    return _chunked(_WAITING, version, events)


def _chunked(area: Area, version: int, table: pa.Table) -> list[KeyValue]:
    return [(area.key(version, chunk), st.blob(table.slice(start, CHUNK_ROWS)))
            for chunk, start in enumerate(range(0, table.num_rows, CHUNK_ROWS))]


def read_runs(store: Store, schema: pa.Schema | None) -> Iterator[tuple[int, pa.Table]]:
    """(version, versions) of every run the store holds, oldest first, as tables of ``schema``
    (a run written under an earlier schema of the table is read in it; None: as stored)."""
    return ((version, table) for version, table, _ in _read(store, _RUNS, schema))


def read_waiting(store: Store, schema: pa.Schema | None) -> Iterator[tuple[int, pa.Table]]:
    """(arrival version, events) of every file of waiting events, oldest first, as tables of
    ``schema`` (the stream's; None: as stored)."""
    return ((version, table) for version, table, _ in _read(store, _WAITING, schema))


def _read(store: Store, area: Area, schema: pa.Schema | None) -> Iterator[tuple[int, pa.Table, tuple[bytes, ...]]]:
    """(version, its chunks as one table, their keys) of every file of ``area``, oldest first."""
    current, chunks, keys = -1, list[pa.Table](), list[bytes]()
    for key, value in area.scan(store):
        version = int(area.decode(key)[0])
        if version != current and chunks:
            yield current, _whole(chunks, schema), tuple(keys)
            chunks, keys = [], []
        current = version
        chunks.append(st.unblob(value))
        keys.append(key)
    if chunks:
        yield current, _whole(chunks, schema), tuple(keys)


def _whole(chunks: list[pa.Table], schema: pa.Schema | None) -> pa.Table:
    if schema is not None:
        chunks = [as_schema(c, schema) for c in chunks]
    return pa.concat_tables(chunks).combine_chunks() if len(chunks) > 1 else chunks[0]


@dataclass(frozen=True)
class Held:
    """The versions a partition holds: the ``base`` run, and the later runs as one ``delta``;
    ``stored``, the keys of every run's chunks (a fold deletes them)."""

    base: SortedVersions
    delta: SortedVersions
    stored: tuple[bytes, ...] = ()

    def __len__(self) -> int:
        return len(self.base) + len(self.delta)

    @classmethod
    def read(cls, store: Store, schema: pa.Schema, keys: list[str]) -> Held:
        """The versions ``store`` holds, sorted (runs after the first merged into the delta)."""
        found = list(_read(store, _RUNS, schema))
        if not found:
            empty = SortedVersions.empty(schema, codes_of(schema.empty_table(), keys))
            return cls(empty, empty)
        runs = [table for _, table, _ in found]
        rest = pa.concat_tables(runs[1:]).combine_chunks() if len(runs) > 1 else schema.empty_table()
        return cls(SortedVersions.sorted(runs[0], codes_of(runs[0], keys)),
                   SortedVersions.sorted(rest, codes_of(rest, keys)), tuple(k for *_, ks in found for k in ks))


def expiry_due(oldest: int, expire_before: int, ttl: int) -> bool:
    """Whether a fold is due to drop expired versions (with a table TTL of ``ttl`` µs): the
    oldest version held (change time ``oldest``; ``NEG_INF``: a timeless one) lies in a time slot
    of :func:`streamjoin.enrichment.state.slot_width` that ends at or before ``expire_before``, as
    the buckets layout's expiry index folds a bucket. So expired versions leave within a slot,
    and folds for expiry come at most once a slot of table time."""
    if expire_before == NEG_INF or oldest == POS_INF:
        return False
    width = st.slot_width(ttl)
    slot = int(st.slot_starts(np.array([oldest == NEG_INF]), np.array([oldest]), width)[0])
    return expire_before == POS_INF or slot <= st.last_due_slot(expire_before, width)


def still_waiting(events: pa.Table, time: str, meta: st.Meta, grace: int | None) -> pa.Table:
    """The events of a file of waiting events (event time column ``time``) still waiting in a
    state whose meta is ``meta``: those at or after the last version's release bound."""
    bound = release_bound(meta.event_watermark, meta.table_watermark, grace)
    return events.filter(pa.array(times_of(events, time) >= bound))


@dataclass(frozen=True)
class Waiting:
    """One file of waiting events: its arrival version, its events, their times (ascending) and
    the keys of its chunks."""

    version: int
    events: pa.Table
    times: np.ndarray
    stored: tuple[bytes, ...]


@dataclass
class RunsCache:
    """The versions held and the waiting events as of store version ``version``, decoded (see
    module)."""

    schema: pa.Schema
    version: int | None
    held: Held | None = None
    waiting: list[Waiting] | None = None

    @classmethod
    def of(cls, store: Store, schema: pa.Schema) -> RunsCache:
        """The cache kept with ``store`` when it describes the store's version and ``schema``,
        else a new empty one (kept in its place)."""
        return kept(store, _MEMO_KEY, cls, schema)

    def read(self, store: Store, keys: list[str]) -> Held:
        """The versions held: from the cache, else read from ``store``."""
        if self.held is None:
            self.held = Held.read(store, self.schema, keys)
        return self.held

    def read_waiting(self, store: Store, stream: pa.Schema, time: str) -> list[Waiting]:
        """The files of waiting events (of schema ``stream``, event time column ``time``): from
        the cache, else read from ``store``."""
        if self.waiting is None:
            self.waiting = [Waiting(v, t, times_of(t, time), ks) for v, t, ks in _read(store, _WAITING, stream)]
        return self.waiting

    def commit(self, version: int, held: Held, waiting: list[Waiting]) -> None:
        """The running step leaves ``held`` and ``waiting``: the cache describes version
        ``version`` once the store's version marker says so (its write happened)."""
        self.version, self.held, self.waiting = version, held, waiting
