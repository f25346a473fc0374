"""The errors every store backend raises, whatever library is underneath.

    StoreError                      anything a store raised
    ├── BackendNotFoundError        open_store() was given an unknown kind or a bad import path
    ├── StoreLockedError            another process (or another open handle) holds the store
    ├── StoreCorruptError           the files at a path are not a readable store of this kind
    ├── StoreClosedError            the store was used after close()
    └── StoreWriteError             a write failed; nothing of it was applied

Backends translate their library's exceptions at the boundary (``raise StoreError(...) from exc``),
so callers never catch ``rocksdict`` or ``lmdb`` exceptions. Every message says what to do.
"""

from __future__ import annotations

__all__ = [
    "StoreError",
    "BackendNotFoundError",
    "StoreLockedError",
    "StoreCorruptError",
    "StoreClosedError",
    "StoreWriteError",
]


class StoreError(Exception):
    """Base class of every error raised by a state store."""


class BackendNotFoundError(StoreError):
    """The store kind is neither registered nor an importable ``package.module:Class``."""


class StoreLockedError(StoreError):
    """The store directory is held by another process or another open handle."""


class StoreCorruptError(StoreError):
    """The files under a store path cannot be read as a store of the requested kind."""


class StoreClosedError(StoreError):
    """A closed store was used."""


class StoreWriteError(StoreError):
    """A write could not be applied; the store is left as it was before the write."""
