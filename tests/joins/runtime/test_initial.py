"""Initial rows (a bootstrap snapshot) given to a join's first version through the checkpoint:
``LocalRunner.set_initial`` writes them routed by key, as ``stream_table_join(bootstrap=...)``
does in Spark, and the first version reads them, also when it is executed again."""

from __future__ import annotations

import datetime as dt
from collections import Counter

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamjoin.changes import ChangeFormat
from streamjoin.enrichment.operator import EnrichmentJoin
from streamjoin.errors import CheckpointMismatchError
from streamjoin.runtime.checkpoint import Checkpoint
from streamjoin.runtime.local import LocalRunner
from streamjoin.runtime.options import StateConfig
from tests.examples import scaled

EVENTS = pa.schema([("user", pa.int64()), ("ts", pa.timestamp("us")), ("what", pa.string())])
TABLE = pa.schema([("user", pa.int64()), ("op", pa.string()), ("at", pa.timestamp("us")), ("plan", pa.string())])
SNAPSHOT = pa.schema([("user", pa.int64()), ("plan", pa.string())])


def _join() -> EnrichmentJoin:
    return EnrichmentJoin(EVENTS, TABLE, "user", stream_time="ts", changes=ChangeFormat.plain("user", time="at"))


def _events(rows):
    return pa.Table.from_pylist([{"user": u, "ts": dt.datetime(2026, 1, 1, 0, 0, s), "what": w} for u, s, w in rows],
                                schema=EVENTS)


def _run(runner: LocalRunner, first_table: pa.Table, events: pa.Table, start: int) -> Counter:
    out = runner.run(events, first_table, version=start)
    out = pa.concat_tables([out, runner.run(EVENTS.empty_table(), TABLE.empty_table(), final=True)])
    return Counter(tuple(r.values()) for r in out.to_pylist())


@settings(max_examples=scaled(20))
@given(users=st.lists(st.integers(0, 20), unique=True, max_size=12), partitions=st.integers(1, 3),
       start=st.sampled_from([0, 3]), again=st.booleans())
def test_runtime_initial_rows_equal_giving_them_to_the_first_version(tmp_path_factory, users, partitions, start, again):
    snapshot = pa.Table.from_pylist([{"user": u, "plan": f"p{u}"} for u in users], schema=SNAPSHOT)
    events = _events([(u, s, f"e{u}.{s}") for u in range(0, 22, 3) for s in (1, 2)])
    op = _join()
    boot = op.bootstrap_changes(snapshot)
    direct = LocalRunner(op, str(tmp_path_factory.mktemp("direct")), partitions=partitions,
                         config=StateConfig(store="memory"))
    expected = _run(direct, boot, events, start)
    runner = LocalRunner(op, str(tmp_path_factory.mktemp("initial")), partitions=partitions,
                         config=StateConfig(store="memory"))
    runner.set_initial("table", boot)
    if again:   # the first version committed, its store lost, then executed again
        runner.run(events, TABLE.empty_table(), version=start)
        runner.lose_local_state()
    assert _run(runner, TABLE.empty_table(), events, start) == expected
    assert sum(m.get("initial_rows_table", 0) for m in runner.metrics if m["version"] == start) == len(users) * (1 + again)


def test_runtime_initial_rows_never_completed_are_refused(tmp_path):
    op = _join()
    runner = LocalRunner(op, str(tmp_path), config=StateConfig(store="memory"))
    snapshot = pa.Table.from_pylist([{"user": 1, "plan": "pro"}], schema=SNAPSHOT)
    runner.checkpoint.initial.write("table", 0, op.bootstrap_changes(snapshot))   # no mark_initial_done
    with pytest.raises(CheckpointMismatchError, match="never completed"):
        runner.run(EVENTS.empty_table(), TABLE.empty_table())


def test_runtime_initial_rows_reach_the_changelog_once(tmp_path):
    # a bootstrap at version 0 is logged as its delta alone (the empty origin starts the log), not
    # written again as a snapshot at once
    import os

    op = _join()
    runner = LocalRunner(op, str(tmp_path / "ck"), partitions=1, config=StateConfig(store="memory"))
    runner.set_initial("table", op.bootstrap_changes(pa.Table.from_pylist([{"user": 1, "plan": "p"}], schema=SNAPSHOT)))
    runner.run(EVENTS.empty_table(), TABLE.empty_table(), version=0)
    logged = [f"{n.split('-')[0]}-{int(n.split('-')[1])}" for n in os.listdir(tmp_path / "ck" / "state" / "p=0")
              if n.startswith(("delta-", "snapshot-"))]
    assert logged == ["delta-0"]
    runner.lose_local_state()   # restored from that delta
    out = runner.run(_events([(1, 5, "a")]), TABLE.empty_table(), final=True)
    assert out.column("plan").to_pylist() == ["p"]


# -- initial rows written while the query starts (bind_query(defer_initial=True)) --------------

def _bind_deferred(path, write):
    from streamjoin.runtime.bind import bind_query

    return bind_query(str(path), _join(), 2, write_initial=write, defer_initial=True)


def test_runtime_deferred_initial_rows_are_written_by_the_engine_then_waited_for(tmp_path):
    from streamjoin.runtime.bind import write_initial_rows

    op = _join()
    rows = op.bootstrap_changes(pa.Table.from_pylist([{"user": 1, "plan": "pro"}], schema=SNAPSHOT))
    calls = []

    def write(bound):
        calls.append(bound.uri)
        bound.checkpoint.initial.write("table", 0, rows)
        return {"table": rows.num_rows}

    bound = _bind_deferred(tmp_path, write)
    assert bound.initial_pending and bound.state.initial and calls == []   # bind wrote nothing
    assert bound.checkpoint.initial.done() is None
    write_initial_rows(bound, write)
    assert calls == [bound.uri]
    assert bound.checkpoint.initial.wait() == {"table": 1}
    assert bound.checkpoint.initial.read("table", 0).num_rows == 1
    again = _bind_deferred(tmp_path, write)   # complete: neither pending nor written again
    assert not again.initial_pending and again.state.initial and calls == [bound.uri]


def test_runtime_deferred_initial_rows_that_fail_stop_the_waiter_with_the_reason(tmp_path):
    from streamjoin.errors import InitialRowsError
    from streamjoin.runtime.bind import write_initial_rows

    def write(bound):
        raise RuntimeError("column 'plan' holds 'x', which does not cast")

    bound = _bind_deferred(tmp_path, write)
    with pytest.raises(RuntimeError, match="does not cast"):
        write_initial_rows(bound, write)
    with pytest.raises(InitialRowsError, match=r"could not be written: RuntimeError: column 'plan' holds 'x'"):
        bound.checkpoint.initial.wait()
    # defined again: what the failed writing left is cleared, so the waiter waits for the new rows
    again = _bind_deferred(tmp_path, lambda b: {"table": 0})
    assert again.initial_pending and again.checkpoint.initial.done() is None
    slept = []

    def sleep(seconds):
        slept.append(seconds)
        if len(slept) == 3:
            write_initial_rows(again, lambda b: {"table": 0})

    assert again.checkpoint.initial.wait(sleep=sleep, longest=0.02) == {"table": 0}
    assert slept == [0.01, 0.015, 0.02]   # longer looks, up to `longest`


def test_initial_pieces_of_a_partition_are_read_as_its_rows(tmp_path):
    initial = Checkpoint(str(tmp_path / "join")).initial
    initial.write_piece("table", 0, 1, pa.table({"k": [3]}))   # (each task of the routing job writes its own)
    initial.write_piece("table", 0, 0, pa.table({"k": [1, 2]}))
    initial.write("table", 1, pa.table({"k": [9]}))   # a partition's rows in one file, as before pieces
    initial.mark_done({"table": 4})
    assert initial.read("table", 0).column("k").to_pylist() == [1, 2, 3]
    assert initial.read("table", 1).column("k").to_pylist() == [9]
    assert initial.read("table", 2) is None
    initial.write_piece("table", 0, 1, pa.table({"k": [4]}))   # a task run again replaces its piece
    assert initial.read("table", 0).column("k").to_pylist() == [1, 2, 4]
