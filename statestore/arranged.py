"""The arranged backend: a store held as sorted columns, a base mapped from files and the changes since it in memory.

Reads never touch a key-value library: the state is a ``streamjoin.statestore.layers.Layers`` in
this process, a sorted *base* memory-mapped from its files and a *delta* in memory (sorted key
columns and their values, ``streamjoin.statestore.arrangement``), so a batch of point reads is
one ``np.searchsorted`` a layer and a batch of range reads two, with no seek per key. Writes make
a new delta (the old layers are untouched until then) and append the write as one Arrow file.

**Files** (all in the store directory):

* ``MANIFEST``: JSON naming the files that make the store, in order, with each file's size and
  CRC-32, the version marker, the owner tag and the write's tag (the changelog delta it applied),
  and the same for the newest previous versions (``HISTORY``, or the ``history_depth`` asked
  for). It is replaced atomically (written beside, then renamed) after the files it names are
  written, so a write is all there or not at all.
* ``base-<n>.arrow`` and ``base-<n>.keys``: the base (``streamjoin.statestore.sorted_base``):
  its values in an Arrow file and its sorted fixed-width keys, both memory-mapped at open, with
  no copy, encoding or sort. A restore's base takes the changelog's snapshot file itself as its
  values file (a hard link where the changelog is on this disk, else a copy of its checked
  bytes) and writes only the keys; every file the store writes is a new one (its name removed
  first), so the store never changes a file it shares with the changelog.
* ``run-<n>.arrow``: one write: its deletes (a null value) and puts, its range deletes in the
  file's metadata. A write that comes with its file (``ColumnWrite.file``: a changelogged
  store's delta, whose ``key`` and ``value`` columns are that write, its range deletes first,
  told by its ``op`` column) takes that file as its run:
  on the directory host a hard link where it is on this disk (else a copy of its bytes), as a
  base takes a snapshot, so the changelog's delta and the store's run are one file, written
  once; a database host holds its bytes as it holds any run. Opening applies the runs to the base into the delta as one write (of a key
  in several runs, its last entry), splitting it only at a run with range deletes.

**Memory budget**: the delta is the only state in the process's own memory, with the base's search
codes (8 bytes a base key, ``streamjoin.statestore.keycodes``), made where they take at most a
``CODED_SHARE``-th of the budget (a larger base is searched as bytes). When the delta holds more
than ``memory_budget`` bytes (its codes counted), or the runs more than ``RUN_SHARE`` of the base's
entries, or the delta more than ``RUN_SHARE`` of the base's bytes of keys and values (a store of a
few large values, an enrichment's buckets of table rows, holds megabytes in a few hundred entries),
or there are more than ``MAX_RUNS``, the write merges base and delta into a new base, streamed a
chunk at a time (``Layers.write_base``), the older files are removed and the delta starts empty:
the store's own compaction, as an LSM tree merges its runs. A store kept open between tasks
(``idle_work_follows``) leaves a merge its runs call for to ``flush_idle``, which the warm-stores
watcher calls while it waits (``streamjoin.statestore.warm``), until the runs hold ``IDLE_SLACK``
times the entries that make one (a merge the delta's bytes call for always waits for it). A
snapshot of the store's version that a changelog wrote from it
(``streamjoin.changelog.snapshot_from_store``) has merged the base and the runs already: the store
takes it as its base (``rebase``: the snapshot file as the values, linked, and its keys written)
when the runs hold at least ``REBASE_SHARE`` of what makes a merge, and the merge those runs were
heading for starts from zero. ``memory_budget`` defaults to the worker's budget
(``STREAMJOIN_WORKER_MEMORY``, bytes, with an optional ``k``/``m``/``g`` suffix; default ``1g``)
shared among the stores a Python worker may hold (the stores kept warm, ``STREAMJOIN_WARM_STORES``,
and the one a task opens). A base counts against the machine's page cache, which the operating
system reclaims, not against the budget; a merge or a restore holds at most one chunk of it (and a
restore the keys, not the values, of what it loads).

Files no manifest names (a write or a merge that stopped before its manifest, and a manifest
that stopped before it replaced the old one) are removed when the store opens.

**History**: a version's files are immutable, so the previous versions stay readable as long as
their files are kept: ``ArrangedStore.roll_back`` returns to one by reading its files and
writing its manifest again. That is how a changelogged arranged store undoes a version executed
again, with no undo records (``streamjoin.changelog.history``).

**Hand-over**: a store closed because another process is about to open it (``hand_over``, a
warm store asked for by another worker) leaves its delta, its base's key codes and the names of
its files in a ``HANDOVER`` file (``streamjoin.statestore.handover``); the next open takes them
when the manifest names exactly those files, instead of checking the files' CRCs, applying the
runs again and coding the base again.

**Damage**: every file is checked against its CRC when the store opens (but for an open that
takes a hand-over: the closing store checked or wrote those files). A mismatch, a missing or
unreadable file or manifest, or a manifest of an earlier format raises ``StoreCorruptError``,
whose message says to remove the directory: the changelog's open path then rebuilds the store.

**Durability**: ``sync=False`` (the default) writes files without fsync: a machine crash may
lose the latest writes or leave a file that fails its check, and the store is then rolled
forward or rebuilt from the changelog, which is the durable copy. ``sync=True`` fsyncs every
file and the manifest.

Process model and locking are those of the other disk backends (``streamjoin.statestore.locking``).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterator, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from streamjoin.statestore import options as check
from streamjoin.statestore import warm
from streamjoin.statestore.base import KeyValue, Store, StoreStats, ascending, check_entry_types
from streamjoin.statestore.checksum import crc32
from streamjoin.statestore.chunks import SortedChunks, SourceFile
from streamjoin.statestore.columns import Chunk, ColumnWrite, PrefixScan, binary_column
from streamjoin.statestore.errors import StoreArgumentError, StoreCorruptError, StoreError, StoreWriteError
from streamjoin.statestore.handover import Handover, take_handover, write_handover
from streamjoin.statestore.hosts import HOSTS, open_host
from streamjoin.statestore.keycodes import Carried
from streamjoin.statestore.layers import Layers
from streamjoin.statestore.locking import (
    DirectoryLock,
    corrupt_message,
    io_error,
    os_refusal,
    prepare_directory,
    remove_directory,
    retry_locked,
)
from streamjoin.statestore.sorted_base import DATA, KEYS, BaseWriter, SortedBase, write_keys

__all__ = ["ArrangedStore", "MAX_RUNS", "RUN_SHARE", "IDLE_SLACK", "REBASE_SHARE", "HISTORY", "BUDGET_VARIABLE", "CODED_SHARE", "worker_budget"]

_FORMAT = "arranged-3"
#: Manifest formats this streamjoin reads: ``arranged-2`` had no run with range deletes in an
#: ``op`` column (a delta taken as a run); a streamjoin that reads only ``arranged-2`` refuses a
#: store of ``arranged-3``, which is then rebuilt from the changelog.
_READS = frozenset({"arranged-2", _FORMAT})
#: The environment variable of a Python worker's memory budget for arranged stores.
BUDGET_VARIABLE = "STREAMJOIN_WORKER_MEMORY"
_DEFAULT_BUDGET = "1g"
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
#: Runs kept beside a base at most before they are merged into a new one.
MAX_RUNS = 32
#: The runs beside a base may hold up to this share of its entries, and the delta up to this share
#: of its bytes of keys and values, before they are merged into a new one. A merge rewrites the
#: whole base, while every write and read pays for the delta's size (the delta is rebuilt and its
#: search codes made again at each write), and so does an open and a hand-over to another process.
RUN_SHARE = 0.25
#: The runs may hold at least this many entries before a merge.
MERGE_ENTRIES = 4096
#: The delta may hold at least this many bytes before a merge: a store of a few large values (an
#: enrichment's buckets of table rows) merges by its bytes, not by its few hundred entries.
MERGE_BYTES = 4 << 20
#: A snapshot of the store's version becomes its base (``ArrangedStore.rebase``) when the runs
#: beside the base hold at least this share of what makes a merge: writing a base's keys is about
#: a fifth of a merge's work, and a rebase spares the runs' share of the next merge.
REBASE_SHARE = 0.25
#: A store kept open between tasks leaves a due merge to ``ArrangedStore.flush_idle`` until its
#: runs hold this many times what makes one; a write merges beyond it.
IDLE_SLACK = 2
#: Previous versions a store keeps to return to (``ArrangedStore.roll_back``).
HISTORY = 2
#: A base's search codes (``streamjoin.statestore.keycodes``: 8 bytes a key, in memory) may take
#: at most the store's memory budget over this; a larger base is searched as bytes.
CODED_SHARE = 4
_RUN_SCHEMA = pa.schema([("key", pa.large_binary()), ("value", pa.large_binary())])
#: The ``op`` of a range delete's row in a changelog delta taken as a run (the changelog's
#: ``DELETE_RANGE``: the store does not import the changelog, which builds on it).
_RANGE_OP = 2


def worker_budget() -> int:
    """The bytes of memory a Python worker's arranged stores may hold together
    (``STREAMJOIN_WORKER_MEMORY``); ``StoreArgumentError`` for a value that is not a size."""
    raw = os.environ.get(BUDGET_VARIABLE, _DEFAULT_BUDGET).strip().lower()
    unit = raw[-1] if raw and raw[-1] in _UNITS else ""
    number = raw[:len(raw) - len(unit)]
    if not number.isdigit() or int(number) <= 0:
        raise StoreArgumentError(f"{BUDGET_VARIABLE}={raw!r}: give a whole number of bytes, optionally with k, m or g "
                                 f"(e.g. 512m)")
    return int(number) * _UNITS[unit]


def _check_budget(kind: str, name: str, value: object) -> None:
    """A ``memory_budget``: None (the worker's share) or a number of bytes."""
    if value is not None:
        check.size(kind, name, value, 1 << 50)


def _check_host(kind: str, name: str, value: object) -> None:
    """A ``host``: one of ``streamjoin.statestore.hosts.HOSTS``."""
    if value not in HOSTS:
        raise StoreArgumentError(f"store kind {kind!r}: {name}={value!r} is not one of {sorted(HOSTS)} "
                                 f"(where the store's files live)")


_CHECKS: dict[str, check.Check] = {"lock_timeout": check.seconds, "sync": check.flag, "memory_budget": _check_budget,
                                   "host": _check_host}


class ArrangedStore(Store):
    """A store held as a base mapped from files and a delta in memory, on disk as a manifest of
    Arrow files (see module).

    Options: ``lock_timeout`` (seconds to wait for a held store; default: fail at once), ``sync``
    (fsync every file; default False), ``memory_budget`` (bytes of changes held in memory before
    they are merged into the base; default: the worker's budget over the stores it may hold),
    ``host`` (where the manifest and the runs live: ``"directory"``, the default, ``"lmdb"`` or
    ``"rocksdb"``; a base is a pair of files of the directory on every host;
    ``streamjoin.statestore.hosts``).
    """

    kind = "arranged"
    records_owner = True
    keeps_history = True
    writes_columns = True

    @classmethod
    def check_options(cls, options: Mapping[str, Any]) -> None:
        """The options' values, and the worker's budget (``STREAMJOIN_WORKER_MEMORY``, as this
        process sees it) when no ``memory_budget`` is given."""
        check.check_all(cls.kind, options, _CHECKS)
        if options.get("memory_budget") is None:
            worker_budget()

    def __init__(self, path: str, *, lock_timeout: float | None = None, sync: bool = False,
                 memory_budget: int | None = None, host: str = "directory") -> None:
        check.check_all(self.kind, {"lock_timeout": lock_timeout, "sync": sync, "memory_budget": memory_budget,
                                    "host": host}, _CHECKS)
        self._sync = sync
        self._idle_merges = False   # (idle_work_follows)
        self._budget = worker_budget() // (warm.LIMIT + 1) if memory_budget is None else memory_budget
        super().__init__(path)
        prepare_directory(self.path, self.kind, HOSTS[host].markers)
        self._lock = retry_locked(lambda: DirectoryLock.acquire(self.path), lock_timeout)
        try:
            try:
                self._host = open_host(host, self.path, sync)
            except OSError as exc:
                raise self._os_error(f"opening {self.path}'s {host} host", exc) from exc
            try:
                self._load()
            except BaseException:
                self._host.close()
                raise
        except BaseException:
            self._lock.release()
            raise

    # -- opening ----------------------------------------------------------------------------------

    def _load(self) -> None:
        """Read the manifest and its files (or start empty), and remove files it does not name."""
        self._now = _State(None, None, None, ())
        self._history: list[_State] = []
        self._next = 0
        self._layers, self._run_entries = Layers(), 0
        self._rebase_follows = False
        try:
            raw = self._host.read_manifest()
        except OSError as exc:
            raise self._os_error(f"reading {self.path}'s manifest", exc) from exc
        if raw is not None:
            try:
                meta = json.loads(raw)
                if meta.get("format") not in _READS:
                    raise ValueError(f"its format is {meta.get('format')!r} where this streamjoin reads "
                                     f"{', '.join(map(repr, sorted(_READS)))}")
                self._now = _State.parse(meta)
                self._history = [_State.parse(h) for h in meta["history"]]
                self._next = int(meta["next"])
            except (ValueError, KeyError, TypeError) as exc:
                raise StoreCorruptError(corrupt_message(self.path, self.kind, f"its manifest is unreadable: {exc}")) from exc
        handed = take_handover(self.path, self._now.files)
        if self._now.files:
            self._layers, self._run_entries = self._read_state(self._now) if handed is None else self._taken(handed)
        try:
            self._manifest_id = self._host.manifest_identity()
            for name in self._host.names() - self._named():
                self._host.remove(name)
        except OSError as exc:
            raise self._os_error(f"cleaning {self.path}", exc) from exc

    def _taken(self, handed: Handover) -> tuple[Layers, int]:
        """The layers a closing store handed over for the current state (its files not checked
        again: the closing store checked or wrote them), and how many entries its runs hold."""
        files, base = self._now.files, SortedBase.empty()
        if files[0][0].startswith("base-"):
            base = self._base(files[:2], check=False)
            index = handed.codes.bind(base.ekeys) if handed.codes is not None else None
            if index is not None:
                base = replace(base, made=index)
            if handed.base_bytes is not None:
                base.__dict__["nbytes"] = handed.base_bytes   # (a cached property: no pass over the keys)
        return Layers(base, handed.delta), handed.run_entries

    def _hand_over(self) -> None:
        """Leave the delta, the base's codes and what the files are (``streamjoin.statestore.handover``)."""
        if not self._now.files:
            return
        base = self._layers.base
        try:
            write_handover(self.path, self._now.files, self._run_entries, self._layers.delta, base.made_codes,
                           base.__dict__.get("nbytes"))
        except (OSError, ValueError, pa.ArrowException):
            pass   # the next open reads the files

    def _named(self) -> set[str]:
        """The files the current state and the history need."""
        return {name for state in (self._now, *self._history) for name, _, _ in state.files}

    def _read_state(self, state: _State) -> tuple[Layers, int]:
        """The layers of ``state``'s files (its base mapped, its runs applied into the delta),
        and how many entries its runs hold."""
        files, layers, run_entries = state.files, Layers(), 0
        if files and files[0][0].startswith("base-"):
            layers = Layers(self._base(files[:2], check=True))
            files = files[2:]
        pending: list[tuple[pa.Array, pa.Array]] = []   # runs without range deletes, not applied yet
        for name, size, crc in files:
            table = self._read_file(name, size, crc)
            try:
                keys, values, ranges = _run_columns_of(table)
            except (ValueError, KeyError, pa.ArrowException) as exc:
                raise StoreCorruptError(corrupt_message(self.path, self.kind, f"{name} is unreadable: {exc}")) from exc
            run_entries += len(keys) + len(ranges)
            if ranges:
                layers = _applied_runs(layers, pending)
                pending = []
                valid = values.is_valid()
                layers = layers.applied_columns(keys.filter(valid), values.filter(valid),
                                                keys.filter(pc.invert(valid)), ranges)
            else:
                pending.append((keys, values))
        return _applied_runs(layers, pending), run_entries

    def _base(self, files: Sequence[_File], check: bool) -> SortedBase:
        """The base of a manifest's two base entries, memory-mapped (their sizes and CRCs
        checked with ``check``)."""
        if len(files) != 2 or not files[0][0].endswith(DATA) or not files[1][0].endswith(KEYS):
            raise StoreCorruptError(corrupt_message(self.path, self.kind, f"its manifest names a base of {list(files)}"))
        data, keys = (self._mapped(*entry, check) for entry in files)
        try:
            return SortedBase.mapped(keys, data, self._budget // CODED_SHARE)
        except (ValueError, pa.ArrowInvalid, OSError) as exc:
            raise StoreCorruptError(corrupt_message(self.path, self.kind, f"{files[0][0]} is unreadable: {exc}")) from exc

    def _mapped(self, name: str, size: int, crc: int, check: bool = True) -> pa.Buffer:
        """A file named by the manifest, memory-mapped (no copy), its size and CRC checked with ``check``."""
        try:
            data = self._host.read(name)
        except FileNotFoundError:
            raise StoreCorruptError(corrupt_message(self.path, self.kind, f"{name}, named by its manifest, is missing")) from None
        except OSError as exc:
            raise self._os_error(f"reading {name} of {self.path}", exc) from exc
        if check and data.size != size:
            raise StoreCorruptError(corrupt_message(
                self.path, self.kind, f"{name} has {data.size} bytes, its manifest says {size}"))
        if check and crc32(data) != crc:
            raise StoreCorruptError(corrupt_message(self.path, self.kind, f"{name} fails its checksum"))
        return data

    def _read_file(self, name: str, size: int, crc: int) -> pa.Table:
        data = self._mapped(name, size, crc)
        try:
            return pa.ipc.open_file(pa.BufferReader(data)).read_all()
        except (pa.ArrowInvalid, OSError) as exc:
            raise StoreCorruptError(corrupt_message(self.path, self.kind, f"{name} is unreadable: {exc}")) from exc

    # -- reads ------------------------------------------------------------------------------------

    def _get(self, key: bytes) -> bytes | None:
        return self._multi_get([key])[0]

    def _multi_get(self, keys: Sequence[bytes]) -> list[bytes | None]:
        if keys and {*map(type, keys)} != {bytes}:
            raise StoreError(f"read of {self.path}: keys must be bytes, got {next(k for k in keys if type(k) is not bytes)!r}")
        return self._layers.get_many(keys)

    def _scan(self, start: bytes | None, end: bytes | None, reverse: bool) -> Iterator[KeyValue]:
        for bound in (start, end):
            if bound is not None and type(bound) is not bytes:
                raise StoreError(f"scan of {self.path}: bounds must be bytes or None, got {bound!r}")
        # a write replaces the layers: an open scan keeps reading the state it began on
        return self._layers.entries(start, end, reverse)

    def _scan_ranges(self, ranges: Sequence[tuple[bytes | None, bytes | None]]) -> list[list[KeyValue]]:
        return self._layers.scan_ranges(ranges)

    def _scan_columns(self, start: bytes | None, end: bytes | None) -> Iterator[Chunk]:
        return self._layers.columns(start, end)

    def _scan_prefixes(self, prefixes: Sequence[bytes]) -> list[list[KeyValue]]:
        return self._layers.scan_prefixes(prefixes)

    def _multi_get_column(self, keys: pa.Array) -> pa.Array:
        return self._layers.get_column(keys)

    def _scan_prefixes_columns(self, prefixes: pa.Array) -> PrefixScan:
        return PrefixScan(*self._layers.scan_prefix_columns(prefixes))

    def _version(self) -> int | None:
        return self._now.version

    def _owner(self) -> bytes | None:
        return self._now.owner

    def _stats(self) -> StoreStats:
        return StoreStats(*self._layers.stats())

    def _check_files(self) -> None:
        """The manifest is the one this store last wrote or read (not replaced or removed under it)."""
        if self._host.manifest_identity() != self._manifest_id:
            raise StoreCorruptError(corrupt_message(
                self.path, self.kind, "its manifest was replaced or removed while the store was open"))

    # -- writes -----------------------------------------------------------------------------------

    def _write(
        self,
        puts: Sequence[KeyValue],
        deletes: Sequence[bytes],
        delete_ranges: Sequence[tuple[bytes, bytes]],
        version: int | None,
    ) -> None:
        check_entry_types(self.path, puts, deletes, delete_ranges)
        # each key and value converted once: the layers and the run share the arrays
        put_keys, put_values = pa.array([k for k, _ in puts], pa.binary()), pa.array([v for _, v in puts], pa.binary())
        drop = pa.array(deletes, pa.binary())
        layers = self._layers.applied_columns(put_keys, put_values, drop, delete_ranges)
        entries = len(puts) + len(deletes) + len(delete_ranges)
        self._commit_write(layers, entries, version,
                           lambda: _run_columns(ColumnWrite(put_keys, put_values, drop), delete_ranges))

    def _commit_write(self, layers: Layers, entries: int, version: int | None, run: Callable[[], pa.Table],
                      file: SourceFile | None = None) -> None:
        """Commit ``layers``, the state after a write of ``entries`` entries: as a run (``file``,
        the write already in a file of the run's layout, linked or copied: ``ColumnWrite.file``;
        else the table ``run()`` makes, written) beside the current files, or as a new base once
        the delta outgrows the memory budget or the runs outgrow the base; runs that outgrow it
        are not merged by a write that a snapshot's rebase follows (``snapshot_follows``), which
        makes the snapshot the base."""
        if not entries and version is None:
            return
        files = list(self._now.files)
        runs = len(files) - (2 if files and files[0][0].startswith("base-") else 0)
        by_entries, by_bytes = self._shares(entries, layers.delta.nbytes)
        outgrown = max(by_entries, by_bytes) > 1 and not (version is not None and self._rebase_follows)
        if version is not None:
            self._rebase_follows = False   # (the hint holds for one versioned write)
        if outgrown and self._idle_merges and by_entries <= IDLE_SLACK:
            # merged by flush_idle while the store waits for its next task; a delta of large
            # values waits for it however many bytes it holds (the budget bounds its memory)
            outgrown = False
        if outgrown or runs >= MAX_RUNS or layers.delta_bytes > self._budget:
            self._merge(layers, version)
        else:
            def made(written: list[str]) -> list[_File]:
                return [*files, self._write_file("run", run(), written) if file is None else
                        self._place_file("run", file, written)]
            self._commit(lambda files: layers, version, made, self._run_entries + entries)

    def _merge(self, layers: Layers, version: int | None) -> None:
        """Commit ``layers`` as a new base (the delta merged into it; ``version`` as in ``_commit``)."""
        carried: list[Carried | None] = [None]

        def write(stem: str) -> list[_File]:
            files, carried[0] = layers.write_coded_base(self.path, stem, self._sync)
            return self._sealed(files)

        self._commit_base(version, write, lambda: carried[0])

    def _shares(self, entries: int = 0, delta_bytes: int | None = None) -> tuple[float, float]:
        """The shares of what makes a merge that the runs hold, with a run of ``entries`` more,
        the delta then holding ``delta_bytes`` of keys and values (None: the delta's own, as it
        is): by their entries and by their bytes (a store of few large values, such as an
        enrichment's buckets, holds megabytes in a few hundred entries). Either over 1: a merge
        is due; the entries' over ``IDLE_SLACK``: a write merges even where ``flush_idle`` would."""
        base = self._layers.base
        delta_bytes = self._layers.delta.nbytes if delta_bytes is None else delta_bytes
        return ((self._run_entries + entries) / max(int(len(base) * RUN_SHARE), MERGE_ENTRIES),
                delta_bytes / max(int(base.nbytes * RUN_SHARE), MERGE_BYTES))

    def _commit_base(self, version: int | None, write: Callable[[str], list[_File]],
                     codes: Callable[[], Carried | None] = lambda: None) -> None:
        """Commit a new base, the delta empty: ``write(stem)`` writes its two files (``stem`` and
        the base suffixes) and returns their manifest entries; ``codes()``, after it, the new
        base's key codes carried through the write (None: none)."""
        stem = self._stem("base")

        def make(written: list[str]) -> list[_File]:
            written.extend(stem + suffix for suffix in (DATA, KEYS))
            return write(stem)

        self._commit(lambda files: self._remapped(files, codes()), version, make, 0)

    def _sealed(self, files: list[_File]) -> list[_File]:
        """``files``, written into the store's directory, handed to the host; their manifest entries."""
        for name, _, _ in files:
            self._host.seal(name)
        return files

    def _remapped(self, files: Sequence[_File], codes: Carried | None = None) -> Layers:
        """The layers of a base just written (its two files first, mapped, not checked again),
        with the key codes carried through its merge (``codes``, None: none)."""
        base = self._base(files[:2], check=False)
        made = codes.bind(base.ekeys) if codes is not None else None
        return Layers(replace(base, made=made) if made is not None else base)

    def _write_columns(self, write: ColumnWrite, version: int | None) -> None:
        """``_write`` of columns: the layers and the run are built from them, no list between."""
        ranges = write.delete_ranges
        layers = self._layers.applied_columns(write.put_keys, write.put_values, write.delete_keys, ranges)
        self._commit_write(layers, write.entries, version, lambda: _run_columns(write, ranges), write.file)

    def _load_sorted(self, items: Any, version: int | None) -> int:
        """A base of the ascending ``items`` (the restore path), written as they come: a
        restore's Arrow chunks (``SortedChunks``) are taken as columns, their order checked in
        Arrow; ``StoreError`` when the keys are not strictly ascending, ``StoreWriteError`` when a
        chunk is not bytes. Chunks read from one Arrow file (``SortedChunks.source``: a restore's
        snapshot) take that file as the base's values (:meth:`_adopt`)."""
        if isinstance(items, SortedChunks) and items.source is not None:
            return self._adopt(items, items.source, version)
        if isinstance(items, SortedChunks):
            chunks: Iterator[tuple[pa.Array, pa.Array]] = (
                (binary_column(k, "keys"), binary_column(v, "values")) for k, v in items.chunks())
        else:
            chunks = self._pair_chunks(items)

        def write(stem: str) -> list[_File]:
            out = BaseWriter(self.path, stem, self._sync)
            try:
                last: bytes | None = None
                for keys, values in chunks:
                    if len(keys) != len(values):
                        raise StoreWriteError(f"load_sorted into {self.path}: {len(keys)} keys but {len(values)} values")
                    last = self._check_ascending(keys, last)
                    out.add_raw(keys, values)
                files = out.finish()
            except BaseException:
                out.abort()
                raise
            return self._sealed(files)

        self._commit_base(version, write)
        return len(self._layers.base)

    def _adopt(self, items: SortedChunks, source: SourceFile, version: int | None, expected: int | None = None) -> int:
        """A base whose values file is ``source`` itself (a hard link to it where it is a file on
        this disk, else a copy of its bytes; its CRC-32 is the source's, checked by its reader),
        and whose keys file is made from the chunks' keys (their order checked): no value is
        read or written again. ``expected``: the entries the chunks must hold (``StoreError``,
        nothing changed, when they do not; None: any)."""
        def write(stem: str) -> list[_File]:
            # (a failure leaves no file: the commit removes the base's names it was given)
            last: bytes | None = None
            kept: list[pa.Array] = []
            for key_chunk, _ in items.chunks():
                key_chunk = binary_column(key_chunk, "keys")
                last = self._check_ascending(key_chunk, last)
                kept.append(key_chunk)
            if expected is not None and sum(map(len, kept)) != expected:
                raise StoreError(f"rebase of {self.path}: the file holds {sum(map(len, kept)):,} entries, the store "
                                 f"{expected:,}; a store is rebased only on a snapshot of its own current version")
            self._host.place(stem + DATA, source)
            size, crc = write_keys(os.path.join(self.path, stem + KEYS), kept, self._sync)
            return [(stem + DATA, source.data.size, source.crc), *self._sealed([(stem + KEYS, size, crc)])]

        self._commit_base(version, write)
        return len(self._layers.base)

    def _snapshot_follows(self) -> None:
        self._rebase_follows = True

    def _idle_work_follows(self) -> None:
        self._idle_merges = True

    def flush_idle(self) -> None:
        """The merge a write left for now (``idle_work_follows``): the runs that outgrew the base
        merged with it into a new base, at the same version, in the watcher's thread while the
        store waits for its next task (``streamjoin.statestore.warm``), off the tasks' path.
        The entries, the version and the history do not change."""
        self._check_open()
        if self._idle_merges and max(self._shares()) > 1:
            self._merge(self._layers, None)

    def _rebase(self, items: SortedChunks) -> bool:
        """The snapshot file of ``items`` as the base (``_adopt``), the runs and the delta
        dropped, where the runs hold at least ``REBASE_SHARE`` of what makes a merge (else the
        base's keys written again would cost more than the merge the runs are short of)."""
        if items.source is None or max(self._shares()) < REBASE_SHARE:
            return False
        coded = self._layers.base.made_codes is not None
        self._adopt(items, items.source, None, expected=len(self._layers))
        if coded:   # searched by codes as the base it replaces was, not as bytes until they pay again
            _ = self._layers.base.codes   # (made now)
        return True

    def _pair_chunks(self, items: Any) -> Iterator[tuple[pa.Array, pa.Array]]:
        """Pairs in ascending key order as chunks of binary columns (their types checked)."""
        keys: list[bytes] = []
        values: list[bytes] = []
        for key, value in ascending(items, self.path):
            keys.append(key)
            values.append(value)
            if len(keys) == 65536:
                check_entry_types(self.path, list(zip(keys, values)), (), ())
                yield pa.array(keys, pa.binary()), pa.array(values, pa.binary())
                keys, values = [], []
        check_entry_types(self.path, list(zip(keys, values)), (), ())
        if keys:
            yield pa.array(keys, pa.binary()), pa.array(values, pa.binary())

    def _check_ascending(self, keys: pa.Array, last: bytes | None) -> bytes | None:
        """``StoreError`` unless ``keys`` ascend strictly from ``last`` (the previous chunk's last
        key); this chunk's last key."""
        if not len(keys):
            return last
        first = keys[0].as_py()
        if last is not None and first <= last:
            raise StoreError(f"load_sorted into {self.path}: keys must be strictly ascending, but "
                             f"{first!r} follows {last!r}")
        out = np.flatnonzero(np.asarray(pc.less_equal(keys[1:], keys[:-1]))) if len(keys) > 1 else np.zeros(0, np.int64)
        if len(out):
            i = int(out[0]) + 1
            raise StoreError(f"load_sorted into {self.path}: keys must be strictly ascending, but "
                             f"{keys[i].as_py()!r} follows {keys[i - 1].as_py()!r}")
        return keys[len(keys) - 1].as_py()

    def _stem(self, kind: str) -> str:
        """The name of the next file of ``kind`` (without its suffix)."""
        stem = f"{kind}-{self._next:08d}"
        self._next += 1
        return stem

    def _commit(self, layers: Callable[[Sequence[_File]], Layers], version: int | None,
                make_files: Callable[[list[str]], list[_File]], run_entries: int) -> None:
        """Write the files ``make_files`` names, then the manifest of the new state, whose layers
        ``layers(files)`` gives: a write that sets a version keeps the state it replaces in the
        history. Nothing changes when it fails."""
        now, history = self._now, self._history
        if version is not None and now.version is not None:
            history = [*history, now][-max(HISTORY, self.history_depth):]
        written: list[str] = []
        try:
            files = make_files(written)
            state = layers(files)
            new = _State(now.version, now.owner, now.tag, tuple(files)) if version is None else \
                _State(version, self.stamp, self.tag, tuple(files))
            self._write_manifest(new, history)
        except BaseException as exc:
            for name in written:
                try:
                    self._host.remove(name)
                except OSError:
                    pass   # left for the next open, which removes files no manifest names
            if isinstance(exc, OSError):
                raise StoreWriteError(f"write to {self.path} failed, nothing applied: {exc}") from exc
            raise
        self._switch(new, history, state, run_entries)

    def _switch(self, new: _State, history: list[_State], layers: Layers, run_entries: int) -> None:
        """Make ``new`` the current state (its manifest written) and remove files nothing needs."""
        before = self._named()
        self._now, self._history, self._layers, self._run_entries = new, history, layers, run_entries
        for name in before - self._named():
            try:
                self._host.remove(name)
            except OSError:
                pass   # left for the next open, which removes files no manifest names

    # -- history ----------------------------------------------------------------------------------

    def roll_back(self, target: int) -> int | None:
        """Return to ``target`` when the history holds it (see ``Store.roll_back``)."""
        self._check_open()
        at = next((i for i, state in enumerate(self._history) if state.version == target), None)
        if at is None or self._now.version is None:
            return None
        state, undone = self._history[at], self._now.version - target
        try:
            layers, run_entries = self._read_state(state)
        except StoreCorruptError:
            return None   # a file of it is damaged: the caller rebuilds instead
        self._write_manifest(state, self._history[:at])
        self._switch(state, self._history[:at], layers, run_entries)
        return undone

    def applied_tag(self, version: int) -> int | None:
        self._check_open()
        return next((state.tag for state in (self._now, *self._history) if state.version == version), None)

    def forget_history(self) -> None:
        self._check_open()
        if self._history:
            self._write_manifest(self._now, [])
            self._switch(self._now, [], self._layers, self._run_entries)

    def _write_file(self, kind: str, table: pa.Table, written: list[str]) -> tuple[str, int, int]:
        """Write ``table`` as the next ``<kind>-<n>.arrow``; return its manifest entry."""
        name = self._stem(kind) + ".arrow"
        sink = pa.BufferOutputStream()
        with pa.ipc.new_file(sink, table.schema) as writer:
            writer.write_table(table)
        data = sink.getvalue()
        written.append(name)
        self._host.write(name, data)
        return name, data.size, crc32(data)

    def _place_file(self, kind: str, source: SourceFile, written: list[str]) -> tuple[str, int, int]:
        """``source`` as the next ``<kind>-<n>.arrow`` (``FileHost.keep``: on the directory host
        a hard link where it is a file on this disk, else a copy; in a database host's
        transaction as any run); return its manifest entry."""
        name = self._stem(kind) + ".arrow"
        written.append(name)
        self._host.keep(name, source)
        return name, source.data.size, source.crc

    def _write_manifest(self, state: _State, history: list[_State]) -> None:
        meta = {"format": _FORMAT, **state.fields(), "history": [h.fields() for h in history], "next": self._next}
        self._manifest_id = self._host.write_manifest(json.dumps(meta).encode())

    def _close(self) -> None:
        self._layers = Layers()
        try:
            self._host.close()
        finally:
            self._lock.release()

    def _os_error(self, what: str, exc: OSError) -> Exception:
        """A refusal of the operating system (disk full, no permission) as ``StoreIOError``,
        which keeps the store; anything else as damage."""
        number = exc.errno if exc.errno is not None and os_refusal(os.strerror(exc.errno)) else os_refusal(str(exc))
        if number is not None:
            return io_error(self.path, f"{what}: {exc}", number)
        return StoreCorruptError(corrupt_message(self.path, self.kind, f"{what}: {exc}"))

    @classmethod
    def destroy(cls, path: str) -> None:
        """Remove the store at ``path``; raises ``StoreLockedError`` while it is open."""
        remove_directory(str(path))


_File = tuple[str, int, int]   # a file of a state: name, size, CRC-32


@dataclass(frozen=True)
class _State:
    """One version of the store as the manifest records it: the files, in order, that make it."""

    version: int | None
    owner: bytes | None
    tag: int | None
    files: tuple[_File, ...]

    @classmethod
    def parse(cls, meta: dict[str, Any]) -> _State:
        return cls(meta["version"], None if meta["owner"] is None else bytes.fromhex(meta["owner"]), meta["tag"],
                   tuple((str(n), int(s), int(c)) for n, s, c in meta["files"]))

    def fields(self) -> dict[str, Any]:
        return {"version": self.version, "owner": None if self.owner is None else self.owner.hex(), "tag": self.tag,
                "files": [list(f) for f in self.files]}


def _applied_runs(layers: Layers, runs: Sequence[tuple[pa.Array, pa.Array]]) -> Layers:
    """``layers`` with ``runs`` (each a run's keys and values, null: a delete; no range deletes)
    applied in order, as one write: of a key in several runs only its last entry counts, as it
    would applied a run at a time. One merge into the delta, where a run at a time merged every
    run into a delta that grew with each (a store reopened after k runs paid k merges)."""
    if not runs:
        return layers
    if len(runs) == 1:
        keys, values = runs[0]
    else:
        keys = pa.concat_arrays([k for k, _ in runs])
        values = pa.concat_arrays([v for _, v in runs])
        last = pa.table({"key": keys, "at": pa.array(np.arange(len(keys)), pa.int64())}) \
            .group_by("key", use_threads=False).aggregate([("at", "max")]).column("at_max")
        taken = pa.array(np.sort(last.to_numpy()), pa.int64())
        keys, values = keys.take(taken), values.take(taken)
    valid = values.is_valid()
    return layers.applied_columns(keys.filter(valid), values.filter(valid), keys.filter(pc.invert(valid)))


def _run_columns(write: ColumnWrite, ranges: Sequence[tuple[bytes, bytes]] = ()) -> pa.Table:
    """A write as a run: its deletes (null values), then its puts; its range deletes in the metadata."""
    keys = pa.concat_arrays([write.delete_keys, write.put_keys]).cast(pa.large_binary())
    values = pa.concat_arrays([pa.nulls(len(write.delete_keys), pa.binary()), write.put_values]).cast(pa.large_binary())
    meta = {b"ranges": json.dumps([[s.hex(), e.hex()] for s, e in ranges]).encode() if ranges else b"[]"}
    return pa.table([keys, values], schema=_RUN_SCHEMA.with_metadata(meta))


def _run_columns_of(table: pa.Table) -> tuple[pa.Array, pa.Array, list[tuple[bytes, bytes]]]:
    """A run's keys and values (null: a delete) as binary columns, and its range deletes: those
    of its metadata (a run the store wrote), or its first rows whose ``op`` is 2 (a changelog
    delta taken as the run, ``ColumnWrite.file``)."""
    meta = table.schema.metadata or {}
    ranges = [(bytes.fromhex(s), bytes.fromhex(e)) for s, e in json.loads(meta.get(b"ranges", b"[]"))]
    keys = table.column("key").combine_chunks().cast(pa.binary())
    values = table.column("value").combine_chunks().cast(pa.binary())
    if "op" in table.column_names and table.num_rows:
        is_range = table.column("op").combine_chunks().to_numpy(zero_copy_only=False) == _RANGE_OP
        first = int(is_range.sum())
        if not is_range[:first].all():
            raise ValueError("a run's range deletes (op 2) are not all before its other rows")
        if first:
            ranges += list(zip(keys.slice(0, first).to_pylist(), values.slice(0, first).to_pylist()))
            keys, values = keys.slice(first), values.slice(first)
    return keys, values, ranges
