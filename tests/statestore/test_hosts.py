"""Where an arranged store's files live (``host=``): what the LMDB host does beyond the store
contract, which its suites check (the ``lmdb`` and ``rocksdb`` backends of ``conftest.BACKENDS``, the
arranged store on those hosts)."""

from __future__ import annotations

import os

import pytest

from streamjoin.changelog import Changelog, OpenHow, compact, open_logged_store, restore
from streamjoin.statestore import StoreArgumentError, StoreCorruptError, destroy_store, open_store
from streamjoin.statestore.hosts import LMDB_FILE, ROCKSDB_DIR, LMDBHost, RocksDBHost
from streamjoin.statestore.locking import LOCK_FILE

LMDB = {"host": "lmdb"}
ENTRIES = [(b"k%05d" % i, b"value %d" % (i * 7)) for i in range(3000)]


def _files(path: str) -> list[str]:
    return sorted(os.listdir(path))


def _held(path: str) -> set[str]:
    """The names of the values in the store's LMDB database."""
    host = LMDBHost(path, sync=False)
    try:
        with host._env.begin() as txn:
            return {bytes(key).decode() for key in txn.cursor().iternext(keys=True, values=False)}
    finally:
        host.close()


@pytest.mark.parametrize("host, database", [("lmdb", [LMDB_FILE, LMDB_FILE + "-lock"]), ("rocksdb", [ROCKSDB_DIR])])
def test_hosts_database_keeps_runs_and_the_manifest_and_bases_beside_it(tmp_path, host, database):
    path = str(tmp_path / "s")
    with open_store("arranged", path, host=host) as store:
        store.write([(b"k%05d" % i, b"v0") for i in range(5000)], version=0)   # more than a run holds: a base
        for version in range(1, 4):   # small writes: runs
            store.write([(b"k%05d" % i, b"v%d" % version) for i in range(1, 100)], [b"k00000"], version=version)
    bases = [name for name in _files(path) if name.startswith("base-")]
    assert _files(path) == sorted([*database, LOCK_FILE, *bases])
    assert [name.rsplit(".")[-1] for name in bases] == ["arrow", "keys"]
    opened = (LMDBHost if host == "lmdb" else RocksDBHost)(path, sync=False)
    try:
        held = opened.names() - set(bases)
        assert len(held) == 3 and all(name.startswith("run-") for name in held)   # the manifest besides
        assert opened.read_manifest() is not None
        assert opened.read(bases[0]).size == os.path.getsize(os.path.join(path, bases[0]))   # mapped from the file
    finally:
        opened.close()
    with open_store("arranged", path, host=host) as store:
        assert store.version == 3 and store.get(b"k00000") is None and store.get(b"k00099") == b"v3"
        assert store.get(b"k04999") == b"v0" and store.roll_back(2) == 1 and store.get(b"k00099") == b"v2"


def test_hosts_lmdb_removes_the_files_of_bases_merged_away(tmp_path):
    path = str(tmp_path / "s")
    with open_store("arranged", path, memory_budget=1, **LMDB) as store:   # every write merges a base
        for version in range(6):
            store.write([(b"k%d" % i, b"v%d" % version) for i in range(1, 100)], [b"k0"], version=version)
        kept = [name for name in _files(path) if name.startswith("base-")]
    # the newest base and those of the versions kept to return to, not the first ones
    assert "base-00000005.arrow" in kept and "base-00000005.keys" in kept
    assert not {"base-00000000.arrow", "base-00000001.arrow", "base-00000001.keys"} & set(kept)
    assert _held(path) == {"MANIFEST"}
    with open_store("arranged", path, **LMDB) as store:
        assert store.version == 5 and dict(store.scan()) == {b"k%d" % i: b"v5" for i in range(1, 100)}


def test_hosts_lmdb_restore_links_the_snapshot_as_the_base(tmp_path):
    log = Changelog(str(tmp_path / "log"))
    log.append(0, ENTRIES[:2000], [], [])
    log.append(1, ENTRIES[2000:], [b"k00007"], [])
    compact(log)
    expected = [kv for kv in ENTRIES if kv[0] != b"k00007"]
    path = str(tmp_path / "s")
    with open_store("arranged", path, **LMDB) as store:
        assert restore(log, store).entries_loaded == len(expected) and store.version == 1
    data = [name for name in _files(path) if name.startswith("base-") and name.endswith(".arrow")]
    assert len(data) == 1 and os.stat(os.path.join(path, data[0])).st_nlink == 2   # the snapshot's inode
    with open_store("arranged", path, **LMDB) as store:   # opened again: every value's CRC checked
        assert list(store.scan()) == expected
        store.write([(b"k00001", b"new")], [b"k00002"], version=2)
        assert store.multi_get([b"k00001", b"k00002", b"k02999"]) == [b"new", None, b"value 20993"]


def test_hosts_lmdb_buffers_outlive_their_file_and_the_host(tmp_path):
    path = str(tmp_path / "s")
    os.makedirs(path)
    old = bytes(range(256)) * 4096   # 1 MiB: overflow pages LMDB frees and reuses
    host = LMDBHost(path, sync=False)
    host.write("base-1.arrow", old)
    host.write_manifest(b"1")   # the file is written with the manifest that names it
    mapped = host.read("base-1.arrow")   # LMDB's own pages, no copy
    host.remove("base-1.arrow")
    host.write_manifest(b"2")
    for n in range(8):   # writes that would take the freed pages if nothing read them
        host.write(f"run-{n}.arrow", bytes([n]) * len(old))
        host.write_manifest(b"3")
        host.remove(f"run-{n}.arrow")
    host.close()
    assert mapped.to_pybytes() == old
    again = LMDBHost(path, sync=False)   # the process's environment, still open for the buffer
    try:
        assert again.names() == set() and again.read_manifest() == b"3"
    finally:
        again.close()
    del mapped


def test_hosts_lmdb_store_destroyed_and_made_again_is_new(tmp_path):
    path = str(tmp_path / "s")
    with open_store("arranged", path, **LMDB) as store:
        store.write([(b"a", b"1")], version=0)
        kept = store.scan()   # keeps nothing mapped (the delta is in memory), but holds the state
    destroy_store("arranged", path)
    with open_store("arranged", path, **LMDB) as store:
        assert store.version is None and store.get(b"a") is None
        store.write([(b"b", b"2")], version=0)
    with open_store("arranged", path, **LMDB) as store:
        assert dict(store.scan()) == {b"b": b"2"}
    assert dict(kept) == {b"a": b"1"}


@pytest.mark.parametrize("host_class", [LMDBHost, RocksDBHost], ids=["lmdb", "rocksdb"])
def test_hosts_database_writes_a_run_with_the_manifest_that_names_it(tmp_path, host_class):
    path = str(tmp_path / "s")
    os.makedirs(path)
    host = host_class(path, sync=True)
    try:
        host.write("run-1.arrow", b"run")
        assert "run-1.arrow" not in host.names()   # not in the database until its manifest
        host.write_manifest(b"names run-1")
        assert host.names() == {"run-1.arrow"} and host.read("run-1.arrow").to_pybytes() == b"run"
        host.remove("run-1.arrow")
        host.write("run-2.arrow", b"never named")
        host.remove("run-2.arrow")   # a write that failed before its manifest: nothing reaches the database
        with pytest.raises(FileNotFoundError):
            host.read("run-2.arrow")
    finally:
        host.close()   # commits the removal held back
    again = host_class(path, sync=False)
    try:
        assert again.names() == set() and again.read_manifest() == b"names run-1"
    finally:
        again.close()
    with pytest.raises(OSError, match="closed"):
        again.read_manifest()


def test_hosts_another_host_is_refused_and_rebuilt_from_the_changelog(tmp_path):
    log, path = Changelog(str(tmp_path / "log")), str(tmp_path / "p0")
    store, _ = open_logged_store("arranged", path, log, None)
    for version in range(3):
        store.write([(b"k%d" % version, b"v%d" % version)], [b"k0"] if version == 2 else [], version=version)
    store.close()
    for host in ("lmdb", "rocksdb"):
        with pytest.raises(StoreCorruptError, match="holds other files"):
            open_store("arranged", path, host=host)
    for host in ("lmdb", "rocksdb", "directory"):   # and back
        store, report = open_logged_store("arranged", path, log, 2, host=host)
        try:
            assert report.how is OpenHow.REBUILT and "not a readable arranged store" in report.reason
            assert (dict(store.scan()), store.version) == ({b"k1": b"v1", b"k2": b"v2"}, 2)
        finally:
            store.close()


def test_hosts_unknown_host_is_refused_with_the_choices(tmp_path):
    with pytest.raises(StoreArgumentError, match=r"host='s3' is not one of \['directory', 'lmdb', 'rocksdb'\]"):
        open_store("arranged", str(tmp_path / "s"), host="s3")
    assert not os.path.exists(tmp_path / "s")
