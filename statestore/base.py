"""The store contract: an ordered map of bytes to bytes with an atomic, versioned write.

A store holds one partition's state. Keys and values are ``bytes``; keys are ordered by their bytes
(unsigned, lexicographic, a prefix before its extensions), so the order-preserving codecs of
``streamjoin.statestore.codecs`` make byte order equal value order. Every backend accepts every key: the
empty key ``b""`` (the smallest) and keys of any length (a backend whose library limits key sizes,
like LMDB, lays long keys out so that they still read, scan and delete in byte order).

A backend subclasses ``Store`` and supplies the primitives marked *required* below; the
optional methods have defaults built from them, which a backend overrides where its library has a
faster path (batched gets, batched range scans, bulk loading). The public methods guard against use after ``close()``
and normalise arguments once, here, so backends stay thin.

Process model: a store directory is held by one open handle at a time. Spark may run the same
partition in a different Python worker process in the next micro-batch, so the runtime opens a
store when a task starts and closes it when the task ends, and never caches an open handle across
tasks. Opening a store that another live handle holds raises ``StoreLockedError`` at once (or
after ``lock_timeout`` seconds, if given); it never blocks indefinitely and never shares the files.
"""

from __future__ import annotations

import shutil
from abc import ABC, abstractmethod
from dataclasses import dataclass
from itertools import chain
from typing import TYPE_CHECKING, Any, ClassVar, Iterable, Iterator, Mapping, Sequence

import pyarrow as pa

from streamjoin.statestore.columns import Chunk, ColumnWrite, PrefixScan, binary_column, check_ranges, pair_chunks
from streamjoin.statestore.errors import StoreClosedError, StoreError, StoreWriteError

if TYPE_CHECKING:
    from streamjoin.statestore.chunks import SortedChunks

__all__ = ["Store", "StoreStats", "KeyValue", "prefix_end", "ascending", "check_entry_types"]

KeyValue = tuple[bytes, bytes]

#: How many entries the default bulk path hands to one atomic write.
_LOAD_CHUNK = 65536


@dataclass(frozen=True)
class StoreStats:
    """Size of a store's contents; backends may estimate (``exact`` says which)."""

    entries: int
    bytes: int
    exact: bool


def prefix_end(prefix: bytes) -> bytes | None:
    """The smallest key greater than every key that starts with ``prefix`` (None: no such key)."""
    stripped = prefix.rstrip(b"\xff")
    if not stripped:
        return None
    return stripped[:-1] + bytes([stripped[-1] + 1])


class Store(ABC):
    """One partition's local state: an ordered ``bytes -> bytes`` map plus a version marker.

    ``write`` is the only mutation and is atomic: its puts, deletes, range deletes and version
    marker are all applied, or (when it raises) none of them. Within one write, range deletes apply
    first, then deletes, then puts, so a key both deleted and put ends up put.
    """

    #: The name the registry knows this backend by.
    kind: ClassVar[str] = "abstract"
    #: Whether the backend records an owner tag with its version marker (see ``owner``).
    records_owner: ClassVar[bool] = False
    #: Whether the backend keeps its newest previous versions and returns to them itself
    #: (``roll_back``), so a changelogged store needs no undo records of its own.
    keeps_history: ClassVar[bool] = False
    #: Whether ``write_columns`` is the backend's own write (its state held as columns, a write
    #: given as a file taken as it is: ``ColumnWrite.file``), not ``write`` of lists made from them.
    writes_columns: ClassVar[bool] = False

    def __init__(self, path: str) -> None:
        self.path = str(path)
        self._closed = False
        #: the owner tag every write that sets a version records with the marker (None: no tag)
        self.stamp: bytes | None = None
        #: what the next write that sets a version applies (a changelog delta's CRC), recorded
        #: with the version by a backend that ``keeps_history`` (``applied_tag``)
        self.tag: int | None = None
        #: how many previous versions a backend that ``keeps_history`` keeps, at least
        self.history_depth = 1

    # -- required primitives -------------------------------------------------------------------

    @abstractmethod
    def _get(self, key: bytes) -> bytes | None:
        """The value of ``key``, or None."""

    @abstractmethod
    def _scan(self, start: bytes | None, end: bytes | None, reverse: bool) -> Iterator[KeyValue]:
        """Entries with ``start <= key < end`` (None: unbounded) in key order, or reversed."""

    @abstractmethod
    def _write(
        self,
        puts: Sequence[KeyValue],
        deletes: Sequence[bytes],
        delete_ranges: Sequence[tuple[bytes, bytes]],
        version: int | None,
    ) -> None:
        """Apply everything atomically; ``version`` None leaves the marker unchanged."""

    @abstractmethod
    def _version(self) -> int | None:
        """The version marker of the last write that set one, or None."""

    @abstractmethod
    def _close(self) -> None:
        """Release files, handles and locks. Called at most once."""

    # -- optional primitives: defaults built from the required ones -----------------------------

    def _owner(self) -> bytes | None:
        """The owner tag recorded with the version marker (backends with ``records_owner``)."""
        return None

    def _check_files(self) -> None:
        """Raise ``StoreCorruptError`` when the files at ``path`` are no longer the ones
        this open store reads (replaced or truncated under it). Default: nothing to check."""
        return None

    def _multi_get(self, keys: Sequence[bytes]) -> list[bytes | None]:
        return [self._get(k) for k in keys]

    def _scan_ranges(self, ranges: Sequence[tuple[bytes | None, bytes | None]]) -> list[list[KeyValue]]:
        """The entries of each ``[start, end)`` of ``ranges`` (non-empty, already checked), in key
        order. Overrides reuse one cursor or iterator and seek from range to range."""
        return [list(self._scan(start, end, False)) for start, end in ranges]

    def _scan_prefixes(self, prefixes: Sequence[bytes]) -> list[list[KeyValue]]:
        """The entries under each of ``prefixes`` (bytes, already checked), one list per prefix."""
        # a prefix's range is never empty: the checks of scan_ranges are not needed
        return self._scan_ranges([(p or None, prefix_end(p) if p else None) for p in prefixes])

    def _write_columns(self, write: ColumnWrite, version: int | None) -> None:
        """``write`` applied as ``_write`` applies its lists (the default converts to them)."""
        puts, deletes = write.as_lists()
        self._write(puts, deletes, list(write.delete_ranges), version)

    def _multi_get_column(self, keys: pa.Array) -> pa.Array:
        """The value of each of ``keys`` (binary, checked) as a binary array, null where absent."""
        return pa.array(self._multi_get(keys.to_pylist()), pa.binary())

    def _scan_prefixes_columns(self, prefixes: pa.Array) -> PrefixScan:
        """The entries under each of ``prefixes`` (binary, checked), flattened (``PrefixScan``)."""
        return PrefixScan.of_lists(self._scan_prefixes(prefixes.to_pylist()))

    def _scan_columns(self, start: bytes | None, end: bytes | None) -> Iterator[Chunk]:
        """The entries of ``[start, end)`` (bounds checked, the range not empty) in ascending key
        order as ``(keys, values)`` chunks (the default groups ``_scan``'s pairs)."""
        return pair_chunks(self._scan(start, end, False))

    def _load_sorted(self, items: Iterable[KeyValue], version: int | None) -> int:
        """Bulk-load items into an empty store; return how many were loaded.

        Overrides must raise ``StoreError`` when keys are not strictly ascending (their
        library's sorted loaders check this anyway, so the check costs nothing extra there).
        """
        count = 0
        chunk: list[KeyValue] = []
        for item in ascending(items, self.path):
            chunk.append(item)
            if len(chunk) >= _LOAD_CHUNK:
                self._write(chunk, (), (), None)
                count += len(chunk)
                chunk = []
        self._write(chunk, (), (), version)
        return count + len(chunk)

    def _stats(self) -> StoreStats:
        entries = size = 0
        for key, value in self._scan(None, None, False):
            entries += 1
            size += len(key) + len(value)
        return StoreStats(entries, size, exact=True)

    @classmethod
    def check_options(cls, options: Mapping[str, Any]) -> None:
        """Refuse a bad value among ``options`` (keyword options of this backend) before any
        store is opened, with ``StoreArgumentError`` naming it (a join checks its
        ``store_options`` this way when it is defined). Default: nothing to check."""
        return None

    # -- the public interface ------------------------------------------------------------------

    def get(self, key: bytes) -> bytes | None:
        """The value stored under ``key``, or None when there is none."""
        self._check_open()
        return self._get(key)

    def multi_get(self, keys: Iterable[bytes]) -> list[bytes | None]:
        """Values for ``keys``, in the same order, None where a key is absent."""
        self._check_open()
        return self._multi_get(keys if isinstance(keys, (list, tuple)) else list(keys))

    def scan(
        self, start: bytes | None = None, end: bytes | None = None, reverse: bool = False
    ) -> Iterator[KeyValue]:
        """Entries with ``start <= key < end`` in ascending key order (descending if ``reverse``).

        The iterator reads a consistent view only until the next ``write``; do not write while
        iterating.
        """
        self._check_open()
        if start is not None and end is not None and start >= end:
            return iter(())
        return self._scan(start, end, reverse)

    def scan_prefix(self, prefix: bytes, reverse: bool = False) -> Iterator[KeyValue]:
        """Entries whose key starts with ``prefix``, in key order."""
        return self.scan(prefix or None, prefix_end(prefix) if prefix else None, reverse)

    def scan_ranges(self, ranges: Iterable[tuple[bytes | None, bytes | None]]) -> list[list[KeyValue]]:
        """The entries of each ``[start, end)`` range (None: unbounded), one list per range in the
        order given, each in ascending key order.

        This is the batched seek: one call reads many small ranges (the rows of many join keys)
        far faster than one ``scan`` each. Ranges may overlap or come in any order; an empty or
        inverted range gives an empty list. Raises ``StoreError`` when a bound is not bytes
        or None.
        """
        self._check_open()
        ranges = _as_list(ranges)
        out: list[list[KeyValue]] = [[] for _ in ranges]
        wanted = []
        for i, bounds in enumerate(ranges):
            start, end = _range(bounds, self.path)
            if start is None or end is None or start < end:
                wanted.append(i)
        if wanted:
            found = self._scan_ranges([ranges[i] for i in wanted] if len(wanted) < len(ranges) else ranges)
            for i, entries in zip(wanted, found):
                out[i] = entries
        return out

    def scan_prefixes(self, prefixes: Iterable[bytes]) -> list[list[KeyValue]]:
        """The entries under each of ``prefixes`` (one list per prefix, in key order): a batched
        ``scan_prefix``. Raises ``StoreError`` when a prefix is not bytes."""
        self._check_open()
        prefixes = _as_list(prefixes)
        for p in prefixes:
            if type(p) is not bytes:
                raise StoreError(f"scan_prefixes of {self.path}: prefixes must be bytes, got {p!r}")
        return self._scan_prefixes(prefixes) if prefixes else []

    def write(
        self,
        puts: Iterable[KeyValue] = (),
        deletes: Iterable[bytes] = (),
        delete_ranges: Iterable[tuple[bytes, bytes]] = (),
        version: int | None = None,
    ) -> None:
        """Apply puts, deletes and ``[start, end)`` range deletes atomically, then set the version.

        Range deletes apply first, then deletes, then puts. With ``version`` None the marker is
        left as it was. Raises ``StoreWriteError`` (nothing applied) when the write fails.
        """
        self._check_open()
        if version is not None and (not isinstance(version, int) or isinstance(version, bool)):
            raise TypeError(f"version must be an int or None, not {type(version).__name__}")
        self._write(_as_list(puts), _as_list(deletes), _as_list(delete_ranges), version)

    def write_columns(self, write: ColumnWrite, version: int | None = None) -> None:
        """``write(puts, deletes, delete_ranges, version=version)`` with the puts and deletes as
        Arrow columns: the same effect, atomically, without
        a Python object per entry where the backend holds columns itself (a
        [`ColumnWrite`][streamjoin.statestore.columns.ColumnWrite])."""
        self._check_open()
        if not isinstance(write, ColumnWrite):
            raise TypeError(f"write_columns takes a ColumnWrite, not {type(write).__name__}")
        if version is not None and (not isinstance(version, int) or isinstance(version, bool)):
            raise TypeError(f"version must be an int or None, not {type(version).__name__}")
        self._write_columns(write, version)

    def multi_get_column(self, keys: pa.Array | Sequence[bytes]) -> pa.Array:
        """``multi_get`` of a binary column: the values as a binary array, null where a key is absent."""
        self._check_open()
        return self._multi_get_column(_read_keys(keys, self.path, "multi_get_column"))

    def scan_prefixes_columns(self, prefixes: pa.Array | Sequence[bytes]) -> PrefixScan:
        """``scan_prefixes`` of a binary column: per prefix the count of its entries, and the
        entries of all of them as two binary columns (a
        [`PrefixScan`][streamjoin.statestore.columns.PrefixScan])."""
        self._check_open()
        return self._scan_prefixes_columns(_read_keys(prefixes, self.path, "scan_prefixes_columns"))

    def scan_columns(self, start: bytes | None = None, end: bytes | None = None) -> Iterator[Chunk]:
        """``scan(start, end)`` as Arrow chunks: ``(keys, values)``, two binary (or large binary)
        arrays of one length, the keys strictly ascending within and across chunks; a chunk's size
        is the backend's. A snapshot of a whole store reads it this way, without a Python object
        per entry where the backend holds columns (the arranged store). Raises ``StoreError`` when
        a bound is not bytes or None; the same note on writes as ``scan``'s applies."""
        self._check_open()
        start, end = _range((start, end), self.path, "scan_columns")
        if start is not None and end is not None and start >= end:
            return iter(())
        return self._scan_columns(start, end)

    def load_sorted(self, items: Iterable[KeyValue], version: int | None = None) -> int:
        """Bulk-load ``items`` (strictly ascending keys) into this empty store; return the count.

        This is the restore path: backends override it with their fastest loader (SST ingestion,
        sorted append). A restore passes a ``SortedChunks``: it
        iterates as pairs, and a backend may read its Arrow chunks instead (LMDB does). Raises
        ``StoreError`` if the store is not empty or keys are not strictly ascending.
        """
        self._check_open()
        if next(iter(self._scan(None, None, False)), None) is not None:
            raise StoreError(
                f"load_sorted needs an empty store, but {self.path} has entries; "
                "remove the store first (destroy_store) and open it again"
            )
        return self._load_sorted(items, version)

    def rebase(self, items: SortedChunks) -> bool:
        """Take ``items``, every entry this store holds now read back from the sorted file a
        snapshot of its current version wrote (``items.source``), as the store's own layout
        where that saves work: the arranged store makes the file its base (a hard link where it
        is on this disk), so the changes it held beside its base are merged without a merge of
        its own. The entries, the version marker, the owner, the tag and the history do not
        change. Returns whether the store took the file; False, having changed nothing, where a
        backend has no use for it (the default) or the file is not worth it. Raises
        ``StoreError``, having changed nothing, when ``items`` do not hold the store's entries.
        """
        self._check_open()
        return self._rebase(items)

    def _rebase(self, items: SortedChunks) -> bool:
        return False

    def snapshot_follows(self) -> None:
        """Say that the next write that sets a version is followed by a snapshot of that version
        offered to ``rebase``: a backend may put off, for that one write, work the rebase would
        make useless (the arranged store: a merge of its runs into a new base). A hint; the
        entries a write leaves do not depend on it, and the default ignores it."""
        self._check_open()
        self._snapshot_follows()

    def _snapshot_follows(self) -> None:
        return None

    def idle_work_follows(self) -> None:
        """Say that the store is kept open between tasks (``streamjoin.statestore.warm``), whose
        watcher calls its ``flush_idle`` (where it has one) while it waits: a backend may leave
        for then work a write would do (the arranged store: the merge of its runs into a new
        base). A hint for the store's life; its entries do not depend on it, and the default
        ignores it."""
        self._check_open()
        self._idle_work_follows()

    def _idle_work_follows(self) -> None:
        return None

    @property
    def version(self) -> int | None:
        """The last committed version marker, or None if no write has set one."""
        self._check_open()
        return self._version()

    @property
    def owner(self) -> bytes | None:
        """Whose state this is: the ``stamp`` in effect at the last write that set the version
        marker, written atomically with it (None: none recorded, or the backend records none).

        A caller that sets ``stamp`` before writing can tell, at the next open, its own store from
        another's at the same path (a copied or swapped directory) before trusting it.
        """
        self._check_open()
        return self._owner()

    def check_files(self) -> None:
        """Raise ``StoreCorruptError`` (or a subclass) when the files at ``path`` were
        replaced or truncated under this open store, before anything reads them again."""
        self._check_open()
        self._check_files()

    def stats(self) -> StoreStats:
        """Entries and bytes held (an estimate where ``exact`` is False)."""
        self._check_open()
        return self._stats()

    def roll_back(self, target: int) -> int | None:
        """Return to version ``target`` kept in the store's history (a backend that
        ``keeps_history``); return how many versions that undid, or None, having changed
        nothing, when the history does not hold ``target``."""
        self._check_open()
        return None

    def applied_tag(self, version: int) -> int | None:
        """The ``tag`` recorded with ``version`` (the current one or one in the history), or None."""
        self._check_open()
        return None

    def forget_history(self) -> None:
        """Drop the previous versions kept (the store was changed by other means than its writes)."""
        self._check_open()

    @property
    def closed(self) -> bool:
        return self._closed

    def memo(self) -> dict[str, Any]:
        """A scratch dict that lives as long as this open store (emptied on close; a store
        handed over to another process leaves it to this process's next open of the same
        directory at the version its task wanted; see ``streamjoin.statestore.warm``).

        For an operator's decoded copies of state it wrote, kept between tasks with a warm
        store. The store never reads it: whoever keeps an entry there checks that it still
        describes the store (by ``version``; an entry of an older version may still describe
        what that version wrote) before using it. An open that rolls the store back or forward
        empties it. A wrapper store returns its inner store's memo, so every wrapper of one
        open store shares it.
        """
        self._check_open()
        return self.__dict__.setdefault("_memo", {})

    def close(self) -> None:
        """Release the store; further use raises ``StoreClosedError``. Idempotent."""
        if not self._closed:
            self._closed = True
            self.__dict__.pop("_memo", None)
            self._close()

    def hand_over(self) -> None:
        """Close the store because another process is about to open it. A backend may first
        leave beside its files what spares that open work it would repeat (the arranged store:
        its delta and its base's key codes, ``streamjoin.statestore.handover``); a failure to
        leave it is not an error. Then as ``close``. Idempotent."""
        if self._closed:
            return
        try:
            self._hand_over()
        finally:
            self.close()

    def _hand_over(self) -> None:
        """Leave what the next open may take (default: nothing); raise nothing for a failure."""
        return None

    @classmethod
    def destroy(cls, path: str) -> None:
        """Remove the store's files at ``path`` (it must not be open). Missing paths are fine."""
        shutil.rmtree(path, ignore_errors=True)

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"open_store({self.kind!r}, {self.path!r})"

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosedError(f"{self!r} is closed; open it again with open_store")


def _range(bounds: object, path: str, what: str = "scan_ranges") -> tuple[bytes | None, bytes | None]:
    """``bounds`` as a checked ``(start, end)`` pair (``what``: the method named in an error)."""
    try:
        pair: Any = bounds   # any object may come in: checked here
        start, end = pair
    except (TypeError, ValueError):
        raise StoreError(f"{what} of {path}: each range must be a (start, end) pair, got {bounds!r}") from None
    for bound in (start, end):
        if bound is not None and type(bound) is not bytes:
            raise StoreError(f"{what} of {path}: bounds must be bytes or None, got {bound!r}")
    return start, end


def _read_keys(keys: pa.Array | Sequence[bytes], path: str, what: str) -> pa.Array:
    """``keys`` as a binary array; ``StoreError`` for keys that are not bytes."""
    try:
        return binary_column(keys, "keys")
    except StoreWriteError as exc:
        raise StoreError(f"{what} of {path}: {exc}") from None


def _as_list(items: Iterable) -> Sequence:
    return items if isinstance(items, (list, tuple)) else list(items)


def ascending(items: Iterable[KeyValue], path: str) -> Iterator[KeyValue]:
    """Pass ``items`` through, raising ``StoreError`` at the first key not above the last."""
    previous: bytes | None = None
    for key, value in items:
        if previous is not None and key <= previous:
            raise StoreError(
                f"load_sorted into {path}: keys must be strictly ascending, "
                f"but {key!r} follows {previous!r}"
            )
        previous = key
        yield key, value


def check_entry_types(
    path: str,
    puts: Sequence[KeyValue],
    deletes: Sequence[bytes],
    delete_ranges: Sequence[tuple[bytes, bytes]],
) -> None:
    """Raise ``StoreWriteError`` for a write with a non-bytes key or value (before anything is applied)."""
    if puts and ({*map(type, puts)} != {tuple} or {*map(len, puts)} != {2}
                 or {*map(type, chain.from_iterable(puts))} != {bytes}):   # (C-level passes, then the culprit)
        for entry in puts:
            if len(entry) != 2 or type(entry[0]) is not bytes or type(entry[1]) is not bytes:
                raise StoreWriteError(f"write to {path}: every put must be a (bytes, bytes) pair, got {entry!r}")
    if deletes and {*map(type, deletes)} != {bytes}:
        for key in deletes:
            if type(key) is not bytes:
                raise StoreWriteError(f"write to {path}: delete keys must be bytes, got {key!r}")
    check_ranges(delete_ranges, f"write to {path}: ")
