"""RocksDB-specific behaviour: rocksdict quirks the backend works around, SST bulk loading."""

from __future__ import annotations

import os

import pytest

import streamjoin.statestore.rocksdb as rocksdb_backend
from streamjoin.statestore import StoreCorruptError, StoreError, StoreLockedError, open_store


def test_rocksdb_scan_is_right_when_the_bound_object_is_temporary(tmp_path) -> None:
    # rocksdict keeps a raw pointer into the upper bound's bytes; if the store let the bound die
    # before the iterator, every one of these scans would come back wrong (it did, in 0.3.29).
    with open_store("rocksdb-kv", str(tmp_path / "s")) as store:
        store.write(puts=[(b"%03d" % i + s, b"v") for i in range(100) for s in (b"", b"a", b"b")])
        for n in range(2000):
            i = n % 99
            scan = store.scan(b"%03d" % i, b"%03d" % (i + 1))
            junk = [b"%03d" % (j % 7) for j in range(20)]  # reuse the freed memory
            assert [k for k, _ in scan] == [b"%03d" % i + s for s in (b"", b"a", b"b")], junk
            assert len(list(store.scan_prefix(b"%03d" % i))) == 3


def test_rocksdb_reverse_scan_respects_start(tmp_path) -> None:
    with open_store("rocksdb-kv", str(tmp_path / "s")) as store:
        store.write(puts=[(bytes([i]), b"v") for i in range(10)])
        assert [k[0] for k, _ in store.scan(b"\x03", b"\x07", reverse=True)] == [6, 5, 4, 3]
        assert [k[0] for k, _ in store.scan(b"\x03", None, reverse=True)] == [9, 8, 7, 6, 5, 4, 3]


def test_rocksdb_entry_count_survives_a_reopen(tmp_path) -> None:
    # a join's state_entries_estimate must not depend on whether its partition's store was kept open or opened
    # again by another Python worker (an open that skips the table files' statistics counts from 0)
    path = str(tmp_path / "s")
    with open_store("rocksdb-kv", path) as store:
        store.write(puts=[(b"%03d" % i, b"v") for i in range(10)])
        kept = store.stats().entries
    with open_store("rocksdb-kv", path) as store:
        assert store.stats().entries == kept == 10
        store.write(puts=[(b"x%03d" % i, b"v") for i in range(3)])
        assert store.stats().entries == 13


@pytest.fixture
def small_sst_files(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rocksdb_backend, "_SST_TARGET_BYTES", 1)
    monkeypatch.setattr(rocksdb_backend, "_SST_CHECK_EVERY", 100)


def test_rocksdb_load_sorted_spans_several_sst_files(tmp_path, small_sst_files) -> None:
    items = [(b"k%05d" % i, b"v%d" % i) for i in range(1000)]
    with open_store("rocksdb-kv", str(tmp_path / "s")) as store:
        assert store.load_sorted(items, version=3) == 1000
        assert list(store.scan()) == items and store.version == 3
        assert not [p for p in (tmp_path / "s").iterdir() if p.name.startswith("load-")]
    with open_store("rocksdb-kv", str(tmp_path / "s")) as store:
        assert list(store.scan()) == items and store.version == 3


def test_rocksdb_load_sorted_out_of_order_across_files_loads_nothing(tmp_path, small_sst_files) -> None:
    items = [(b"k%05d" % i, b"v") for i in range(1000)]
    items[500] = (b"k00010", b"v")  # the first key of the sixth file goes backwards
    with open_store("rocksdb-kv", str(tmp_path / "s")) as store:
        with pytest.raises(StoreError, match=r"ascending.*k00010.*follows.*k00499"):
            store.load_sorted(items, version=3)
        assert list(store.scan()) == [] and store.version is None
        assert store.load_sorted(items[:500], version=4) == 500  # still empty, still loadable


def test_rocksdb_load_sorted_out_of_order_within_a_file_loads_nothing(tmp_path) -> None:
    with open_store("rocksdb-kv", str(tmp_path / "s")) as store:
        with pytest.raises(StoreError, match=r"ascending.*b'b'.*follows.*b'c'"):
            store.load_sorted([(b"a", b""), (b"c", b""), (b"b", b"")], version=3)
        assert list(store.scan()) == [] and store.version is None


def test_rocksdb_held_by_a_raw_rocksdb_handle_is_locked(tmp_path) -> None:
    # Someone bypassing our lock file (a raw rocksdict handle) still meets RocksDB's LOCK file.
    from rocksdict import Options, Rdict

    path = str(tmp_path / "s")
    with open_store("rocksdb-kv", path) as store:
        store.write(puts=[(b"a", b"1")])
    raw = Rdict(path, Options(raw_mode=True), column_families={"meta": Options(raw_mode=True)})
    try:
        with pytest.raises(StoreLockedError, match="close that handle"):
            open_store("rocksdb-kv", path)
        with pytest.raises(StoreLockedError):
            open_store("rocksdb-kv", path, lock_timeout=0.1)
    finally:
        raw.close()
        del raw
    with open_store("rocksdb-kv", path) as store:
        assert store.get(b"a") == b"1"


@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "reverse"])
def test_rocksdb_scan_over_a_damaged_block_fails_and_the_store_is_not_reused(tmp_path, reverse: bool) -> None:
    # rocksdict's iterators end quietly at a block whose checksum fails: a scan must not pass
    # that off as the end of the range.
    path = str(tmp_path / "s")
    with open_store("rocksdb-kv", path) as store:
        store.write(puts=[(b"k%05d" % i, b"VALUE-%05d" % i * 20) for i in range(20000)])
    (table,) = [n for n in os.listdir(path) if n.endswith(".sst")]
    with open(os.path.join(path, table), "r+b") as fh:
        size = fh.seek(0, os.SEEK_END)
        fh.seek(size // 3)
        fh.write(b"\xde\xad")  # inside a data block, far from the footer and the index
    with open_store("rocksdb-kv", path) as store:  # opening reads the index, not the data blocks
        with pytest.raises(StoreCorruptError, match="checksum") as caught:
            list(store.scan(reverse=reverse))
        assert path in str(caught.value)
    with pytest.raises(StoreCorruptError, match="damaged"):  # the retry rebuilds, never reuses
        open_store("rocksdb-kv", path)
