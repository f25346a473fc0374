"""LMDB-specific behaviour: the map grows as needed; key limits; scans and growth."""

from __future__ import annotations

import pytest

import streamjoin.statestore.lmdb as lmdb_backend
from streamjoin.statestore import StoreError, StoreWriteError, open_store

SMALL_MAP = 64 << 10  # 64 KiB: a few pages


def map_size(store) -> int:
    return store._env.info()["map_size"]


def test_lmdb_write_larger_than_the_map_grows_it(tmp_path) -> None:
    path = str(tmp_path / "s")
    puts = [(b"k%06d" % i, b"v" * 200) for i in range(20000)]  # about 4.5 MB in one write
    with open_store("lmdb", path, map_size=SMALL_MAP) as store:
        store.write(puts=puts, version=1)
        assert map_size(store) > 4 << 20
        assert store.get(b"k012345") == b"v" * 200 and store.stats().entries == 20000
    with open_store("lmdb", path, map_size=SMALL_MAP) as store:  # reopening keeps the larger map
        assert store.version == 1 and len(list(store.scan())) == 20000
        store.write(puts=[(b"more", b"x" * 100000)])
        assert store.get(b"more") == b"x" * 100000


def test_lmdb_many_writes_grow_the_map_step_by_step(tmp_path) -> None:
    with open_store("lmdb", str(tmp_path / "s"), map_size=SMALL_MAP) as store:
        for batch in range(40):
            store.write(puts=[(b"%02d-%04d" % (batch, i), b"x" * 100) for i in range(500)], version=batch)
        assert store.version == 39 and store.stats().entries == 20000
        assert store.get(b"00-0000") == b"x" * 100  # the shared read transaction survived growth


def test_lmdb_load_sorted_grows_the_map(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lmdb_backend, "_LOAD_CHUNK", 1000)
    items = [(b"k%06d" % i, b"v" * 100) for i in range(20000)]
    with open_store("lmdb", str(tmp_path / "s"), map_size=SMALL_MAP) as store:
        assert store.load_sorted(iter(items), version=2) == 20000
        assert list(store.scan()) == items and store.version == 2


def test_lmdb_load_sorted_names_the_key_out_of_order_across_chunks(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(lmdb_backend, "_LOAD_CHUNK", 100)
    items = [(b"k%04d" % i, b"v") for i in range(1000)]
    items[550] = (b"k0003", b"v")
    with open_store("lmdb", str(tmp_path / "s")) as store:
        with pytest.raises(StoreError, match=r"ascending.*k0003.*follows.*k0549"):
            store.load_sorted(items, version=5)
        assert store.version is None  # earlier chunks stay; the marker is not set
        assert [k for k, _ in store.scan()] == [k for k, _ in items[:500]]


def test_lmdb_scan_open_while_the_map_grows_fails_cleanly(tmp_path) -> None:
    with open_store("lmdb", str(tmp_path / "s"), map_size=SMALL_MAP) as store:
        store.write(puts=[(b"a", b"1"), (b"b", b"2")])
        scan = store.scan()
        assert next(scan) == (b"a", b"1")
        store.write(puts=[(b"k%06d" % i, b"v" * 200) for i in range(5000)])  # grows the map
        with pytest.raises(StoreError, match="finish iterating before writing"):
            list(scan)
        assert store.get(b"b") == b"2"


def test_lmdb_keys_outside_its_limits_fail_the_write_and_are_never_found(tmp_path) -> None:
    with open_store("lmdb", str(tmp_path / "s")) as store:
        store.write(puts=[(b"a", b"1")], version=1)
        for key in (b"", b"k" * 512):
            with pytest.raises(StoreWriteError):
                store.write(puts=[(b"b", b"2"), (key, b"v")], version=2)
            assert store.get(key) is None and store.multi_get([key, b"a"]) == [None, b"1"]
        assert list(store.scan()) == [(b"a", b"1")] and store.version == 1
        store.write(puts=[(b"k" * 511, b"v")])  # the longest key LMDB takes
        assert store.get(b"k" * 511) == b"v"
        store.write(deletes=[b"", b"k" * 512, b"k" * 511])  # deleting what cannot exist is a no-op
        assert list(store.scan()) == [(b"a", b"1")]
