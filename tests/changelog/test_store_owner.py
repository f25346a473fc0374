"""A partition's local store proves whose it is before it is trusted: a store swapped in from
another partition (same version, cold or kept warm), or written before owner tags existed, is
rebuilt from the changelog, and the next version's state equals an uninterrupted run's."""

from __future__ import annotations

import os
import shutil

import pytest

from streamjoin.changelog import Changelog, OpenHow, open_logged_store, release_logged_store, restore
from streamjoin.statestore import open_store, warm

KINDS = ["arranged", "rocksdb", "lmdb", "rocksdb-kv", "lmdb-kv"]
PUTS = {0: [(b"k", b"p0-v0"), (b"a", b"p0")], 1: [(b"k", b"p1-v0"), (b"b", b"p1")]}


@pytest.fixture(autouse=True)
def _no_parked_stores():
    warm.evict_all()
    yield
    warm.evict_all()


def _commit(kind, path, log, version, puts, keep_warm):
    store, report = open_logged_store(kind, path, log, version - 1 if version else None, warm=keep_warm)
    store.write(puts, (), (), version=version)
    release_logged_store(store)
    return report


def _swap_directories(first: str, second: str) -> None:
    os.rename(first, first + ".swap")
    os.rename(second, first)
    os.rename(first + ".swap", second)


def _swap_data_files_in_place(first: str, second: str, name: str) -> None:
    """Overwrite each LMDB data file ``name`` with the other's (same inodes: the directories look unchanged)."""
    a, b = (os.path.join(p, name) for p in (first, second))
    shutil.copyfile(a, a + ".copy")
    shutil.copyfile(b, a)
    shutil.copyfile(a + ".copy", b)
    os.remove(a + ".copy")


def _two_partitions(tmp_path, kind, keep_warm):
    paths = [str(tmp_path / f"p={p}") for p in (0, 1)]
    logs = [Changelog(str(tmp_path / f"log{p}")) for p in (0, 1)]
    for p in (0, 1):
        _commit(kind, paths[p], logs[p], 0, PUTS[p], keep_warm)
    return paths, logs


# only LMDB's data file can be overwritten in place under an open store
@pytest.mark.parametrize("kind, how", [(kind, how) for kind in KINDS for how in ("cold", "warm")]
                         + [("lmdb-kv", "warm-in-place"), ("lmdb", "warm-in-place")])
def test_open_logged_store_rebuilds_a_store_swapped_with_another_partitions(tmp_path, kind, how):
    paths, logs = _two_partitions(tmp_path, kind, keep_warm=how != "cold")
    if how == "warm-in-place":
        _swap_data_files_in_place(*paths, "data.mdb" if kind == "lmdb-kv" else "arranged.mdb")
    else:
        _swap_directories(*paths)
    for p in (0, 1):
        store, report = open_logged_store(kind, paths[p], logs[p], 0, warm=how != "cold")
        try:
            if (kind, how) != ("rocksdb", "warm"):   # (RocksDB writes its files by path: a database moved
                assert report.how is OpenHow.REBUILT, report  # while open may write into the other's; the state is checked)
            if how != "warm":   # a RocksDB store moved while open may also write into the other's files
                assert "another partition" in report.reason
            store.write([(b"c", b"v1")], (), (), version=1)
            expected = dict(PUTS[p]) | {b"c": b"v1"}
            assert dict(store.scan()) == expected
        finally:
            store.close()
        with open_store("memory", str(tmp_path / f"restored{p}")) as restored:
            restore(logs[p], restored, 1)
            assert dict(restored.scan()) == expected


@pytest.mark.parametrize("kind", KINDS)
def test_open_logged_store_reuses_its_own_store_and_rebuilds_an_untagged_one(tmp_path, kind):
    path, log = str(tmp_path / "p=0"), Changelog(str(tmp_path / "log"))
    _commit(kind, path, log, 0, PUTS[0], keep_warm=False)
    store, report = open_logged_store(kind, path, log, 0)
    assert report.how is OpenHow.REUSED
    store.close()
    with open_store(kind, path) as old:   # a write of the format before owner tags: no tag
        old.write([(b"stale", b"x")], version=0)
        assert old.owner is None
    store, report = open_logged_store(kind, path, log, 0)
    try:
        assert report.how is OpenHow.REBUILT and "no owner tag" in report.reason
        assert dict(store.scan()) == dict(PUTS[0])
    finally:
        store.close()
    store, report = open_logged_store(kind, path, log, 0)   # rebuilt with the tag: trusted again
    try:
        assert report.how is OpenHow.REUSED
    finally:
        store.close()


@pytest.mark.parametrize("kind", KINDS + ["memory"])
def test_store_owner_is_written_with_the_version_marker(tmp_path, kind):
    path = str(tmp_path / "s")
    store = open_store(kind, path)
    try:
        store.stamp = b"mine"
        store.write([(b"a", b"1")])            # no version: no tag either
        assert store.owner is None
        store.write([(b"a", b"2")], version=0)
        assert store.owner == b"mine"
        store.stamp = None
        store.write([(b"a", b"3")], version=1)  # a versioned write without a stamp clears it
        assert store.owner is None
        store.stamp = b"mine"
        store.write((), version=2)
    finally:
        store.close()
    with open_store(kind, path) as again:
        assert (again.version, again.owner) == (2, b"mine")
