"""The arranged backend: a store held in memory as an arrangement, kept on disk as immutable Arrow files.

Reads never touch a key-value library: the whole store is an
:class:`~streamjoin.statestore.arrangement.Arrangement` in this process (sorted key columns and
their values), so a batch of point reads is one ``np.searchsorted`` and a batch of range reads
two, with no seek per key. Writes make a new arrangement (the old one is untouched until then)
and append the write as one Arrow file.

**Files** (all in the store directory):

* ``MANIFEST``: JSON naming the files that make the store, in order, with each file's size and
  CRC-32, the version marker and the owner tag. It is replaced atomically (written beside, then
  renamed) after the files it names are written, so a write is all there or not at all.
* ``base-<n>.arrow``: an arrangement's columns (:meth:`Arrangement.columns`: the fixed-width
  sorted keys too), read back through a memory map without a copy, an encoding or a sort.
* ``run-<n>.arrow``: one write: its deletes (a null value) and puts, its range deletes in the
  file's metadata. Opening applies the runs after the base, in order.

When the runs hold more than a quarter of the base's entries (or there are more than
:data:`MAX_RUNS`), the current arrangement is written as a new base and the older files are
removed: the store's own compaction, as an LSM tree merges its runs. Files no manifest names (a
write that stopped before its manifest) are removed when the store opens.

**Damage**: every file is checked against its CRC when the store opens. A mismatch, a missing or
unreadable file or manifest raises :class:`StoreCorruptError`, whose message says to remove the
directory: the changelog's open path then rebuilds the store.

**Durability**: ``sync=False`` (the default) writes files without fsync: a machine crash may
lose the latest writes or leave a file that fails its check, and the store is then rolled
forward or rebuilt from the changelog, which is the durable copy. ``sync=True`` fsyncs every
file and the manifest.

**Memory**: the state is held in this process. A base read at open is memory-mapped (the
operating system pages it); every write makes anonymous copies of the columns, so a store that
is written holds its state in memory. Size the executors' memory for the state of the partitions
a Python worker holds (``STREAMJOIN_WARM_STORES`` at most, kept warm between tasks).

Process model and locking are those of the other disk backends (:mod:`streamjoin.statestore.locking`).
"""

from __future__ import annotations

import json
import os
import zlib
from typing import Any, Iterator, Sequence

import pyarrow as pa

from streamjoin.statestore import options as check
from streamjoin.statestore.arrangement import Arrangement, ekeys_of
from streamjoin.statestore.base import KeyValue, Store, StoreStats, ascending, check_entry_types
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

__all__ = ["ArrangedStore", "MAX_RUNS"]

MANIFEST = "MANIFEST"
_FORMAT = "arranged-1"
#: Runs kept beside a base at most before they are merged into a new one.
MAX_RUNS = 32
_RUN_SCHEMA = pa.schema([("key", pa.large_binary()), ("value", pa.large_binary())])
_SCAN_CHUNK = 65536


class ArrangedStore(Store):
    """A store held as an arrangement in memory, on disk as a manifest of Arrow files (see module).

    Options: ``lock_timeout`` (seconds to wait for a held store; default: fail at once), ``sync``
    (fsync every file; default False).
    """

    kind = "arranged"
    records_owner = True

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
        self._files: list[tuple[str, int, int]] = []
        self._next = 0
        self._version_marker: int | None = None
        self._owner_tag: bytes | None = None
        self._arr = Arrangement.empty()
        self._run_entries = 0
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
                self._files = [(str(n), int(s), int(c)) for n, s, c in meta["files"]]
                self._next = int(meta["next"])
                self._version_marker = meta["version"]
                self._owner_tag = None if meta["owner"] is None else bytes.fromhex(meta["owner"])
            except (ValueError, KeyError, TypeError) as exc:
                raise StoreCorruptError(corrupt_message(self.path, self.kind, f"its manifest is unreadable: {exc}")) from exc
            for name, size, crc in self._files:
                self._read_file(name, size, crc)
        self._manifest_id = _identity(manifest)
        named = {n for n, _, _ in self._files}
        for entry in os.listdir(self.path):
            if entry.endswith(".arrow") and entry not in named:
                _remove(os.path.join(self.path, entry))

    def _read_file(self, name: str, size: int, crc: int) -> None:
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
            table = pa.ipc.open_file(pa.py_buffer(data)).read_all()
        except (pa.ArrowInvalid, OSError) as exc:
            raise StoreCorruptError(corrupt_message(self.path, self.kind, f"{name} is unreadable: {exc}")) from exc
        if name.startswith("base-"):
            self._arr = Arrangement.from_columns(ekeys_of(table.column("ekey").combine_chunks()),
                                                 table.column("key").combine_chunks(),
                                                 table.column("value").combine_chunks())
            self._run_entries = 0
        else:
            puts, deletes, ranges = _run_contents(table)
            self._arr = self._arr.applied(puts, deletes, ranges)
            self._run_entries += table.num_rows + len(ranges)

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

    def _version(self) -> int | None:
        return self._version_marker

    def _owner(self) -> bytes | None:
        return self._owner_tag

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
        if arr is self._arr and not entries and version is None:
            return
        files = list(self._files)
        written: list[str] = []
        try:
            if self._run_entries + entries > max(len(arr) // 4, 4096) or len(files) > MAX_RUNS:
                files, run_entries = [self._write_file("base", arr.columns(), written)], 0
            else:
                files.append(self._write_file("run", _run_table(puts, deletes, delete_ranges), written))
                run_entries = self._run_entries + entries
            owner = self.stamp if version is not None else self._owner_tag
            marker = version if version is not None else self._version_marker
            self._write_manifest(files, marker, owner)
        except BaseException as exc:
            for name in written:
                _remove(os.path.join(self.path, name))
            if isinstance(exc, OSError):
                raise StoreWriteError(f"write to {self.path} failed, nothing applied: {exc}") from exc
            raise
        dropped = {n for n, _, _ in self._files} - {n for n, _, _ in files}
        self._arr, self._files, self._run_entries = arr, files, run_entries
        self._version_marker, self._owner_tag = marker, owner
        for name in dropped:
            _remove(os.path.join(self.path, name))

    def _load_sorted(self, items: Any, version: int | None) -> int:
        """One base file of the ascending ``items`` (the restore path)."""
        keys: list[bytes] = []
        values: list[bytes] = []
        for key, value in ascending(items, self.path):
            keys.append(key)
            values.append(value)
        check_entry_types(self.path, list(zip(keys, values)), (), ())
        arr = Arrangement.from_sorted(keys, values)
        written: list[str] = []
        try:
            files = [self._write_file("base", arr.columns(), written)]
            owner = self.stamp if version is not None else self._owner_tag
            marker = version if version is not None else self._version_marker
            self._write_manifest(files, marker, owner)
        except OSError as exc:
            for name in written:
                _remove(os.path.join(self.path, name))
            raise StoreWriteError(f"bulk load into {self.path} failed, nothing applied: {exc}") from exc
        dropped = {n for n, _, _ in self._files}
        self._arr, self._files, self._run_entries = arr, files, 0
        self._version_marker, self._owner_tag = marker, owner
        for name in dropped:
            _remove(os.path.join(self.path, name))
        return len(keys)

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

    def _write_manifest(self, files: list[tuple[str, int, int]], version: int | None, owner: bytes | None) -> None:
        meta = {"format": _FORMAT, "files": [list(f) for f in files], "next": self._next, "version": version,
                "owner": None if owner is None else owner.hex()}
        target = os.path.join(self.path, MANIFEST)
        _write_bytes(target + ".new", json.dumps(meta).encode(), self._sync)
        os.replace(target + ".new", target)
        self._manifest_id = _identity(target)

    def _close(self) -> None:
        self._arr = Arrangement.empty()
        self._lock.release()

    def _os_error(self, what: str, exc: OSError) -> Exception:
        """A refusal of the operating system (disk full, no permission) as :class:`StoreIOError`,
        which keeps the store; anything else as damage."""
        number = exc.errno if exc.errno is not None and os_refusal(os.strerror(exc.errno)) else os_refusal(str(exc))
        if number is not None:
            return io_error(self.path, f"{what}: {exc}", number)
        return StoreCorruptError(corrupt_message(self.path, self.kind, f"{what}: {exc}"))

    @classmethod
    def destroy(cls, path: str) -> None:
        """Remove the store at ``path``; raises :class:`StoreLockedError` while it is open."""
        remove_directory(str(path))


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

