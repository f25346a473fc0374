"""``store="rocksdb"`` and ``store="lmdb"``: the arranged store with its manifest and runs held in
RocksDB or LMDB.

Each kind is ``streamjoin.statestore.arranged.ArrangedStore`` on one host
(``streamjoin.statestore.hosts``): the database holds the manifest and the run a version adds,
and a base stays a pair of files beside it, memory-mapped, as on every host. Reads never touch the
database: a batch of reads searches the arrangement in memory. A restore links the changelog's
snapshot as the base's values. The options are the arranged store's, without ``host``.

The stores that keep one database entry per state entry, the kinds of streamjoin 0.2, are
``store="rocksdb-kv"`` (``streamjoin.statestore.rocksdb.RocksDBStore``) and
``store="lmdb-kv"`` (``streamjoin.statestore.lmdb.LMDBStore``). A store directory of one kind is
refused by the other, so a query that changes kind rebuilds each partition's store from its
changelog once.
"""

from __future__ import annotations

from typing import Any, Mapping

from streamjoin.statestore.arranged import ArrangedStore

__all__ = ["RocksDBArrangedStore", "LMDBArrangedStore"]


class _Hosted(ArrangedStore):
    """The arranged store on the host ``HOST``: options ``lock_timeout``, ``sync`` and
    ``memory_budget``, as ``ArrangedStore`` takes them."""

    HOST = ""

    @classmethod
    def check_options(cls, options: Mapping[str, Any]) -> None:
        super().check_options({**options, "host": cls.HOST})

    def __init__(self, path: str, *, lock_timeout: float | None = None, sync: bool = False,
                 memory_budget: int | None = None) -> None:
        super().__init__(path, lock_timeout=lock_timeout, sync=sync, memory_budget=memory_budget, host=self.HOST)


class RocksDBArrangedStore(_Hosted):
    """``store="rocksdb"``: the arranged store, its manifest and runs in one RocksDB database
    (``arranged.rocksdb/`` in the store directory; see module)."""

    kind = "rocksdb"
    HOST = "rocksdb"


class LMDBArrangedStore(_Hosted):
    """``store="lmdb"``: the arranged store, its manifest and runs in one LMDB environment
    (``arranged.mdb`` in the store directory; see module)."""

    kind = "lmdb"
    HOST = "lmdb"
