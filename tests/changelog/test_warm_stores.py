"""Warm stores: a task's local store kept open for the partition's next task in the same process,
reused only at exactly the wanted version, closed before its directory is removed, and handed
over to another process that needs the directory."""

from __future__ import annotations

import multiprocessing
import os
import sys

import pytest

from streamjoin.changelog import Changelog, OpenHow, open_logged_store, release_logged_store
from streamjoin.statestore import destroy_store, warm

KINDS = ["rocksdb", "lmdb"]


@pytest.fixture(autouse=True)
def _no_parked_stores():
    warm.evict_all()
    yield
    warm.evict_all()


def _commit(kind, path, log, version, puts):
    store, report = open_logged_store(kind, path, log, version - 1 if version else None, warm=True)
    store.write(puts, (), (), version=version)
    inner = store.inner
    release_logged_store(store)
    return inner, report


@pytest.mark.parametrize("kind", KINDS)
def test_warm_store_is_reused_at_exactly_the_wanted_version(tmp_path, kind):
    path, log = str(tmp_path / "p=0"), Changelog(str(tmp_path / "log"))
    inner, _ = _commit(kind, path, log, 0, [(b"a", b"0")])
    assert warm.parked_paths() == [path] and not inner.closed
    second, report = _commit(kind, path, log, 1, [(b"b", b"1")])
    assert second is inner and report.how is OpenHow.REUSED
    store, report = open_logged_store(kind, path, log, 0, warm=True)   # the parked one is at 1
    try:
        assert store.inner is not inner and inner.closed and report.how is OpenHow.ROLLED_BACK
        assert dict(store.scan()) == {b"a": b"0"}
    finally:
        store.close()


@pytest.mark.parametrize("kind", KINDS)
def test_warm_store_is_closed_before_its_directory_is_removed(tmp_path, kind):
    path, log = str(tmp_path / "p=0"), Changelog(str(tmp_path / "log"))
    inner, _ = _commit(kind, path, log, 0, [(b"a", b"0")])
    destroy_store(kind, path)
    assert inner.closed and warm.parked_paths() == []
    store, report = open_logged_store(kind, path, log, 0, warm=True)
    try:
        assert report.how is OpenHow.REBUILT and dict(store.scan()) == {b"a": b"0"}
    finally:
        store.close()


def test_warm_store_without_warm_is_closed_and_an_open_takes_the_directory_back(tmp_path):
    path, log = str(tmp_path / "p=0"), Changelog(str(tmp_path / "log"))
    inner, _ = _commit("rocksdb", path, log, 0, [(b"a", b"0")])
    store, report = open_logged_store("rocksdb", path, log, 0)   # not warm: closes the parked one first
    try:
        assert inner.closed and report.how is OpenHow.REUSED and dict(store.scan()) == {b"a": b"0"}
    finally:
        release_logged_store(store)
    assert store.closed and warm.parked_paths() == []


def _hold(path, log_uri, parked, done):
    _commit("rocksdb", path, Changelog(log_uri), 0, [(b"a", b"0")])
    parked.set()
    done.wait(60)


def test_warm_store_is_handed_over_to_another_process(tmp_path):
    path, log_uri = str(tmp_path / "p=0"), str(tmp_path / "log")
    context = multiprocessing.get_context("spawn")   # a fork would copy RocksDB's threads' state
    parked, done = context.Event(), context.Event()
    holder = context.Process(target=_hold, args=(path, log_uri, parked, done))
    holder.start()
    try:
        assert parked.wait(60)
        store, report = open_logged_store("rocksdb", path, Changelog(log_uri), 0, warm=True)
        try:
            assert report.how is OpenHow.REUSED and dict(store.scan()) == {b"a": b"0"}
            assert not os.path.exists(path + warm.RELEASE_SUFFIX)
        finally:
            store.close()
    finally:
        done.set()
        holder.join(60)
    assert holder.exitcode == 0


def test_warm_store_runtime_reuses_a_partitions_store_and_a_failed_task_closes_it(tmp_path):
    import pyarrow as pa

    from streamjoin.runtime.checkpoint import Checkpoint
    from streamjoin.runtime.options import StateConfig
    from streamjoin.runtime.task import TaskInfo, local_store_path, run_task
    from tests.operators import RunningCount

    schema = pa.schema([("k", pa.int64()), ("v", pa.string())])
    marker = str(tmp_path / "fail")
    config = StateConfig(store="rocksdb", local_dir=str(tmp_path / "local"), fail_once=marker)
    op, checkpoint = RunningCount(schema, ["k"]), Checkpoint(str(tmp_path / "ck"))
    checkpoint.binding.bind(op.definition(), 1)
    rows = (pa.table({"k": [1, 2], "v": ["a", "b"]}, schema=schema),)

    def run(version, query_id="q"):
        return run_task(op, checkpoint, config, TaskInfo(version, 0, 1, query_id=query_id), rows)

    opened = [run(v)[1] for v in (0, 1)]
    assert [m["state_open"] for m in opened] == ["reused", "reused"]
    # version 0 opened an empty store; version 1 took the one version 0 kept open
    assert [m["state_reopened"] for m in opened] == [False, False]
    path = local_store_path(config, checkpoint, 0)
    assert warm.parked_paths() == [path]
    open(f"{marker}.before-commit.v2.p0", "w").close()
    with pytest.raises(RuntimeError, match="injected failure"):
        run(2)
    assert warm.parked_paths() == []          # a failed task closes its store
    output, metrics = run(2)
    assert output.num_rows == 2 and metrics["state_reopened"]   # its store closed with the failure: opened again
    destroy_store("rocksdb", path)
    rebuilt = run(3)[1]
    assert rebuilt["state_open"] == "rebuilt" and not rebuilt["state_reopened"]


def test_warm_store_is_kept_only_for_a_streaming_querys_tasks(tmp_path):
    import pyarrow as pa

    from streamjoin.runtime.local import LocalRunner
    from streamjoin.runtime.options import StateConfig
    from tests.operators import RunningCount

    schema = pa.schema([("k", pa.int64()), ("v", pa.string())])
    config = StateConfig(store="rocksdb", local_dir=str(tmp_path / "local"))
    runner = LocalRunner(RunningCount(schema, ["k"]), str(tmp_path / "ck"), partitions=2, config=config)
    runner.run(pa.table({"k": [1, 2], "v": ["a", "b"]}, schema=schema))
    assert warm.parked_paths() == []          # no query id: the directories are the caller's


def _park_version_0(checkpoint_uri, local_dir, parked, done):
    """A streaming query's task of version 0 in another process: its store stays parked there."""
    import pyarrow as pa

    from streamjoin.runtime.checkpoint import Checkpoint
    from streamjoin.runtime.options import StateConfig
    from streamjoin.runtime.task import TaskInfo, run_task
    from tests.operators import RunningCount

    schema = pa.schema([("k", pa.int64()), ("v", pa.string())])
    rows = (pa.table({"k": [1], "v": ["a"]}, schema=schema),)
    run_task(RunningCount(schema, ["k"]), Checkpoint(checkpoint_uri), StateConfig(store="rocksdb", local_dir=local_dir),
             TaskInfo(0, 0, 1, query_id="q"), rows)
    parked.set()
    done.wait(60)


def test_warm_store_final_task_of_a_query_takes_the_store_over_from_another_process(tmp_path):
    # end_of_run="release": the closing version's tasks run final (they park nothing), and the
    # partition's store is still parked in the Python worker that ran the version before
    import pyarrow as pa

    from streamjoin.runtime.checkpoint import Checkpoint
    from streamjoin.runtime.options import StateConfig
    from streamjoin.runtime.task import TaskInfo, run_task
    from tests.operators import RunningCount

    schema = pa.schema([("k", pa.int64()), ("v", pa.string())])
    op, checkpoint = RunningCount(schema, ["k"]), Checkpoint(str(tmp_path / "ck"))
    checkpoint.binding.bind(op.definition(), 1)
    local_dir = str(tmp_path / "local")
    context = multiprocessing.get_context("spawn")
    parked, done = context.Event(), context.Event()
    holder = context.Process(target=_park_version_0, args=(checkpoint.uri, local_dir, parked, done))
    holder.start()
    try:
        assert parked.wait(60)
        rows = (pa.table({"k": [1], "v": ["b"]}, schema=schema),)
        _, metrics = run_task(op, checkpoint, StateConfig(store="rocksdb", local_dir=local_dir),
                              TaskInfo(1, 0, 1, query_id="q", final=True), rows)
        assert metrics["state_open"] == "reused" and metrics["state_reopened"]   # handed over by the holder
        assert warm.parked_paths() == []   # a final task keeps nothing open
    finally:
        done.set()
        holder.join(60)
    assert holder.exitcode == 0


@pytest.mark.parametrize("kind", KINDS)
def test_warm_store_whose_directory_is_gone_is_closed_by_the_watcher(tmp_path, kind):
    # a finished query's checkpoint removed under its parked store (not through destroy_store)
    import shutil
    import time

    path, log = str(tmp_path / "p=0"), Changelog(str(tmp_path / "log"))
    other, _ = _commit(kind, str(tmp_path / "p=1"), Changelog(str(tmp_path / "log1")), 0, [(b"b", b"0")])
    inner, _ = _commit(kind, path, log, 0, [(b"a", b"0")])
    shutil.rmtree(path)
    waited = time.monotonic()
    while warm.parked_paths() != [str(tmp_path / "p=1")] and time.monotonic() - waited < 10 * warm.GONE_SECONDS:
        time.sleep(0.05)
    assert inner.closed and not other.closed
    assert warm.parked_paths() == [str(tmp_path / "p=1")]
    assert warm.close_gone() == []


def test_warm_store_asked_for_by_another_process_is_handed_over(tmp_path):
    """The watcher closes a parked store that another process asks for with ``hand_over``: the
    arranged kinds leave their delta beside their files, which that process's open takes."""
    from streamjoin.statestore.handover import NAME

    path, log = str(tmp_path / "p=0"), Changelog(str(tmp_path / "log"))
    _commit("arranged", path, log, 0, [(b"a", b"0")])
    assert warm.parked_paths() == [path]
    warm.evict(path, hand_over=True)   # what the watcher does for a release request
    assert warm.parked_paths() == [] and os.path.exists(os.path.join(path, NAME))
    store, report = open_logged_store("arranged", path, log, 0, warm=True)
    try:
        assert report.how is OpenHow.REUSED and dict(store.scan()) == {b"a": b"0"}
        assert not os.path.exists(os.path.join(path, NAME))
    finally:
        store.close()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify is Linux's")
def test_warm_store_request_is_answered_when_it_appears_not_at_a_poll(tmp_path, monkeypatch):
    """The watcher sleeps until a request file appears beside a parked store: with its poll and
    its look for gone directories an hour apart, a request is still answered at once."""
    import time

    path, log = str(tmp_path / "p=0"), Changelog(str(tmp_path / "log"))
    monkeypatch.setattr(warm, "POLL_SECONDS", 3600.0)
    monkeypatch.setattr(warm, "GONE_SECONDS", 3600.0)
    _commit("arranged", path, log, 0, [(b"a", b"0")])
    assert warm.parked_paths() == [path]
    with open(path + warm.RELEASE_SUFFIX, "wb"):   # what request_release does
        pass
    waited = time.monotonic()
    while warm.parked_paths() and time.monotonic() - waited < 30:
        time.sleep(0.01)
    assert warm.parked_paths() == []


def test_warm_store_runs_past_the_share_are_merged_by_the_watcher(tmp_path):
    """A parked arranged store whose runs outgrew its base is merged in the watcher's thread
    while it waits (its write left the merge: ``idle_work_follows``); the next task takes it at
    the same version with the same entries, and a rebuild from the changelog reads the same."""
    import time

    from streamjoin.statestore.arranged import RUN_SHARE

    path, log = str(tmp_path / "p=0"), Changelog(str(tmp_path / "log"))
    base = [(b"b%06d" % i, b"base") for i in range(20_000)]
    inner, _ = _commit("arranged", path, log, 0, base)
    puts = [(b"r%06d" % i, b"run") for i in range(int(len(base) * RUN_SHARE) + 1)]
    assert _commit("arranged", path, log, 1, puts)[0] is inner
    waited = time.monotonic()
    while [f[0] for f in inner._now.files if f[0].startswith("run-")] and time.monotonic() - waited < 10:
        time.sleep(0.01)
    # merged while parked: version 1 wrote its run (file 1), the watcher the new base (file 2)
    assert [name.split(".")[0] for name, _, _ in inner._now.files] == ["base-00000002"] * 2
    store, report = open_logged_store("arranged", path, log, 1, warm=True)
    try:
        assert store.inner is inner and report.how is OpenHow.REUSED
        assert store.version == 1 and dict(store.scan()) == dict(base) | dict(puts)
    finally:
        store.close()
    destroy_store("arranged", path)
    store, report = open_logged_store("arranged", path, log, 1)
    try:
        assert report.how is OpenHow.REBUILT and dict(store.scan()) == dict(base) | dict(puts)
    finally:
        store.close()


@pytest.mark.parametrize("kind", KINDS)
def test_warm_store_memo_left_at_a_hand_over_is_adopted_by_the_next_open_here(tmp_path, kind):
    path, log = str(tmp_path / "p=0"), Changelog(str(tmp_path / "log"))
    inner, _ = _commit(kind, path, log, 0, [(b"a", b"0")])
    inner.memo()["decoded"] = ("as of", 0)
    warm.evict(path, hand_over=True)   # another worker asked for it
    assert inner.closed and warm.kept_memos() == [path]
    # that worker wrote version 1; this one opens the directory for version 2
    store, report = open_logged_store(kind, path, log, 0, warm=False)
    store.write([(b"b", b"1")], (), (), version=1)
    assert store.memo()["decoded"] == ("as of", 0) and warm.kept_memos() == []
    store.close()
    store, report = open_logged_store(kind, path, log, 1, warm=True)
    try:
        assert report.how is OpenHow.REUSED and "decoded" not in store.memo()   # (adopted once)
    finally:
        store.close()


@pytest.mark.parametrize("how", ["rolled back", "directory replaced"])
def test_warm_store_memo_left_at_a_hand_over_is_dropped_when_the_store_is_not_as_left(tmp_path, how):
    kind = "lmdb"
    path, log = str(tmp_path / "p=0"), Changelog(str(tmp_path / "log"))
    _commit(kind, path, log, 0, [(b"a", b"0")])
    inner, _ = _commit(kind, path, log, 1, [(b"b", b"1")])
    inner.memo()["decoded"] = ("as of", 1)
    warm.evict(path, hand_over=True)
    if how == "directory replaced":
        destroy_store(kind, path)
        store, report = open_logged_store(kind, path, log, 1, warm=True)
        assert report.how is OpenHow.REBUILT
    else:   # a retry of version 1 opens the store at 0
        store, report = open_logged_store(kind, path, log, 0, warm=True)
        assert report.how is OpenHow.ROLLED_BACK
    try:
        assert store.memo() == {} and warm.kept_memos() == []
    finally:
        store.close()


def test_warm_store_memos_and_parked_stores_share_the_limit(tmp_path, monkeypatch):
    monkeypatch.setattr(warm, "LIMIT", 2)
    log = Changelog(str(tmp_path / "log"))
    paths = [str(tmp_path / f"p={p}") for p in range(3)]
    for path in paths[:2]:
        inner, _ = _commit("lmdb", path, Changelog(str(tmp_path / f"log-{path[-1]}")), 0, [(b"a", b"0")])
        inner.memo()["decoded"] = path
        warm.evict(path, hand_over=True)
    assert warm.kept_memos() == paths[:2]
    _commit("lmdb", paths[2], log, 0, [(b"a", b"0")])   # a parked store takes the oldest memo's place
    assert warm.parked_paths() == paths[2:] and warm.kept_memos() == paths[1:2]
