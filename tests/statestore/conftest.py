"""Backends for the store suites: every contract test runs once per entry of :data:`BACKENDS`."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Iterator

import pytest

from streamjoin.statestore import Store, destroy_store, open_store, register_backend
from tests.statestore.userstore import PickleStore

REGISTERED_USER_KIND = "user-pickle"
register_backend(REGISTERED_USER_KIND, PickleStore)


@dataclass(frozen=True)
class Backend:
    """One way of opening a store: what ``open_store`` is given as the kind."""

    name: str
    kind: str
    #: Data lives in files (and so survives another process); memory does not.
    on_disk: bool = True
    #: Options every open of this backend is given (beside a test's own).
    options: tuple[tuple[str, Any], ...] = ()

    def open(self, path: str, **options: Any) -> Store:
        return open_store(self.kind, path, **{**dict(self.options), **options})

    def destroy(self, path: str) -> None:
        destroy_store(self.kind, path)

    def __repr__(self) -> str:
        return self.name


BACKENDS = [
    Backend("memory", "memory", on_disk=False),
    # the arranged store with its manifest and runs in RocksDB, in LMDB (its bases files beside them)
    Backend("rocksdb", "rocksdb"),
    Backend("lmdb", "lmdb"),
    # one RocksDB or LMDB entry per state entry
    Backend("rocksdb-kv", "rocksdb-kv"),
    Backend("lmdb-kv", "lmdb-kv"),
    Backend("arranged", "arranged"),
    # a budget of one byte: every write merges its changes into a new base (memory-mapped files)
    Backend("arranged-merging", "arranged", options=(("memory_budget", 1),)),
    Backend("user-import-path", "tests.statestore.userstore:PickleStore"),
    Backend("user-registered", REGISTERED_USER_KIND),
]
DISK_BACKENDS = [b for b in BACKENDS if b.name in ("rocksdb", "lmdb", "rocksdb-kv", "lmdb-kv", "arranged")]


@pytest.fixture(params=BACKENDS, ids=lambda b: b.name)
def backend(request: pytest.FixtureRequest) -> Backend:
    return request.param


@pytest.fixture
def store_path(tmp_path: Any) -> str:
    return os.path.join(str(tmp_path), "store")


@pytest.fixture
def store(backend: Backend, store_path: str) -> Iterator[Store]:
    handle = backend.open(store_path)
    yield handle
    handle.close()
    backend.destroy(store_path)
