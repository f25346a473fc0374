"""The checkpoint's binding and records: who may write it (one definition, one streaming query or
batch runs, never both), atomic first bindings, durable records, and damage named with its file."""

from __future__ import annotations

import json
import multiprocessing
import os
import threading

import pytest

from streamjoin.errors import CheckpointDamagedError, CheckpointMismatchError, JoinDefinitionError
from streamjoin.runtime.checkpoint import Checkpoint, RunMode
from streamjoin.runtime.checkpoint.commits import Progress
from streamjoin.runtime.checkpoint.files import CheckpointFiles

DEFINITION = {"kind": "test", "key": ["k"]}


def test_checkpoint_bind_refuses_a_batch_run_on_a_streaming_checkpoint(tmp_path):
    Checkpoint(str(tmp_path)).binding.bind(DEFINITION, 2, mode=RunMode.STREAMING)
    with pytest.raises(CheckpointMismatchError, match="streaming query"):
        Checkpoint(str(tmp_path)).binding.bind(DEFINITION, 2, mode=RunMode.BATCH)
    Checkpoint(str(tmp_path)).binding.bind(DEFINITION, 2, mode=RunMode.STREAMING)   # the query itself may


def test_checkpoint_bind_refuses_a_streaming_query_on_a_batch_checkpoint(tmp_path):
    Checkpoint(str(tmp_path)).binding.bind(DEFINITION, 2, mode=RunMode.BATCH)
    Checkpoint(str(tmp_path)).binding.bind(DEFINITION, 2, mode=RunMode.BATCH)   # a batch run again may
    with pytest.raises(CheckpointMismatchError, match="batch run"):
        Checkpoint(str(tmp_path)).binding.bind(DEFINITION, 2, mode=RunMode.STREAMING)


def test_checkpoint_check_query_refuses_a_batch_task_on_a_query_bound_checkpoint(tmp_path):
    checkpoint = Checkpoint(str(tmp_path))
    checkpoint.binding.bind(DEFINITION, 1)
    checkpoint.binding.check_query("query-1")
    checkpoint.binding.check_query("query-1")
    with pytest.raises(CheckpointMismatchError, match="batch run must not"):
        checkpoint.binding.check_query(None)
    with pytest.raises(CheckpointMismatchError, match="belongs to streaming query query-1"):
        checkpoint.binding.check_query("query-2")


def _race_after_first_read(monkeypatch, parties: int) -> None:
    """Make every thread's first record read wait until all have read: a read-then-write binding
    then lets them all through; a create-if-absent binding still lets exactly one through."""
    barrier = threading.Barrier(parties, timeout=30)
    local = threading.local()
    original = CheckpointFiles.read_json

    def read_then_wait(self, rel):
        result = original(self, rel)
        if not getattr(local, "waited", False):
            local.waited = True
            barrier.wait()
        return result

    monkeypatch.setattr(CheckpointFiles, "read_json", read_then_wait)


def _run_threads(target, count: int) -> list:
    results: list = [None] * count

    def run(i: int) -> None:
        try:
            target(i)
            results[i] = "won"
        except CheckpointMismatchError as exc:
            results[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    return results


def test_checkpoint_query_binding_has_exactly_one_winner(tmp_path, monkeypatch):
    Checkpoint(str(tmp_path)).binding.bind(DEFINITION, 1)
    _race_after_first_read(monkeypatch, 6)
    results = _run_threads(lambda i: Checkpoint(str(tmp_path)).binding.check_query(f"query-{i}"), 6)
    monkeypatch.undo()
    winners = [i for i, r in enumerate(results) if r == "won"]
    assert len(winners) == 1, results
    assert Checkpoint(str(tmp_path)).binding.bound_query() == f"query-{winners[0]}"
    assert all("belongs to streaming query" in str(r) for r in results if r != "won")


def test_checkpoint_first_bind_has_exactly_one_winner(tmp_path, monkeypatch):
    _race_after_first_read(monkeypatch, 6)
    results = _run_threads(lambda i: Checkpoint(str(tmp_path)).binding.bind({**DEFINITION, "i": i}, 1), 6)
    monkeypatch.undo()
    winners = [i for i, r in enumerate(results) if r == "won"]
    assert len(winners) == 1, results
    Checkpoint(str(tmp_path)).binding.bind({**DEFINITION, "i": winners[0]}, 1)


def _bind_query(path: str, query: str, start, outcome) -> None:
    start.wait()
    try:
        Checkpoint(path).binding.check_query(query)
        outcome.put(query)
    except CheckpointMismatchError:
        outcome.put(None)


def test_checkpoint_query_binding_has_one_winner_among_processes(tmp_path):
    Checkpoint(str(tmp_path)).binding.bind(DEFINITION, 1)
    context = multiprocessing.get_context("fork")
    start, outcome = context.Barrier(4, timeout=60), context.Queue()
    processes = [context.Process(target=_bind_query, args=(str(tmp_path), f"q{i}", start, outcome)) for i in range(4)]
    for p in processes:
        p.start()
    for p in processes:
        p.join(timeout=60)
    results = [outcome.get(timeout=10) for _ in processes]
    assert [r for r in results if r is not None] == [Checkpoint(str(tmp_path)).binding.bound_query()]


@pytest.mark.parametrize("content", [b"", b"{\"format\": 1, \"defin", b"[1, 2]", b"\xff\xfe"])
def test_checkpoint_damaged_record_names_its_file(tmp_path, content):
    Checkpoint(str(tmp_path)).binding.bind(DEFINITION, 1)
    (tmp_path / "streamjoin.json").write_bytes(content)
    with pytest.raises(CheckpointDamagedError, match="streamjoin.json.*restore it") as raised:
        Checkpoint(str(tmp_path)).binding.bind(DEFINITION, 1)
    assert raised.value.path.endswith("streamjoin.json")


def test_checkpoint_damaged_commit_record_names_its_file(tmp_path):
    checkpoint = Checkpoint(str(tmp_path))
    checkpoint.commits.write(3, 0, 1, (1, None), {"version": 3, "partition": 0})
    assert checkpoint.commits.watermark_inputs(4, 2) == (1, None)
    (tmp_path / "commits" / "v=3" / "p=0.of=1.t=1_x.json").rename(tmp_path / "commits" / "v=3" / "p=0.json")
    with pytest.raises(CheckpointDamagedError, match=r"commits/v=3/p=0\.json"):
        checkpoint.commits.watermark_inputs(4, 2)
    (tmp_path / "commits" / "v=3" / "p=0.json").write_bytes(b"")
    with pytest.raises(CheckpointDamagedError, match=r"commits/v=3/p=0\.json"):
        checkpoint.commits.read_metrics()


def test_checkpoint_missing_commit_record_is_reported_not_skipped(tmp_path):
    checkpoint = Checkpoint(str(tmp_path))
    checkpoint.commits.write(3, 0, 3, (5,), {})
    checkpoint.commits.write(3, 2, 3, (9,), {})
    with pytest.raises(CheckpointDamagedError, match=r"version 3 .*missing for partitions \[1\]"):
        checkpoint.commits.watermark_inputs(4, 1)
    checkpoint.commits.write(3, 1, 3, (7,), {})
    assert checkpoint.commits.watermark_inputs(4, 1) == (9,)
    assert checkpoint.commits.watermark_inputs(9, 1) == (9,)     # from the newest version before, if not v - 1
    assert checkpoint.commits.watermark_inputs(3, 1) == (None,)  # nothing before the first version


def test_checkpoint_commit_record_written_again_replaces_the_partitions_record(tmp_path):
    checkpoint = Checkpoint(str(tmp_path))
    checkpoint.commits.write(0, 0, 1, (5,), {"rows": 1})
    checkpoint.commits.write(0, 0, 1, (6,), {"rows": 2})
    assert [r.max_times for r in checkpoint.commits.records(0)] == [(6,)]
    assert checkpoint.commits.read_metrics() == [{"rows": 2}]


def test_checkpoint_watermark_inputs_survive_a_partition_count_change(tmp_path):
    """Each record carries the global progress: a version of 2 partitions after one of 4 sees it."""
    checkpoint = Checkpoint(str(tmp_path))
    for p, t in enumerate((3, 8, None, 1)):
        checkpoint.commits.write(5, p, 4, (t,), {})
    assert checkpoint.commits.watermark_inputs(6, 1) == (8,)
    for p in range(2):
        checkpoint.commits.write(6, p, 2, (8,), {})
    assert checkpoint.commits.watermark_inputs(7, 1) == (8,)
    assert checkpoint.commits.newest_progress(1) == (6, (8,))


def test_checkpoint_records_are_synced_before_they_are_moved_into_place(tmp_path, monkeypatch):
    events: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        events.append("fsync")
        return real_fsync(fd)

    def replace(src, dst, *args, **kwargs):
        events.append(f"replace {os.path.basename(dst)}")
        return real_replace(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    Checkpoint(str(tmp_path)).commits.write(0, 0, 1, (5,), {"rows": 1})
    name = "p=0.of=1.t=5.json"
    assert f"replace {name}" in events
    moved = events.index(f"replace {name}")
    assert "fsync" in events[:moved] and "fsync" in events[moved + 1:]   # the file, then its directory
    assert json.loads((tmp_path / "commits" / "v=0" / name).read_bytes())["max_times"] == [5]


def test_checkpoint_relative_location_is_resolved_where_it_is_given(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    checkpoint = Checkpoint("ck")
    assert checkpoint.uri == str(tmp_path / "ck")
    assert checkpoint.changelog_uri(0) == str(tmp_path / "ck" / "state" / "p=0")
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    assert Checkpoint(checkpoint.uri).changelog_uri(0) == str(tmp_path / "ck" / "state" / "p=0")


def test_checkpoint_location_schemes_are_mapped_or_refused(tmp_path):
    assert Checkpoint("dbfs:/checkpoints/join").uri == "/dbfs/checkpoints/join"
    assert Checkpoint(f"file://{tmp_path}/ck").uri == str(tmp_path / "ck")
    with pytest.raises(JoinDefinitionError, match="checkpoint='foo://bucket/ck'.*s3a:"):
        Checkpoint("foo://bucket/ck")


def test_checkpoint_watermark_inputs_start_from_a_recorded_base(tmp_path):
    checkpoint = Checkpoint(str(tmp_path))
    checkpoint.commits.write_progress_base(4, (7, None))
    assert checkpoint.commits.watermark_inputs(5, 2) == (7, None)          # the base alone is complete
    checkpoint.commits.write(4, 0, 1, (3, 2), {"version": 4})
    assert checkpoint.commits.watermark_inputs(5, 2) == (7, 2)             # the maximum of base and records
    assert checkpoint.commits.read_metrics() == [{"version": 4}]
    assert checkpoint.commits.newest_progress(2) == (4, (7, 2))


def test_commits_carry_processing_times_in_their_names(tmp_path):
    checkpoint = Checkpoint(str(tmp_path))
    checkpoint.commits.write(2, 0, 2, (5, 7), {}, Progress((5, 7), now=100, advanced_at=(100, 40)))
    checkpoint.commits.write(2, 1, 2, (6, 7), {}, Progress((6, 7), now=None))   # no time known: none written
    assert sorted(os.listdir(tmp_path / "commits" / "v=2")) == ["p=0.of=2.t=5_7.pt=100_100_40.json",
                                                                "p=1.of=2.t=6_7.json"]
    assert checkpoint.commits.progress_before(3, 2) == Progress((6, 7), now=100, advanced_at=(100, 40))


def test_commits_without_processing_times_read_as_never_idle(tmp_path):
    """Records written before ``idle_timeout`` (or without it) know no processing time."""
    checkpoint = Checkpoint(str(tmp_path))
    checkpoint.commits.write(2, 0, 1, (5, None), {})
    assert checkpoint.commits.progress_before(3, 2) == Progress((5, None), now=None, advanced_at=())


def test_checkpoint_records_deleted_by_another_writer_meanwhile_are_fine(tmp_path):
    import pyarrow.fs as pafs

    from streamjoin.runtime.checkpoint.commits import Commits
    from tests.changelog.test_storage import _Racing

    local = pafs.LocalFileSystem()
    files = CheckpointFiles(str(tmp_path), _Racing(local, before_delete=local.delete_file), str(tmp_path))
    commits = Commits(files)
    commits.write(0, 0, 1, (5,), {})
    commits.write(0, 0, 1, (6,), {})             # replaces the record of other times: deleted meanwhile
    assert [r.max_times for r in commits.records(0)] == [(6,)]
    files.delete_dir("missing")
