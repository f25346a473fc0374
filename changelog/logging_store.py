"""The changelogging store: a :class:`streamjoin.statestore.Store` that logs every write before applying it.

    store, opened = open_logged_store("rocksdb", "/local/q1/p=0", log, target_version=41)
    store.write(puts=[(b"k", b"v")], version=42)   # delta 42 is durable, then the local store has it
    opened.how                                      # OpenHow.REUSED / ROLLED_FORWARD / ...

``ChangeloggingStore(inner, log)`` wraps any store with the same interface: reads pass straight
through; ``write(..., version=v)`` (a version is required, one above the store's) appends the
delta of ``v`` to the log, records an undo record naming that delta (when it has an
:class:`~streamjoin.changelog.undo.UndoLog`), then applies the same writes and the marker to the inner store
in one atomic write. The values this store read from ``inner`` since its last write (``get``,
``multi_get``, ``scan_ranges``; up to :data:`READ_REUSE_LIMIT` keys) are handed to the undo record,
which then reads only the written keys the operator did not already read: those values are the
previous version's, since nothing but this store's own writes changes ``inner`` while it owns it
(every write forgets them).

:func:`open_logged_store` opens the local store of a partition and brings it to the version a task
needs, reporting how in an :class:`OpenReport`:

* already there: reused (undo records of later versions are dropped), unless its undo record shows
  it applied another delta of that version than the log now has (the batch ran again elsewhere):
  then it is rolled back one version and forward by the log's delta;
* behind: rolled forward by the deltas in between, unless restoring the newest snapshot reads
  fewer bytes; a store whose undo record shows another delta of its own version than the log's
  is first rolled back one version (the deltas after it follow the log's);
* ahead (a batch executed again): rolled back by the undo records of the versions in between;
* missing, empty, unreadable (:class:`StoreCorruptError`), or not reachable the ways above:
  rebuilt (``destroy_store`` + open + :func:`streamjoin.changelog.restore.restore`);
* another's: every versioned write records the store's owner tag (``owner``, by default a digest
  of the changelog's URI) with the version marker, atomically. A store whose tag is not the one
  expected (a directory copied or swapped from another partition, query or epoch, or written
  before owner tags existed) is rebuilt whatever its version, never trusted.

A store is never destroyed when it may hold the only copy of its state: asked for the empty state
while the local store is at version ``u`` and the log holds no file of ``u`` or later (the log
is empty, lost, or not this store's), :func:`open_logged_store` raises instead.
"""

from __future__ import annotations

import hashlib
import os
import time
from dataclasses import dataclass, field, replace
from enum import Enum
from itertools import chain
from typing import Any, Callable, Iterable, Iterator, NamedTuple, Sequence

import pyarrow as pa

from streamjoin.changelog.errors import ChangelogCorruptError, VersionNotRetainedError, VersionOrderError
from streamjoin.changelog.format import LogFile, check_write
from streamjoin.changelog.history import StoreHistory
from streamjoin.changelog.log import Changelog
from streamjoin.changelog.restore import restore
from streamjoin.changelog.undo import UndoLog
from streamjoin.statestore import warm
from streamjoin.statestore.base import KeyValue, Store, StoreStats
from streamjoin.statestore.chunks import SortedChunks
from streamjoin.statestore.columns import Chunk, ColumnWrite, PrefixScan
from streamjoin.statestore.errors import StoreCorruptError, StoreLockedError
from streamjoin.statestore.registry import destroy_store, open_store, resolve_backend
from streamjoin.statestore.warm import adopt_memo, forget_memo

__all__ = ["ChangeloggingStore", "open_logged_store", "release_logged_store", "owner_tag", "OpenReport",
           "OpenHow", "READ_REUSE_LIMIT"]

#: Keys whose read values a store keeps for the next write's undo record, at most.
READ_REUSE_LIMIT = 1_000_000


class ChangeloggingStore(Store):
    """``inner`` with every write logged to ``log`` first (see module docstring). Owns ``inner``."""

    kind = "changelogging"

    def __init__(self, inner: Store, log: Changelog, *, undo: UndoLog | StoreHistory | None = None) -> None:
        super().__init__(inner.path)
        self.inner = inner
        self.log = log
        self.undo = undo
        self._keep_reads = undo is not None and undo.wants_reads
        self._in_log = False  # whether the log is known to restore the store's version
        #: values read from ``inner`` since its last write (None: known absent), for the undo record
        self._read: dict[bytes, bytes | None] = {}
        #: (kind, path, options) to keep the inner store open under after the task (None: close it)
        self.park_as: tuple[str, str, dict[str, Any]] | None = None

    def __repr__(self) -> str:
        return f"ChangeloggingStore({self.inner!r}, {self.log!r}, undo={self.undo!r})"

    def _get(self, key: bytes) -> bytes | None:
        value = self.inner.get(key)
        if self._keep_reads and len(self._read) < READ_REUSE_LIMIT:
            self._remember(((key, value),))
        return value

    def _multi_get(self, keys: Sequence[bytes]) -> list[bytes | None]:
        values = self.inner.multi_get(keys)
        if self._keep_reads and len(self._read) + len(keys) <= READ_REUSE_LIMIT:
            self._remember(zip(keys, values))
        return values

    def _scan(self, start: bytes | None, end: bytes | None, reverse: bool) -> Iterator[KeyValue]:
        return self.inner.scan(start, end, reverse)

    def _scan_ranges(self, ranges: Sequence[tuple[bytes | None, bytes | None]]) -> list[list[KeyValue]]:
        return self._remember_found(self.inner.scan_ranges(ranges))

    def _scan_columns(self, start: bytes | None, end: bytes | None) -> Iterator[Chunk]:
        return self.inner.scan_columns(start, end)

    def _scan_prefixes(self, prefixes: Sequence[bytes]) -> list[list[KeyValue]]:
        return self._remember_found(self.inner.scan_prefixes(prefixes))

    def _remember_found(self, found: list[list[KeyValue]]) -> list[list[KeyValue]]:
        if not self._keep_reads:
            return found
        if len(self._read) + sum(map(len, found)) <= READ_REUSE_LIMIT:
            self._remember(chain.from_iterable(found))   # all of them in one update
        else:
            for entries in found:
                if len(self._read) + len(entries) > READ_REUSE_LIMIT:
                    break
                self._remember(entries)
        return found

    def _remember(self, entries: Iterable[tuple[bytes, bytes | None]]) -> None:
        try:
            self._read.update(entries)
        except TypeError:  # a key that is not hashable bytes: the undo record reads it itself
            pass

    def _version(self) -> int | None:
        return self.inner.version

    def memo(self) -> dict[str, Any]:
        """The inner store's memo (it outlives this wrapper when the store is kept warm)."""
        self._check_open()
        return self.inner.memo()

    def _stats(self) -> StoreStats:
        return self.inner.stats()

    def _close(self) -> None:
        self._read = {}
        self.inner.close()

    def _write(
        self,
        puts: Sequence[KeyValue],
        deletes: Sequence[bytes],
        delete_ranges: Sequence[tuple[bytes, bytes]],
        version: int | None,
    ) -> None:
        """Undo record, then the delta, then the inner write; raises VersionOrderError (nothing
        written) for a missing version or one that does not follow the store's. A write to a
        store that ``writes_columns`` (and whose undo needs no entries) goes as columns
        (``_logged_columns``), its range deletes too: its delta file is then the inner store's too."""
        checked = self._check_follows(version)
        if self._undo_wants_entries or not self.inner.writes_columns:
            self._logged(checked, puts, deletes, delete_ranges,
                         lambda: self.inner.write(puts, deletes, delete_ranges, version=version))
            return
        check_write(puts, deletes, delete_ranges)  # before anything reads or writes
        self._logged_columns(checked, ColumnWrite.of_lists(puts, deletes, delete_ranges), version)

    @property
    def _undo_wants_entries(self) -> bool:
        return self.undo is not None and self.undo.wants_entries

    def _write_columns(self, write: ColumnWrite, version: int | None) -> None:
        """``_write`` of a column write: the delta encoded from its columns and the inner store's
        column write, unless the undo record needs the entries as lists."""
        if self._undo_wants_entries:
            puts, deletes = write.as_lists()
            self._write(puts, deletes, write.delete_ranges, version)
            return
        self._logged_columns(self._check_follows(version), write, version)

    def _logged_columns(self, checked: int, write: ColumnWrite, version: int | None) -> None:
        """The delta of ``write`` at ``checked``, then the inner store's column write of it with
        the delta's file (``ColumnWrite.file``: a store that keeps its writes as such files takes it)."""
        appended: list[ColumnWrite] = []

        def append() -> LogFile:
            file, source = self.log.append_columns_file(checked, write)
            appended.append(replace(write, file=source))   # the delta, for a store that keeps it as its run
            return file
        self._apply_logged(checked, append, ((), (), ()),
                           lambda: self.inner.write_columns(appended[0], version=version))

    def _multi_get_column(self, keys: pa.Array) -> pa.Array:
        values = self.inner.multi_get_column(keys)
        if self._keep_reads and len(self._read) + len(keys) <= READ_REUSE_LIMIT:   # for the undo record
            self._remember(zip(keys.to_pylist(), values.to_pylist()))
        return values

    def _scan_prefixes_columns(self, prefixes: pa.Array) -> PrefixScan:
        if self._keep_reads:
            return super()._scan_prefixes_columns(prefixes)
        return self.inner.scan_prefixes_columns(prefixes)

    def _rebase(self, items: SortedChunks) -> bool:
        """The inner store's ``rebase``: the entries do not change, so nothing is logged."""
        return self.inner.rebase(items)

    def _snapshot_follows(self) -> None:
        self.inner.snapshot_follows()

    def _hand_over(self) -> None:
        self.inner.hand_over()

    def _load_sorted(self, items: Iterable[KeyValue], version: int | None) -> int:
        """Bulk-load an empty store as one logged write of puts at ``version`` (required)."""
        checked = self._check_follows(version)
        puts = list(items)
        self._logged(checked, puts, (), (), lambda: self.inner.load_sorted(puts, version))
        return len(puts)

    def _logged(
        self,
        version: int,
        puts: Sequence[KeyValue],
        deletes: Sequence[bytes],
        delete_ranges: Sequence[tuple[bytes, bytes]],
        apply: Callable[[], object],
    ) -> None:
        check_write(puts, deletes, delete_ranges)  # before anything reads or writes
        self._apply_logged(version, lambda: self.log.append(version, puts, deletes, delete_ranges),
                           (puts, deletes, delete_ranges), apply)

    def _apply_logged(
        self,
        version: int,
        append: Callable[[], Any],
        entries: tuple[Sequence[KeyValue], Sequence[bytes], Sequence[tuple[bytes, bytes]]],
        apply: Callable[[], object],
    ) -> None:
        """The delta (``append()``), the undo record of ``entries``, then ``apply()``."""
        delta = append()
        read, self._read = self._read, {}  # the write makes them stale, whatever happens
        try:
            if self.undo is not None:
                self.undo.record(self.inner, version, *entries, delta.crc, known=read)
            apply()
        except BaseException:
            if self.undo is not None and self.inner.version != version:
                self.undo.discard(version)
            raise

    def _check_follows(self, version: int | None) -> int:
        """``version``, checked to follow the store's (see ``_write``)."""
        if version is None:
            raise VersionOrderError(
                f"{self!r}: every write to a changelogged store needs version= (the batch id)")
        current = self.inner.version
        if current is not None and version == current + 1:
            if not self._in_log:
                self._require_in_log(current)
            return version
        if current is None and next(iter(self.inner.scan()), None) is None:
            if version == 0 or version - 1 not in self.log.versions():
                return version
            detail = f"the changelog has version {version - 1}, but the local store is empty"
        else:
            detail = f"the local store is at version {current}"
        raise VersionOrderError(
            f"write(version={version}) to {self.inner!r}: {detail}. A changelogged store moves one "
            f"version per write; open it with open_logged_store(..., target_version={version - 1}) "
            "first", versions=(version, version))


    def _require_in_log(self, current: int) -> None:
        """Refuse to extend a log that cannot restore the store's version (checked once)."""
        listing = self.log.listing()
        if current not in listing.restorable():
            raise VersionNotRetainedError(
                f"{self.inner!r} is at version {current}, but changelog {self.log.uri} cannot "
                f"restore it ({listing.unreachable(current)}); writing on would make a log that "
                "disagrees with the store. Is it the changelog of this checkpoint? Otherwise "
                "re-run the query from a checkpoint the changelog still has.",
                versions=(current, current))
        self._in_log = True


class OpenHow(str, Enum):
    """How :func:`open_logged_store` obtained the store (a str, so it serialises as is)."""

    REUSED = "reused"
    ROLLED_FORWARD = "rolled_forward"
    ROLLED_BACK = "rolled_back"
    REBUILT = "rebuilt"


@dataclass(frozen=True)
class OpenReport:
    """What opening a logged store did, for metrics.

    ``local_version``: the local store's version before (None: missing, empty or unreadable);
    ``versions``: deltas applied forward or undo records applied back; ``entries_restored``:
    entries a rebuild loaded; ``seconds``: time spent bringing the store to the target;
    ``reason``: why it was rebuilt ("" otherwise); ``warm``: the store was the one this process
    kept open after the partition's previous task (False: opened from its directory, taken over
    from another process, or rebuilt).
    """

    how: OpenHow
    local_version: int | None
    target_version: int | None
    versions: int = 0
    entries_restored: int = 0
    seconds: float = 0.0
    reason: str = ""
    warm: bool = False


def open_logged_store(
    kind: str,
    local_path: str | os.PathLike[str],
    log: Changelog,
    target_version: int | None,
    *,
    undo_depth: int = 1,
    warm: bool = False,
    park: bool | None = None,
    owner: bytes | None = None,
    **options: Any,
) -> tuple[ChangeloggingStore, OpenReport]:
    """Open the local store at ``local_path`` at exactly ``target_version`` of ``log``.

    ``target_version`` None means the empty state before the first batch. Undo records live in
    ``<local_path>.undo`` and cover the newest ``undo_depth`` versions. ``options`` go to
    ``open_store``. Raises the changelog's errors (before opening anything) when the log cannot
    restore ``target_version``, even if the local store has it: writing on would then make a log
    that disagrees with the store. Raises them too (and closes the store) when a rebuild fails.

    ``warm``: take the store :func:`release_logged_store` kept open in this process when its
    version marker is ``target_version`` (:mod:`streamjoin.statestore.warm`), and when another
    process holds the directory, ask it to hand the store over (a bounded wait). ``park`` (None:
    ``warm``): keep the store open after the task (:func:`release_logged_store`); a task that
    will not park (a query's final one) still takes the store over from whoever parked it.

    ``owner``: the tag that says whose state the store holds (None: a digest of ``log.uri``);
    a store recording another tag is rebuilt (see the module docstring).
    """
    local = _Local(kind, os.fspath(local_path), options, undo_depth, warm, target_version,
                   owner if owner is not None else owner_tag(log.uri))
    started = time.perf_counter()
    listing = log.listing()
    if target_version is not None and target_version not in listing.restorable():
        raise listing.unreachable(target_version)
    version, reason = local.open()
    try:
        outcome = _bring_to(local, log, version, target_version, reason)
    except BaseException:
        local.store.close()
        raise
    if outcome.how is not OpenHow.REUSED:   # its memo may describe writes the store no longer has
        local.store.memo().clear()
        forget_memo(local.path)
    elif not local.taken and target_version is not None:
        adopt_memo(local.path, local.store)   # what this process kept of it when it handed it over
    report = OpenReport(outcome.how, version, target_version, outcome.versions, outcome.entries,
                        time.perf_counter() - started, outcome.reason, warm=local.taken)
    store = ChangeloggingStore(local.store, log, undo=local.undo)
    store.park_as = (kind, local.path, dict(options)) if (warm if park is None else park) else None
    if store.park_as is not None:
        local.store.idle_work_follows()   # kept open between tasks: idle work may wait for the watcher
    return store, report


def owner_tag(*parts: object) -> bytes:
    """A store owner tag: a digest of ``parts`` (their ``repr``s), e.g. a checkpoint URI,
    query id, epoch and partition."""
    return hashlib.sha256(repr(parts).encode()).digest()[:16]


def release_logged_store(store: ChangeloggingStore) -> None:
    """Done with ``store`` after a task that succeeded: keep its local store open in this process
    for the partition's next task when it was opened with ``warm=True``, else close it."""
    park_as = getattr(store, "park_as", None)
    if park_as is None or store.closed:
        store.close()
        return
    kind, path, options = park_as
    warm.park(kind, path, options, store.inner)


class _Outcome(NamedTuple):
    how: OpenHow
    versions: int = 0
    entries: int = 0
    reason: str = ""


@dataclass
class _Local:
    """A partition's local store (opened by :meth:`open`) and its undo records."""

    kind: str
    path: str
    options: dict[str, Any]
    undo_depth: int
    warm: bool = False
    wanted: int | None = None
    owner: bytes | None = None
    store: Store = field(init=False)
    #: the store records another owner tag than ours (or none): it is rebuilt, never trusted
    foreign: bool = False
    #: the store was taken from this process's warm stores (not opened from its directory)
    taken: bool = False
    undo: UndoLog | StoreHistory = field(init=False)

    def __post_init__(self) -> None:
        # a store that keeps its previous versions needs no undo records (streamjoin.changelog.history)
        keeps = getattr(resolve_backend(self.kind), "keeps_history", False)
        self.undo = StoreHistory(lambda: self.store, self.undo_depth) if keeps else UndoLog(self.path + ".undo", self.undo_depth)

    def open(self) -> tuple[int | None, str]:
        """Open the store (or take the warm one); return its version and "" or why it must be rebuilt."""
        taken = warm.take(self.kind, self.path, self.options, self.wanted) if self.warm else None
        if taken is not None:
            self.store, self.taken = taken, True
        else:
            try:
                self.store = self._open()
            except StoreCorruptError as exc:
                destroy_store(self.kind, self.path)
                self.store = self._open()
                self.store.stamp = self.owner
                return None, f"local store unreadable ({exc})"
        self.store.stamp = self.owner
        version = self.store.version
        if version is None and next(iter(self.store.scan()), None) is not None:
            return None, "local store has entries but no version"
        if version is not None and self.store.records_owner:
            found = self.store.owner
            if found != self.owner:
                self.foreign = True
                return version, ("local store has no owner tag (written by an earlier streamjoin)"
                                 if found is None else "local store belongs to another partition or query")
        return version, "" if version is not None else "no local store"

    def _open(self) -> Store:
        warm.evict(self.path)
        try:
            return open_store(self.kind, self.path, **self.options)
        except StoreLockedError:
            if not self.warm:
                raise
            return warm.request_release(self.path, lambda: open_store(self.kind, self.path, **self.options))

    def rebuild(self, log: Changelog, target: int | None, reason: str) -> _Outcome:
        """Remove the store and its undo records, open it empty, restore ``target`` into it."""
        self.store.close()
        destroy_store(self.kind, self.path)
        self.undo.clear()
        self.store = open_store(self.kind, self.path, **self.options)
        self.store.stamp = self.owner
        if target is None:
            return _Outcome(OpenHow.REBUILT, reason=reason)
        stats = restore(log, self.store, target)
        return _Outcome(OpenHow.REBUILT, stats.deltas, stats.entries_loaded, reason)


def _bring_to(local: _Local, log: Changelog, current: int | None, target: int | None,
              reason: str) -> _Outcome:
    """Move the local store from ``current`` to ``target`` the cheapest way that works."""
    if local.foreign:
        if target is None and local.store.owner is None:
            _refuse_last_copy(local, log, current)   # an untagged store may still be the only copy
        return local.rebuild(log, target, reason)
    if not reason and current == target:
        if target is not None and _replaced(local.undo, log, target):
            return _reapply(local, log, target, target)
        local.undo.discard_after(target)
        return _Outcome(OpenHow.REUSED)
    if reason == "no local store" and target is None:
        local.undo.clear()
        return _Outcome(OpenHow.REUSED)
    if current is not None and target is not None and current > target:
        undone = local.undo.rollback(local.store, target)
        if undone is not None:
            return _Outcome(OpenHow.ROLLED_BACK, undone)
        reason = f"local store at {current} is ahead of {target} and has no undo records back to it"
    elif current is not None and target is not None:
        if not reason and _replaced(local.undo, log, current):   # (its later deltas follow the log's)
            return _reapply(local, log, current, target)
        applied, reason = _roll_forward(local.store, log, current, target)
        if applied is not None:
            local.undo.clear()
            return _Outcome(OpenHow.ROLLED_FORWARD, applied)
    elif current is not None:
        _refuse_last_copy(local, log, current)
        reason = f"local store at {current}, the target is the empty state"
    return local.rebuild(log, target, reason)


def _refuse_last_copy(local: _Local, log: Changelog, current: int | None) -> None:
    """Raise if the store at ``current`` may be the only copy: the log has nothing as new (an
    empty store, ``current`` None, is no copy of anything)."""
    if current is None:
        return
    newest = log.listing().newest
    if newest is not None and newest >= current:
        return
    holds = "is empty" if newest is None else f"ends at version {newest}"
    raise VersionNotRetainedError(
        f"local store {local.path} is at version {current} but changelog {log.uri} {holds}: the "
        "local store may be the only copy of that state, so it is kept. Restore the changelog from "
        "a copy of the checkpoint; if the state is meant to be discarded (the checkpoint was "
        f"cleared on purpose), delete {local.path} and run again", versions=(current, current))


def _replaced(undo: UndoLog | StoreHistory, log: Changelog, version: int) -> bool:
    """Whether the store applied another delta of ``version`` than the one the log has now."""
    applied = undo.applied_crc(version)
    delta = log.listing().deltas.get(version)
    return applied is not None and delta is not None and delta.crc != applied


def _reapply(local: _Local, log: Changelog, version: int, target: int) -> _Outcome:
    """Swap the store's delta of ``version`` (the store's version) for the log's and go on to
    ``target``: undo it, then roll forward; else rebuild. (A version executed again elsewhere, on
    other rows, replaced the delta the store applied, and the deltas after it follow the new one.)"""
    why = f"local store applied another delta of version {version} than the changelog has"
    if version > 0 and local.undo.rollback(local.store, version - 1) is not None:
        applied, _ = _roll_forward(local.store, log, version - 1, target)
        if applied is not None:
            local.undo.clear()
            return _Outcome(OpenHow.ROLLED_FORWARD, applied, reason=why)
    return local.rebuild(log, target, why)


def _roll_forward(store: Store, log: Changelog, current: int, target: int) -> tuple[int | None, str]:
    """Apply deltas ``current+1..target``; (count, "") or (None, why not) when it cannot or should not."""
    listing = log.listing()
    needed = range(current + 1, target + 1)
    missing = [v for v in needed if v not in listing.deltas]
    if missing:
        return None, f"local store at {current}; deltas {missing[0]}..{missing[-1]} are compacted away"
    forward = sum(listing.deltas[v].size for v in needed)
    chains = listing.chains(target)
    if chains and chains[0].base is not None and chains[0].base.version > current:
        if sum(f.size for f in chains[0].files) < forward:
            return None, f"local store at {current}; restoring snapshot {chains[0].base.version} is cheaper"
    for v in needed:
        try:
            delta = log.read_delta(listing.deltas[v])
        except ChangelogCorruptError as exc:
            return None, f"delta {v} is damaged ({exc})"
        puts, deletes, ranges = delta.as_write()
        store.write(puts, deletes, ranges, version=v)
    return len(needed), ""
