"""Every streaming step (``Operator.stream``) against its operator's whole step: for any split of
a version's rows into pieces, in any order, the rows the pieces output with those of ``finish``
are the whole step's output, and ``finish``'s state changes, set-aside rows and metrics (but the
count of state rows read) are the whole step's. Then the same through the runtime
(``StreamedTask``): a run fed in pieces equals a run stepped whole, version by version."""

from __future__ import annotations

import tempfile
from collections import Counter
from dataclasses import replace

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from streamjoin.bench.operators import PassThrough
from streamjoin.runtime.checkpoint import Checkpoint
from streamjoin.runtime.local import LocalRunner
from streamjoin.runtime.operator import Operator, StepInput, StepResult
from streamjoin.runtime.options import StateConfig
from streamjoin.runtime.task import StreamedTask, TaskInfo, progress_after
from streamjoin.statestore import open_store
from tests.joins.interval.cases import join_cases, rows_of

WORK_COUNTS = {"state_rows_read"}


def _pieces(data: st.DataObject, tables: tuple[pa.Table, ...]) -> list[tuple[pa.Table, ...]]:
    """Each input's rows shuffled and cut into up to four pieces; piece ``i`` of every input together."""
    count = data.draw(st.integers(1, 4), label="pieces")
    cut = []
    for table in tables:
        order = data.draw(st.permutations(range(table.num_rows)), label="order")
        shuffled = table.take(pa.array(order, pa.int64()))
        bounds = sorted(data.draw(st.lists(st.integers(0, table.num_rows), min_size=count - 1, max_size=count - 1)))
        cut.append([shuffled.slice(a, b - a) for a, b in zip([0, *bounds], [*bounds, table.num_rows])])
    return [tuple(parts[i] for parts in cut) for i in range(count)]


def _same(whole: StepResult, outputs: list[pa.Table], rest: StepResult) -> None:
    assert rows_of(pa.concat_tables([*outputs, rest.output])) == rows_of(whole.output)
    assert (list(rest.puts), list(rest.deletes), list(rest.delete_ranges)) == \
        (list(whole.puts), list(whole.deletes), list(whole.delete_ranges))
    assert (rest.writes is None) == (whole.writes is None)
    for mine, theirs in zip(rest.set_aside, whole.set_aside):
        assert Counter(map(repr, mine.to_pylist())) == Counter(map(repr, theirs.to_pylist()))
    assert {k: v for k, v in rest.metrics.items() if k not in WORK_COUNTS} == \
        {k: v for k, v in whole.metrics.items() if k not in WORK_COUNTS}


def _versions(op: Operator, batches: list[tuple[pa.Table, ...]], data: st.DataObject) -> None:
    """Each version stepped whole and streamed in pieces from the same state; the whole step's
    writes applied after."""
    with tempfile.TemporaryDirectory() as root:
        store = open_store("memory", f"{root}/p0")
        max_times: tuple[int | None, ...] = (None,) * len(op.inputs)
        for version, tables in enumerate(batches):
            final = version == len(batches) - 1 and data.draw(st.booleans(), label="final")
            batch = StepInput(version, 0, tables, max_times, final)
            whole = op.step(store, batch)
            streamed = op.stream(store, replace(batch, rows=tuple(t.slice(0, 0) for t in tables)))
            assert streamed is not None
            outputs = [streamed.feed(piece) for piece in _pieces(data, tables)]
            _same(whole, outputs, streamed.finish(batch))
            whole.write_to(store, version)
            max_times = progress_after(op, max_times, tables)
        store.close()


@given(case=join_cases(hows=("inner",), heartbeats=True, max_rows=20), data=st.data())
def test_streaming_inner_interval_join_in_pieces_is_its_whole_step(case, data):
    op = case.operator()
    assert op.streams_input
    _versions(op, [case.tables(i) for i in range(len(case.batches))], data)


@given(case=join_cases(hows=("left", "right", "full", "left_semi", "left_anti")))
def test_streaming_interval_join_streams_only_inner_joins(case):
    op = case.operator()
    assert not op.streams_input
    with tempfile.TemporaryDirectory() as root:
        store = open_store("memory", f"{root}/p0")
        assert op.stream(store, StepInput(0, 0, case.tables(0), (None, None))) is None
        store.close()


@settings(max_examples=20)
@given(rows=st.lists(st.tuples(st.integers(0, 5), st.integers(0, 100)), max_size=30), data=st.data())
def test_streaming_pass_through_in_pieces_is_its_whole_step(rows, data):
    schema = pa.schema([("k", pa.int64()), ("t", pa.int64())])
    table = pa.Table.from_pylist([{"k": k, "t": t} for k, t in rows], schema=schema)
    _versions(PassThrough(schema, ["k"], "t"), [(table,), (table.slice(0, len(rows) // 2),)], data)


@settings(max_examples=15, deadline=None)
@given(case=join_cases(hows=("inner",), max_rows=16), data=st.data())
def test_streamed_task_in_pieces_commits_what_a_whole_task_does(case, data):
    """Through the runtime: one checkpoint run with each version fed in pieces
    (``StreamedTask``), one stepped whole (``LocalRunner``); the same output each version, and
    the same state after the last."""
    op = case.operator()
    with tempfile.TemporaryDirectory() as root:
        whole = LocalRunner(op, f"{root}/whole", config=StateConfig(store="memory", local_dir=f"{root}/w"))
        LocalRunner(op, f"{root}/pieces", config=StateConfig(store="memory", local_dir=f"{root}/p"))  # (binds it)
        config = StateConfig(store="memory", local_dir=f"{root}/p")
        for version in range(len(case.batches)):
            tables = case.tables(version)
            expected = whole.run(*tables)
            run = StreamedTask(op, Checkpoint(f"{root}/pieces"), config, TaskInfo(version, 0, 1))
            assert run.streaming is not None
            outputs = [run.feed(piece) for piece in _pieces(data, tables)]
            stepped = run.finish()
            stepped.commit()
            assert rows_of(pa.concat_tables([*outputs, stepped.output])) == rows_of(expected)
