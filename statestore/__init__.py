"""Local state stores for streamjoin operators: ordered ``bytes -> bytes`` maps with versions.

    from streamjoin.statestore import open_store
    with open_store("arranged", "/path/to/p0") as store:
        store.write(puts=[(b"k", b"v")], version=0)

Backends: ``arranged`` (default: sorted columns, a base mapped from Arrow files), ``rocksdb`` and
``lmdb`` (the same, its manifest and runs in RocksDB or LMDB), ``rocksdb-kv`` (one rocksdict entry
per state entry), ``lmdb-kv`` (one py-lmdb entry per state entry), ``memory`` (tests, the model),
or ``"package.module:Class"``. See :mod:`streamjoin.statestore.base` for the contract.
"""

from streamjoin.statestore.base import KeyValue, Store, StoreStats, prefix_end
from streamjoin.statestore.errors import (
    BackendNotFoundError,
    StoreArgumentError,
    StoreClosedError,
    StoreCorruptError,
    StoreError,
    StoreIOError,
    StoreLockedError,
    StoreTruncatedError,
    StoreWriteError,
)
from streamjoin.statestore.registry import backend_names, destroy_store, open_store, register_backend

__all__ = [
    "BackendNotFoundError",
    "KeyValue",
    "Store",
    "StoreArgumentError",
    "StoreClosedError",
    "StoreCorruptError",
    "StoreError",
    "StoreIOError",
    "StoreLockedError",
    "StoreStats",
    "StoreTruncatedError",
    "StoreWriteError",
    "backend_names",
    "destroy_store",
    "open_store",
    "prefix_end",
    "register_backend",
]
