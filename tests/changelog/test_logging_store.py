"""The changelogging store and open_logged_store: log first, then apply; reuse, roll forward,
roll back (an ahead store, by undo records) or rebuild, and report which."""

from __future__ import annotations

import os
import shutil

import pytest

from streamjoin.changelog import Changelog, OpenHow, VersionNotRetainedError, VersionOrderError, open_logged_store
from streamjoin.statestore import destroy_store, open_store
from streamjoin.statestore.registry import resolve_backend
from tests.changelog.model import Model, Write

WRITES = [
    Write(puts=[(b"a", b"0"), (b"b", b"0"), (b"c", b"0"), (b"d", b"0")]),
    Write(puts=[(b"a", b"1"), (b"e", b"1")], deletes=[b"b"]),
    Write(puts=[(b"c", b"2"), (b"f", b"2")], delete_ranges=[(b"a", b"c")]),
    Write(puts=[(b"b", b"3")], deletes=[b"f", b"zz"], delete_ranges=[(b"d", b"e\x00")]),
    Write(puts=[(b"e", b"4"), (b"g", b"4")], delete_ranges=[(b"", b"c")]),
    Write(puts=[(b"a", b"5"), (b"c", b"5")], deletes=[b"g"], delete_ranges=[(b"e", b"\xff")]),
]


class Runner:
    """Runs batches like the runtime: open at the previous version, write, close."""

    def __init__(self, kind: str, root: str, **options) -> None:
        self.kind, self.path = kind, os.path.join(root, "local", "p=0")
        self.log = Changelog(os.path.join(root, "log"), retain_versions=3)
        self.model = Model()
        self.options = options

    def open(self, target):
        return open_logged_store(self.kind, self.path, self.log, target, **self.options)

    def batch(self, version: int, write: Write):
        store, report = self.open(version - 1 if version > 0 else None)
        try:
            store.write(write.puts, write.deletes, write.delete_ranges, version=version)
        finally:
            store.close()
        self.model.apply(version, write)
        return report

    def state_at(self, target):
        store, report = self.open(target)
        try:
            return dict(store.scan()), store.version, report
        finally:
            store.close()

    def lose_local(self) -> None:
        destroy_store(self.kind, self.path)
        shutil.rmtree(self.path + ".undo", ignore_errors=True)

    def lose_undo(self) -> None:
        """Take away what returns the local store to an earlier version: its undo records, or the
        previous versions a backend keeps itself (``keeps_history``)."""
        if os.path.exists(self.path + ".undo"):
            shutil.rmtree(self.path + ".undo")
        else:
            with open_store(self.kind, self.path) as store:
                assert store.keeps_history
                store.forget_history()


@pytest.fixture
def runner(tmp_path, backend):
    r = Runner(backend, str(tmp_path))
    yield r
    destroy_store(backend, r.path)


def test_logged_store_write_logs_delta_then_applies(runner):
    report = runner.batch(0, WRITES[0])
    assert report.how is OpenHow.REUSED and report.local_version is None
    assert runner.log.versions() == [0]
    delta = runner.log.read_delta(runner.log.listing().deltas[0])
    assert delta.as_write()[0] == WRITES[0].puts
    state, version, report = runner.state_at(0)
    assert (state, version, report.how) == (runner.model.states[0], 0, OpenHow.REUSED)


def test_logged_store_write_needs_the_next_version(runner):
    runner.batch(0, WRITES[0])
    store, _ = runner.open(0)
    try:
        with pytest.raises(VersionOrderError, match="needs version="):
            store.write(puts=[(b"x", b"y")])
        with pytest.raises(VersionOrderError, match="at version 0"):
            store.write(puts=[(b"x", b"y")], version=2)
        with pytest.raises(TypeError):
            store.write(puts=[("not bytes", b"y")], version=1)
        assert runner.log.versions() == [0] and store.version == 0 and store.get(b"x") is None
    finally:
        store.close()
    assert runner.state_at(0)[2].how is OpenHow.REUSED


def test_open_logged_store_rolls_back_ahead_store_by_undo(runner):
    for version, write in enumerate(WRITES):
        runner.batch(version, write)
    state, version, report = runner.state_at(4)  # batch 5 executed again
    assert report.how is OpenHow.ROLLED_BACK and report.versions == 1
    assert report.entries_restored == 0 and report.local_version == 5
    assert (state, version) == (runner.model.states[4], 4)
    again = Write(puts=[(b"h", b"again")])
    assert runner.batch(5, again).how is OpenHow.REUSED
    assert runner.state_at(5)[0] == runner.model.states[5]


def test_open_logged_store_rolls_back_several_versions_with_depth(tmp_path, backend):
    runner = Runner(backend, str(tmp_path), undo_depth=3)
    for version, write in enumerate(WRITES):
        runner.batch(version, write)
    state, version, report = runner.state_at(2)
    assert (report.how, report.versions) == (OpenHow.ROLLED_BACK, 3)
    assert (state, version) == (runner.model.states[2], 2)
    destroy_store(backend, runner.path)


def test_open_logged_store_ahead_without_undo_rebuilds(runner):
    for version, write in enumerate(WRITES):
        runner.batch(version, write)
    runner.lose_undo()
    state, version, report = runner.state_at(3)
    assert report.how is OpenHow.REBUILT and "ahead" in report.reason
    assert (state, version) == (runner.model.states[3], 3)


def test_open_logged_store_rolls_forward_behind_store(tmp_path, backend):
    first = Runner(backend, str(tmp_path))
    for version in range(3):
        first.batch(version, WRITES[version])
    other = Runner(backend, str(tmp_path))  # another executor takes over: its own local store
    other.path = os.path.join(str(tmp_path), "elsewhere", "p=0")
    other.model = first.model
    for version in range(3, 6):
        other.batch(version, WRITES[version])
    state, version, report = first.state_at(5)
    assert (report.how, report.versions, report.local_version) == (OpenHow.ROLLED_FORWARD, 3, 2)
    assert (state, version) == (first.model.states[5], 5)
    for r in (first, other):
        destroy_store(backend, r.path)


def test_open_logged_store_rebuilds_lost_local_store(runner):
    for version, write in enumerate(WRITES):
        runner.batch(version, write)
    runner.lose_local()
    state, version, report = runner.state_at(5)
    assert report.how is OpenHow.REBUILT and report.reason == "no local store"
    assert report.entries_restored > 0 and report.seconds > 0
    assert (state, version) == (runner.model.states[5], 5)


@pytest.mark.parametrize("backend", ["rocksdb-kv", "lmdb-kv"])  # the memory store cannot be damaged
def test_open_logged_store_rebuilds_unreadable_local_store(runner, backend):
    for version, write in enumerate(WRITES[:4]):
        runner.batch(version, write)
    shutil.rmtree(runner.path)
    os.makedirs(runner.path)
    for name in ("CURRENT", "data.mdb"):
        with open(os.path.join(runner.path, name), "wb") as fh:
            fh.write(b"\x00garbage" * 512)
    state, version, report = runner.state_at(3)
    assert report.how is OpenHow.REBUILT and "unreadable" in report.reason
    assert (state, version) == (runner.model.states[3], 3)


@pytest.mark.parametrize("backend", ["arranged"])
def test_open_logged_store_rebuilds_an_arranged_store_of_a_format_it_does_not_read(runner, backend):
    """A store written by a later build (its manifest names a format this one does not read) is
    rebuilt from the changelog, as after a downgrade."""
    import json

    for version, write in enumerate(WRITES[:4]):
        runner.batch(version, write)
    manifest = os.path.join(runner.path, "MANIFEST")
    with open(manifest) as fh:
        meta = json.load(fh)
    meta["format"] = "arranged-99"
    with open(manifest, "w") as fh:
        json.dump(meta, fh)
    state, version, report = runner.state_at(3)
    assert report.how is OpenHow.REBUILT and "arranged-99" in report.reason
    assert (state, version) == (runner.model.states[3], 3)


@pytest.mark.parametrize("before, after", [("rocksdb-kv", "arranged"), ("lmdb-kv", "arranged"), ("arranged", "rocksdb-kv"),
                                           ("arranged", "lmdb-kv"), ("rocksdb-kv", "rocksdb"), ("lmdb-kv", "lmdb")])
def test_open_logged_store_rebuilds_a_store_of_another_kind(tmp_path, before, after):
    # a query restarted with another store= (or on a release with another default, or on 0.3, where
    # "rocksdb" and "lmdb" became the arranged store, on a store of 0.2's "rocksdb" or "lmdb": now
    # "rocksdb-kv" and "lmdb-kv") finds the directory the old kind left at the partition's path
    log, path = Changelog(str(tmp_path / "log")), str(tmp_path / "p0")
    store, _ = open_logged_store(before, path, log, None)
    for version in range(3):
        store.write([(b"k%d" % version, b"v%d" % version)], [b"k0"] if version == 2 else [], version=version)
    store.close()
    store, report = open_logged_store(after, path, log, 2)
    try:
        assert report.how is OpenHow.REBUILT and f"not a readable {after} store" in report.reason
        assert (dict(store.scan()), store.version) == ({b"k1": b"v1", b"k2": b"v2"}, 2)
    finally:
        store.close()


def test_open_logged_store_empty_target_returns_empty_store(runner):
    runner.batch(0, WRITES[0])
    state, version, report = runner.state_at(None)  # batch 0 executed again
    assert (state, version) == ({}, None)
    assert report.how is OpenHow.REBUILT and report.entries_restored == 0
    assert runner.batch(0, WRITES[1]).how is OpenHow.REUSED
    assert runner.state_at(0)[0] == runner.model.states[0]


def test_open_logged_store_unrestorable_target_raises_and_closes(runner):
    runner.batch(0, WRITES[0])
    runner.lose_local()
    with pytest.raises(Exception, match="newer than the newest"):
        runner.open(3)
    assert runner.state_at(0)[2].how is OpenHow.REBUILT  # not left locked


def test_open_logged_store_refuses_log_without_target(runner):
    for version, write in enumerate(WRITES[:3]):
        runner.batch(version, write)
    shutil.rmtree(runner.log.uri)  # the changelog is gone, the local store still has version 2
    with pytest.raises(VersionNotRetainedError, match="is empty"):
        runner.open(2)


def test_logged_store_refuses_to_extend_log_that_lacks_its_version(runner):
    for version, write in enumerate(WRITES[:3]):
        runner.batch(version, write)
    store, _ = runner.open(2)
    try:
        shutil.rmtree(runner.log.uri)
        with pytest.raises(VersionNotRetainedError, match="cannot restore it"):
            store.write(puts=[(b"x", b"y")], version=3)
        assert store.version == 2 and runner.log.versions() == []
    finally:
        store.close()


def test_open_logged_store_replaces_delta_rewritten_elsewhere(runner):
    """Batch 2 ran again on another executor with other output: this store must not be reused."""
    for version, write in enumerate(WRITES[:3]):
        runner.batch(version, write)
    other = Write(puts=[(b"elsewhere", b"2")])
    runner.log.append(2, other.puts)
    runner.model.apply(2, other)
    state, version, report = runner.state_at(2)
    assert report.how is OpenHow.ROLLED_FORWARD and "another delta" in report.reason
    assert (state, version) == (runner.model.states[2], 2)


def test_open_logged_store_behind_a_delta_rewritten_elsewhere_swaps_it_before_rolling_forward(runner):
    """Batch 2 ran again on another executor with other output, and batch 3 after it there; this
    store, at 2 with the old delta 2, comes back for batch 4: rolling it forward from 2 would
    keep the old delta's entries under the log's later ones."""
    for version, write in enumerate(WRITES[:3]):
        runner.batch(version, write)
    other = Write(puts=[(b"elsewhere", b"2")], deletes=[b"c"])
    runner.log.append(2, other.puts, other.deletes)
    runner.model.apply(2, other)
    runner.log.append(3, WRITES[3].puts, WRITES[3].deletes, WRITES[3].delete_ranges)
    runner.model.apply(3, WRITES[3])
    state, version, report = runner.state_at(3)
    assert report.how in (OpenHow.ROLLED_FORWARD, OpenHow.REBUILT) and "another delta" in report.reason
    assert (state, version) == (runner.model.states[3], 3)


def test_open_logged_store_keeps_local_store_when_changelog_is_lost(runner):
    """The first version again on an empty log would rebuild the store empty: it may be the last copy."""
    for version, write in enumerate(WRITES[:3]):
        runner.batch(version, write)
    shutil.rmtree(runner.log.uri)
    with pytest.raises(VersionNotRetainedError, match="only copy") as raised:
        runner.open(None)
    assert runner.path in str(raised.value)
    runner.log.append(0, WRITES[0].puts)   # the log has version 0 again, not 2: still refused
    with pytest.raises(VersionNotRetainedError, match="ends at version 0"):
        runner.open(None)
    runner.log.delete([f.name for f in runner.log.listing().files()])
    store = open_store(runner.kind, runner.path)
    try:
        assert store.version == 2 and dict(store.scan()) == runner.model.states[2]
    finally:
        store.close()


def test_logged_store_batched_scans_pass_through_to_the_inner_store(runner, monkeypatch):
    for version, write in enumerate(WRITES[:3]):
        runner.batch(version, write)
    store, _ = runner.open(2)
    calls = []
    for batched in ("_scan_ranges", "_scan_prefixes"):   # a backend's batched path is one of them
        inner_call = getattr(store.inner, batched)
        monkeypatch.setattr(store.inner, batched, lambda arg, call=inner_call: calls.append(arg) or call(arg))
    try:
        state = runner.model.states[2]
        want = [[(k, v) for k, v in sorted(state.items()) if k.startswith(p)] for p in (b"a", b"c", b"")]
        assert store.scan_prefixes([b"a", b"c", b""]) == want
        # the inner store's own batched seek (its _scan_prefixes, or the default one that hands every
        # range to one _scan_ranges), not one scan per prefix
        assert calls[-1] == [(b"a", b"b"), (b"c", b"d"), (None, None)] if len(calls) == 2 else len(calls) == 1
    finally:
        store.close()


class _CountingStore:
    """Wraps a store, counting the keys read from it by ``multi_get``."""

    def __init__(self, inner) -> None:
        self.inner, self.keys_read = inner, 0

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def multi_get(self, keys):
        keys = list(keys)
        self.keys_read += len(keys)
        return self.inner.multi_get(keys)


def test_changelogging_store_undo_record_reuses_values_read_this_version(tmp_path):
    from streamjoin.changelog import ChangeloggingStore
    from streamjoin.changelog.undo import UndoLog

    inner = _CountingStore(open_store("memory", str(tmp_path / "s")))
    undo = UndoLog(str(tmp_path / "s.undo"))
    store = ChangeloggingStore(inner, Changelog(str(tmp_path / "log")), undo=undo)
    store.write([(b"a", b"0"), (b"b", b"0")], version=0)
    assert store.multi_get([b"a", b"new"]) == [b"0", None]
    assert [kv[0] for kv in store.scan_ranges([(b"b", b"c")])[0]] == [b"b"]
    inner.keys_read = 0
    store.write([(b"a", b"1"), (b"b", b"1"), (b"new", b"1"), (b"x", b"1")], version=1)
    assert inner.keys_read == 1  # only b"x" was not read by the caller this version
    store.write([(b"a", b"2"), (b"x", b"2")], version=2)  # reads of version 1 are stale now
    assert inner.keys_read == 3
    assert undo.rollback(inner.inner, 1) == 1
    assert dict(inner.inner.scan()) == {b"a": b"1", b"b": b"1", b"new": b"1", b"x": b"1"}
    inner.inner.close()


def test_undo_record_is_written_without_fsync(runner, monkeypatch):
    """Undo records are a local shortcut (a lost or torn one costs a rebuild): no fsync, file or directory."""
    for version, write in enumerate(WRITES[:2]):
        runner.batch(version, write)
    synced: list[str] = []
    real_fsync = os.fsync

    def fsync(fd):
        synced.append(os.readlink(f"/proc/self/fd/{fd}") if os.path.exists(f"/proc/self/fd/{fd}") else str(fd))
        return real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    runner.batch(2, WRITES[2])
    assert synced, "the changelog delta is still synced"
    assert not [path for path in synced if ".undo" in path]
    if resolve_backend(runner.kind).keeps_history:   # no records: the store keeps its versions itself
        assert not os.path.exists(runner.path + ".undo")
    else:
        assert os.listdir(runner.path + ".undo")


def test_open_logged_store_ahead_with_torn_undo_record_rebuilds(runner):
    """A record a machine crash tore (its bytes no longer match its name's CRC) is not applied."""
    for version, write in enumerate(WRITES):
        runner.batch(version, write)
    if resolve_backend(runner.kind).keeps_history:   # the file the previous version is read back from
        undo = runner.path
        record = max(name for name in os.listdir(undo) if name.endswith(".arrow"))
    else:
        undo = runner.path + ".undo"
        (record,) = os.listdir(undo)
    with open(os.path.join(undo, record), "r+b") as fh:
        fh.truncate(os.path.getsize(os.path.join(undo, record)) // 2)
    state, version, report = runner.state_at(len(WRITES) - 2)
    assert report.how is OpenHow.REBUILT
    assert (state, version) == (runner.model.states[len(WRITES) - 2], len(WRITES) - 2)


def test_changelogging_store_memo_is_the_inner_stores(tmp_path):
    from streamjoin.changelog import ChangeloggingStore

    inner = open_store("memory", str(tmp_path / "s"))
    log = Changelog(str(tmp_path / "log"))
    ChangeloggingStore(inner, log).memo()["cache"] = 1
    assert ChangeloggingStore(inner, log).memo() == {"cache": 1}   # a later task's wrapper
    inner.close()


def test_logged_store_column_writes_log_the_same_deltas_and_roll_back(tmp_path, backend):
    """A column write (``write_columns``) logs the delta a list write of the same entries logs,
    byte for byte, leaves the same state, and an ahead store still rolls back."""
    from streamjoin.statestore.columns import ColumnWrite

    writes = [Write(puts=w.puts, deletes=w.deletes) for w in WRITES]
    by_lists, by_columns = Runner(backend, str(tmp_path / "lists")), Runner(backend, str(tmp_path / "columns"))
    for version, write in enumerate(writes):
        by_lists.batch(version, write)
        store, _ = by_columns.open(version - 1 if version else None)
        try:
            store.write_columns(ColumnWrite.of_lists(write.puts, write.deletes), version=version)
        finally:
            store.close()
        assert by_columns.log.listing().deltas[version].crc == by_lists.log.listing().deltas[version].crc
        assert by_columns.state_at(version)[0] == by_lists.model.states[version]
    state, version, report = by_columns.state_at(4)
    assert report.how is OpenHow.ROLLED_BACK and (state, version) == (by_lists.model.states[4], 4)
    for r in (by_lists, by_columns):
        destroy_store(backend, r.path)
