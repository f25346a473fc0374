"""The in-memory backend: the model every other backend is tested against.

Contents live in this process, keyed by path, so closing and reopening a path within one process
finds the same data (as a disk store would), while another process sees nothing there: exactly the
situation of a local store lost with its executor, which the changelog then rebuilds.
"""

from __future__ import annotations

import bisect
import itertools
import os
import threading
from contextlib import contextmanager
from typing import Iterator, Sequence

from streamjoin.statestore.base import KeyValue, Store, StoreStats, check_entry_types
from streamjoin.statestore.errors import StoreLockedError

__all__ = ["MemoryStore", "scratch_store"]


class _Data:
    """One path's contents: a dict plus a sorted key list rebuilt lazily after writes."""

    def __init__(self) -> None:
        self.items: dict[bytes, bytes] = {}
        self.version: int | None = None
        self.owner: bytes | None = None
        self._sorted: list[bytes] | None = []

    def sorted_keys(self) -> list[bytes]:
        if self._sorted is None:
            self._sorted = sorted(self.items)
        return self._sorted

    def invalidate(self) -> None:
        self._sorted = None


_REGISTRY: dict[str, _Data] = {}
_OPEN: set[str] = set()
_LOCK = threading.Lock()


class MemoryStore(Store):
    """An ordered ``bytes -> bytes`` map held in this process (see module docstring)."""

    kind = "memory"
    records_owner = True

    def __init__(self, path: str) -> None:
        super().__init__(path)
        with _LOCK:
            if self.path in _OPEN:
                raise StoreLockedError(
                    f"memory store {self.path} is already open in this process; "
                    "close the other handle first"
                )
            _OPEN.add(self.path)
            self._data = _REGISTRY.setdefault(self.path, _Data())

    def _get(self, key: bytes) -> bytes | None:
        return self._data.items.get(key)

    def _multi_get(self, keys: Sequence[bytes]) -> list[bytes | None]:
        get = self._data.items.get
        return [get(k) for k in keys]

    def _scan(self, start: bytes | None, end: bytes | None, reverse: bool) -> Iterator[KeyValue]:
        keys = self._data.sorted_keys()
        lo = 0 if start is None else bisect.bisect_left(keys, start)
        hi = len(keys) if end is None else bisect.bisect_left(keys, end)
        selected = keys[lo:hi]
        if reverse:
            selected.reverse()
        items = self._data.items
        return ((k, items[k]) for k in selected)

    def _scan_ranges(self, ranges: Sequence[tuple[bytes | None, bytes | None]]) -> list[list[KeyValue]]:
        keys, value = self._data.sorted_keys(), self._data.items.__getitem__
        left, size, out = bisect.bisect_left, len(keys), []
        for start, end in ranges:
            selected = keys[0 if start is None else left(keys, start) : size if end is None else left(keys, end)]
            out.append(list(zip(selected, map(value, selected))))
        return out

    def _write(
        self,
        puts: Sequence[KeyValue],
        deletes: Sequence[bytes],
        delete_ranges: Sequence[tuple[bytes, bytes]],
        version: int | None,
    ) -> None:
        check_entry_types(self.path, puts, deletes, delete_ranges)
        data = self._data
        items = data.items
        if delete_ranges:
            keys = data.sorted_keys()
            for start, end in delete_ranges:
                lo, hi = bisect.bisect_left(keys, start), bisect.bisect_left(keys, end)
                for k in keys[lo:hi]:
                    items.pop(k, None)  # overlapping ranges in one write meet the same key twice
            data.invalidate()
        if deletes:
            for k in deletes:
                items.pop(k, None)
            data.invalidate()
        if puts:
            before = len(items)
            items.update(puts)
            if len(items) != before or data._sorted is None:
                data.invalidate()
        if version is not None:
            data.version, data.owner = version, self.stamp

    def _version(self) -> int | None:
        return self._data.version

    def _owner(self) -> bytes | None:
        return self._data.owner

    def _stats(self) -> StoreStats:
        items = self._data.items
        return StoreStats(len(items), sum(len(k) + len(v) for k, v in items.items()), exact=True)

    def _close(self) -> None:
        with _LOCK:
            _OPEN.discard(self.path)

    @classmethod
    def destroy(cls, path: str) -> None:
        with _LOCK:
            if str(path) in _OPEN:
                raise StoreLockedError(f"memory store {path} is open; close it before removing it")
            _REGISTRY.pop(str(path), None)


_SCRATCH = itertools.count()


@contextmanager
def scratch_store(purpose: str) -> Iterator[MemoryStore]:
    """A new, empty memory store of a name no other has (``purpose`` names it), closed and removed
    with its contents when the block ends: for work on state entries in this process (a
    changelog restored to be read, state rows loaded to be stepped on)."""
    with _LOCK:
        name = f"streamjoin-{purpose}-{os.getpid()}-{next(_SCRATCH)}"
    store = MemoryStore(name)
    try:
        yield store
    finally:
        store.close()
        MemoryStore.destroy(name)
