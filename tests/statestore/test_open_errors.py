"""Unreadable store directories and library errors: everything surfaces as a StoreError that says
which path and what to do; no rocksdict or lmdb exception reaches the caller."""

from __future__ import annotations

import inspect
import os

import pytest

from streamjoin import statestore
from streamjoin.statestore import StoreCorruptError, StoreError, StoreLockedError, StoreWriteError
from tests.statestore.conftest import DISK_BACKENDS, Backend


@pytest.fixture(params=DISK_BACKENDS, ids=lambda b: b.name)
def disk_backend(request: pytest.FixtureRequest) -> Backend:
    return request.param


def garbage_files(path: str) -> None:
    os.makedirs(path)
    with open(os.path.join(path, "notes.txt"), "w") as fh:
        fh.write("not a store")


def garbage_library_files(path: str) -> None:
    os.makedirs(path)
    for name in ("CURRENT", "data.mdb"):  # the files each library looks for, full of noise
        with open(os.path.join(path, name), "wb") as fh:
            fh.write(bytes(range(256)) * 64)


def a_plain_file(path: str) -> None:
    with open(path, "w") as fh:
        fh.write("a file where a store directory should be")


@pytest.mark.parametrize("damage", [garbage_files, garbage_library_files, a_plain_file])
def test_open_corrupt_path_names_it_and_says_what_to_do(disk_backend: Backend, store_path: str, damage) -> None:
    damage(store_path)
    with pytest.raises(StoreCorruptError) as caught:
        disk_backend.open(store_path)
    message = str(caught.value)
    assert store_path in message and "Remove the directory" in message and "changelog" in message
    disk_backend.destroy(store_path)  # the advice works
    with disk_backend.open(store_path) as store:
        assert list(store.scan()) == []


def test_open_store_of_the_other_kind_is_refused(store_path: str) -> None:
    with statestore.open_store("lmdb", store_path) as store:
        store.write(puts=[(b"a", b"1")])
    with pytest.raises(StoreCorruptError, match="not a readable rocksdb store"):
        statestore.open_store("rocksdb", store_path)
    statestore.destroy_store("lmdb", store_path)
    with statestore.open_store("rocksdb", store_path) as store:
        store.write(puts=[(b"a", b"1")])
    with pytest.raises(StoreCorruptError, match="not a readable lmdb store"):
        statestore.open_store("lmdb", store_path)


def test_open_rocksdb_with_damaged_table_file_is_corrupt(store_path: str) -> None:
    with statestore.open_store("rocksdb", store_path) as store:
        store.write(puts=[(b"k%04d" % i, b"v" * 50) for i in range(1000)])
    tables = [n for n in os.listdir(store_path) if n.endswith(".sst")]
    assert tables  # close() flushed the memtable into a table file
    with open(os.path.join(store_path, tables[0]), "r+b") as fh:
        fh.seek(0, os.SEEK_END)
        fh.seek(fh.tell() - 48)
        fh.write(b"\x00" * 48)  # the footer with the magic number
    with pytest.raises(StoreCorruptError, match=store_path):
        statestore.open_store("rocksdb", store_path)


BAD_CALLS = {
    "get-str": lambda s: s.get("a"),
    "get-none": lambda s: s.get(None),
    "multi-get-str": lambda s: s.multi_get([b"a", "b"]),
    "scan-start-int": lambda s: list(s.scan(start=3)),
    "scan-end-str": lambda s: list(s.scan(end="z")),
    "scan-reverse-bad": lambda s: list(s.scan(start=3, reverse=True)),
    "write-value-str": lambda s: s.write(puts=[(b"a", "v")]),
    "write-key-big": lambda s: s.write(puts=[(b"k" * 4096, b"v")]),
    "write-key-empty": lambda s: s.write(puts=[(b"", b"v")]),
    "delete-int": lambda s: s.write(deletes=[5]),
    "load-bad-value": lambda s: s.load_sorted([(b"a", 5)]),
    "load-unsorted": lambda s: s.load_sorted([(b"b", b""), (b"a", b"")]),
}


#: Calls that are bad for LMDB (whose keys are 1 to 511 bytes) but fine for RocksDB.
VALID_IN_ROCKSDB = {"write-key-big", "write-key-empty"}


@pytest.mark.parametrize("name", list(BAD_CALLS))
def test_backend_errors_never_escape_untranslated(disk_backend: Backend, store_path: str, name: str) -> None:
    with disk_backend.open(store_path) as store:
        if disk_backend.kind == "rocksdb" and name in VALID_IN_ROCKSDB:
            BAD_CALLS[name](store)
            return
        with pytest.raises(Exception) as caught:
            BAD_CALLS[name](store)
        exc = caught.value  # whatever the library objected to must arrive as a StoreError
        assert isinstance(exc, StoreError), f"{type(exc).__module__}.{type(exc).__name__}: {exc}"
        assert store_path in str(exc)


def test_lmdb_scan_open_across_close_fails_as_store_error(store_path: str) -> None:
    store = statestore.open_store("lmdb", store_path)
    store.write(puts=[(b"a", b"1"), (b"b", b"2")])
    scan = store.scan()
    assert next(scan) == (b"a", b"1")
    store.close()
    with pytest.raises(StoreError):
        next(scan)


def test_store_errors_form_one_hierarchy() -> None:
    for error in (StoreCorruptError, StoreLockedError, StoreWriteError, statestore.StoreClosedError,
                  statestore.BackendNotFoundError):
        assert issubclass(error, StoreError)


def test_statestore_all_lists_exactly_the_public_names() -> None:
    public = {
        name for name, value in vars(statestore).items()
        if not name.startswith("_") and not inspect.ismodule(value)
    }
    assert public == set(statestore.__all__)
