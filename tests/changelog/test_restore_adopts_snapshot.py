"""A restore into the arranged store takes the snapshot file itself as the base's values: a hard
link to it where the changelog is on this disk, a copy of its bytes where it is elsewhere."""

from __future__ import annotations

import os

import pyarrow.fs as pafs
import pytest

from streamjoin.changelog import Changelog, compact, restore
from streamjoin.statestore import open_store
from streamjoin.statestore.errors import StoreCorruptError

ENTRIES = [(b"k%05d" % i, b"value %d" % (i * 7)) for i in range(3000)]


def _log(uri: str, filesystem: pafs.FileSystem | None = None) -> Changelog:
    log = Changelog(uri, filesystem=filesystem)
    log.append(0, ENTRIES[:2000], [], [])
    log.append(1, ENTRIES[2000:], [b"k00007"], [])
    compact(log)
    return log


def _base_data(path: str) -> str:
    [name] = [n for n in os.listdir(path) if n.startswith("base-") and n.endswith(".arrow")]
    return os.path.join(path, name)


def _snapshot(log_dir: str) -> str:
    [name] = [n for n in os.listdir(log_dir) if "snapshot" in n]
    return os.path.join(log_dir, name)


def _expected() -> list[tuple[bytes, bytes]]:
    return [kv for kv in ENTRIES if kv[0] != b"k00007"]


def test_arranged_restore_links_a_local_snapshot_as_its_values(tmp_path):
    log = _log(str(tmp_path / "log"))
    store_dir = str(tmp_path / "store")
    with open_store("arranged", store_dir) as store:
        stats = restore(log, store)
        assert stats.entries_loaded == len(_expected()) and store.version == 1
        assert list(store.scan()) == _expected()
    assert os.stat(_base_data(store_dir)).st_ino == os.stat(_snapshot(str(tmp_path / "log"))).st_ino
    with open_store("arranged", store_dir) as store:   # opened again: the files' CRCs checked
        assert store.multi_get([b"k00001", b"k00007", b"k02999"]) == [b"value 7", None, b"value 20993"]
        store.write([(b"k00001", b"new")], [b"k00002"], version=2)
    with open_store("arranged", store_dir) as store:
        assert store.multi_get([b"k00001", b"k00002"]) == [b"new", None]
    # the changelog's snapshot is unchanged by what the store did with its link, and still restores
    with open_store("arranged", str(tmp_path / "again")) as store:
        restore(log, store)
        assert list(store.scan()) == _expected()


def test_arranged_restore_copies_a_snapshot_read_from_elsewhere(tmp_path):
    (tmp_path / "log").mkdir()
    remote = pafs.SubTreeFileSystem(str(tmp_path / "log"), pafs.LocalFileSystem())   # not a local path
    log = _log("ck", remote)
    store_dir = str(tmp_path / "store")
    with open_store("arranged", store_dir) as store:
        restore(log, store)
    snapshot = _snapshot(str(tmp_path / "log" / "ck"))
    data = _base_data(store_dir)
    assert os.stat(data).st_ino != os.stat(snapshot).st_ino
    assert open(data, "rb").read() == open(snapshot, "rb").read()
    with open_store("arranged", store_dir) as store:
        assert list(store.scan()) == _expected()


def test_arranged_store_taking_a_damaged_snapshot_copy_is_refused_when_opened(tmp_path):
    (tmp_path / "log").mkdir()
    log = _log("ck", pafs.SubTreeFileSystem(str(tmp_path / "log"), pafs.LocalFileSystem()))
    store_dir = str(tmp_path / "store")
    with open_store("arranged", store_dir) as store:
        restore(log, store)
    data = _base_data(store_dir)
    raw = bytearray(open(data, "rb").read())
    raw[len(raw) // 2] ^= 0xFF
    with open(data, "wb") as f:
        f.write(raw)
    with pytest.raises(StoreCorruptError, match="checksum"):
        open_store("arranged", store_dir)
