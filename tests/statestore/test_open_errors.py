"""Unreadable store directories and library errors: everything surfaces as a StoreError that says
which path and what to do; no rocksdict or lmdb exception reaches the caller."""

from __future__ import annotations

import errno
import inspect
import os

import lmdb
import pytest

import streamjoin.statestore.arranged as arranged_backend
import streamjoin.statestore.rocksdb as rocksdb_backend
from streamjoin import statestore
from streamjoin.changelog import Changelog, open_logged_store
from streamjoin.statestore import (
    StoreArgumentError,
    StoreCorruptError,
    StoreError,
    StoreIOError,
    StoreLockedError,
    StoreWriteError,
)
from streamjoin.statestore.hosts import HOSTS
from streamjoin.statestore.registry import check_store_options
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


@pytest.mark.parametrize("first, second", [("lmdb-kv", "rocksdb-kv"), ("lmdb", "rocksdb"), ("rocksdb-kv", "rocksdb"),
                                           ("lmdb-kv", "lmdb")])
def test_open_store_of_the_other_kind_is_refused(store_path: str, first: str, second: str) -> None:
    # (a store of 0.2's "rocksdb" or "lmdb", now "rocksdb-kv" and "lmdb-kv", is refused by the
    # arranged store that those names now mean: the changelog's open path then rebuilds it)
    with statestore.open_store(first, store_path) as store:
        store.write(puts=[(b"a", b"1")])
    with pytest.raises(StoreCorruptError, match=f"not a readable {second} store"):
        statestore.open_store(second, store_path)
    statestore.destroy_store(first, store_path)
    with statestore.open_store(second, store_path) as store:
        store.write(puts=[(b"a", b"1")])
    with pytest.raises(StoreCorruptError, match=f"not a readable {first} store"):
        statestore.open_store(first, store_path)


def test_open_rocksdb_with_damaged_table_file_is_corrupt(store_path: str) -> None:
    with statestore.open_store("rocksdb-kv", store_path) as store:
        store.write(puts=[(b"k%04d" % i, b"v" * 50) for i in range(1000)])
    tables = [n for n in os.listdir(store_path) if n.endswith(".sst")]
    assert tables  # close() flushed the memtable into a table file
    with open(os.path.join(store_path, tables[0]), "r+b") as fh:
        fh.seek(0, os.SEEK_END)
        fh.seek(fh.tell() - 48)
        fh.write(b"\x00" * 48)  # the footer with the magic number
    with pytest.raises(StoreCorruptError, match=store_path):
        statestore.open_store("rocksdb-kv", store_path)


BAD_CALLS = {
    "get-str": lambda s: s.get("a"),
    "get-none": lambda s: s.get(None),
    "multi-get-str": lambda s: s.multi_get([b"a", "b"]),
    "scan-start-int": lambda s: list(s.scan(start=3)),
    "scan-end-str": lambda s: list(s.scan(end="z")),
    "scan-reverse-bad": lambda s: list(s.scan(start=3, reverse=True)),
    "write-value-str": lambda s: s.write(puts=[(b"a", "v")]),
    "delete-int": lambda s: s.write(deletes=[5]),
    "load-bad-value": lambda s: s.load_sorted([(b"a", 5)]),
    "load-unsorted": lambda s: s.load_sorted([(b"b", b""), (b"a", b"")]),
}


@pytest.mark.parametrize("name", list(BAD_CALLS))
def test_backend_errors_never_escape_untranslated(disk_backend: Backend, store_path: str, name: str) -> None:
    with disk_backend.open(store_path) as store:
        with pytest.raises(Exception) as caught:
            BAD_CALLS[name](store)
        exc = caught.value  # whatever the library objected to must arrive as a StoreError
        assert isinstance(exc, StoreError), f"{type(exc).__module__}.{type(exc).__name__}: {exc}"
        assert store_path in str(exc)


def test_lmdb_scan_open_across_close_fails_as_store_error(store_path: str) -> None:
    store = statestore.open_store("lmdb-kv", store_path)
    store.write(puts=[(b"a", b"1"), (b"b", b"2")])
    scan = store.scan()
    assert next(scan) == (b"a", b"1")
    store.close()
    with pytest.raises(StoreError):
        next(scan)


def test_store_errors_form_one_hierarchy() -> None:
    for error in (StoreCorruptError, StoreLockedError, StoreWriteError, statestore.StoreClosedError,
                  statestore.BackendNotFoundError, StoreIOError, StoreArgumentError):
        assert issubclass(error, StoreError)


def test_statestore_all_lists_exactly_the_public_names() -> None:
    public = {
        name for name, value in vars(statestore).items()
        if not name.startswith("_") and not inspect.ismodule(value)
    }
    assert public == set(statestore.__all__)


# -- a full disk is not a damaged store ----------------------------------------------------------------


def disk_full_on_open(disk_backend: Backend, monkeypatch: pytest.MonkeyPatch, path: str) -> None:
    """Make the backend's library fail to open ``path`` the way it does when the disk is full."""
    if disk_backend.kind == "rocksdb-kv":
        def full(*args, **kwargs):
            raise Exception(f"IO error: No space left on deviceWhile appending to file: {path}/000009.log: "
                            "No space left on device")
        monkeypatch.setattr(rocksdb_backend, "Rdict", full)
    elif disk_backend.kind in ("arranged", "rocksdb", "lmdb"):   # the arranged store, on its host
        def no_space(self: object) -> bytes:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path)
        host = disk_backend.kind if disk_backend.kind != "arranged" else "directory"
        monkeypatch.setattr(HOSTS[host], "read_manifest", no_space)
    else:
        def full(*args, **kwargs):
            raise lmdb.Error(f"{path}: {os.strerror(errno.ENOSPC)}")
        monkeypatch.setattr(lmdb, "open", full)


def test_open_on_a_full_disk_says_so_and_keeps_the_store(
    disk_backend: Backend, tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log, local = Changelog(str(tmp_path / "log")), str(tmp_path / "local")
    options = dict(disk_backend.options)
    store, _ = open_logged_store(disk_backend.kind, local, log, None, **options)
    with store:
        store.write(puts=[(b"a", b"1")], version=0)
    with monkeypatch.context() as patch:
        disk_full_on_open(disk_backend, patch, local)
        with pytest.raises(StoreIOError) as caught:
            open_logged_store(disk_backend.kind, local, log, 0, **options)  # must not rebuild (delete) it
        message = str(caught.value)
        assert local in message and "no space left" in message.lower() and "free" in message
        assert not isinstance(caught.value, StoreCorruptError)
    with disk_backend.open(local) as store:  # the store was left alone
        assert store.get(b"a") == b"1" and store.version == 0


# -- arguments that name what is wrong -------------------------------------------------------------------


@pytest.mark.parametrize("kind", [123, None, b"lmdb", ["rocksdb"]])
def test_open_store_with_a_kind_that_is_not_a_string_names_it(store_path: str, kind) -> None:
    for call in (lambda: statestore.open_store(kind, store_path), lambda: statestore.destroy_store(kind, store_path)):
        with pytest.raises(StoreArgumentError, match=r"kind.*" + repr(kind).replace("[", r"\[")):
            call()
    assert not os.path.exists(store_path)


@pytest.mark.parametrize(
    "kind,options,named",
    [("lmdb-kv", dict(map_size=-1), "map_size=-1"), ("lmdb-kv", dict(map_size=0), "map_size=0"),
     ("lmdb-kv", dict(map_size="64MB"), "map_size='64MB'"), ("lmdb-kv", dict(map_size=True), "map_size=True"),
     ("lmdb-kv", dict(map_size=1 << 50), "map_size=1125899906842624"),
     ("lmdb", dict(sync="no"), "sync='no'"), ("rocksdb", dict(sync=1), "sync=1"),
     ("lmdb", dict(lock_timeout=-1), "lock_timeout=-1"), ("rocksdb", dict(lock_timeout="5"), "lock_timeout='5'"),
     ("lmdb-kv", dict(mapsize=1 << 20), "mapsize"), ("rocksdb", dict(map_size=1 << 20), "map_size"),
     ("memory", dict(sync=True), "sync"), ("arranged", dict(memory_budget="1g"), "memory_budget='1g'"),
     ("arranged", dict(memory_budget=0), "memory_budget=0"), ("arranged", dict(sync=None), "sync=None")],
)
def test_open_store_with_a_bad_option_names_it(store_path: str, kind: str, options: dict, named: str) -> None:
    with pytest.raises(StoreArgumentError) as caught:
        statestore.open_store(kind, store_path, **options)
    assert named in str(caught.value) and kind in str(caught.value)
    assert not os.path.exists(store_path)  # refused before anything was created
    with pytest.raises(StoreArgumentError) as checked:   # and refused alike without opening a store
        check_store_options(kind, options)
    assert str(checked.value) == str(caught.value)


@pytest.mark.parametrize("kind,options", [("lmdb-kv", dict(map_size=1 << 20, sync=False)), ("rocksdb", dict(lock_timeout=2)),
                                          ("arranged", dict(memory_budget=1 << 20)), ("arranged", {}), ("memory", {})])
def test_check_store_options_takes_good_options(kind: str, options: dict) -> None:
    check_store_options(kind, options)


def test_check_store_options_reads_the_worker_budget_of_an_arranged_store(monkeypatch) -> None:
    monkeypatch.setenv(arranged_backend.BUDGET_VARIABLE, "lots")
    with pytest.raises(StoreArgumentError, match="STREAMJOIN_WORKER_MEMORY='lots'"):
        check_store_options("arranged", {})
    check_store_options("arranged", {"memory_budget": 1 << 20})   # its own budget: the variable is not read


@pytest.mark.parametrize("path", [123, None, b""])
def test_open_store_with_a_bad_path_names_it(path) -> None:
    with pytest.raises(StoreArgumentError, match=r"path"):
        statestore.open_store("memory", path)
