"""Compaction: write snapshots, then delete what the retained versions no longer need.

* :func:`compact` writes the snapshot of a version by a streaming merge of the newest good snapshot
  before it and the deltas after that (:mod:`streamjoin.changelog.merge`), then applies retention.
* :func:`snapshot_from_store` writes the snapshot of a version from a local store already at that
  version (the runtime's fast path every few versions), then applies retention.
* :func:`apply_retention` keeps exactly the files that restore each of the newest
  ``retain_versions`` restorable versions by their newest chain: the newest snapshot at or before
  the oldest retained version (whose checksum it checks first: a damaged base never causes the
  deletion of its fallback), every delta after it and every snapshot after it. Everything older
  goes, oldest first, so an interruption leaves only orphans older than every retained version
  (which the next compaction removes) and never a hole in the history.

Concurrency: appends of new versions may run during a compaction. A compaction lists the directory
again after writing its snapshot and deletes only files older than a snapshot present in that fresh
listing, so it never deletes what an append made meanwhile. If a delta it merged was rewritten
meanwhile (a batch executed again), its snapshot is stale: it removes it and raises
:class:`ChangelogConflictError`. Snapshot files are canonical (one state gives one file name), so
two compactions of one version agree.
"""

from __future__ import annotations

import os
import tempfile
import time
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator

import pyarrow as pa

from streamjoin.changelog.errors import (
    ChangelogConflictError,
    ChangelogCorruptError,
    VersionNotRetainedError,
    VersionOrderError,
)
from streamjoin.changelog.format import Kind, LogFile
from streamjoin.changelog.listing import Chain, Listing
from streamjoin.changelog.log import Changelog, check_retention
from streamjoin.changelog.merge import compose, merge
from streamjoin.statestore.base import Store
from streamjoin.statestore.chunks import SortedChunks

__all__ = ["compact", "snapshot_from_store", "apply_retention", "CompactStats"]

#: Called after the snapshot is written and before old files are deleted (tests, instrumentation).
Hook = Callable[[], None]


@dataclass(frozen=True)
class CompactStats:
    """What a compaction did. ``entries_read`` counts the base snapshot's entries plus the delta
    rows folded in; ``ratio`` is ``entries_read / entries`` (how much the snapshot saves a restore).
    """

    version: int
    snapshot: str
    wrote: bool
    entries: int
    entries_read: int
    deleted: tuple[str, ...]
    bytes_deleted: int
    seconds: float
    #: the store took the snapshot file as its own layout (``Store.rebase``; ``snapshot_from_store``)
    rebased: bool = False

    @property
    def ratio(self) -> float:
        return self.entries_read / self.entries if self.entries else float(self.entries_read > 0)


def compact(
    log: Changelog,
    up_to: int | None = None,
    *,
    retain_versions: int | None = None,
    on_written: Hook | None = None,
) -> CompactStats:
    """Write the snapshot of ``up_to`` (None: the newest restorable version) and apply retention.

    A good snapshot already at ``up_to`` is kept (``wrote`` False); a damaged one is replaced.
    ``retain_versions`` overrides the log's setting for this call. Raises like ``restore`` when the
    version cannot be reached, and :class:`ChangelogConflictError` (nothing lost) when the log
    changed under it.
    """
    started = time.perf_counter()
    listing = log.listing()
    target = _target(log, listing, up_to)
    existing = listing.snapshots.get(target)
    good = existing is not None and _is_good(log, existing)
    used: tuple[LogFile, ...]
    if existing is not None and good:
        file, entries, read, used = existing, log.read_snapshot(existing).entries, 0, ()
    else:
        file, entries, read, used = _write_merged(log, listing, target, replacing=existing)
    if on_written is not None:
        on_written()
    fresh = _check_unchanged(log, file, used)
    deleted, size = apply_retention(log, retain_versions=retain_versions, listing=fresh)
    return CompactStats(target, file.name, not good, entries, read, tuple(deleted), size,
                        time.perf_counter() - started)


def snapshot_from_store(
    log: Changelog,
    store: Store,
    version: int,
    *,
    retain_versions: int | None = None,
    on_written: Hook | None = None,
    rebase: bool = True,
) -> CompactStats:
    """Write the snapshot of ``version`` from ``store`` (which must be at it), then apply retention.

    With ``rebase``, the snapshot is then offered to the store as its own layout (``Store.rebase``:
    the arranged store makes it its base, so the changes it held beside the base are merged by the
    snapshot's pass instead of a merge of its own): the log's file where the log is on this
    machine's disk, else a copy of its bytes written as it was published (to the system's
    temporary directory, removed once the store took it or not).

    Raises :class:`VersionOrderError` when the store's marker is not ``version`` and
    :class:`VersionNotRetainedError` when the log cannot restore ``version`` (the snapshot must
    describe a version of this log).
    """
    started = time.perf_counter()
    if store.version != version:
        raise VersionOrderError(
            f"snapshot_from_store({version}) needs a store at version {version}, but {store!r} is "
            f"at {store.version}", versions=(version, version))
    listing = log.listing()
    if version not in listing.restorable():
        raise VersionNotRetainedError(
            f"snapshot_from_store({version}): changelog {log.uri} has no version {version}; "
            "append its delta first", versions=(version, version))
    existing = listing.snapshots.get(version)
    good = existing is not None and _is_good(log, existing)
    counted = _Count()
    # an object store's snapshot is written here too, for the store to take (removed below)
    copy = _temp_copy(version) if rebase and not log.local and not good else None
    rebased = False
    try:
        if existing is not None and good:
            file = existing
        else:
            if existing is not None:
                log.delete([existing.name])
            file = log.write_snapshot(version, counted.track(store.scan_columns()), copy=copy)
        if on_written is not None:
            on_written()
        local = log.local_snapshot(file, copy) if rebase else None   # (None: neither the log nor a copy here)
        if local is not None:
            rebased = store.rebase(SortedChunks(local.chunks(), local.source))
    finally:
        if copy is not None:
            _remove_quietly(copy)
    deleted, size = apply_retention(log, retain_versions=retain_versions, listing=log.listing())
    entries = log.read_snapshot(file).entries if good else counted.n
    return CompactStats(version, file.name, not good, entries, entries, tuple(deleted), size,
                        time.perf_counter() - started, rebased)


def _temp_copy(version: int) -> str:
    """A new file's path in the system's temporary directory, for a snapshot's local copy."""
    handle, path = tempfile.mkstemp(prefix=f"streamjoin-snapshot-{version}-", suffix=".arrow")
    os.close(handle)
    return path


def _remove_quietly(path: str) -> None:
    try:
        os.remove(path)
    except OSError:
        pass   # (the system's temporary directory is cleaned by the system)


def apply_retention(
    log: Changelog, *, retain_versions: int | None = None, listing: Listing | None = None
) -> tuple[list[str], int]:
    """Delete files the newest ``retain_versions`` versions do not need; return (names, bytes)."""
    retain = check_retention(log.retain_versions if retain_versions is None else retain_versions)
    listing = listing or log.listing()
    restorable = listing.restorable()
    if not restorable:
        return [], 0
    floor = min(v for v in restorable if v >= restorable[-1] - retain + 1)
    base = _good_base(log, listing.chains(floor))
    if base is None:
        return [], 0
    doomed = [f for f in listing.files() if f.version < base.version
              or (f.version == base.version and f.name != base.name)]
    names = [f.name for f in sorted(doomed)] + listing.temps_up_to(base.version)
    log.delete(names)
    return names, sum(f.size for f in doomed)


# -- helpers ---------------------------------------------------------------------------------------


def _target(log: Changelog, listing: Listing, up_to: int | None) -> int:
    restorable = listing.restorable()
    if up_to is None:
        if not restorable:
            raise listing.unreachable(0) if listing.newest is not None else VersionNotRetainedError(
                f"changelog {log.uri} is empty: there is nothing to compact")
        return restorable[-1]
    if up_to not in restorable:
        raise listing.unreachable(up_to)
    return up_to


def _is_good(log: Changelog, file: LogFile) -> bool:
    try:
        log.read_snapshot(file)
    except ChangelogCorruptError:
        return False
    return True


def _good_base(log: Changelog, chains: list[Chain]) -> LogFile | None:
    """The base snapshot of the newest chain whose snapshot is intact (None: the empty origin)."""
    for chain in chains:
        if chain.base is None or _is_good(log, chain.base):
            return chain.base
    return None


def _write_merged(
    log: Changelog, listing: Listing, target: int, replacing: LogFile | None
) -> tuple[LogFile, int, int, tuple[LogFile, ...]]:
    """Merge the newest good chain to ``target`` into a new snapshot file.

    ``replacing`` (a damaged snapshot at ``target``) is deleted once a good chain is found, just
    before the new file is written, so there are never two snapshot files for one version.
    """
    problems = []
    for chain in listing.chains(target):
        if chain.base is not None and chain.base.version == target:
            continue  # the damaged snapshot being replaced
        try:
            snapshot = log.read_snapshot(chain.base) if chain.base is not None else None
        except ChangelogCorruptError as exc:
            problems.append(exc)
            continue
        deltas = [log.read_delta(f) for f in chain.deltas]
        if replacing is not None:
            log.delete([replacing.name])
        counted = _Count()
        chunks = merge(snapshot.chunks() if snapshot else None, compose(deltas))
        file = log.write_snapshot(target, counted.track(chunks))
        read = (snapshot.entries if snapshot else 0) + sum(d.entries for d in deltas)
        return file, counted.n, read, chain.files
    if problems:
        raise problems[0]
    raise listing.unreachable(target)


def _check_unchanged(log: Changelog, snapshot: LogFile, used: Iterable[LogFile]) -> Listing:
    """A fresh listing, after checking no file merged into ``snapshot`` was rewritten meanwhile."""
    fresh = log.listing()
    for file in used:
        now = (fresh.deltas if file.kind is Kind.DELTA else fresh.snapshots).get(file.version)
        if now is not None and now.name != file.name:
            log.delete([snapshot.name])
            raise ChangelogConflictError(
                f"compaction of {log.uri} at version {snapshot.version}: {file.name} was replaced by "
                f"{now.name} while it ran (a batch executed again); the new snapshot was removed. "
                "Compact again.", files=[file.name, now.name], versions=(file.version, snapshot.version))
    return fresh


class _Count:
    """Counts the entries of chunks passing through."""

    def __init__(self) -> None:
        self.n = 0

    def track(self, chunks: Iterable[tuple[pa.Array, pa.Array]]) -> Iterator[tuple[pa.Array, pa.Array]]:
        for keys, values in chunks:
            self.n += len(keys)
            yield keys, values
