"""The arranged backend: a store held in memory as an arrangement, kept on disk as immutable Arrow files.

Reads never touch a key-value library: the whole store is an
``streamjoin.statestore.arrangement.Arrangement`` in this process (sorted key columns and
their values), so a batch of point reads is one ``np.searchsorted`` and a batch of range reads
two, with no seek per key. Writes make a new arrangement (the old one is untouched until then)
and append the write as one Arrow file.

**Files** (all in the store directory):

* ``MANIFEST``: JSON naming the files that make the store, in order, with each file's size and
  CRC-32, the version marker, the owner tag and the write's tag (the changelog delta it applied),
  and the same for the newest previous versions (``HISTORY``, or the ``history_depth`` asked
  for). It is replaced atomically (written beside, then renamed) after the files it names are
  written, so a write is all there or not at all.
* ``base-<n>.arrow``: an arrangement's columns (``Arrangement.columns``: the fixed-width
  sorted keys too), read back through a memory map without a copy, an encoding or a sort.
* ``run-<n>.arrow``: one write: its deletes (a null value) and puts, its range deletes in the
  file's metadata. Opening applies the runs after the base, in order.

When the runs hold more than a quarter of the base's entries (or there are more than
``MAX_RUNS``), the current arrangement is written as a new base and the older files are
removed: the store's own compaction, as an LSM tree merges its runs. Files no manifest names (a
write that stopped before its manifest) are removed when the store opens.

**History**: a version's files are immutable, so the previous versions stay readable as long as
their files are kept: ``ArrangedStore.roll_back`` returns to one by reading its files and
writing its manifest again. That is how a changelogged arranged store undoes a version executed
again, with no undo records (``streamjoin.changelog.history``).

**Damage**: every file is checked against its CRC when the store opens. A mismatch, a missing or
unreadable file or manifest raises ``StoreCorruptError``, whose message says to remove the
directory: the changelog's open path then rebuilds the store.

**Durability**: ``sync=False`` (the default) writes files without fsync: a machine crash may
lose the latest writes or leave a file that fails its check, and the store is then rolled
forward or rebuilt from the changelog, which is the durable copy. ``sync=True`` fsyncs every
file and the manifest.

**Memory**: the state is held in this process. A base read at open is memory-mapped (the
operating system pages it); every write makes anonymous copies of the columns, so a store that
is written holds its state in memory. Size the executors' memory for the state of the partitions
a Python worker holds (``STREAMJOIN_WARM_STORES`` at most, kept warm between tasks).

Process model and locking are those of the other disk backends (``streamjoin.statestore.locking``).
"""

from __future__ import annotations

import json
import os
import zlib
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence

import numpy as np
import pyarrow as pa

from streamjoin.statestore import options as check
from streamjoin.statestore.arrangement import Arrangement, ekeys_of, encode_keys
from streamjoin.statestore.base import KeyValue, Store, StoreStats, ascending, check_entry_types
from streamjoin.statestore.chunks import SortedChunks
from streamjoin.statestore.columns import ColumnWrite, PrefixScan, binary_column
from streamjoin.statestore.errors import StoreCorruptError, StoreError, StoreWriteError
from streamjoin.statestore.locking import (
    DirectoryLock,
    corrupt_message,
    io_error,
    os_refusal,
    prepare_directory,
    remove_directory,
    retry_locked,
)

__all__ = ["ArrangedStore", "MAX_RUNS", "HISTORY"]

MANIFEST = "MANIFEST"
_FORMAT = "arranged-1"
#: Runs kept beside a base at most before they are merged into a new one.
MAX_RUNS = 32
#: Previous versions a store keeps to return to (``ArrangedStore.roll_back``).
HISTORY = 2
_RUN_SCHEMA = pa.schema([("key", pa.large_binary()), ("value", pa.large_binary())])
_SCAN_CHUNK = 65536


class ArrangedStore(Store):
    """A store held as an arrangement in memory, on disk as a manifest of Arrow files (see module).

    Options: ``lock_timeout`` (seconds to wait for a held store; default: fail at once), ``sync``
    (fsync every file; default False).
    """

    kind = "arranged"
    records_owner = True
    keeps_history = True

    def __init__(self, path: str, *, lock_timeout: float | None = None, sync: bool = False) -> None:
        lock_timeout = check.seconds(self.kind, "lock_timeout", lock_timeout)
        self._sync = check.flag(self.kind, "sync", sync)
        super().__init__(path)
        prepare_directory(self.path, self.kind, (MANIFEST,))
        self._lock = retry_locked(lambda: DirectoryLock.acquire(self.path), lock_timeout)
        try:
            self._load()
        except BaseException:
            self._lock.release()
            raise

    # -- opening ----------------------------------------------------------------------------------

    def _load(self) -> None:
        """Read the manifest and its files (or start empty), and remove files it does not name."""
        self._now = _State(None, None, None, ())
        self._history: list[_State] = []
        self._next = 0
        self._arr, self._run_entries = Arrangement.empty(), 0
        manifest = os.path.join(self.path, MANIFEST)
        try:
            raw: bytes | None = _read_bytes(manifest)
        except FileNotFoundError:
            raw = None
        except OSError as exc:
            raise self._os_error(f"reading {manifest}", exc) from exc
        if raw is not None:
            try:
                meta = json.loads(raw)
                if meta.get("format") != _FORMAT:
                    raise ValueError(f"unknown format {meta.get('format')!r}")
                self._now = _State.parse(meta)
                self._history = [_State.parse(h) for h in meta["history"]]
                self._next = int(meta["next"])
            except (ValueError, KeyError, TypeError) as exc:
                raise StoreCorruptError(corrupt_message(self.path, self.kind, f"its manifest is unreadable: {exc}")) from exc
            self._arr, self._run_entries = self._read_state(self._now)
        self._manifest_id = _identity(manifest)
        named = self._named()
        for entry in os.listdir(self.path):
            if entry.endswith(".arrow") and entry not in named:
                _remove(os.path.join(self.path, entry))

    def _named(self) -> set[str]:
        """The files the current state and the history need."""
        return {name for state in (self._now, *self._history) for name, _, _ in state.files}

    def _read_state(self, state: _State) -> tuple[Arrangement, int]:
        """The arrangement of ``state``'s files, and how many entries its runs hold."""
        arr, run_entries = Arrangement.empty(), 0
        for name, size, crc in state.files:
            table = self._read_file(name, size, crc)
            if name.startswith("base-"):
                arr = Arrangement.from_columns(ekeys_of(table.column("ekey")), table.column("value").combine_chunks())
                run_entries = 0
            else:
                puts, deletes, ranges = _run_contents(table)
                arr = arr.applied(puts, deletes, ranges)
                run_entries += table.num_rows + len(ranges)
        return arr, run_entries

    def _read_file(self, name: str, size: int, crc: int) -> pa.Table:
        path = os.path.join(self.path, name)
        try:
            data = _read_bytes(path)
        except FileNotFoundError:
            raise StoreCorruptError(corrupt_message(self.path, self.kind, f"{name}, named by its manifest, is missing")) from None
        except OSError as exc:
            raise self._os_error(f"reading {path}", exc) from exc
        if len(data) != size:
            raise StoreCorruptError(corrupt_message(
                self.path, self.kind, f"{name} has {len(data)} bytes, its manifest says {size}"))
        if zlib.crc32(data) != crc:
            raise StoreCorruptError(corrupt_message(self.path, self.kind, f"{name} fails its checksum"))
        try:
            return pa.ipc.open_file(pa.py_buffer(data)).read_all()
        except (pa.ArrowInvalid, OSError) as exc:
            raise StoreCorruptError(corrupt_message(self.path, self.kind, f"{name} is unreadable: {exc}")) from exc

    # -- reads ------------------------------------------------------------------------------------

    def _get(self, key: bytes) -> bytes | None:
        return self._multi_get([key])[0]

    def _multi_get(self, keys: Sequence[bytes]) -> list[bytes | None]:
        if keys and {*map(type, keys)} != {bytes}:
            raise StoreError(f"read of {self.path}: keys must be bytes, got {next(k for k in keys if type(k) is not bytes)!r}")
        return self._arr.get_many(keys)

    def _scan(self, start: bytes | None, end: bytes | None, reverse: bool) -> Iterator[KeyValue]:
        for bound in (start, end):
            if bound is not None and type(bound) is not bytes:
                raise StoreError(f"scan of {self.path}: bounds must be bytes or None, got {bound!r}")
        arr = self._arr   # a write replaces it: an open scan keeps reading the state it began on
        (lo,), (hi,) = arr.bounds([(start, end)])
        return _chunks(arr, int(lo), int(hi), reverse)

    def _scan_ranges(self, ranges: Sequence[tuple[bytes | None, bytes | None]]) -> list[list[KeyValue]]:
        return self._arr.scan_ranges(ranges)

    def _scan_prefixes(self, prefixes: Sequence[bytes]) -> list[list[KeyValue]]:
        return self._arr.scan_prefixes(prefixes)

    def _multi_get_column(self, keys: pa.Array) -> pa.Array:
        return self._arr.get_column(keys)

    def _scan_prefixes_columns(self, prefixes: pa.Array) -> PrefixScan:
        return PrefixScan(*self._arr.scan_prefix_columns(prefixes))

    def _version(self) -> int | None:
        return self._now.version

    def _owner(self) -> bytes | None:
        return self._now.owner

    def _stats(self) -> StoreStats:
        return StoreStats(len(self._arr), self._arr.nbytes, exact=True)

    def _check_files(self) -> None:
        """The manifest is the one this store last wrote or read (not replaced or removed under it)."""
        if _identity(os.path.join(self.path, MANIFEST)) != self._manifest_id:
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
        arr = self._arr.applied(puts, deletes, delete_ranges)
        entries = len(puts) + len(deletes) + len(delete_ranges)
        self._commit_write(arr, entries, version, lambda: _run_table(puts, deletes, delete_ranges))

    def _commit_write(self, arr: Arrangement, entries: int, version: int | None, run: Callable[[], pa.Table]) -> None:
        """Commit ``arr``, the state after a write of ``entries`` entries: as a run (the table
        ``run()`` makes) beside the current files, or as a new base once the runs outgrow it."""
        if arr is self._arr and not entries and version is None:
            return
        files = list(self._now.files)
        if self._run_entries + entries > max(len(arr) // 4, 4096) or len(files) > MAX_RUNS:
            self._commit(arr, version, lambda written: [self._write_file("base", arr.columns(), written)], 0)
        else:
            self._commit(arr, version, lambda written: [*files, self._write_file("run", run(), written)],
                         self._run_entries + entries)

    def _write_columns(self, write: ColumnWrite, version: int | None) -> None:
        """``_write`` of columns: the arrangement and the run are built from them, no list between."""
        arr = self._arr.applied_columns(write.put_keys, write.put_values, write.delete_keys)
        self._commit_write(arr, write.entries, version, lambda: _run_columns(write))

    def _load_sorted(self, items: Any, version: int | None) -> int:
        """One base file of the ascending ``items`` (the restore path): a restore's Arrow chunks
        (``SortedChunks``) are taken as columns, their order checked in numpy."""
        if isinstance(items, SortedChunks):
            arr = self._arranged_chunks(items)
        else:
            keys: list[bytes] = []
            values: list[bytes] = []
            for key, value in ascending(items, self.path):
                keys.append(key)
                values.append(value)
            check_entry_types(self.path, list(zip(keys, values)), (), ())
            arr = Arrangement.from_sorted(keys, values)
        self._commit(arr, version, lambda written: [self._write_file("base", arr.columns(), written)], 0)
        return len(arr)

    def _arranged_chunks(self, items: SortedChunks) -> Arrangement:
        """The arrangement of a restore's chunks; ``StoreError`` when the keys are not strictly
        ascending, ``StoreWriteError`` when a chunk is not bytes."""
        pieces = list(items.chunks())
        keys, values = (pa.concat_arrays([pa.array([], pa.large_binary()), *(
            binary_column(chunk[i], what).cast(pa.large_binary()) for chunk in pieces)])
            for i, what in ((0, "keys"), (1, "values")))
        if len(keys) != len(values):
            raise StoreWriteError(f"load_sorted into {self.path}: {len(keys)} keys but {len(values)} values")
        ekeys = encode_keys(keys)
        if len(ekeys) > 1:
            out = np.flatnonzero(ekeys[1:] <= ekeys[:-1])
            if len(out):
                i = int(out[0]) + 1
                raise StoreError(f"load_sorted into {self.path}: keys must be strictly ascending, but "
                                 f"{keys[i].as_py()!r} follows {keys[i - 1].as_py()!r}")
        return Arrangement.from_columns(ekeys, values)

    def _commit(self, arr: Arrangement, version: int | None, make_files: Callable[[list[str]], list[_File]],
                run_entries: int) -> None:
        """Write the files ``make_files`` names, then the manifest of the new state: a write that
        sets a version keeps the state it replaces in the history. Nothing changes when it fails."""
        now, history = self._now, self._history
        if version is not None and now.version is not None:
            history = [*history, now][-max(HISTORY, self.history_depth):]
        written: list[str] = []
        try:
            files = make_files(written)
            new = _State(now.version, now.owner, now.tag, tuple(files)) if version is None else \
                _State(version, self.stamp, self.tag, tuple(files))
            self._write_manifest(new, history)
        except BaseException as exc:
            for name in written:
                _remove(os.path.join(self.path, name))
            if isinstance(exc, OSError):
                raise StoreWriteError(f"write to {self.path} failed, nothing applied: {exc}") from exc
            raise
        self._switch(new, history, arr, run_entries)

    def _switch(self, new: _State, history: list[_State], arr: Arrangement, run_entries: int) -> None:
        """Make ``new`` the current state (its manifest written) and remove files nothing needs."""
        before = self._named()
        self._now, self._history, self._arr, self._run_entries = new, history, arr, run_entries
        for name in before - self._named():
            _remove(os.path.join(self.path, name))

    # -- history ----------------------------------------------------------------------------------

    def roll_back(self, target: int) -> int | None:
        """Return to ``target`` when the history holds it (see ``Store.roll_back``)."""
        self._check_open()
        at = next((i for i, state in enumerate(self._history) if state.version == target), None)
        if at is None or self._now.version is None:
            return None
        state, undone = self._history[at], self._now.version - target
        try:
            arr, run_entries = self._read_state(state)
        except StoreCorruptError:
            return None   # a file of it is damaged: the caller rebuilds instead
        self._write_manifest(state, self._history[:at])
        self._switch(state, self._history[:at], arr, run_entries)
        return undone

    def applied_tag(self, version: int) -> int | None:
        self._check_open()
        return next((state.tag for state in (self._now, *self._history) if state.version == version), None)

    def forget_history(self) -> None:
        self._check_open()
        if self._history:
            self._write_manifest(self._now, [])
            self._switch(self._now, [], self._arr, self._run_entries)

    def _write_file(self, kind: str, table: pa.Table, written: list[str]) -> tuple[str, int, int]:
        """Write ``table`` as the next ``<kind>-<n>.arrow``; return its manifest entry."""
        name = f"{kind}-{self._next:08d}.arrow"
        self._next += 1
        sink = pa.BufferOutputStream()
        with pa.ipc.new_file(sink, table.schema) as writer:
            writer.write_table(table)
        data = sink.getvalue()
        written.append(name)
        _write_bytes(os.path.join(self.path, name), data, self._sync)
        return name, data.size, zlib.crc32(data)

    def _write_manifest(self, state: _State, history: list[_State]) -> None:
        meta = {"format": _FORMAT, **state.fields(), "history": [h.fields() for h in history], "next": self._next}
        target = os.path.join(self.path, MANIFEST)
        _write_bytes(target + ".new", json.dumps(meta).encode(), self._sync)
        os.replace(target + ".new", target)
        self._manifest_id = _identity(target)

    def _close(self) -> None:
        self._arr = Arrangement.empty()
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


def _chunks(arr: Arrangement, lo: int, hi: int, reverse: bool) -> Iterator[KeyValue]:
    """The entries at ``lo`` to ``hi`` of ``arr``, a chunk at a time."""
    if not reverse:
        for at in range(lo, hi, _SCAN_CHUNK):
            yield from arr.entries(at, min(at + _SCAN_CHUNK, hi))
        return
    for at in range(hi, lo, -_SCAN_CHUNK):
        yield from reversed(arr.entries(max(at - _SCAN_CHUNK, lo), at))


def _run_table(puts: Sequence[KeyValue], deletes: Sequence[bytes], ranges: Sequence[tuple[bytes, bytes]]) -> pa.Table:
    """A write as a run: deletes (null values), then puts; range deletes in the metadata."""
    keys = [*deletes, *(k for k, _ in puts)]
    values = [*(None for _ in deletes), *(v for _, v in puts)]
    meta = {b"ranges": json.dumps([[s.hex(), e.hex()] for s, e in ranges]).encode()}
    return pa.table([pa.array(keys, pa.large_binary()), pa.array(values, pa.large_binary())],
                    schema=_RUN_SCHEMA.with_metadata(meta))


def _run_columns(write: ColumnWrite) -> pa.Table:
    """A column write as a run (as ``_run_table`` lays out a write, without range deletes)."""
    keys = pa.concat_arrays([write.delete_keys, write.put_keys]).cast(pa.large_binary())
    values = pa.concat_arrays([pa.nulls(len(write.delete_keys), pa.binary()), write.put_values]).cast(pa.large_binary())
    return pa.table([keys, values], schema=_RUN_SCHEMA.with_metadata({b"ranges": b"[]"}))


def _run_contents(table: pa.Table) -> tuple[list[KeyValue], list[bytes], list[tuple[bytes, bytes]]]:
    meta = table.schema.metadata or {}
    ranges = [(bytes.fromhex(s), bytes.fromhex(e)) for s, e in json.loads(meta.get(b"ranges", b"[]"))]
    keys = table.column("key").to_pylist()
    values = table.column("value").to_pylist()
    deletes = [k for k, v in zip(keys, values) if v is None]
    puts = [(k, v) for k, v in zip(keys, values) if v is not None]
    return puts, deletes, ranges


def _read_bytes(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _write_bytes(path: str, data: Any, sync: bool) -> None:
    with open(path, "wb") as f:
        f.write(memoryview(data))
        if sync:
            f.flush()
            os.fsync(f.fileno())


def _identity(path: str) -> tuple[int, int] | None:
    try:
        found = os.stat(path)
    except FileNotFoundError:
        return None
    return found.st_dev, found.st_ino


def _remove(path: str) -> None:
    try:
        os.remove(path)
    except FileNotFoundError:
        pass

