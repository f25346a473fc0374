"""The ``runs`` state layout of the enrichment join: a partition's table versions as sorted runs.

The default (``EnrichmentJoin(..., layout="runs")``, the definition's ``layout`` 3). Keys::

    b"\\x00meta"                                    -> as in layout 2 (:mod:`streamjoin.enrichment.state`)
    b"I" | encode_int(version)                     -> the index of the base run of ``version`` (Arrow IPC stream)
    b"R" | encode_int(version) | encode_int(chunk) -> versions (Arrow IPC stream)
    b"W" | encode_int(version) | encode_int(chunk) -> waiting events (Arrow IPC stream)

**Runs.** A version that accepts changes writes them as one *run*: its accepted versions in
version order (:mod:`streamjoin.enrichment.sorted_versions`), cut into chunks of at most
:data:`CHUNK_ROWS` rows, under the version's number. A version *folds* once the runs after the
first (the *base*) hold more than ``fold_fraction`` of its rows (and at least
:data:`MIN_FOLD_ROWS`), or more than a quarter of :func:`memory_budget` in bytes: it writes
every version still needed (base, later runs and its own accepted changes, pruned as
:func:`streamjoin.enrichment.step.needed_versions` prunes) as its base run, and removes every
earlier run and index. No version appears in two runs, so the versions
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

**The base** is stored in chunks cut at key boundaries, with an index (``I`` | version: each
chunk's last key code, rows, oldest change time and bytes; :mod:`streamjoin.enrichment.runs_base`),
so a fold merges it a chunk at a time with the versions beside it of the chunk's keys.

**In memory.** :class:`RunsCache`, kept in the store's memo as the enrichment's bucket cache is
(:mod:`streamjoin.enrichment.cache`: labelled with the store version it describes, started again
when the label does not match), holds the versions decoded and sorted, within the partition's
:func:`memory_budget`: the base, whole while its stored bytes fit half of it (else its index,
and a version reads the chunks holding the keys it touches), the later runs (the *delta*)
as a few sorted stacks (:func:`stacked`), which a fold empties once they hold more than a quarter, and the files of waiting
events, oldest first, while they hold at most the last quarter (a file beyond it is read a chunk
at a time as its events are released: its chunks follow its events' times).

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
from streamjoin.enrichment.runs_base import Base, ChunkIndex, chunk_bounds
from streamjoin.enrichment.sorted_versions import Order, SortedVersions, key_codes
from streamjoin.enrichment.step import release_bound
from streamjoin.kit.times import times_of
from streamjoin.runtime.areas import ARROW, INT, Area, Ints, StateLayout
from streamjoin.runtime.evolution import as_schema
from streamjoin.runtime.operator import NEG_INF, POS_INF
from streamjoin.statestore import warm
from streamjoin.statestore.arranged import worker_budget
from streamjoin.statestore.base import KeyValue, Store
from streamjoin.statestore.errors import StoreCorruptError

__all__ = ["LAYOUT", "CHUNK_ROWS", "MIN_FOLD_ROWS", "memory_budget", "base_budget", "run_puts", "base_puts", "BaseBuilder", "stored_base", "waiting_puts", "read_runs", "read_waiting", "still_waiting", "expiry_due", "waiting_room", "stacked", "Held", "Waiting", "RunsCache", "codes_of"]

#: The enrichment join's state in the ``runs`` layout (see module).
LAYOUT = StateLayout("enrichment join", 3, (
    Area("meta", st.LAYOUT["meta"].prefix, (), Ints(4)),
    Area("index", b"I", (("version", INT),), ARROW),
    Area("runs", b"R", (("version", INT), ("chunk", INT)), ARROW),
    Area("waiting", b"W", (("version", INT), ("chunk", INT)), ARROW),
))
_INDEX, _RUNS, _WAITING = LAYOUT["index"], LAYOUT["runs"], LAYOUT["waiting"]
#: The most rows of one stored chunk of a run.
CHUNK_ROWS = 65536
#: A fold waits for at least this many rows beside the base.
MIN_FOLD_ROWS = 4096
_MEMO_KEY = "streamjoin.enrichment.runs"


def memory_budget() -> int:
    """The bytes a partition's store may hold in memory: the Python worker's budget
    (``STREAMJOIN_WORKER_MEMORY``, default 1g) shared among the stores it may hold
    (``STREAMJOIN_WARM_STORES`` kept warm and the one a task opens), as the arranged store
    shares it. Half of it may hold the base run (:func:`base_budget`; a larger one is read by
    chunks), a quarter the runs beside it (beyond it they are folded into a new base) and a
    quarter the waiting events (:func:`waiting_room`)."""
    return worker_budget() // (warm.LIMIT + 1)


def base_budget() -> int:
    """The stored bytes of a base run held whole in memory: half of :func:`memory_budget`."""
    return memory_budget() // 2


def codes_of(table: pa.Table, keys: list[str]) -> np.ndarray:
    """The key codes of versions ``table`` (its key columns ``keys``)."""
    return key_codes([table.column(k).combine_chunks() for k in keys])


def run_puts(version: int, versions: pa.Table) -> list[KeyValue]:
    """The entries of the run ``version`` writes beside the base (``versions`` in version
    order), chunk by chunk."""
    return _chunked(_RUNS, version, versions)


def base_puts(version: int, versions: SortedVersions) -> list[KeyValue]:
    """The entries of ``versions`` written as version ``version``'s base run: its chunks and
    its index (:mod:`streamjoin.enrichment.runs_base`)."""
    builder = BaseBuilder(version, -1)
    builder.add(versions)
    return builder.finish()[0]


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


def _read(store: Store, area: Area, schema: pa.Schema | None, after: int | None = None
          ) -> Iterator[tuple[int, pa.Table, tuple[bytes, ...]]]:
    """(version, its chunks as one table, their keys) of every file of ``area`` (of a version
    after ``after``; None: every one), oldest first."""
    current, chunks, keys = -1, list[pa.Table](), list[bytes]()
    entries = area.scan(store) if after is None else area.scan_span(store, (after + 1,), None)
    for key, value in entries:
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


def stacked(delta: tuple[SortedVersions, ...], run: SortedVersions) -> tuple[SortedVersions, ...]:
    """The runs beside a base (``delta``, oldest first, each in version order) with ``run`` on
    top: the top two merged into one while the lower holds at most twice the upper's rows. So
    a partition keeps about log2 of its delta's rows of them, a version's changes are merged
    again about that many times before a fold, and a version merges what it adds, not the whole
    delta (probes search each of them)."""
    out = [*delta, run] if len(run) else list(delta)
    while len(out) > 1 and len(out[-2]) <= 2 * len(out[-1]):
        out[-2:] = [SortedVersions.merged(out[-2:])]
    return tuple(out)


@dataclass(frozen=True)
class Held:
    """The versions a partition holds: the ``base`` run, and the later runs as the ``delta``'s
    sorted stacks (:func:`stacked`); ``stored``, the keys of every run's chunks and of the base's
    index (a fold deletes them)."""

    base: Base
    delta: tuple[SortedVersions, ...]
    stored: tuple[bytes, ...] = ()

    def __len__(self) -> int:
        return len(self.base) + sum(map(len, self.delta))

    @classmethod
    def read(cls, store: Store, schema: pa.Schema, keys: list[str]) -> Held:
        """The versions ``store`` holds: the base whole when it fits :func:`base_budget`, else
        its index; the runs after it stacked as the delta (:func:`stacked`). (Runs without a
        base index are all read as the delta.)"""
        empty = SortedVersions.empty(schema, codes_of(schema.empty_table(), keys))
        indexes = list(_INDEX.scan(store))
        stored: list[bytes] = []
        after = None
        base = Base.held(empty, ChunkIndex.empty())
        if indexes:
            key, value = indexes[-1]
            after = int(_INDEX.decode(key)[0])
            index = ChunkIndex.from_table(st.unblob(value))
            stored += [key, *(_RUNS.key(after, i) for i in range(len(index)))]
            base = stored_base(store, schema, keys, after, index, base_budget())
        delta: tuple[SortedVersions, ...] = ()
        for _, table, chunk_keys in _read(store, _RUNS, schema, after):
            delta = stacked(delta, SortedVersions.sorted(table, codes_of(table, keys)))
            stored += chunk_keys
        return cls(base, delta, tuple(stored))

    def caught_up(self, store: Store, schema: pa.Schema, keys: list[str], version: int) -> Held | None:
        """These versions, held as of store version ``version``, as of ``store``'s later version:
        the runs written after ``version`` stacked on the delta. Only while the store's base is
        this one and held whole (its index, under its version, is the store's newest: every fold
        removes the index before it, so no run this holds has gone); None otherwise, and the
        versions are read anew (:meth:`read`)."""
        ours = [k for k in self.stored if k.startswith(_INDEX.prefix)]
        if self.base.whole is None or len(ours) != 1:
            return None
        newest = next(_INDEX.scan(store, reverse=True), None)
        if newest is None or newest[0] != ours[0]:
            return None
        delta, stored = self.delta, list(self.stored)
        for _, table, chunk_keys in _read(store, _RUNS, schema, version):
            delta = stacked(delta, SortedVersions.sorted(table, codes_of(table, keys)))
            stored += chunk_keys
        return Held(self.base, delta, tuple(stored))


def stored_base(store: Store, schema: pa.Schema, keys: list[str], version: int, index: ChunkIndex,
                 budget: int) -> Base:
    """The base run of ``version`` in ``store`` (its ``index`` read): held whole when its bytes
    fit ``budget`` (negative: never), else read by chunks when asked for."""
    def load(i: int) -> SortedVersions:
        return _chunk(store.get(_RUNS.key(version, i)))

    def _chunk(value: bytes | None) -> SortedVersions:
        if value is None:
            raise StoreCorruptError(f"the enrichment's base run {version} lacks a chunk its index names; "
                                    f"remove the store's directory to rebuild it from the changelog")
        table = as_schema(st.unblob(value), schema)
        return SortedVersions(table, Order.of(codes_of(table, keys), table))

    if budget < 0 or int(index.nbytes.sum()) > budget:
        return Base(index, None, load)
    chunks = [_chunk(v) for _, v in _RUNS.scan(store, version)]
    if len(chunks) != len(index):
        _chunk(None)
    whole = SortedVersions.joined(chunks) if chunks else SortedVersions.empty(schema, codes_of(schema.empty_table(), keys))
    return Base.held(whole, index)


class BaseBuilder:
    """Writes the base run of ``version`` from versions added in version order (each add's keys
    after every earlier add's), cut into chunks at key boundaries
    (:func:`streamjoin.enrichment.runs_base.chunk_bounds`); keeps the versions in memory while
    the chunks' stored bytes stay within ``budget`` (negative: never)."""

    def __init__(self, version: int, budget: int) -> None:
        self.version, self.budget = version, budget
        self.pending: list[SortedVersions] = []
        self.pending_rows = 0
        self.puts: list[KeyValue] = []
        self.lasts: list[np.ndarray] = []
        self.rows: list[int] = []
        self.oldest: list[int] = []
        self.sizes: list[int] = []
        self.kept: list[SortedVersions] | None = [] if budget >= 0 else None

    def add(self, versions: SortedVersions) -> None:
        """Add ``versions``; whole chunks are written once two chunks' rows wait (so a fold
        holds about that, not the whole base)."""
        if len(versions):
            self.pending.append(versions)
            self.pending_rows += len(versions)
            if len(self.pending) > 1 and self.pending_rows >= 2 * CHUNK_ROWS:
                self._cut(final=False)

    def _cut(self, final: bool) -> None:
        if not self.pending:
            return
        joined = SortedVersions.joined(self.pending)
        bounds = chunk_bounds(joined.order, CHUNK_ROWS)
        last = len(bounds) - 1 if final else len(bounds) - 2   # (the last piece waits for more rows)
        for lo, hi in zip(bounds[:last].tolist(), bounds[1:last + 1].tolist()):
            chunk = joined.slice(lo, hi)
            blob = st.blob(chunk.table)
            self.puts.append((_RUNS.key(self.version, len(self.sizes)), blob))
            self.lasts.append(chunk.order.code[-1:])
            self.rows.append(len(chunk))
            self.oldest.append(chunk.oldest())
            self.sizes.append(len(blob))
        done = int(bounds[last])
        if self.kept is not None and done:
            self.kept.append(joined.slice(0, done))
            if sum(self.sizes) > self.budget:
                self.kept = None
        rest = joined.slice(done, len(joined))
        self.pending, self.pending_rows = ([rest], len(rest)) if len(rest) else ([], 0)

    def finish(self) -> tuple[list[KeyValue], ChunkIndex, SortedVersions | None]:
        """The run's entries (chunks, then its index), its index, and its versions when kept
        (None: not kept, or none)."""
        self._cut(final=True)
        index = ChunkIndex.of(self.lasts, self.rows, self.oldest, self.sizes)
        if len(index):   # (no base: nothing)
            self.puts.append((_INDEX.key(self.version), st.blob(index.table())))
        whole = SortedVersions.joined(self.kept) if self.kept else None
        return self.puts, index, whole


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


def waiting_room(files: list[Waiting]) -> int:
    """The bytes of waiting events a partition may still hold in memory beside ``files``: a
    quarter of :func:`memory_budget`, less what they hold."""
    return memory_budget() // 4 - sum(f.nbytes for f in files)


def still_waiting(events: pa.Table, time: str, meta: st.Meta, grace: int | None) -> pa.Table:
    """The events of a file of waiting events (event time column ``time``) still waiting in a
    state whose meta is ``meta``: those at or after the last version's release bound."""
    bound = release_bound(meta.event_watermark, meta.table_watermark, grace)
    return events.filter(pa.array(times_of(events, time) >= bound))


@dataclass(frozen=True)
class Waiting:
    """One file of waiting events: its arrival version, the keys of its chunks, the time of its
    last event, and its events with their times (ascending) while held in memory (None: read a
    chunk at a time when released; :meth:`RunsCache.read_waiting`)."""

    version: int
    stored: tuple[bytes, ...]
    last: int
    events: pa.Table | None = None
    times: np.ndarray | None = None

    @classmethod
    def of(cls, version: int, events: pa.Table, times: np.ndarray, stored: tuple[bytes, ...], hold: bool) -> Waiting:
        """The file of ``events`` (times ``times``), held in memory if ``hold``."""
        return cls(version, stored, int(times[-1]), events if hold else None, times if hold else None)

    @property
    def nbytes(self) -> int:
        """The bytes it holds in memory."""
        return 0 if self.events is None else self.events.nbytes

    def between(self, store: Store, stream: pa.Schema, time: str, low: int, high: int) -> pa.Table | None:
        """Its events with a time in ``[low, high)``, in order (None: none), as a table of
        ``stream`` (event time column ``time``): a slice of those held (filed under the stream's
        schema of their version, which a later version's may have evolved from), else of each
        chunk read from ``store`` up to the first that starts at ``high`` or later."""
        if self.events is not None and self.times is not None:
            start, end = np.searchsorted(self.times, [low, high], "left").tolist()
            return as_schema(self.events.slice(start, end - start), stream) if end > start else None
        parts = []
        for _, value in _WAITING.scan(store, self.version):
            chunk = as_schema(st.unblob(value), stream)
            times = times_of(chunk, time)
            if times[0] >= high:
                break
            start, end = np.searchsorted(times, [low, high], "left").tolist()
            if end > start:
                parts.append(chunk.slice(start, end - start))
        return pa.concat_tables(parts) if parts else None


@dataclass
class RunsCache:
    """The versions held and the waiting events as of store version ``version``, decoded (see
    module)."""

    schema: pa.Schema
    version: int | None
    held: Held | None = None
    waiting: list[Waiting] | None = None
    #: the cache of an earlier version of the store that its memo held (a store handed to
    #: another worker and back: :mod:`streamjoin.statestore.warm`), whose versions held
    #: :meth:`read` brings up to date instead of reading them all
    earlier: RunsCache | None = None

    @classmethod
    def of(cls, store: Store, schema: pa.Schema) -> RunsCache:
        """The cache kept with ``store`` when it describes the store's version and ``schema``,
        else a new empty one (kept in its place), which keeps a cache of an earlier version found
        there as :attr:`earlier`."""
        found = store.memo().get(_MEMO_KEY)
        made = kept(store, _MEMO_KEY, cls, schema)
        if (made is not found and isinstance(found, RunsCache) and found.held is not None
                and found.schema.equals(schema) and found.version is not None and made.version is not None
                and found.version < made.version):
            made.earlier = found
        return made

    def read(self, store: Store, keys: list[str]) -> Held:
        """The versions held: from the cache, else from :attr:`earlier` and the runs written
        since (:meth:`Held.caught_up`), else read from ``store``."""
        if self.held is None:
            earlier, self.earlier = self.earlier, None
            if earlier is not None and earlier.held is not None and earlier.version is not None:
                self.held = earlier.held.caught_up(store, self.schema, keys, earlier.version)
            if self.held is None:
                self.held = Held.read(store, self.schema, keys)
        return self.held

    def read_waiting(self, store: Store, stream: pa.Schema, time: str) -> list[Waiting]:
        """The files of waiting events (of schema ``stream``, event time column ``time``): from
        the cache, else read from ``store`` a file at a time, the oldest held in memory while
        they take at most a quarter of :func:`memory_budget` (:func:`waiting_room`)."""
        if self.waiting is None:
            files: list[Waiting] = []
            room = waiting_room(files)
            for version, events, keys in _read(store, _WAITING, stream):
                hold = events.nbytes <= room
                room -= events.nbytes if hold else 0
                files.append(Waiting.of(version, events, times_of(events, time), keys, hold=hold))
            self.waiting = files
        return self.waiting

    def commit(self, version: int, held: Held, waiting: list[Waiting]) -> None:
        """The running step leaves ``held`` and ``waiting``: the cache describes version
        ``version`` once the store's version marker says so (its write happened)."""
        self.version, self.held, self.waiting, self.earlier = version, held, waiting, None
