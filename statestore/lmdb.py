"""The LMDB backend, through py-lmdb.

Layout: one environment per store directory with two named databases, ``data`` (the entries) and
``meta`` (the version marker). A write is one write transaction over both, so data and marker
commit together or not at all.

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

Limits: LMDB keys are 1 to 511 bytes; a write with another key raises :class:`StoreWriteError`
and a read of one finds nothing.

Durability: by default each commit fsyncs the data but not the meta page (LMDB's ``metasync=False``):
a machine crash may undo the last commit but never leaves a torn store. ``sync=False`` drops the
fsync (a machine crash may then corrupt the store; the corrupt-store error says to remove it).
"""

from __future__ import annotations

from collections import deque
from itertools import takewhile
from typing import Callable, Iterable, Iterator, Sequence, TypeVar

import lmdb

from streamjoin.statestore.base import KeyValue, Store, StoreStats
from streamjoin.statestore.codecs import decode_int, encode_int
from streamjoin.statestore.errors import StoreCorruptError, StoreError, StoreWriteError
from streamjoin.statestore.locking import (
    DirectoryLock,
    corrupt_message,
    prepare_directory,
    remove_directory,
    retry_locked,
)

__all__ = ["LMDBStore"]

_DATA, _META = b"data", b"meta"
_VERSION_KEY = b"version"
_MARKERS = ("data.mdb",)
_INITIAL_MAP = 64 << 20
_MAX_MAP = 1 << 40
_LOAD_CHUNK = 65536
_DRAIN = deque(maxlen=0).extend  # consume an iterator at C speed
T = TypeVar("T")


class LMDBStore(Store):
    """A store in an LMDB environment directory (see the module docstring).

    Options: ``map_size`` (initial map size in bytes), ``lock_timeout`` (seconds to wait for a
    held store; default: fail at once), ``sync`` (fsync each commit; default True).
    """

    kind = "lmdb"

    def __init__(
        self,
        path: str,
        *,
        map_size: int = _INITIAL_MAP,
        lock_timeout: float | None = None,
        sync: bool = True,
    ) -> None:
        super().__init__(path)
        prepare_directory(self.path, self.kind, _MARKERS)
        self._lock = retry_locked(lambda: DirectoryLock.acquire(self.path), lock_timeout)
        try:
            self._env = lmdb.open(
                self.path, map_size=map_size, max_dbs=2, sync=sync, metasync=False,
                readahead=False, max_spare_txns=2,
            )
            self._data = self._env.open_db(_DATA)
            self._meta = self._env.open_db(_META)
            self._reader = self._env.begin(db=self._data)
            self._cached_version = _decode_version(self._reader.get(_VERSION_KEY, db=self._meta), path)
        except lmdb.Error as exc:
            self._release_after_failed_open()
            raise StoreCorruptError(corrupt_message(self.path, self.kind, str(exc))) from exc
        except BaseException:
            self._release_after_failed_open()
            raise

    def _release_after_failed_open(self) -> None:
        env = getattr(self, "_env", None)
        if env is not None:
            env.close()
        self._lock.release()

    # -- reads -----------------------------------------------------------------------------------

    def _get(self, key: bytes) -> bytes | None:
        try:
            return self._reader.get(key)
        except lmdb.BadValsizeError:
            return None  # a key LMDB cannot hold (b"") is absent
        except Exception as exc:
            raise _read_error(self.path, exc) from exc

    def _multi_get(self, keys: Sequence[bytes]) -> list[bytes | None]:
        try:
            return list(map(self._reader.get, keys))
        except lmdb.BadValsizeError:
            return [self._get(key) for key in keys]
        except Exception as exc:
            raise _read_error(self.path, exc) from exc

    def _scan(self, start: bytes | None, end: bytes | None, reverse: bool) -> Iterator[KeyValue]:
        _check_bounds(self.path, start, end)
        try:
            txn = self._env.begin(db=self._data)
            cursor = txn.cursor()
            items = _reverse_items(cursor, end) if reverse else _forward_items(cursor, start)
        except Exception as exc:
            raise _read_error(self.path, exc) from exc
        # ``(end,) > (key, value)`` iff key < end, and ``(start,) <= (key, value)`` iff start <= key:
        # the bound tests stay in C.
        if reverse and start is not None:
            items = takewhile((start,).__le__, items)
        elif not reverse and end is not None:
            items = takewhile((end,).__gt__, items)
        return _translated(items, txn, self.path)

    def _version(self) -> int | None:
        return self._cached_version

    def _stats(self) -> StoreStats:
        try:
            stat = self._reader.stat(self._data)
        except Exception as exc:
            raise _read_error(self.path, exc) from exc
        pages = stat["branch_pages"] + stat["leaf_pages"] + stat["overflow_pages"]
        return StoreStats(stat["entries"], pages * stat["psize"], exact=False)

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

        def apply(txn: lmdb.Transaction) -> None:
            if delete_ranges:
                _delete_ranges(txn.cursor(), delete_ranges)
            if deletes:
                _delete_keys(txn, deletes)
            if puts:
                txn.cursor().putmulti(puts)
            if version is not None:
                txn.put(_VERSION_KEY, encode_int(version), db=self._meta)

        self._transact(apply, "write")
        if version is not None:
            self._cached_version = version

    def _load_sorted(self, items: Iterable[KeyValue], version: int | None) -> int:
        """Append ``items`` in chunks of sorted puts (``MDB_APPEND``: no search, full pages).

        Each chunk commits on its own; when a key is out of order, the chunks before it stay
        and the version marker is not set.
        """
        count = 0
        chunk: list[KeyValue] = []
        for item in items:
            chunk.append(item)
            if len(chunk) >= _LOAD_CHUNK:
                count += self._append(chunk)
                chunk = []
        count += self._append(chunk)
        if version is not None:
            self._write((), (), (), version)
        return count

    def _append(self, chunk: list[KeyValue]) -> int:
        def apply(txn: lmdb.Transaction) -> int:
            consumed, added = txn.cursor().putmulti(chunk, append=True)
            if added != consumed:  # MDB_APPEND skips a key that is not above the last one
                raise _OutOfOrder()  # aborts the transaction: the chunk is not applied
            return added

        if not chunk:
            return 0
        try:
            return self._transact(apply, "load_sorted")
        except _OutOfOrder:
            raise StoreError(_order_message(self.path, self._reader, chunk)) from None

    def _transact(self, apply: Callable[[lmdb.Transaction], T], what: str) -> T:
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
            except Exception as exc:
                raise StoreWriteError(
                    f"{what} to {self.path} failed, nothing applied: puts must be (bytes, bytes) "
                    f"tuples and keys bytes ({type(exc).__name__}: {exc})"
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
        env, self._env, self._reader = self._env, None, None
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


def _forward_items(cursor: lmdb.Cursor, start: bytes | None) -> Iterator[KeyValue]:
    positioned = cursor.first() if start is None else cursor.set_range(start)
    return cursor.iternext() if positioned else iter(())


def _reverse_items(cursor: lmdb.Cursor, end: bytes | None) -> Iterator[KeyValue]:
    if end is None or not cursor.set_range(end):
        positioned = cursor.last()  # no key >= end: start from the last key
    else:
        positioned = cursor.prev()  # on the first key >= end: step below it
    return cursor.iterprev() if positioned else iter(())


def _translated(items: Iterator[KeyValue], txn: lmdb.Transaction, path: str) -> Iterator[KeyValue]:
    """Yield ``items``, end the read transaction when done, and translate lmdb errors."""
    try:
        yield from items
    except lmdb.Error as exc:
        raise StoreError(
            f"scan of {path} was invalidated (the store was written or grew while iterating; "
            f"finish iterating before writing): {exc}"
        ) from exc
    finally:
        try:
            txn.abort()
        except lmdb.Error:
            pass  # already invalidated by a map resize or close


def _delete_keys(txn: lmdb.Transaction, keys: Sequence[bytes]) -> None:
    try:
        _DRAIN(map(txn.delete, keys))
    except lmdb.BadValsizeError:  # b"" cannot be stored, so deleting it is a no-op
        _DRAIN(map(txn.delete, [key for key in keys if key != b""]))


def _delete_ranges(cursor: lmdb.Cursor, ranges: Sequence[tuple[bytes, bytes]]) -> None:
    for start, end in ranges:
        if type(start) is not bytes or type(end) is not bytes:
            raise TypeError(f"a range delete needs (bytes, bytes), got ({start!r}, {end!r})")
        if not start < end:
            continue
        found = cursor.set_range(start)
        while found and cursor.key() < end:
            found = cursor.delete()  # moves to the next entry


class _OutOfOrder(StoreError):
    """A bulk-load chunk had a key not above its predecessor (internal; reported with the keys)."""


def _order_message(path: str, reader: lmdb.Transaction, chunk: list[KeyValue]) -> str:
    """Name the first key of ``chunk`` not above its predecessor (or the store's last key)."""
    cursor = reader.cursor()
    previous = cursor.key() if cursor.last() else None
    for key, _ in chunk:
        if previous is not None and key <= previous:
            break
        previous = key
    return f"load_sorted into {path}: keys must be strictly ascending, but {key!r} follows {previous!r}"


def _decode_version(raw: bytes | None, path: str) -> int | None:
    if raw is None:
        return None
    if len(raw) != 8:
        raise StoreCorruptError(corrupt_message(path, "lmdb", f"bad version marker {raw!r}"))
    return decode_int(raw)


def _check_bounds(path: str, start: object, end: object) -> None:
    for bound in (start, end):
        if bound is not None and type(bound) is not bytes:
            raise StoreError(f"scan of {path}: bounds must be bytes or None, got {bound!r}")


def _read_error(path: str, exc: Exception) -> StoreError:
    return StoreError(f"read from {path} failed: {type(exc).__name__}: {exc}")
