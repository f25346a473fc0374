"""The RocksDB backend, through rocksdict in raw-bytes mode.

Layout: the data lives in the default column family; the version marker lives under one key of a
second column family, ``meta``. A write is one ``WriteBatch`` spanning both families, and RocksDB
applies a batch atomically across families (the write-ahead log records it as one entry), so data
and marker never disagree, even after a crash. Keeping the marker out of the data family leaves
the whole key space to the caller.

Process model: the directory is owned by one handle at a time, through our ``flock``
(:mod:`streamjoin.statestore.locking`) and RocksDB's own ``LOCK`` file. Spark may run a partition in a
different Python worker next micro-batch, so the runtime opens the store when a task starts and
closes it when the task ends; an open that finds the store held raises
:class:`StoreLockedError` at once (or after ``lock_timeout`` seconds), never blocks or shares it.
The kernel drops both locks when a holder dies. Note that an unfinished ``scan`` iterator keeps
the underlying database alive after ``close()`` (rocksdict's reference counting), so finish or drop
iterators before closing.

Scans seek to ``start`` and let RocksDB stop at ``end`` (an iterator upper bound). Two rocksdict
0.3 defects are worked around in ``_scan``: its lower-bound setter sets the upper bound (so reverse
scans stop at ``start`` themselves), and its raw-mode read options point into the bound's bytes
without holding them (so the returned iterator holds the bound).

Bulk loads (``load_sorted``) write SST files into a scratch directory inside the store and ingest
them in one atomic step, so a failed load leaves the store empty.

Errors: an open that fails because the operating system refused the files (disk full, no
permission) raises :class:`StoreIOError` and leaves the store alone; any other failure to open
means the files are not a readable store (:class:`StoreCorruptError`). A read that meets damage
(RocksDB's block checksums) raises :class:`StoreCorruptError` and marks the directory damaged
(:func:`streamjoin.statestore.locking.mark_damaged`), so the next open rebuilds instead of reusing it.

Durability: writes go to the write-ahead log without an fsync (``sync=True`` adds one). A crash of
the process loses nothing; a crash of the machine may lose the latest writes, but RocksDB recovers
to a consistent earlier write, whose version marker says which one; the changelog replays the rest.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections import deque
from itertools import dropwhile, starmap, takewhile
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

import numpy as np
import pyarrow as pa
from rocksdict import (
    IngestExternalFileOptions,
    Options,
    Rdict,
    ReadOptions,
    SstFileWriter,
    WriteBatch,
    WriteOptions,
)

from streamjoin.statestore import options as check
from streamjoin.statestore.base import KeyValue, Store, StoreStats
from streamjoin.statestore.codecs import decode_int, encode_int
from streamjoin.statestore.errors import StoreCorruptError, StoreError, StoreLockedError, StoreWriteError
from streamjoin.statestore.keysort import sort_order
from streamjoin.statestore.locking import (
    DirectoryLock,
    corrupt_message,
    held_message,
    io_error,
    mark_damaged,
    os_refusal,
    prepare_directory,
    remove_directory,
    retry_locked,
)

__all__ = ["RocksDBStore"]

_META = "meta"
_VERSION_KEY = b"version"
_OWNER_KEY = b"owner"
#: Files every RocksDB database directory has; a non-empty directory without one is not ours.
_MARKERS = ("CURRENT", "IDENTITY")
#: A bulk load starts a new SST file once the current one reaches this size.
_SST_TARGET_BYTES = 64 << 20
#: ... checked every this many entries (file_size() is not free).
_SST_CHECK_EVERY = 16384
_DRAIN: Callable[[Iterable[object]], None] = deque[object](maxlen=0).extend  # consume an iterator at C speed


class RocksDBStore(Store):
    """A store in a RocksDB directory (see the module docstring for layout and locking).

    Options: ``lock_timeout`` (seconds to wait for a held store; default: fail at once),
    ``sync`` (fsync the write-ahead log on every write; default False).
    """

    kind = "rocksdb-kv"
    records_owner = True

    @classmethod
    def check_options(cls, options: Mapping[str, Any]) -> None:
        check.check_all(cls.kind, options, {"lock_timeout": check.seconds, "sync": check.flag})

    def __init__(self, path: str, *, lock_timeout: float | None = None, sync: bool = False) -> None:
        self.check_options({"lock_timeout": lock_timeout, "sync": sync})
        super().__init__(path)
        prepare_directory(self.path, self.kind, _MARKERS)
        self._lock = retry_locked(lambda: DirectoryLock.acquire(self.path), lock_timeout)
        try:
            self._db = retry_locked(lambda: _open_rdict(self.path), lock_timeout)
            self._meta = self._db.get_column_family_handle(_META)
            self._cached_version = _read_version(self._db, self.path)
            self._cached_owner = _read_meta(self._db, self.path, _OWNER_KEY)
        except BaseException:
            self._release_after_failed_open()
            raise
        self._write_options = WriteOptions()
        self._write_options.sync = sync

    def _release_after_failed_open(self) -> None:
        db = getattr(self, "_db", None)
        self._meta = None
        if db is not None:
            db.close()
        self._lock.release()

    # -- reads -----------------------------------------------------------------------------------

    def _get(self, key: bytes) -> bytes | None:
        try:
            return self._db.get(key)
        except Exception as exc:
            raise _read_error(self.path, exc) from exc

    def _multi_get(self, keys: Sequence[bytes]) -> list[bytes | None]:
        try:
            return self._db.get(keys if type(keys) is list else list(keys))
        except Exception as exc:
            raise _read_error(self.path, exc) from exc

    def _multi_get_column(self, keys: pa.Array) -> pa.Array:
        """Read in key order (the store's blocks in sequence), returned in the order asked."""
        if not len(keys):
            return pa.array([], pa.binary())
        order = sort_order(keys)
        values = pa.array(self._multi_get(keys.take(pa.array(order)).to_pylist()), pa.binary())
        back = np.empty(len(keys), np.int64)
        back[order] = np.arange(len(keys))
        return values.take(pa.array(back))

    def _scan(self, start: bytes | None, end: bytes | None, reverse: bool) -> Iterator[KeyValue]:
        # Two rocksdict 0.3 quirks shape this method:
        # - ReadOptions.set_iterate_lower_bound sets the *upper* bound, so no lower bound can be
        #   passed; reverse scans stop at ``start`` themselves.
        # - In raw mode the C read options point into the bound's ``bytes`` buffer without holding
        #   a reference, so the bound must outlive the iterator or RocksDB compares against freed
        #   memory (seen as truncated scans). A ``dropwhile`` holds ``end``: its predicate
        #   ``(end,) < (key, value)`` (iff end <= key) is false for the first key below the bound,
        #   so it runs once and then items pass straight through, in C.
        # Tuple comparisons keep the other bound tests in C too: ``(start,) <= (key, value)`` iff
        # start <= key.
        if reverse and start is not None and type(start) is not bytes:
            raise StoreError(f"scan of {self.path}: bounds must be bytes or None, got {start!r}")
        try:
            if reverse:
                items = self._db.items(backwards=True, from_key=end)  # last key <= end
                if end is not None:
                    items = dropwhile((end,).__le__, items)  # drops end itself
                items = items if start is None else takewhile((start,).__le__, items)
            elif end is None:
                items = self._db.items(from_key=start)
            else:
                options = ReadOptions()
                options.set_iterate_upper_bound(end)  # RocksDB stops at end (and skips tombstones)
                items = dropwhile((end,).__lt__, self._db.items(from_key=start, read_opt=options))
        except Exception as exc:
            raise _read_error(self.path, exc) from exc
        return self._checked(items, start, end, reverse)

    def _scan_ranges(self, ranges: Sequence[tuple[bytes | None, bytes | None]]) -> list[list[KeyValue]]:
        """One iterator for every range: seek to its start, step to its end."""
        out: list[list[KeyValue]] = []
        try:
            it = self._db.iter()
            valid, key, value, step = it.valid, it.key, it.value, it.next
            for start, end in ranges:
                it.seek_to_first() if start is None else it.seek(start)
                entries: list[KeyValue] = []
                while valid():
                    k = key()
                    if end is not None and k >= end:
                        break
                    entries.append((k, value()))
                    step()
                else:
                    it.status()  # the iterator ran out: raise the read error that ended it, if one did
                out.append(entries)
        except Exception as exc:
            raise _read_error(self.path, exc) from exc
        return out

    def _checked(
        self, items: Iterator[KeyValue], start: bytes | None, end: bytes | None, reverse: bool
    ) -> Iterator[KeyValue]:
        """Yield ``items``, then make sure they ended because the range did, not a read error.

        rocksdict's item iterators stop without a word when RocksDB meets a damaged block (a
        checksum mismatch), which would look like a shorter range. So when they run out, one
        iterator is positioned after the last item and asked for its status.
        """
        last = None
        try:
            for last in items:
                yield last
        except Exception as exc:
            raise _read_error(self.path, exc) from exc
        if self._db is None:
            return  # closed while iterating: nothing left to ask
        probe = self._db.iter()
        try:
            if last is not None:
                (probe.seek_for_prev if reverse else probe.seek)(last[0])
                if probe.valid():
                    probe.prev() if reverse else probe.next()
            elif reverse:
                probe.seek_to_last() if end is None else probe.seek_for_prev(end)
            else:
                probe.seek_to_first() if start is None else probe.seek(start)
            probe.status()  # raises the error that ended the items, if one did
        except Exception as exc:
            raise _read_error(self.path, exc) from exc
        finally:
            del probe

    def _version(self) -> int | None:
        return self._cached_version

    def _stats(self) -> StoreStats:
        prop = self._db.property_int_value
        try:
            entries = prop("rocksdb.estimate-num-keys") or 0
            size = (prop("rocksdb.estimate-live-data-size") or 0) + (
                prop("rocksdb.size-all-mem-tables") or 0
            )
        except Exception as exc:
            raise _read_error(self.path, exc) from exc
        return StoreStats(entries, size, exact=False)

    # -- writes ----------------------------------------------------------------------------------

    def _write(
        self,
        puts: Sequence[KeyValue],
        deletes: Sequence[bytes],
        delete_ranges: Sequence[tuple[bytes, bytes]],
        version: int | None,
    ) -> None:
        if not (puts or deletes or delete_ranges or version is not None):
            return
        batch = WriteBatch(raw_mode=True)
        try:  # building the batch applies nothing, so a bad entry fails the write cleanly
            for start, end in delete_ranges:
                _check_range(start, end)
                if start < end:  # RocksDB rejects an inverted range; an empty one is a no-op
                    batch.delete_range(start, end)
            if deletes:
                _DRAIN(map(batch.delete, deletes))
            if puts:
                _DRAIN(starmap(batch.put, puts))
            if version is not None:
                batch.put(_VERSION_KEY, encode_int(version), self._meta)
                if self.stamp is not None:
                    batch.put(_OWNER_KEY, self.stamp, self._meta)
                else:
                    batch.delete(_OWNER_KEY, self._meta)
        except Exception as exc:
            raise StoreWriteError(
                f"write to {self.path} rejected, nothing applied: keys, values and range bounds "
                f"must be bytes ({type(exc).__name__}: {exc})"
            ) from exc
        try:
            self._db.write(batch, self._write_options)
        except Exception as exc:
            raise StoreWriteError(f"write to {self.path} failed, nothing applied: {exc}") from exc
        if version is not None:
            self._cached_version, self._cached_owner = version, self.stamp

    def _owner(self) -> bytes | None:
        return self._cached_owner

    def _load_sorted(self, items: Iterable[KeyValue], version: int | None) -> int:
        """Write SST files into a scratch directory in the store, then ingest them all at once.

        Ingestion is atomic: if a key is out of order or anything fails, nothing is loaded.
        """
        scratch = tempfile.mkdtemp(prefix="load-", dir=self.path)
        try:
            files, count = _write_sst_files(items, scratch, self.path)
            if files:
                options = IngestExternalFileOptions()
                options.set_move_files(True)
                self._db.ingest_external_file(files, options)
        except StoreError:
            raise
        except Exception as exc:
            raise StoreError(f"load_sorted into {self.path} failed, nothing loaded: {exc}") from exc
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        if version is not None:
            self._write((), (), (), version)
        return count

    # -- lifecycle -------------------------------------------------------------------------------

    def flush_idle(self) -> None:
        """Write the memtables to table files (what closing does), for a store kept open between
        tasks (:mod:`streamjoin.statestore.warm`); the contents do not change."""
        self._check_open()
        try:
            self._db.flush(True)
        except Exception as exc:
            raise _read_error(self.path, exc) from exc

    def _close(self) -> None:
        db, self._db, self._meta = self._db, None, None  # drop the family handle: it pins the db
        try:
            db.close()
        except Exception as exc:
            raise StoreError(f"closing {self.path} failed: {exc}") from exc
        finally:
            self._lock.release()

    @classmethod
    def destroy(cls, path: str) -> None:
        """Remove the store at ``path``; raises :class:`StoreLockedError` while it is open."""
        remove_directory(str(path))


def _options() -> Options:
    options = Options(raw_mode=True)
    options.create_if_missing(True)
    options.create_missing_column_families(True)
    options.set_keep_log_file_num(2)  # every open rolls the info log; keep few of them
    # A partition's store is opened again whenever its task lands in another Python worker: the
    # default 16 threads to open its few table files made an open take about twice as long
    # (measured: 12 ms against 6 ms a reopen of a small store). The table files' statistics are
    # still read on open: without them the entry count (``stats().entries``, a join's
    # ``state_entries_estimate``) restarts from 0 after a reopen, so it would depend on which worker ran a task.
    options.set_max_file_opening_threads(1)
    return options


def _open_rdict(path: str) -> Rdict:
    try:
        return Rdict(path, _options(), column_families={_META: Options(raw_mode=True)})
    except Exception as exc:
        message = str(exc)
        if "lock" in message.lower() and (
            "temporarily unavailable" in message or "current process" in message
        ):
            raise StoreLockedError(held_message(path)) from exc
        if os_refusal(message) is not None:  # a full disk is not a damaged store: keep it
            raise io_error(path, message) from exc
        raise StoreCorruptError(corrupt_message(path, RocksDBStore.kind, message)) from exc


def _read_meta(db: Rdict, path: str, key: bytes) -> bytes | None:
    meta = db.get_column_family(_META)
    try:
        return meta.get(key)
    except Exception as exc:
        raise StoreCorruptError(corrupt_message(path, RocksDBStore.kind, str(exc))) from exc
    finally:
        del meta


def _read_version(db: Rdict, path: str) -> int | None:
    raw = _read_meta(db, path, _VERSION_KEY)
    if raw is None:
        return None
    if len(raw) != 8:
        raise StoreCorruptError(corrupt_message(path, RocksDBStore.kind, f"bad version marker {raw!r}"))
    return decode_int(raw)


def _write_sst_files(items: Iterable[KeyValue], directory: str, path: str) -> tuple[list[str], int]:
    """Write ``items`` into SST files of about :data:`_SST_TARGET_BYTES`; return them and a count."""
    files: list[str] = []
    writer: SstFileWriter | None = None
    count = 0
    previous: bytes | None = None
    for key, value in items:
        if writer is None:  # a new file: the writer checks order within a file, we check across
            if previous is not None and key <= previous:
                raise _load_error(path, key, previous, ValueError("strict ascending order"))
            writer = SstFileWriter(_options())
            files.append(os.path.join(directory, f"{len(files):06d}.sst"))
            writer.open(files[-1])
        try:
            writer[key] = value
        except Exception as exc:
            raise _load_error(path, key, previous, exc) from exc
        previous = key
        count += 1
        if count % _SST_CHECK_EVERY == 0 and writer.file_size() >= _SST_TARGET_BYTES:
            writer.finish()
            writer = None
    if writer is not None:
        writer.finish()
    return files, count


def _load_error(path: str, key: object, previous: bytes | None, exc: Exception) -> StoreError:
    if "ascending" in str(exc):
        return StoreError(
            f"load_sorted into {path}: keys must be strictly ascending, "
            f"but {key!r} follows {previous!r}; nothing was loaded"
        )
    return StoreError(f"load_sorted into {path}: bad entry for key {key!r} ({exc}); nothing was loaded")


def _check_range(start: object, end: object) -> None:
    if type(start) is not bytes or type(end) is not bytes:
        raise TypeError(f"a range delete needs (bytes, bytes), got ({start!r}, {end!r})")


def _read_error(path: str, exc: Exception) -> StoreError:
    if str(exc).startswith("Corruption:"):  # a block checksum mismatch, a torn table file
        return mark_damaged(path, RocksDBStore.kind, f"read failed: {exc}")
    return StoreError(f"read from {path} failed: {type(exc).__name__}: {exc}")
