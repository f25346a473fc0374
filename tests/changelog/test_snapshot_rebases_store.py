"""A snapshot written from an arranged store becomes that store's base (``Store.rebase``): the
changes it held beside its base are merged by the snapshot's pass, not by a merge of its own."""

from __future__ import annotations

import os
import tempfile

import pyarrow.fs as pafs
import pytest

from streamjoin.changelog import Changelog, ChangeloggingStore, compact, restore, snapshot_from_store
from streamjoin.statestore import open_store
from streamjoin.statestore.chunks import SortedChunks
from streamjoin.statestore.errors import StoreError

LOADED = [(b"k%06d" % i, b"value %d" % i) for i in range(20_000)]
#: version 1: 3,000 updates and 500 deletes, held in a run beside the base (under a merge's 5,000)
UPDATED = [(b"k%06d" % i, b"new %d" % i) for i in range(0, 20_000, 6)][:3000]
DELETED = [b"k%06d" % i for i in range(1, 20_000, 40)]


def _state(version: int) -> list[tuple[bytes, bytes]]:
    state = dict(LOADED)
    if version >= 1:
        state.update(UPDATED)
        for key in DELETED:
            state.pop(key, None)
    return sorted(state.items())


def _logged(tmp_path, log: Changelog | None = None) -> ChangeloggingStore:
    log = log or Changelog(str(tmp_path / "log"))
    store = ChangeloggingStore(open_store("arranged", str(tmp_path / "store")), log)
    store.write(LOADED, [], version=0)
    store.write(UPDATED, DELETED, version=1)
    return store


def _files(path: str, kind: str) -> set[str]:
    return {n for n in os.listdir(path) if n.startswith(kind)}


def _snapshot_inode(log_dir: str) -> int:
    [name] = [n for n in os.listdir(log_dir) if n.startswith("snapshot-")]
    return os.stat(os.path.join(log_dir, name)).st_ino


def test_snapshot_from_store_makes_the_snapshot_the_arranged_store_base(tmp_path):
    store = _logged(tmp_path)
    store_dir, owner = str(tmp_path / "store"), store.owner
    bases = _files(store_dir, "base-")
    stats = snapshot_from_store(store.log, store, 1)
    assert stats.rebased and stats.wrote and stats.entries == len(_state(1))
    assert list(store.scan()) == _state(1) and store.version == 1 and store.owner == owner
    [new_data] = {n for n in _files(store_dir, "base-") - bases if n.endswith(".arrow")}
    assert os.stat(os.path.join(store_dir, new_data)).st_ino == _snapshot_inode(str(tmp_path / "log"))
    # the next write is a run beside the new base, and the history still returns to version 0
    store.write([(b"k000003", b"v2")], [b"k000000"], version=2)
    assert store.inner.roll_back(0) == 2
    assert list(store.inner.scan()) == _state(0)
    store.close()
    with open_store("arranged", store_dir) as reopened:   # every file's CRC checked again
        assert list(reopened.scan()) == _state(0) and reopened.version == 0


def test_snapshot_rebased_store_keeps_writing_and_restores_from_its_changelog(tmp_path):
    store = _logged(tmp_path)
    snapshot_from_store(store.log, store, 1)
    store.write([(b"k000003", b"v2")], [b"k000000"], version=2)
    expected = dict(_state(1))
    expected[b"k000003"] = b"v2"
    del expected[b"k000000"]
    assert list(store.scan()) == sorted(expected.items())
    store.close()
    with open_store("arranged", str(tmp_path / "store")) as reopened:
        assert list(reopened.scan()) == sorted(expected.items()) and reopened.version == 2
    with open_store("arranged", str(tmp_path / "restored")) as fresh:
        restore(Changelog(str(tmp_path / "log")), fresh)
        assert list(fresh.scan()) == sorted(expected.items())


def test_arranged_store_rebase_refuses_a_file_of_other_entries(tmp_path):
    store = _logged(tmp_path)
    other = Changelog(str(tmp_path / "other"))
    other.append(0, LOADED[:100], [], [])
    compact(other)
    [file] = other.listing().snapshots.values()
    local = other.local_snapshot(file)
    assert local is not None
    before = sorted(os.listdir(tmp_path / "store"))
    with pytest.raises(StoreError, match="rebase of .*100 entries"):
        store.rebase(SortedChunks(local.chunks(), local.source))
    assert sorted(os.listdir(tmp_path / "store")) == before
    assert list(store.scan()) == _state(1) and store.version == 1
    store.close()


def test_arranged_store_rebase_declines_runs_too_small_to_pay(tmp_path):
    log = Changelog(str(tmp_path / "log"))
    store = ChangeloggingStore(open_store("arranged", str(tmp_path / "store")), log)
    store.write(LOADED, [], version=0)
    store.write(UPDATED[:100], [], version=1)   # 100 entries beside a base of 20,000: a rebase costs more
    bases = _files(str(tmp_path / "store"), "base-")
    stats = snapshot_from_store(log, store, 1)
    assert stats.wrote and not stats.rebased
    assert _files(str(tmp_path / "store"), "base-") == bases
    store.close()


def test_arranged_store_leaves_a_merge_due_to_the_snapshot_that_follows(tmp_path):
    """A write whose runs outgrow the base merges them into a new base, unless a snapshot of its
    version follows (``snapshot_follows``): then the snapshot becomes the base, one pass, not two."""
    outgrowing = [(b"k%06d" % i, b"newer %d" % i) for i in range(0, 20_000, 3)]   # 6,667: over 5,000
    for follows in (False, True):
        log = Changelog(str(tmp_path / f"log-{follows}"))
        store_dir = str(tmp_path / f"store-{follows}")
        store = ChangeloggingStore(open_store("arranged", store_dir), log)
        store.write(LOADED, [], version=0)
        bases = _files(store_dir, "base-")
        if follows:
            store.snapshot_follows()
        store.write(outgrowing, [], version=1)
        assert (_files(store_dir, "base-") == bases) is follows   # merged only without the hint
        stats = snapshot_from_store(log, store, 1)
        assert stats.rebased is follows   # (a store just merged has no runs for a rebase to spare)
        expected = dict(LOADED)
        expected.update(outgrowing)
        assert list(store.scan()) == sorted(expected.items())
        store.write([(b"k000001", b"v2")], [], version=2)   # the hint held for one write only
        store.close()
        with open_store("arranged", store_dir) as reopened:
            expected[b"k000001"] = b"v2"
            assert list(reopened.scan()) == sorted(expected.items()) and reopened.version == 2


def test_snapshot_from_store_leaves_a_store_it_cannot_rebase_as_it_is(tmp_path):
    log = Changelog(str(tmp_path / "log"))
    store = ChangeloggingStore(open_store("memory", str(tmp_path / "store")), log)
    store.write(LOADED, [], version=0)
    store.write(UPDATED, DELETED, version=1)
    stats = snapshot_from_store(log, store, 1)
    assert stats.wrote and not stats.rebased
    assert list(store.scan()) == _state(1)
    store.close()


def _remote(tmp_path) -> Changelog:
    """A changelog that is not on this machine's disk (its files are never linked)."""
    (tmp_path / "remote").mkdir()
    log = Changelog("ck", filesystem=pafs.SubTreeFileSystem(str(tmp_path / "remote"), pafs.LocalFileSystem()))
    assert not log.local
    return log


def test_snapshot_to_an_object_store_rebases_the_store_on_a_copy_written_beside_it(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    store = _logged(tmp_path, _remote(tmp_path))
    bases = _files(str(tmp_path / "store"), "base-")
    stats = snapshot_from_store(store.log, store, 1)
    assert stats.wrote and stats.rebased
    assert list(store.scan()) == _state(1) and store.version == 1
    [snapshot] = [n for n in os.listdir(tmp_path / "remote" / "ck") if n.startswith("snapshot-")]
    [new_data] = {n for n in _files(str(tmp_path / "store"), "base-") - bases if n.endswith(".arrow")}
    data = open(tmp_path / "store" / new_data, "rb").read()
    assert data == open(tmp_path / "remote" / "ck" / snapshot, "rb").read()
    assert os.listdir(tmp_path / "tmp") == []   # the copy is gone (the store links or copied it)
    store.close()
    with open_store("arranged", str(tmp_path / "store")) as reopened:   # its CRC checked against the name's
        assert list(reopened.scan()) == _state(1)


def test_snapshot_to_an_object_store_without_rebase_writes_no_copy(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    store = _logged(tmp_path, _remote(tmp_path))
    stats = snapshot_from_store(store.log, store, 1, rebase=False)
    assert stats.wrote and not stats.rebased and os.listdir(tmp_path / "tmp") == []
    assert list(store.scan()) == _state(1)
    store.close()
