"""The driver's writing of a join's initial rows (:mod:`streamjoin.spark.initial_writer`): in a
thread of its own while the query starts, waited for by a redefinition, its failure recorded
for the query; and the routing job's tasks' writer (:class:`streamjoin.spark.task.InitialWriter`).
No Spark session: the writing is a function here, and the task's context a stand-in."""

from __future__ import annotations

import threading
import time

import pyarrow as pa
import pytest

from streamjoin.changes import ChangeFormat
from streamjoin.enrichment.operator import EnrichmentJoin
from streamjoin.errors import InitialRowsError
from streamjoin.runtime.bind import bind_query
from streamjoin.runtime.checkpoint import Checkpoint
from streamjoin.spark import initial_writer
from streamjoin.spark.flush_source import READY_WAIT_S, _FlushReader

EVENTS = pa.schema([("user", pa.int64()), ("ts", pa.timestamp("us"))])
TABLE = pa.schema([("user", pa.int64()), ("op", pa.string()), ("at", pa.timestamp("us")), ("plan", pa.string())])


def _bound(path, write):
    op = EnrichmentJoin(EVENTS, TABLE, "user", stream_time="ts", changes=ChangeFormat.plain("user", time="at"))
    return bind_query(str(path), op, 2, write_initial=write, defer_initial=True)


def _writing_in_background(path, release: threading.Event):
    """A join bound at ``path`` whose 3 initial rows are being written in the background until
    ``release`` is set."""
    def write(bound):
        release.wait(10)
        return {"table": 3}

    bound = _bound(path, write)
    initial_writer.write(bound, write, in_background=True)
    return bound


def test_initial_writer_background_writing_is_waited_for_by_the_flush_source(tmp_path):
    release = threading.Event()
    bound = _writing_in_background(tmp_path, release)
    assert bound.checkpoint.initial.done() is None   # still writing: the definition has returned
    reader = _FlushReader(bound.uri, 2, 2, initial_pending=True)
    release.set()
    assert reader.initialOffset() == {"max_times": [None, None]}   # returns once the rows are complete
    assert bound.checkpoint.initial.done() == {"table": 3}
    initial_writer.wait_for(bound.uri)


def test_initial_writer_ready_follows_the_writing_end_at_once(tmp_path):
    release = threading.Event()
    bound = _writing_in_background(tmp_path, release)
    reader = _FlushReader(bound.uri, 2, 2, initial_pending=True)
    started = time.perf_counter()
    assert not reader.ready()   # still writing: it waited a moment for the writing, then said so
    assert time.perf_counter() - started >= READY_WAIT_S * 0.9
    threading.Timer(0.05, release.set).start()
    started = time.perf_counter()
    assert reader.ready()   # the writing ended while it waited: answered then, not at a later look
    assert time.perf_counter() - started < READY_WAIT_S
    assert initial_writer.await_written(bound.uri, 0)   # none running any more
    initial_writer.wait_for(bound.uri)


def test_initial_writer_failure_reaches_the_query_and_a_redefinition_waits(tmp_path, caplog):
    started = threading.Event()
    release = threading.Event()

    def failing(bound):
        started.set()
        release.wait(10)
        raise ValueError("bootstrap: column 'plan' holds 'x'")

    bound = _bound(tmp_path, failing)
    initial_writer.write(bound, failing, in_background=True)
    started.wait(10)
    waiter = threading.Thread(target=initial_writer.wait_for, args=(bound.uri,))
    waiter.start()
    waiter.join(0.05)
    assert waiter.is_alive()   # a redefinition of the same checkpoint waits for the writing
    release.set()
    waiter.join(10)
    assert not waiter.is_alive()
    assert "writing the initial rows of the join" in caplog.text
    reader = _FlushReader(bound.uri, 2, 2, initial_pending=True)
    with pytest.raises(InitialRowsError, match="could not be written: ValueError: bootstrap: column 'plan'"):
        reader.latestOffset(None)


def test_initial_writer_in_the_foreground_raises_what_writing_raises(tmp_path):
    def failing(bound):
        raise ValueError("no")

    bound = _bound(tmp_path, failing)
    with pytest.raises(ValueError, match="no"):
        initial_writer.write(bound, failing, in_background=False)
    with pytest.raises(InitialRowsError):
        bound.checkpoint.initial.wait()


def test_initial_writer_routes_each_batch_as_it_comes_keeping_each_partitions_order(tmp_path, monkeypatch):
    from streamjoin.spark import task as spark_task
    from streamjoin.spark.lanes import Layout
    from streamjoin.spark.task import TARGET

    class Context:
        def partitionId(self) -> int:
            return 7

    monkeypatch.setattr(spark_task, "task_context", lambda: Context())
    operator = EnrichmentJoin(EVENTS, TABLE, "user", stream_time="ts", changes=ChangeFormat.plain("user", time="at"))
    uri = str(tmp_path / "join")
    layout = Layout(((0, 1), (0, 2, 3, 4)))   # the table's columns in lanes 0, 2, 3 and 4
    users = [[5, 1, 8, 2], [], [9, 4, 3]]
    plans = [[f"p{u}" for u in batch] for batch in users]

    def batch(us, ps):
        at = pa.array([0] * len(us), pa.timestamp("us"))
        return pa.RecordBatch.from_arrays(
            [pa.array(us, pa.int64()), pa.array(["u"] * len(us)), at, pa.array(ps), pa.array([u % 2 for u in us], pa.int32())],
            names=["_sj_0", "_sj_2", "_sj_3", "_sj_4", TARGET])

    writer = spark_task.InitialWriter(operator, 1, uri, layout)
    (counted,) = writer(iter(batch(u, p) for u, p in zip(users, plans)))
    assert counted.column("rows").to_pylist() == [7]
    initial = Checkpoint(uri).initial
    initial.mark_done({"table": 7})
    assert initial.files.names("initial/table/p=0") == ["piece-000007.arrow"]   # one file a partition, named by the task
    first, second = initial.read("table", 0), initial.read("table", 1)
    assert first.schema == TABLE
    assert (first.column("user").to_pylist(), first.column("plan").to_pylist()) == ([8, 2, 4], ["p8", "p2", "p4"])
    assert second.column("user").to_pylist() == [5, 1, 9, 3]   # in the order the rows came
