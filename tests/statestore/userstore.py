"""A backend written the way a user would write one, outside the ``statestore`` package.

It supplies only the required primitives (the optional ones come from :class:`Store`'s defaults)
and plugs in by import path (``"tests.statestore.userstore:PickleStore"``) or by
``register_backend``. State is one pickle file, replaced atomically on every write: obviously
correct and slow, which is what a model-like backend should be.
"""

from __future__ import annotations

import os
import pickle
from typing import Iterator, Sequence

from streamjoin.statestore import KeyValue, Store, StoreWriteError
from streamjoin.statestore.locking import DirectoryLock, remove_directory

__all__ = ["PickleStore"]

_FILE = "state.pickle"


class PickleStore(Store):
    """An ordered map pickled to ``<path>/state.pickle``; one handle per directory."""

    kind = "tests.statestore.userstore:PickleStore"

    def __init__(self, path: str) -> None:
        super().__init__(path)
        os.makedirs(self.path, exist_ok=True)
        self._lock = DirectoryLock.acquire(self.path)
        self._file = os.path.join(self.path, _FILE)
        try:
            with open(self._file, "rb") as fh:
                self._items, self._marker = pickle.load(fh)
        except FileNotFoundError:
            self._items, self._marker = {}, None

    def _get(self, key: bytes) -> bytes | None:
        return self._items.get(key)

    def _scan(self, start: bytes | None, end: bytes | None, reverse: bool) -> Iterator[KeyValue]:
        keys = sorted(
            k for k in self._items if (start is None or k >= start) and (end is None or k < end)
        )
        return iter([(k, self._items[k]) for k in (reversed(keys) if reverse else keys)])

    def _write(
        self,
        puts: Sequence[KeyValue],
        deletes: Sequence[bytes],
        delete_ranges: Sequence[tuple[bytes, bytes]],
        version: int | None,
    ) -> None:
        if not all(_is_pair(p) for p in puts) or not all(_is_pair(r) for r in delete_ranges):
            raise StoreWriteError(f"write to {self.path}: puts and ranges must be (bytes, bytes)")
        if not all(type(k) is bytes for k in deletes):
            raise StoreWriteError(f"write to {self.path}: delete keys must be bytes")
        items = dict(self._items)
        for start, end in delete_ranges:
            for key in [k for k in items if start <= k < end]:
                del items[key]
        for key in deletes:
            items.pop(key, None)
        items.update(puts)
        marker = self._marker if version is None else version
        scratch = self._file + ".new"
        with open(scratch, "wb") as fh:
            pickle.dump((items, marker), fh)
        os.replace(scratch, self._file)
        self._items, self._marker = items, marker

    def _version(self) -> int | None:
        return self._marker

    def _close(self) -> None:
        self._lock.release()

    @classmethod
    def destroy(cls, path: str) -> None:
        remove_directory(str(path))


def _is_pair(entry: object) -> bool:
    return (
        isinstance(entry, tuple) and len(entry) == 2
        and type(entry[0]) is bytes and type(entry[1]) is bytes
    )
