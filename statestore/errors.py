"""The errors every store backend raises, whatever library is underneath, and the root of all of
streamjoin's errors (defined here, in the lowest layer, so that every package can derive from it).

    StreamjoinError                 anything streamjoin raised (see ``streamjoin.errors`` for the
                                    whole tree: stores, changelogs, joins)
    StoreError                      anything a store raised (a StreamjoinError)
    ├── StoreArgumentError          a bad kind, path or option (also a ValueError)
    ├── BackendNotFoundError        open_store() was given an unknown kind or a bad import path
    ├── StoreLockedError            another process (or another open handle) holds the store
    ├── StoreCorruptError           the files at a path are not a readable store of this kind,
    │   │                           or a read met damaged data (a checksum mismatch)
    │   └── StoreTruncatedError     a data file is shorter than the store says it is (reading
    │                               it would crash the process), or was replaced under an open store
    ├── StoreIOError                the operating system refused the files (disk full, no
    │                               permission, read-only): the store itself may be intact
    ├── StoreClosedError            the store was used after close()
    └── StoreWriteError             a write failed; nothing of it was applied

Backends translate their library's exceptions at the boundary (``raise StoreError(...) from exc``),
so callers never catch ``rocksdict`` or ``lmdb`` exceptions. Every message says what to do.

Only ``StoreCorruptError`` means "remove the store and rebuild it from the changelog" (which
``streamjoin.changelog.open_logged_store`` does); a ``StoreIOError`` must never lead to removing a store,
since the store may be the only intact copy of recent state.
"""

from __future__ import annotations

__all__ = [
    "StreamjoinError",
    "StoreError",
    "StoreArgumentError",
    "StoreIOError",
    "BackendNotFoundError",
    "StoreLockedError",
    "StoreCorruptError",
    "StoreTruncatedError",
    "StoreClosedError",
    "StoreWriteError",
]


class StreamjoinError(Exception):
    """The root of every error streamjoin raises: catch it to catch them all."""


class StoreError(StreamjoinError):
    """Base class of every error raised by a state store."""


class StoreArgumentError(StoreError, ValueError):
    """``open_store`` or ``destroy_store`` was given a kind, path or option it cannot use."""


class StoreIOError(StoreError):
    """The operating system refused the store's files (no space, no permission, read-only)."""


class BackendNotFoundError(StoreError):
    """The store kind is neither registered nor an importable ``package.module:Class``."""


class StoreLockedError(StoreError):
    """The store directory is held by another process or another open handle."""


class StoreCorruptError(StoreError):
    """The files under a store path cannot be read as a store of the requested kind, or hold
    damaged data; remove the store (``destroy_store``) and rebuild it from its changelog."""


class StoreTruncatedError(StoreCorruptError):
    """A store's data file is shorter than its own records say (cut by a full disk, a copy or a
    tool), or was replaced under an open store; found before anything reads the missing part
    (for LMDB, whose memory-mapped reads past the end of a file kill the process with SIGBUS).
    Rebuild it from its changelog, as for any ``StoreCorruptError``."""


class StoreClosedError(StoreError):
    """A closed store was used."""


class StoreWriteError(StoreError):
    """A write could not be applied; the store is left as it was before the write."""
