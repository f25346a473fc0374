"""LMDB-specific behaviour: the map grows as needed; keys beyond LMDB's own limit; scans and growth;
checksums that catch damaged files, and the rebuild from the changelog that follows."""

from __future__ import annotations

import os

import lmdb
import pyarrow as pa
import pytest

import streamjoin.statestore.lmdb as lmdb_backend
import streamjoin.statestore.lmdb_layout as layout
from streamjoin.changelog import Changelog, OpenHow, compact, open_logged_store, restore
from streamjoin.statestore import StoreCorruptError, StoreError, destroy_store, open_store
from streamjoin.statestore.chunks import SortedChunks

SMALL_MAP = 64 << 10  # 64 KiB: a few pages


def map_size(store) -> int:
    return store._env.info()["map_size"]


def test_lmdb_write_larger_than_the_map_grows_it(tmp_path) -> None:
    path = str(tmp_path / "s")
    puts = [(b"k%06d" % i, b"v" * 200) for i in range(20000)]  # about 4.5 MB in one write
    with open_store("lmdb-kv", path, map_size=SMALL_MAP) as store:
        store.write(puts=puts, version=1)
        assert map_size(store) > 4 << 20
        assert store.get(b"k012345") == b"v" * 200 and store.stats().entries == 20000
    with open_store("lmdb-kv", path, map_size=SMALL_MAP) as store:  # reopening keeps the larger map
        assert store.version == 1 and len(list(store.scan())) == 20000
        store.write(puts=[(b"more", b"x" * 100000)])
        assert store.get(b"more") == b"x" * 100000


def test_lmdb_many_writes_grow_the_map_step_by_step(tmp_path) -> None:
    with open_store("lmdb-kv", str(tmp_path / "s"), map_size=SMALL_MAP) as store:
        for batch in range(40):
            store.write(puts=[(b"%02d-%04d" % (batch, i), b"x" * 100) for i in range(500)], version=batch)
        assert store.version == 39 and store.stats().entries == 20000
        assert store.get(b"00-0000") == b"x" * 100  # the shared read transaction survived growth


def test_lmdb_load_sorted_grows_the_map(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lmdb_backend, "_LOAD_CHUNK", 1000)
    items = [(b"k%06d" % i, b"v" * 100) for i in range(20000)]
    with open_store("lmdb-kv", str(tmp_path / "s"), map_size=SMALL_MAP) as store:
        assert store.load_sorted(iter(items), version=2) == 20000
        assert list(store.scan()) == items and store.version == 2


def test_lmdb_load_sorted_names_the_key_out_of_order_across_chunks(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(lmdb_backend, "_LOAD_CHUNK", 100)
    items = [(b"k%04d" % i, b"v") for i in range(1000)]
    items[550] = (b"k0003", b"v")
    with open_store("lmdb-kv", str(tmp_path / "s")) as store:
        with pytest.raises(StoreError, match=r"ascending.*k0003.*follows.*k0549"):
            store.load_sorted(items, version=5)
        assert store.version is None  # earlier chunks stay; the marker is not set
        assert [k for k, _ in store.scan()] == [k for k, _ in items[:500]]


@pytest.mark.parametrize("count", [99, 100, 101, 200])
def test_lmdb_load_sorted_keeps_every_entry_at_chunk_boundaries(tmp_path, monkeypatch, count: int) -> None:
    monkeypatch.setattr(lmdb_backend, "_LOAD_CHUNK", 100)
    long = b"p" * 500  # one bucket of long keys that spans the chunk boundary
    items = sorted([(b"k%04d" % i, b"v%d" % i) for i in range(count - 10)]
                   + [(long + b"%02d" % i, b"w%d" % i) for i in range(10)] + [(b"", b"empty")])
    with open_store("lmdb-kv", str(tmp_path / "s")) as store:
        assert store.load_sorted(iter(items), version=3) == len(items)
        assert list(store.scan()) == items and store.version == 3


def test_lmdb_scan_open_while_the_map_grows_fails_cleanly(tmp_path) -> None:
    with open_store("lmdb-kv", str(tmp_path / "s"), map_size=SMALL_MAP) as store:
        store.write(puts=[(b"a", b"1"), (b"b", b"2")])
        scan = store.scan()
        assert next(scan) == (b"a", b"1")
        store.write(puts=[(b"k%06d" % i, b"v" * 200) for i in range(5000)])  # grows the map
        with pytest.raises(StoreError, match="finish iterating before writing"):
            list(scan)
        assert store.get(b"b") == b"2"


def test_lmdb_keys_beyond_lmdb_limits_are_stored_and_found(tmp_path) -> None:
    path = str(tmp_path / "s")
    long_keys = [b"k" * 511, b"k" * 512, b"k" * 512 + b"\x00", b"k" * 4096]
    with open_store("lmdb-kv", path) as store:
        store.write(puts=[(b"a", b"1"), (b"", b"empty")] + [(k, b"%d" % len(k)) for k in long_keys], version=1)
        assert store.get(b"") == b"empty" and store.get(b"k" * 4096) == b"4096"
        store.write(deletes=[b"", b"k" * 512])
        assert [k for k, _ in store.scan()] == [b"a", b"k" * 511, b"k" * 512 + b"\x00", b"k" * 4096]
    with open_store("lmdb-kv", path) as store:
        assert store.multi_get([b"k" * 4096, b"", b"a"]) == [b"4096", None, b"1"]


def test_lmdb_restore_from_the_changelog_with_long_keys(tmp_path) -> None:
    log, local = Changelog(str(tmp_path / "log")), str(tmp_path / "local")
    keys = [b"", b"u" * 480] + [b"u" * 480 + b"/%05d" % i for i in range(300)] + [b"w" * 6000]
    writes = [[(k, b"v0-" + k[-6:]) for k in keys], [(k, b"v1-" + k[-6:]) for k in keys[::7]]]
    for version, puts in enumerate(writes):
        store, _ = open_logged_store("lmdb-kv", local, log, version - 1 if version else None)
        with store:
            store.write(puts=puts, deletes=[keys[5]] if version else [], version=version)
    model = dict(writes[0]) | dict(writes[1])
    del model[keys[5]]
    destroy_store("lmdb-kv", local)  # the local store is lost: the log is all there is
    store, report = open_logged_store("lmdb-kv", local, log, 1)
    with store:
        assert report.how is OpenHow.REBUILT and report.entries_restored == len(model)
        assert list(store.scan()) == sorted(model.items()) and store.version == 1


# -- damage: every entry carries a checksum ----------------------------------------------------------


def flip_one_byte(path: str, pattern: bytes, offset: int) -> None:
    """Flip one bit of the single occurrence of ``pattern`` in the store's data file."""
    data_file = os.path.join(path, "data.mdb")
    with open(data_file, "r+b") as fh:
        data = fh.read()
        assert data.count(pattern) == 1
        at = data.index(pattern) + offset
        fh.seek(at)
        fh.write(bytes([data[at] ^ 0x04]))


def written_store(path: str) -> dict[bytes, bytes]:
    model = {b"key-%04d" % i: b"VALUE-%04d-" % i + b"x" * 30 for i in range(200)}
    with open_store("lmdb-kv", path) as store:
        store.write(puts=list(model.items()), version=3)
    return model


@pytest.mark.parametrize("where", ["value", "key"])
def test_lmdb_flipped_bit_is_detected_on_read_and_on_the_next_open(tmp_path, where: str) -> None:
    path = str(tmp_path / "s")
    model = written_store(path)
    flip_one_byte(path, b"VALUE-0042-" if where == "value" else b"key-0042", 7)
    store = open_store("lmdb-kv", path)
    try:
        assert store.get(b"key-0041") == model[b"key-0041"]  # undamaged entries still read
        with pytest.raises(StoreCorruptError, match="checksum") as caught:
            list(store.scan())  # a damaged key is found by the scan that meets it
        assert path in str(caught.value) and "changelog" in str(caught.value)
    finally:
        store.close()
    with pytest.raises(StoreCorruptError, match="damaged"):  # remembered: never reopened as intact
        open_store("lmdb-kv", path)
    destroy_store("lmdb-kv", path)  # the advice works
    with open_store("lmdb-kv", path) as store:
        assert list(store.scan()) == []


@pytest.mark.parametrize("read", ["get", "multi_get", "scan", "reverse_scan", "scan_range"])
def test_lmdb_every_read_verifies_checksums(tmp_path, read: str) -> None:
    path = str(tmp_path / "s")
    written_store(path)
    flip_one_byte(path, b"VALUE-0042-", 3)
    calls = {
        "get": lambda s: s.get(b"key-0042"),
        "multi_get": lambda s: s.multi_get([b"key-0001", b"key-0042"]),
        "scan": lambda s: list(s.scan()),
        "reverse_scan": lambda s: list(s.scan(reverse=True)),
        "scan_range": lambda s: list(s.scan(b"key-0040", b"key-0050")),
    }
    with open_store("lmdb-kv", path) as store:
        with pytest.raises(StoreCorruptError, match="checksum"):
            calls[read](store)


def test_lmdb_damaged_value_is_rebuilt_from_the_changelog(tmp_path) -> None:
    log, local = Changelog(str(tmp_path / "log")), str(tmp_path / "local")
    model = {b"key-%04d" % i: b"VALUE-%04d-" % i + b"x" * 30 for i in range(200)}
    store, _ = open_logged_store("lmdb-kv", local, log, None)
    with store:
        store.write(puts=list(model.items()), version=0)
    flip_one_byte(local, b"VALUE-0042-", 7)
    store, report = open_logged_store("lmdb-kv", local, log, 0)
    with store:  # the open cannot see the damage yet (it reads no values) ...
        assert report.how is OpenHow.REUSED
        with pytest.raises(StoreCorruptError):  # ... the task that reads it fails
            store.get(b"key-0042")
    store, report = open_logged_store("lmdb-kv", local, log, 0)  # the retry rebuilds
    with store:
        assert report.how is OpenHow.REBUILT and "checksum" in report.reason
        assert dict(store.scan()) == model and store.version == 0


def test_lmdb_store_without_checksums_is_rebuilt(tmp_path) -> None:
    log, local = Changelog(str(tmp_path / "log")), str(tmp_path / "local")
    store, _ = open_logged_store("lmdb-kv", local, log, None)
    with store:
        store.write(puts=[(b"a", b"1")], version=0)
    destroy_store("lmdb-kv", local)
    env = lmdb.open(local, max_dbs=3)  # the layout of a store written before checksums
    with env.begin(write=True) as txn:
        txn.put(b"a", b"1", db=env.open_db(b"data", txn=txn))
        txn.put(b"version", (1 << 63).to_bytes(8, "big"), db=env.open_db(b"meta", txn=txn))
    env.close()
    with pytest.raises(StoreCorruptError, match="checksums"):
        open_store("lmdb-kv", local)
    store, report = open_logged_store("lmdb-kv", local, log, 0)
    with store:
        assert report.how is OpenHow.REBUILT and list(store.scan()) == [(b"a", b"1")]


# -- bulk sealing: a restore's Arrow chunks are sealed a chunk at a time --------------------------


def as_chunks(items: list[tuple[bytes, bytes]], size: int) -> SortedChunks:
    return SortedChunks((pa.array([k for k, _ in items[i:i + size]], pa.large_binary()),
                         pa.array([v for _, v in items[i:i + size]], pa.large_binary())) for i in range(0, len(items), size))


@pytest.mark.parametrize("type_", [pa.binary(), pa.large_binary()])
def test_lmdb_sealed_arrays_match_the_per_record_seal(type_: pa.DataType) -> None:
    items = [(b"\x00", b""), (b"a", b"1"), (b"key", b"v" * 1000), (b"k" * 480, b"\xff" * 7)]
    items += [(b"n%05d" % i, os.urandom(i % 50)) for i in range(300)]
    keys, values = pa.array([k for k, _ in items], type_), pa.array([v for _, v in items], type_)
    records = layout.sealed_arrays(keys.slice(1), values.slice(1))  # an offset into the buffers too
    assert list(records) == layout.sealed(items[1:])
    assert [layout.unseal(k, r) for k, r in records] == [v for _, v in items[1:]]


def test_lmdb_sealed_arrays_refuse_nulls_and_other_types() -> None:
    with pytest.raises(TypeError, match="null"):
        layout.sealed_arrays(pa.array([b"a", b"b"]), pa.array([b"1", None]))
    with pytest.raises(TypeError, match="bytes"):
        layout.sealed_arrays(pa.array([b"a"]), pa.array([1]))


@pytest.mark.parametrize("count", [99, 100, 101, 250])
def test_lmdb_load_sorted_chunks_keeps_every_entry(tmp_path, monkeypatch, count: int) -> None:
    monkeypatch.setattr(lmdb_backend, "_LOAD_CHUNK", 100)
    long = b"p" * 500  # a bucket of long keys spanning a chunk boundary: the per-entry path
    items = sorted([(b"k%04d" % i, b"v%d" % i) for i in range(count - 10)]
                   + [(long + b"%02d" % i, b"w%d" % i) for i in range(10)] + [(b"", b"empty")])
    with open_store("lmdb-kv", str(tmp_path / "s")) as store:
        assert store.load_sorted(as_chunks(items, 70), version=3) == len(items)
        assert list(store.scan()) == items and store.version == 3


def test_lmdb_load_sorted_chunks_names_the_key_out_of_order(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(lmdb_backend, "_LOAD_CHUNK", 100)
    items = [(b"k%04d" % i, b"v") for i in range(1000)]
    items[550] = (b"k0003", b"v")
    with open_store("lmdb-kv", str(tmp_path / "s")) as store:
        with pytest.raises(StoreError, match=r"ascending.*k0003.*follows.*k0549"):
            store.load_sorted(as_chunks(items, 300), version=5)
        assert store.version is None  # earlier chunks stay; the marker is not set
        assert [k for k, _ in store.scan()] == [k for k, _ in items[:500]]
    items = [(b"k%04d" % i, b"v") for i in range(1000)]
    with open_store("lmdb-kv", str(tmp_path / "t")) as store:  # a chunk starting below the last one
        with pytest.raises(StoreError, match=r"ascending.*k0000.*follows.*k0099"):
            store.load_sorted(as_chunks(items[:100] + items[:100], 100), version=5)


def test_lmdb_load_sorted_chunks_refuses_nulls(tmp_path) -> None:
    chunks = SortedChunks([(pa.array([b"a", b"b"]), pa.array([b"1", None]))])
    with open_store("lmdb-kv", str(tmp_path / "s")) as store:
        with pytest.raises(StoreError, match="bad entry.*null"):
            store.load_sorted(chunks, version=1)
        assert store.version is None and list(store.scan()) == []


def test_lmdb_load_sorted_chunks_refuses_keys_without_values(tmp_path) -> None:
    long = b"p" * 500  # the per-entry path too, where zip alone would drop the extra key
    for keys in ([b"a", b"b", b"c"], [b"a", long + b"1", long + b"2"]):
        chunks = SortedChunks([(pa.array(keys), pa.array([b"1", b"2"]))])
        with open_store("lmdb-kv", str(tmp_path / "s")) as store:
            with pytest.raises(StoreError, match="3 keys has 2 values"):
                store.load_sorted(chunks, version=1)
            assert store.version is None and list(store.scan()) == []


def compacted_log(path: str) -> tuple[Changelog, dict[bytes, bytes]]:
    log, model = Changelog(path), {b"key-%04d" % i: b"VALUE-%04d-" % i + b"x" * 30 for i in range(200)}
    log.append(0, sorted(model.items())[:120])
    log.append(1, sorted(model.items())[120:])
    compact(log)
    return log, model


def test_restore_into_lmdb_seals_chunks_in_bulk(tmp_path, monkeypatch) -> None:
    def per_record(*args: object) -> None:
        raise AssertionError("restore sealed records one at a time in Python")

    log, model = compacted_log(str(tmp_path / "log"))
    monkeypatch.setattr(layout, "sealed", per_record)
    monkeypatch.setattr(layout, "seal", per_record)
    with open_store("lmdb-kv", str(tmp_path / "s")) as store:
        stats = restore(log, store)
        assert stats.method.value == "bulk" and dict(store.scan()) == model and store.version == 1


@pytest.mark.parametrize("where", ["value", "key"])
def test_lmdb_damaged_record_of_a_bulk_restore_is_detected(tmp_path, where: str) -> None:
    path = str(tmp_path / "s")
    log, model = compacted_log(str(tmp_path / "log"))
    with open_store("lmdb-kv", path) as store:
        restore(log, store)
        assert store.get(b"key-0042") == model[b"key-0042"]
    flip_one_byte(path, b"VALUE-0042-" if where == "value" else b"key-0042", 7)
    with open_store("lmdb-kv", path) as store:
        assert store.get(b"key-0041") == model[b"key-0041"]
        with pytest.raises(StoreCorruptError, match="checksum"):
            list(store.scan())
