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
