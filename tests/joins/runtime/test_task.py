"""The task's phases: read (everything from the checkpoint), open, step, commit."""

from __future__ import annotations

import collections
import dataclasses

import pyarrow as pa
import pytest

from streamjoin.bench.operators import PassThrough
from streamjoin.changelog.logging_store import ChangeloggingStore
from streamjoin.runtime.bind import bind_query
from streamjoin.runtime.checkpoint.commits import Progress
from streamjoin.runtime.checkpoint.files import CheckpointFiles
from streamjoin.runtime.operator import StepInput, StepResult
from streamjoin.runtime.options import StateConfig
from streamjoin.runtime.task import TaskInfo, commit_phase, open_phase, processing_after, read_phase, run_task
from streamjoin.statestore import Store
from streamjoin.statestore.timed import StoreTimer, TimedStore

SCHEMA = pa.schema([("k", pa.int64()), ("t", pa.timestamp("us", tz="UTC"))])


def _rows(keys, t0: int = 0) -> pa.Table:
    return pa.table({"k": pa.array(keys, pa.int64()),
                     "t": pa.array([t0 + i for i in range(len(keys))], pa.timestamp("us", tz="UTC"))})


@pytest.fixture
def bound(tmp_path):
    return bind_query(str(tmp_path / "ck"), PassThrough(SCHEMA, ["k"], "t"), 1,
                      state=StateConfig(store="memory", local_dir=str(tmp_path / "local")))


def test_read_phase_reads_each_checkpoint_record_once(bound, monkeypatch):
    op = PassThrough(SCHEMA, ["k"], "t")
    run_task(op, bound.checkpoint, bound.state, TaskInfo(0, 0, 1), (_rows([1, 2]),))
    reads: collections.Counter = collections.Counter()
    original = CheckpointFiles.read_json
    monkeypatch.setattr(CheckpointFiles, "read_json", lambda self, rel: reads.update([rel]) or original(self, rel))
    start = read_phase(op, bound.checkpoint, bound.state, TaskInfo(1, 0, 1), (_rows([3]),))
    assert reads["streamjoin.json"] == 1 and max(reads.values()) == 1
    assert (start.target, start.known, start.epoch.number) == (0, (1,), 0)


def test_read_phase_adds_initial_rows_to_the_first_version_only(tmp_path):
    op = PassThrough(SCHEMA, ["k"], "t")

    def write_initial(b):
        b.checkpoint.initial.write("input", 0, _rows([7, 8], t0=100))
        return {"input": 2}

    bound = bind_query(str(tmp_path / "ck"), op, 1, write_initial=write_initial,
                       state=StateConfig(store="memory", local_dir=str(tmp_path / "local")))
    first = read_phase(op, bound.checkpoint, bound.state, TaskInfo(0, 0, 1), (_rows([1]),))
    assert first.initial == (2,) and first.rows[0].column("k").to_pylist() == [7, 8, 1] and first.target is None
    run_task(op, bound.checkpoint, bound.state, TaskInfo(0, 0, 1), (_rows([1]),))
    later = read_phase(op, bound.checkpoint, bound.state, TaskInfo(1, 0, 1), (_rows([2]),))
    assert later.initial == (0,) and later.rows[0].column("k").to_pylist() == [2]


def test_commit_phase_records_progress_metrics_and_the_version(bound):
    op = PassThrough(SCHEMA, ["k"], "t")
    task = TaskInfo(0, 0, 1)
    start = read_phase(op, bound.checkpoint, bound.state, task, (_rows([1, 2], t0=50),))
    opened = open_phase(op, bound.checkpoint, bound.state, task, start)
    result = op.step(opened.store, StepInput(0, 0, start.rows, start.max_times, False))
    metrics = commit_phase(op, bound.checkpoint, bound.state, task, start, opened, result)
    assert metrics["output_rows"] == 2 and metrics["max_time_input"] == 51
    assert [r.max_times for r in bound.checkpoint.commits.records(0)] == [(51,)]
    assert bound.checkpoint.commits.watermark_inputs(1, 1) == (51,)
    assert start.log.listing().newest == 0


def test_processing_after_moves_the_inputs_whose_rows_advanced_and_only_with_rows():
    before = Progress((10, 20), now=100, advanced_at=(100, 50))
    left = (_rows([1], t0=30), _rows([]))
    assert processing_after(before, (30, 20), left, now=200) == Progress((30, 20), 200, (200, 50))
    # a partition without rows of the version does not know its processing time
    assert processing_after(before, (10, 20), (_rows([]), _rows([])), now=200) == Progress((10, 20), 100, (100, 50))
    # an input with no row yet waits from the first processing time known
    assert processing_after(Progress((None, None)), (5, None), (_rows([1], t0=5), _rows([])), now=7) \
        == Progress((5, None), 7, (7, 7))


class _Counting(PassThrough):
    """PassThrough that keeps a row count in its state: reads it, puts it back increased, and
    records the store each step received."""

    def __init__(self, schema: pa.Schema, key, time=None) -> None:
        super().__init__(schema, key, time)
        self.received: list[Store] = []

    def step(self, state: Store, batch: StepInput) -> StepResult:
        self.received.append(state)
        seen = int(state.get(b"n") or b"0") + batch.rows[0].num_rows
        result = super().step(state, batch)
        return dataclasses.replace(result, puts=[(b"n", str(seen).encode())])


def _counted(tmp_path, name: str, wrap_store=None) -> tuple[_Counting, list, bytes | None]:
    """Two versions of ``_Counting`` under ``tmp_path/name``: the operator, the outputs' keys and
    the state's count, read back from the changelogged store."""
    op = _Counting(SCHEMA, ["k"], "t")
    bound = bind_query(str(tmp_path / name / "ck"), op, 1,
                       state=StateConfig(store="memory", local_dir=str(tmp_path / name / "local")))
    outputs = [run_task(op, bound.checkpoint, bound.state, TaskInfo(v, 0, 1), (_rows(keys),),
                        wrap_store=wrap_store)[0].column("k").to_pylist()
               for v, keys in enumerate(([1, 2], [3]))]
    task = TaskInfo(2, 0, 1)
    start = read_phase(op, bound.checkpoint, bound.state, task, (_rows([]),))
    opened = open_phase(op, bound.checkpoint, bound.state, task, start)
    try:
        return op, outputs, opened.store.get(b"n")
    finally:
        opened.store.close()


def test_run_task_wraps_the_store_only_when_asked(tmp_path):
    plain, outputs, count = _counted(tmp_path, "plain")
    assert all(isinstance(s, ChangeloggingStore) for s in plain.received)   # the opened store itself

    timer = StoreTimer()
    timed, timed_outputs, timed_count = _counted(tmp_path, "timed", wrap_store=timer.wrap)
    assert all(isinstance(s, TimedStore) and isinstance(s.inner, ChangeloggingStore) for s in timed.received)
    assert (timed_outputs, timed_count) == (outputs, count) == ([[1, 2], [3]], b"3")   # the same results
    # each version: the step's get, and the commit's write of its changes through the wrapper
    assert timer.calls == 4 and timer.seconds > 0
