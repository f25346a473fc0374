"""The arranged store on another host (``host="lmdb"``, ``host="rocksdb"``) as a kind of its own,
for tests that take a store kind and no options (``"tests.statestore.hosted:ArrangedOnLMDB"``)."""

from __future__ import annotations

from typing import Any

from streamjoin.statestore.arranged import ArrangedStore


class ArrangedOnLMDB(ArrangedStore):
    """``ArrangedStore(path, host="lmdb", ...)``."""

    def __init__(self, path: str, **options: Any) -> None:
        super().__init__(path, **{**options, "host": "lmdb"})


class ArrangedOnRocksDB(ArrangedStore):
    """``ArrangedStore(path, host="rocksdb", ...)``."""

    def __init__(self, path: str, **options: Any) -> None:
        super().__init__(path, **{**options, "host": "rocksdb"})
