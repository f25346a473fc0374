"""The LMDB backend, through py-lmdb.

Layout: one environment per store directory with three named databases, all written in one write
transaction per ``write`` (so entries and marker commit together or not at all):

* ``data``: every entry whose key is 1 to :data:`~streamjoin.statestore.lmdb_layout.SHORT_MAX` (480) bytes,
  under its own key;
* ``long``: entries with longer keys (LMDB itself refuses keys over 511 bytes). The record under
  a 480-byte prefix holds every stored key that starts with it, as sorted ``(suffix, value)``
  pairs. A long key sorts right after its 480-byte prefix and before every other key of 480
  bytes or fewer that is greater than the prefix, so a scan merges the two sorted streams
  (``heapq.merge``) and keeps the contract's byte order. Writing one long key rewrites the
  record of its prefix: keys that agree over their first 480 bytes by the thousands are slow;
* ``meta``: the version marker, the format tag, and the entry of the empty key ``b""`` (a
  reserved slot, since LMDB refuses empty keys); the empty key sorts before every other key.

Checksums: every record is stored as ``crc32(key, value)`` then the value
(:mod:`streamjoin.statestore.lmdb_layout`), and every read (``get``, ``multi_get``, scans, and the records a
write has to read) verifies it. LMDB has no checksums of its own, so this is what turns a flipped
bit in the data file into an error instead of a wrong result. A mismatch, or LMDB reporting a
corrupted page, raises :class:`StoreCorruptError` and marks the directory damaged
(:func:`streamjoin.statestore.locking.mark_damaged`): the task fails, and the next open refuses the store,
so the changelog's open path rebuilds it rather than reusing it. Damage in records that are never
read is not found; a store written before checksums (no format tag) is refused as corrupt at open
and rebuilt the same way. A bulk load of :class:`~streamjoin.statestore.chunks.SortedChunks` (a
restore) writes the same records, sealed a chunk at a time in C rather than one by one.

Map size: LMDB needs an upper bound on the file size up front. The store starts with a modest map
(``map_size``, 64 MiB by default) and, when a write finds it full, aborts the transaction, doubles
the map and runs the whole write again, so a large state never fails with "map full". The map is
virtual address space; the file only grows with the data.

Process model: LMDB itself lets several processes share an environment, but a store has one owner,
so the store takes an exclusive ``flock`` (:mod:`streamjoin.statestore.locking`) before opening the
environment. A second open of the same path, from another process or this one, raises
:class:`StoreLockedError` at once (or after ``lock_timeout`` seconds), never blocks. The kernel
drops the lock when the holder dies. Spark may run a partition in a different Python worker next
micro-batch, so the runtime opens the store when a task starts and closes it when the task ends.

Reads: point reads share one read transaction that is renewed after every write, so ``get`` costs
one lookup; each ``scan`` has its own read transaction, released when the iterator is exhausted or
dropped. A scan that is still open when the map grows is invalidated and raises
:class:`StoreError`; as the contract says, do not write while iterating.

Durability: by default each commit fsyncs the data but not the meta page (LMDB's ``metasync=False``):
a machine crash may undo the last commit but never leaves a torn store. ``sync=False`` drops the
fsync (a machine crash may then corrupt the store; the corrupt-store error says to remove it).
"""

from __future__ import annotations

import bisect
import heapq
import os
import resource
from collections import deque
from itertools import chain, islice
from operator import itemgetter
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence, TypeVar

import lmdb

from streamjoin.statestore import options as check
from streamjoin.statestore.base import KeyValue, Store, StoreStats
from streamjoin.statestore.chunks import Chunk, SortedChunks
from streamjoin.statestore.codecs import decode_int, encode_int
from streamjoin.statestore.errors import StoreCorruptError, StoreError, StoreTruncatedError, StoreWriteError
from streamjoin.statestore.lmdb_layout import (
    EMPTY_KEY,
    SHORT_MAX,
    Damaged,
    Loader,
    Prepared,
    all_short,
    decode_bucket,
    encode_bucket,
    long_items,
    seal,
    sealed,
    short_items,
    unseal,
    unseal_many,
)
from streamjoin.statestore.locking import (
    DirectoryLock,
    corrupt_message,
    io_error,
    mark_damaged,
    os_refusal,
    prepare_directory,
    remove_directory,
    retry_locked,
)

__all__ = ["LMDBStore"]

_DATA, _META, _LONG = b"data", b"meta", b"long"
_VERSION_KEY, _FORMAT_KEY, _OWNER_KEY = b"version", b"format", b"owner"
_FORMAT = b"checksummed-1"
_MARKERS = ("data.mdb",)
_INITIAL_MAP = 64 << 20
_MAX_MAP = 1 << 40
_LOAD_CHUNK = 65536
_DRAIN: Callable[[Iterable[object]], None] = deque[object](maxlen=0).extend  # consume an iterator at C speed
_KEY = itemgetter(0)
#: LMDB errors that mean the file's pages are damaged (others are misuse or the OS refusing).
_DAMAGE = (lmdb.CorruptedError, lmdb.PageNotFoundError, lmdb.BadChecksumError, lmdb.PanicError)
T = TypeVar("T")


def _data_file(path: str) -> tuple[int, int, int]:
    """data.mdb's device, inode and size ((0, 0, 0) when missing); refuses a file cut below
    LMDB's two meta pages before LMDB maps it."""
    try:
        found = os.stat(os.path.join(path, "data.mdb"))
    except FileNotFoundError:
        return 0, 0, 0
    if 0 < found.st_size < 2 * resource.getpagesize():
        raise StoreTruncatedError(corrupt_message(
            path, "lmdb-kv", f"data.mdb is truncated to {found.st_size} bytes, shorter than its meta pages"))
    return found.st_dev, found.st_ino, found.st_size


class LMDBStore(Store):
    """A store in an LMDB environment directory (see the module docstring).

    Options: ``map_size`` (initial map size in bytes), ``lock_timeout`` (seconds to wait for a
    held store; default: fail at once), ``sync`` (fsync each commit; default True).
    """

    kind = "lmdb-kv"
    records_owner = True

    @classmethod
    def check_options(cls, options: Mapping[str, Any]) -> None:
        check.check_all(cls.kind, options, {"map_size": lambda kind, name, value: check.size(kind, name, value, _MAX_MAP),
                                            "lock_timeout": check.seconds, "sync": check.flag})

    def __init__(
        self,
        path: str,
        *,
        map_size: int = _INITIAL_MAP,
        lock_timeout: float | None = None,
        sync: bool = True,
    ) -> None:
        self.check_options({"map_size": map_size, "lock_timeout": lock_timeout, "sync": sync})
        super().__init__(path)
        prepare_directory(self.path, self.kind, _MARKERS)
        self._lock = retry_locked(lambda: DirectoryLock.acquire(self.path), lock_timeout)
        try:
            _data_file(self.path)
            self._env = lmdb.open(
                self.path, map_size=map_size, max_dbs=3, sync=sync, metasync=False,
                readahead=False, max_spare_txns=2,
            )
            self._file = _data_file(self.path)
            self._psize = self._env.stat()["psize"]
            self._check_size()
            self._data = self._env.open_db(_DATA)
            self._meta = self._env.open_db(_META)
            self._long = self._env.open_db(_LONG)
            self._check_format()
            self._reader = self._env.begin(db=self._data)
            self._cached_version = self._read_version()
        except lmdb.Error as exc:
            self._release_after_failed_open()
            if os_refusal(str(exc)) is not None:  # a full disk is not a damaged store: keep it
                raise io_error(self.path, str(exc)) from exc
            raise StoreCorruptError(corrupt_message(self.path, self.kind, str(exc))) from exc
        except Damaged as exc:
            self._release_after_failed_open()
            raise StoreCorruptError(corrupt_message(self.path, self.kind, str(exc))) from None
        except BaseException:
            self._release_after_failed_open()
            raise

    def _check_format(self) -> None:
        """Tag a new store with the format; refuse a store of another (an older, unsealed) one."""
        with self._env.begin(db=self._meta) as txn:
            tag = txn.get(_FORMAT_KEY)
            untouched = txn.stat(self._data)["entries"] == 0 and txn.get(_VERSION_KEY) is None
        if tag is not None and unseal(_FORMAT_KEY, tag) == _FORMAT:
            return
        if tag is not None or not untouched:
            raise StoreCorruptError(corrupt_message(
                self.path, self.kind, "it was written without checksums by an earlier streamjoin"
                if tag is None else f"unknown format {tag[4:]!r}"))
        with self._env.begin(write=True, db=self._meta) as txn:
            txn.put(_FORMAT_KEY, seal(_FORMAT_KEY, _FORMAT))

    def _check_files(self) -> None:
        """The data file is still the one the environment maps, and long enough for every page
        its meta page names: LMDB reads pages through a memory map, and reading one past the end
        of the file kills the process with SIGBUS instead of raising."""
        found = _data_file(self.path)
        if found[:2] != self._file[:2]:
            raise StoreTruncatedError(corrupt_message(
                self.path, self.kind, "its data file was replaced or removed while the store was open"))
        self._file = found
        self._check_size()

    def _check_size(self) -> None:
        """Raise :class:`StoreTruncatedError` when data.mdb is shorter than its last page."""
        size = self._file[2]
        if size < 2 * self._psize:   # the two meta pages LMDB reads before anything else
            raise StoreTruncatedError(corrupt_message(
                self.path, self.kind, f"data.mdb is truncated to {size} bytes, shorter than its meta pages"))
        needed = (self._env.info()["last_pgno"] + 1) * self._psize
        if size < needed:
            raise StoreTruncatedError(corrupt_message(
                self.path, self.kind, f"data.mdb is truncated to {size} bytes, its pages need {needed}"))

    def _owner(self) -> bytes | None:
        """Read afresh (not cached): a warm store's file may have been overwritten in place."""
        try:
            with self._env.begin(db=self._meta) as txn:
                raw = txn.get(_OWNER_KEY)
            return None if raw is None else unseal(_OWNER_KEY, raw)
        except Exception as exc:
            raise self._failure("reading the owner tag", exc) from exc

    def _read_version(self) -> int | None:
        raw = self._reader.get(_VERSION_KEY, db=self._meta)
        if raw is None:
            return None
        marker = unseal(_VERSION_KEY, raw)
        if len(marker) != 8:
            raise StoreCorruptError(corrupt_message(self.path, self.kind, f"bad version marker {marker!r}"))
        return decode_int(marker)

    def _release_after_failed_open(self) -> None:
        env = getattr(self, "_env", None)
        if env is not None:
            env.close()
        self._lock.release()

    # -- reads -----------------------------------------------------------------------------------

    def _get(self, key: bytes) -> bytes | None:
        try:
            return self._lookup(self._reader, key)
        except Exception as exc:
            raise self._failure("read", exc) from exc

    def _multi_get(self, keys: Sequence[bytes]) -> list[bytes | None]:
        try:
            if not keys or not all_short(keys):
                return [self._lookup(self._reader, key) for key in keys]
            return unseal_many(keys, list(map(self._reader.get, keys)))
        except Exception as exc:
            raise self._failure("read", exc) from exc

    def _lookup(self, txn: lmdb.Transaction[bytes], key: bytes) -> bytes | None:
        """The value of ``key`` of any length, checked."""
        size = len(key)
        if 0 < size <= SHORT_MAX:
            record = txn.get(key, db=self._data)
            return None if record is None else unseal(key, record)
        if size == 0:
            record = txn.get(EMPTY_KEY, db=self._meta)
            return None if record is None else unseal(EMPTY_KEY, record)
        entries = self._bucket(txn, key[:SHORT_MAX])
        suffix = key[SHORT_MAX:]
        at = bisect.bisect_left(entries, (suffix,))
        return entries[at][1] if at < len(entries) and entries[at][0] == suffix else None

    def _bucket(self, txn: lmdb.Transaction[bytes], prefix: bytes) -> list[KeyValue]:
        record = txn.get(prefix, db=self._long)
        return [] if record is None else decode_bucket(prefix, unseal(prefix, record))

    def _scan(self, start: bytes | None, end: bytes | None, reverse: bool) -> Iterator[KeyValue]:
        _check_bounds(self.path, start, end)
        if end == b"":
            return iter(())
        txn = None
        try:
            txn = self._env.begin(db=self._data)
            has_long = txn.stat(self._long)["entries"] > 0
            items = self._range_items(txn, txn.cursor(), has_long, start, end, reverse)
        except Exception as exc:
            if txn is not None:
                txn.abort()
            raise self._failure("scan", exc) from exc
        return self._translated(items, txn)

    def _range_items(
        self, txn: lmdb.Transaction[bytes], cursor: lmdb.Cursor[bytes], has_long: bool,
        start: bytes | None, end: bytes | None, reverse: bool,
    ) -> Iterator[KeyValue]:
        """The entries of ``[start, end)`` read through ``txn`` (``cursor`` on ``data``): short keys,
        merged with the long keys' buckets when the store has any, and the empty key."""
        if end == b"":
            return iter(())
        items = short_items(cursor, start, end, reverse)
        if has_long:
            longer = long_items(txn.cursor(self._long), start, end, reverse)
            items = heapq.merge(items, longer, key=_KEY, reverse=reverse)
        empty = None if start else txn.get(EMPTY_KEY, db=self._meta)
        if empty is not None:
            first = [(b"", unseal(EMPTY_KEY, empty))]
            items = chain(items, first) if reverse else chain(first, items)
        return items

    def _scan_ranges(self, ranges: Sequence[tuple[bytes | None, bytes | None]]) -> list[list[KeyValue]]:
        """One read transaction and one cursor for every range: set_range to its start, step to its end."""
        try:
            with self._env.begin(db=self._data) as txn:
                cursor, has_long = txn.cursor(), txn.stat(self._long)["entries"] > 0
                return [list(self._range_items(txn, cursor, has_long, s, e, False)) for s, e in ranges]
        except Exception as exc:
            raise self._failure("scan", exc) from exc

    def _translated(self, items: Iterator[KeyValue], txn: lmdb.Transaction[bytes]) -> Iterator[KeyValue]:
        """Yield ``items``, end the read transaction when done, and translate errors."""
        try:
            yield from items
        except (Damaged, *_DAMAGE) as exc:
            raise self._failure("scan", exc) from exc
        except lmdb.Error as exc:
            raise StoreError(
                f"scan of {self.path} was invalidated (the store was written or grew while "
                f"iterating; finish iterating before writing): {exc}"
            ) from exc
        finally:
            try:
                txn.abort()
            except lmdb.Error:
                pass  # already invalidated by a map resize or close

    def _failure(self, what: str, exc: BaseException) -> StoreError:
        """The StoreError for ``exc``: damage marks the store (the next open rebuilds it)."""
        if isinstance(exc, (Damaged, *_DAMAGE)):
            return mark_damaged(self.path, self.kind, f"{what} failed: {exc}")
        return StoreError(f"{what} of {self.path} failed: {type(exc).__name__}: {exc}")

    def _version(self) -> int | None:
        return self._cached_version

    def _stats(self) -> StoreStats:
        try:
            stats = [self._reader.stat(db) for db in (self._data, self._long)]
        except Exception as exc:
            raise self._failure("read", exc) from exc
        pages = sum(s["branch_pages"] + s["leaf_pages"] + s["overflow_pages"] for s in stats)
        return StoreStats(sum(s["entries"] for s in stats), pages * stats[0]["psize"], exact=False)

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

        def apply(txn: lmdb.Transaction[bytes]) -> None:
            if delete_ranges:
                self._delete_ranges(txn, delete_ranges)
            if deletes:
                self._delete_keys(txn, deletes)
            if puts:
                self._put(txn, puts)
            if version is not None:
                txn.put(_VERSION_KEY, seal(_VERSION_KEY, encode_int(version)), db=self._meta)
                if self.stamp is not None:
                    txn.put(_OWNER_KEY, seal(_OWNER_KEY, self.stamp), db=self._meta)
                else:
                    txn.delete(_OWNER_KEY, db=self._meta)

        self._transact(apply, "write")
        if version is not None:
            self._cached_version = version

    def _put(self, txn: lmdb.Transaction[bytes], puts: Sequence[KeyValue]) -> None:
        records = sealed(puts)  # TypeError/ValueError for a bad entry: nothing applied
        if all_short(list(map(_KEY, records))):
            txn.cursor().putmulti(records)
            return
        txn.cursor().putmulti([kv for kv in records if 0 < len(kv[0]) <= SHORT_MAX])
        self._put_special(txn, [kv for kv in puts if not 0 < len(kv[0]) <= SHORT_MAX])

    def _put_special(self, txn: lmdb.Transaction[bytes], changes: Sequence[tuple[bytes, bytes | None]]) -> None:
        """Apply puts (value) and deletes (None) of empty and long keys, in order."""
        buckets: dict[bytes, dict[bytes, bytes | None]] = {}
        for key, value in changes:
            if key:
                buckets.setdefault(key[:SHORT_MAX], {})[key[SHORT_MAX:]] = value
            elif value is None:
                txn.delete(EMPTY_KEY, db=self._meta)
            else:
                txn.put(EMPTY_KEY, seal(EMPTY_KEY, value), db=self._meta)
        for prefix, edits in buckets.items():
            entries = dict(self._bucket(txn, prefix))
            for suffix, value in edits.items():
                if value is None:
                    entries.pop(suffix, None)
                else:
                    entries[suffix] = value
            self._store_bucket(txn, prefix, sorted(entries.items()))

    def _store_bucket(self, txn: lmdb.Transaction[bytes], prefix: bytes, entries: list[KeyValue]) -> None:
        if entries:
            txn.put(prefix, seal(prefix, encode_bucket(entries)), db=self._long)
        else:
            txn.delete(prefix, db=self._long)

    def _delete_keys(self, txn: lmdb.Transaction[bytes], keys: Sequence[bytes]) -> None:
        if all_short(keys):
            _DRAIN(map(txn.delete, keys))
            return
        _DRAIN(map(txn.delete, [key for key in keys if 0 < len(key) <= SHORT_MAX]))
        self._put_special(txn, [(key, None) for key in keys if not 0 < len(key) <= SHORT_MAX])

    def _delete_ranges(self, txn: lmdb.Transaction[bytes], ranges: Sequence[tuple[bytes, bytes]]) -> None:
        has_long = txn.stat(self._long)["entries"] > 0
        for start, end in ranges:
            if type(start) is not bytes or type(end) is not bytes:
                raise TypeError(f"a range delete needs (bytes, bytes), got ({start!r}, {end!r})")
            if not start < end:
                continue
            if not start:
                txn.delete(EMPTY_KEY, db=self._meta)
            cursor = txn.cursor()
            found = cursor.set_range(start[:SHORT_MAX]) if start else cursor.first()
            while found and cursor.key() < start:  # only start's prefix, when start is long
                found = cursor.next()
            while found and cursor.key() < end:
                found = cursor.delete()  # moves to the next entry
            if has_long:
                self._delete_long_range(txn, start, end)

    def _delete_long_range(self, txn: lmdb.Transaction[bytes], start: bytes, end: bytes) -> None:
        cursor = txn.cursor(self._long)
        found = cursor.set_range(start[:SHORT_MAX]) if start else cursor.first()
        touched = []
        while found and cursor.key() < end:  # a prefix >= end: all its keys are above end
            touched.append(cursor.item())
            found = cursor.next()
        for prefix, record in touched:
            entries = decode_bucket(prefix, unseal(prefix, record))
            kept = [(s, v) for s, v in entries if not start <= prefix + s < end]
            if len(kept) != len(entries):
                self._store_bucket(txn, prefix, kept)

    def _load_sorted(self, items: Iterable[KeyValue], version: int | None) -> int:
        """Append ``items`` in chunks of sorted puts (``MDB_APPEND``: no search, full pages).

        Each chunk commits on its own; when a key is out of order, the chunks before it stay
        and the version marker is not set. :class:`SortedChunks` (a restore's Arrow batches) are
        sealed a chunk at a time in C (:meth:`Loader.prepare_arrays`).
        """
        loader = Loader(self.path)
        if isinstance(items, SortedChunks):
            self._load_chunks(loader, items)
        else:
            self._load_pairs(loader, items)
        if version is not None:
            self._write((), (), (), version)
        return loader.count

    def _load_pairs(self, loader: Loader, items: Iterable[KeyValue]) -> None:
        source = iter(items)
        chunk = list(islice(source, _LOAD_CHUNK))  # chunks are cut in C: no Python step per entry
        while True:
            following = list(islice(source, _LOAD_CHUNK)) if len(chunk) == _LOAD_CHUNK else []
            self._append(loader.prepare(chunk, final=not following), chunk)
            if not following:
                break
            chunk = following

    def _load_chunks(self, loader: Loader, items: SortedChunks) -> None:
        pieces = _pieces(items.chunks(), _LOAD_CHUNK)
        piece = next(pieces, None)
        while piece is not None:
            following = next(pieces, None)
            self._append(*loader.prepare_arrays(*piece, final=following is None))
            piece = following

    def _append(self, prepared: Prepared, chunk: Iterable[KeyValue]) -> None:
        short, long, empty = prepared

        def apply(txn: lmdb.Transaction[bytes]) -> None:
            for db, records in ((self._data, short), (self._long, long)):
                if records:
                    consumed, added = txn.cursor(db).putmulti(records, append=True)
                    if added != consumed:  # MDB_APPEND skips a key that is not above the last one
                        raise _OutOfOrder()  # aborts the transaction: the chunk is not applied
            if empty is not None:
                txn.put(EMPTY_KEY, empty, db=self._meta)

        if not (short or long or empty is not None):
            return
        try:
            self._transact(apply, "load_sorted")
        except _OutOfOrder:
            raise StoreError(_order_message(self.path, self._reader, chunk)) from None

    def _transact(self, apply: Callable[[lmdb.Transaction[bytes]], T], what: str) -> T:
        """Run ``apply`` in one write transaction, growing the map and retrying when it is full."""
        while True:
            try:
                with self._env.begin(write=True, db=self._data) as txn:
                    result = apply(txn)
            except lmdb.MapFullError:
                self._grow(what)
                continue
            except StoreError:
                raise
            except (Damaged, *_DAMAGE) as exc:
                raise self._failure(what, exc) from exc
            except (TypeError, ValueError) as exc:
                raise StoreWriteError(
                    f"{what} to {self.path} failed, nothing applied: puts must be (bytes, bytes) "
                    f"tuples and keys bytes ({type(exc).__name__}: {exc})"
                ) from exc
            except Exception as exc:
                raise StoreWriteError(
                    f"{what} to {self.path} failed, nothing applied: {type(exc).__name__}: {exc}"
                ) from exc
            self._renew_reader()
            return result

    def _grow(self, what: str) -> None:
        size = self._env.info()["map_size"] * 2
        if size > _MAX_MAP:
            raise StoreWriteError(f"{what} to {self.path}: the store would exceed {_MAX_MAP} bytes")
        try:
            self._env.set_mapsize(size)  # invalidates open read transactions, ours included
        except lmdb.Error as exc:
            raise StoreWriteError(f"{what} to {self.path}: cannot grow the map: {exc}") from exc
        finally:
            self._renew_reader()

    def _renew_reader(self) -> None:
        """Point reads at the latest commit (a spare transaction makes ``begin`` cheap)."""
        try:
            self._reader.abort()
        except lmdb.Error:
            pass  # invalidated when the map grew
        self._reader = self._env.begin(db=self._data)

    # -- lifecycle -------------------------------------------------------------------------------

    def _close(self) -> None:
        env = self._env
        # the handles are dropped with the store (every use checks that it is open first)
        self._env, self._reader = None, None  # type: ignore[assignment]
        try:
            env.close()
        except Exception as exc:
            raise StoreError(f"closing {self.path} failed: {exc}") from exc
        finally:
            self._lock.release()

    @classmethod
    def destroy(cls, path: str) -> None:
        """Remove the store at ``path``; raises :class:`StoreLockedError` while it is open."""
        remove_directory(str(path))


def _pieces(chunks: Iterable[Chunk], size: int) -> Iterator[Chunk]:
    """The chunks cut into zero-copy slices of at most ``size`` entries (empty ones dropped)."""
    for keys, values in chunks:
        for start in range(0, max(len(keys), len(values)), size):
            yield keys.slice(start, size), values.slice(start, size)


class _OutOfOrder(StoreError):
    """A bulk-load chunk had a key not above its predecessor (internal; reported with the keys)."""


def _order_message(path: str, reader: lmdb.Transaction[bytes], chunk: Iterable[KeyValue]) -> str:
    """Name the first key of ``chunk`` not above its predecessor (or the store's last key)."""
    cursor = reader.cursor()
    previous = cursor.key() if cursor.last() else None
    for key, _ in chunk:
        if previous is not None and key <= previous:
            break
        previous = key
    return f"load_sorted into {path}: keys must be strictly ascending, but {key!r} follows {previous!r}"


def _check_bounds(path: str, start: object, end: object) -> None:
    for bound in (start, end):
        if bound is not None and type(bound) is not bytes:
            raise StoreError(f"scan of {path}: bounds must be bytes or None, got {bound!r}")
