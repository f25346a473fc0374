"""A changelogged arranged store keeps a column write's changelog delta as its run
(``ColumnWrite.file``): one file written once, linked where the log is on this disk and copied
where it is not, read back as the same entries after a reopen, a roll-back and the delta's removal."""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.fs as pafs
import pytest

from streamjoin.changelog import Changelog, ChangeloggingStore, restore
from streamjoin.statestore import open_store
from streamjoin.statestore.columns import ColumnWrite

LOADED = [(b"k%05d" % i, b"value %d" % i) for i in range(10_000)]
PUTS = [(b"k%05d" % i, b"new %d" % i) for i in range(0, 10_000, 7)]
DELETES = [b"k%05d" % i for i in range(3, 10_000, 50)]


def _expected(versions: int) -> list[tuple[bytes, bytes]]:
    state = dict(LOADED)
    if versions >= 1:
        for key in DELETES:
            state.pop(key, None)
        state.update(PUTS)
    return sorted(state.items())


def _store(tmp_path, log: Changelog, store: str = "arranged") -> ChangeloggingStore:
    logged = ChangeloggingStore(open_store(store, str(tmp_path / "store")), log)
    logged.write(LOADED, [], version=0)
    logged.write_columns(ColumnWrite.of([k for k, _ in PUTS], [v for _, v in PUTS], DELETES), version=1)
    return logged


def _runs(path: str) -> list[str]:
    return sorted(n for n in os.listdir(path) if n.startswith("run-"))


def _delta(log_dir: str, version: int) -> str:
    [name] = [n for n in os.listdir(log_dir) if n.startswith(f"delta-{version:020d}-")]
    return os.path.join(log_dir, name)


def test_changelogged_arranged_store_links_its_delta_as_its_run(tmp_path):
    store = _store(tmp_path, Changelog(str(tmp_path / "log")))
    assert list(store.scan()) == _expected(1) and store.version == 1
    [run] = _runs(str(tmp_path / "store"))
    delta = _delta(str(tmp_path / "log"), 1)
    assert os.stat(os.path.join(tmp_path / "store", run)).st_ino == os.stat(delta).st_ino
    store.close()
    os.remove(delta)   # the log's retention removes its name; the store's link keeps the bytes
    with open_store("arranged", str(tmp_path / "store")) as reopened:   # every file's CRC checked again
        assert list(reopened.scan()) == _expected(1) and reopened.version == 1
        assert reopened.roll_back(0) == 1
        assert list(reopened.scan()) == _expected(0)


def test_changelogged_arranged_store_copies_the_delta_of_a_log_elsewhere(tmp_path):
    (tmp_path / "remote").mkdir()
    log = Changelog("ck", filesystem=pafs.SubTreeFileSystem(str(tmp_path / "remote"), pafs.LocalFileSystem()))
    assert not log.local
    store = _store(tmp_path, log)
    [run] = _runs(str(tmp_path / "store"))
    delta = _delta(str(tmp_path / "remote" / "ck"), 1)
    with open(os.path.join(tmp_path / "store", run), "rb") as copied, open(delta, "rb") as original:
        assert copied.read() == original.read()
    assert os.stat(os.path.join(tmp_path / "store", run)).st_ino != os.stat(delta).st_ino
    store.close()
    with open_store("arranged", str(tmp_path / "store")) as reopened:
        assert list(reopened.scan()) == _expected(1)


@pytest.mark.parametrize("store", ["arranged", "memory", "rocksdb", "lmdb"])
def test_changelogged_store_given_its_delta_reopens_and_restores_the_same_entries(tmp_path, store):
    logged = _store(tmp_path, Changelog(str(tmp_path / "log")), store)
    assert list(logged.scan()) == _expected(1)
    logged.close()
    with open_store(store, str(tmp_path / "store")) as reopened:
        assert list(reopened.scan()) == _expected(1) and reopened.version == 1
    with open_store("arranged", str(tmp_path / "restored")) as fresh:
        restore(Changelog(str(tmp_path / "log")), fresh)
        assert list(fresh.scan()) == _expected(1)


def test_changelogged_arranged_store_links_the_delta_of_a_write_of_lists(tmp_path):
    log = Changelog(str(tmp_path / "log"))
    store = ChangeloggingStore(open_store("arranged", str(tmp_path / "store")), log)
    store.write(LOADED, [], version=0)
    store.write(PUTS, DELETES, version=1)
    [run] = _runs(str(tmp_path / "store"))
    assert os.stat(os.path.join(tmp_path / "store", run)).st_ino == os.stat(_delta(str(tmp_path / "log"), 1)).st_ino
    assert list(store.scan()) == _expected(1)


@pytest.mark.parametrize("host", ["lmdb", "rocksdb"])
def test_changelogged_arranged_store_on_a_database_host_reads_back_a_delta_with_range_deletes(tmp_path, host):
    log = Changelog(str(tmp_path / "log"))
    store = ChangeloggingStore(open_store("arranged", str(tmp_path / "store"), host=host), log)
    store.write(LOADED, [], version=0)
    store.write([(b"k00150", b"y")], [b"k00002"], [(b"k00100", b"k00200")], version=1)
    expected = {k: v for k, v in LOADED if not b"k00100" <= k < b"k00200" and k != b"k00002"}
    expected[b"k00150"] = b"y"
    store.close()
    with open_store("arranged", str(tmp_path / "store"), host=host) as reopened:   # the run's bytes held by the host
        assert list(reopened.scan()) == sorted(expected.items())
        assert reopened.roll_back(0) == 1
        assert list(reopened.scan()) == LOADED


@pytest.mark.parametrize("columns", [False, True], ids=["lists", "columns"])
def test_changelogged_arranged_store_links_the_delta_of_a_write_with_range_deletes(tmp_path, columns):
    log = Changelog(str(tmp_path / "log"))
    store = ChangeloggingStore(open_store("arranged", str(tmp_path / "store")), log)
    store.write(LOADED, [], version=0)
    ranges = [(b"k00100", b"k00200"), (b"k00500", b"k00510")]
    if columns:
        store.write_columns(ColumnWrite.of([b"k00001", b"k00150"], [b"x", b"y"], [b"k00002"], ranges), version=1)
    else:
        store.write([(b"k00001", b"x"), (b"k00150", b"y")], [b"k00002"], ranges, version=1)
    [run] = _runs(str(tmp_path / "store"))
    assert os.stat(os.path.join(tmp_path / "store", run)).st_ino == os.stat(_delta(str(tmp_path / "log"), 1)).st_ino
    expected = {k: v for k, v in LOADED if not (b"k00100" <= k < b"k00200" or b"k00500" <= k < b"k00510")}
    expected.pop(b"k00002")
    expected.update({b"k00001": b"x", b"k00150": b"y"})   # a put after the range delete stays
    assert list(store.scan()) == sorted(expected.items())
    store.close()
    with open_store("arranged", str(tmp_path / "store")) as reopened:   # the delta read back as the run
        assert list(reopened.scan()) == sorted(expected.items())
        assert reopened.roll_back(0) == 1
        assert list(reopened.scan()) == LOADED
    with open_store("memory", str(tmp_path / "restored")) as fresh:
        restore(Changelog(str(tmp_path / "log")), fresh)
        assert list(fresh.scan()) == sorted(expected.items())


def test_arranged_run_of_a_delta_reads_its_leading_op_2_rows_as_range_deletes_and_refuses_others():
    from streamjoin.changelog.format import Kind, encode_delta
    from streamjoin.statestore.arranged import _run_columns_of

    batch = encode_delta(Kind.DELTA, 1, [(b"k1", b"x")], [b"k2"], [(b"a", b"b"), (b"c", b"d")])
    keys, values, ranges = _run_columns_of(pa.Table.from_batches([batch]))
    assert ranges == [(b"a", b"b"), (b"c", b"d")]
    assert keys.to_pylist() == [b"k2", b"k1"] and values.to_pylist() == [None, b"x"]
    with pytest.raises(ValueError, match="range deletes"):
        _run_columns_of(pa.Table.from_batches([batch.take([0, 3, 1, 2])]))
