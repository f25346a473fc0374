"""Rebuild a store of any backend to exactly the state of one version of a changelog.

``restore(log, store, version)`` picks the newest chain that reaches ``version`` (a snapshot at or
before it, then deltas; see :mod:`streamjoin.changelog.listing`), checks the checksum of every file of the
chain *before* it touches the store, and then loads the store through its bulk path:

* snapshot only: the snapshot's sorted entries go straight to ``store.load_sorted`` (SST ingestion
  for RocksDB, sorted append for LMDB);
* snapshot plus small deltas: ``load_sorted`` of the snapshot, then each delta with
  ``store.write`` in version order, each setting the version marker;
* deltas that are large beside the snapshot (or no snapshot): the deltas are folded into the
  snapshot's sorted stream in Arrow (:mod:`streamjoin.changelog.merge`) and the result is bulk-loaded once, so
  an uncompacted log restores through the bulk path too.

The store must be empty (version None, no entries): a caller with an old store removes it with
``destroy_store`` and opens it again (``open_logged_store`` does this). When the newest snapshot is
damaged, restore falls back to the next older chain that reaches the version, logs a warning and
lists what it passed over in ``RestoreStats.skipped``; when no chain survives it raises an error
naming every damaged or missing file and the versions affected.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from enum import Enum
from typing import Callable, Iterable, Iterator

import pyarrow as pa

from streamjoin.changelog.errors import (
    ChangelogCorruptError,
    ChangelogError,
    StoreNotEmptyError,
    VersionNotRetainedError,
)
from streamjoin.changelog.format import Delta, SnapshotReader
from streamjoin.changelog.listing import Chain, Listing
from streamjoin.changelog.log import Changelog
from streamjoin.changelog.merge import compose, merge
from streamjoin.statestore.base import Store
from streamjoin.statestore.chunks import SortedChunks, SourceFile
from streamjoin.statestore.columns import ColumnWrite

__all__ = ["restore", "RestoreStats", "RestoreMethod", "Progress"]

_log = logging.getLogger(__name__)

#: ``progress(entries_done, entries_total)``, called as restore goes.
Progress = Callable[[int, int], None]

#: Fold deltas into the snapshot stream once they hold this share of the snapshot's entries.
MERGE_SHARE = 0.125


class RestoreMethod(str, Enum):
    """How the entries reached the store."""

    BULK = "bulk"  # one load_sorted of a snapshot
    BULK_AND_WRITES = "bulk+writes"  # load_sorted of the snapshot, then one write per delta
    MERGED = "merged"  # deltas folded into the snapshot stream, one load_sorted


@dataclass(frozen=True)
class RestoreStats:
    """What one restore did.

    ``base_version`` is the snapshot's version (-1: the empty state before version 0);
    ``entries_read`` counts snapshot entries plus delta rows; ``skipped`` describes damaged files
    passed over for an older chain.
    """

    version: int
    base_version: int
    deltas: int
    entries_read: int
    entries_loaded: int
    method: RestoreMethod
    seconds: float
    skipped: tuple[str, ...] = ()

    @property
    def entries_per_second(self) -> float:
        return self.entries_read / self.seconds if self.seconds > 0 else float("inf")


def restore(
    log: Changelog,
    store: Store,
    version: int | None = None,
    *,
    progress: Progress | None = None,
    method: RestoreMethod | None = None,
) -> RestoreStats:
    """Load ``store`` (empty) with the state of ``version`` (None: the newest); set its marker.

    ``progress(done, total)`` is called as entries are loaded. ``method`` forces how deltas are
    applied (None: MERGED when they are large beside the snapshot, else BULK_AND_WRITES).

    Raises :class:`StoreNotEmptyError` for a store with entries or a version,
    :class:`VersionNotRetainedError` / :class:`ChangelogGapError` when no files reach ``version``
    and :class:`ChangelogCorruptError` when every chain that reaches it is damaged.
    """
    started = time.perf_counter()
    _require_empty(store)
    listing = log.listing()
    version = _target(log, listing, version)
    chain, snapshot, deltas, problems = _first_intact_chain(log, listing, version)
    if problems:
        _log.warning("restore of %s version %d passed over damaged files: %s",
                     log.uri, version, "; ".join(str(p) for p in problems))
    read, loaded, used = _apply(store, chain, snapshot, deltas, progress, method)
    return RestoreStats(version, chain.base_version, len(deltas), read, loaded, used,
                        time.perf_counter() - started, tuple(str(p) for p in problems))


def _target(log: Changelog, listing: Listing, version: int | None) -> int:
    if version is not None:
        return version
    restorable = listing.restorable()
    if not restorable:
        raise listing.unreachable(0) if listing.newest is not None else VersionNotRetainedError(
            f"changelog {log.uri} is empty: there is nothing to restore")
    return restorable[-1]


def _first_intact_chain(
    log: Changelog, listing: Listing, version: int
) -> tuple[Chain, SnapshotReader | None, list[Delta], list[ChangelogError]]:
    """The newest chain to ``version`` whose files all verify, with what it passed over."""
    chains = listing.chains(version)
    if not chains:
        raise listing.unreachable(version)
    problems: list[ChangelogError] = []
    for chain in chains:
        try:
            problem = listing.ambiguity(chain.files)
            if problem:
                raise problem
            snapshot, deltas = _read_chain(log, chain)
        except ChangelogCorruptError as exc:
            problems.append(exc)
            if chain.base is None or exc.files != (chain.base.name,):
                break  # a damaged delta: every older chain needs it too
            continue
        return chain, snapshot, deltas, problems
    raise _no_chain_left(log, version, problems)


def _require_empty(store: Store) -> None:
    if store.version is not None or next(iter(store.scan()), None) is not None:
        raise StoreNotEmptyError(
            f"restore needs an empty store, but {store!r} has version {store.version} and entries; "
            "remove it with destroy_store() and open it again (open_logged_store does this)")


def _read_chain(log: Changelog, chain: Chain) -> tuple[SnapshotReader | None, list[Delta]]:
    """The chain's files, each checked (checksum, footer, kind, version) before anything is loaded."""
    snapshot = log.read_snapshot(chain.base) if chain.base is not None else None
    return snapshot, [log.read_delta(f) for f in chain.deltas]


def _apply(
    store: Store,
    chain: Chain,
    snapshot: SnapshotReader | None,
    deltas: list[Delta],
    progress: Progress | None,
    method: RestoreMethod | None,
) -> tuple[int, int, RestoreMethod]:
    """Load the chain into ``store``; return (entries read, entries loaded, method)."""
    base_entries = snapshot.entries if snapshot is not None else 0
    delta_entries = sum(d.entries for d in deltas)
    total = base_entries + delta_entries
    counter = _Counter(progress, total)
    if not deltas and snapshot is not None:
        loaded = store.load_sorted(_items(snapshot.chunks(), counter, snapshot.source), version=chain.target)
        return total, loaded, RestoreMethod.BULK
    if method is None:
        merged = snapshot is None or delta_entries >= MERGE_SHARE * base_entries
        method = RestoreMethod.MERGED if merged else RestoreMethod.BULK_AND_WRITES
    if method is not RestoreMethod.BULK_AND_WRITES:
        chunks = merge(counter.track(snapshot.chunks()) if snapshot else None, compose(deltas))
        loaded = store.load_sorted(_items(chunks, None), version=chain.target)
        counter.add(delta_entries)
        return total, loaded, RestoreMethod.MERGED
    base = _items(snapshot.chunks(), counter, snapshot.source) if snapshot is not None else iter(())
    loaded = store.load_sorted(base, version=None if chain.base is None else chain.base_version)
    for delta in deltas:
        # as columns (range deletes too): a backend that holds columns takes them without a
        # Python object per entry
        ranges = list(zip(delta.range_starts.to_pylist(), delta.range_ends.to_pylist()))
        store.write_columns(ColumnWrite.of(delta.put_keys, delta.put_values, delta.delete_keys, ranges),
                            version=delta.version)
        loaded += len(delta.put_keys)
        counter.add(delta.entries)
    return total, loaded, RestoreMethod.BULK_AND_WRITES


class _Counter:
    """Reports progress as chunks go by."""

    def __init__(self, progress: Progress | None, total: int) -> None:
        self.progress, self.total, self.done = progress, total, 0

    def add(self, n: int) -> None:
        self.done += n
        if self.progress is not None:
            self.progress(self.done, self.total)

    def track(self, chunks: Iterable[tuple[pa.Array, pa.Array]]) -> Iterator[tuple[pa.Array, pa.Array]]:
        for keys, values in chunks:
            yield keys, values
            self.add(len(keys))


def _items(chunks: Iterable[tuple[pa.Array, pa.Array]], counter: _Counter | None,
           source: SourceFile | None = None) -> SortedChunks:
    """The sorted chunks as they are, for ``load_sorted``: a backend that takes Arrow chunks
    (LMDB) seals them a chunk at a time; the others iterate ``(key, value)`` pairs, converted a
    chunk at a time (C-level iteration). ``source``: the snapshot file they are every row of
    (the arranged store keeps it as its values)."""
    return SortedChunks(chunks if counter is None else counter.track(chunks), source)


def _no_chain_left(log: Changelog, version: int, problems: list[ChangelogError]) -> ChangelogError:
    """One error naming every damaged file and the versions they cost (the first problem's class
    when there is one problem, so callers can tell a torn file from a checksum mismatch)."""
    files = [name for p in problems for name in p.files]
    first = min((p.versions[0] for p in problems if p.versions), default=version)
    details = "\n  ".join(str(p) for p in problems)
    kind = type(problems[0]) if len(problems) == 1 else ChangelogCorruptError
    return kind(
        f"version {version} of changelog {log.uri} cannot be restored: every chain of files that "
        f"reaches it is damaged:\n  {details}\nRun `streamjoin changelog verify {log.uri}` to see "
        "which versions remain restorable; restore one of those, or re-run the query from a "
        "checkpoint before the damage.", files=files, versions=(first, version))
