"""The interval join with ``idle_timeout`` (in process): a quiet input stops holding the watermark
after the timeout of *given* processing time; its rows that come back below it are late."""

from __future__ import annotations

import datetime as dt
import os

import pyarrow as pa
import pytest

from streamjoin.interval.operator import IntervalJoin
from streamjoin.runtime.operator import NEG_INF
from streamjoin.runtime.options import StateConfig
from streamjoin.runtime.plan_runner import PlanRunner
from streamjoin.testing.interval import interval_watermarks

SCHEMA = pa.schema([("k", pa.int64()), ("t", pa.timestamp("us"))])
T0 = dt.datetime(2026, 1, 1)
SECOND = 1_000_000
P0 = 1_800_000_000 * SECOND   # a processing time (µs since the epoch)


def rows(*pairs):
    return pa.Table.from_pylist([{"k": k, "t": T0 + dt.timedelta(seconds=s)} for k, s in pairs], schema=SCHEMA)


def runner(tmp_path, idle_timeout="1 minute", partitions=2):
    op = IntervalJoin(SCHEMA, SCHEMA, "k", left_time="t", right_time="t", lower="0 seconds", upper="0 seconds",
                      delay="10 seconds", how="left", idle_timeout=idle_timeout)
    return PlanRunner(op.plan, str(tmp_path / "ck"), partitions=partitions,
                      config=StateConfig(store="memory", local_dir=str(tmp_path / "local")))


#: (left, right, processing seconds after P0): the right input has one row, then goes quiet
BATCHES = [((1, 0), (1000, 0), 0), ((2, 100), None, 30), ((3, 200), None, 90), ((4, 300), None, 100)]


def run(join, batches=BATCHES):
    out = []
    for left, right, seconds in batches:
        out.append(join.run(rows(left), rows(right) if right else rows(), processing_time=P0 + seconds * SECOND))
    return out


def at(seconds: int) -> int:
    """The event time ``seconds`` after T0, in µs."""
    return int((T0 - dt.datetime(1970, 1, 1)).total_seconds() + seconds) * SECOND


def watermarks(join):
    """Per version, the watermark every partition used (one value, or the test fails)."""
    by_version: dict[int, set[int]] = {}
    for m in join.metrics():
        by_version.setdefault(m["version"], set()).add(m["watermark"])
    assert all(len(v) == 1 for v in by_version.values()), by_version
    return [v.pop() for _, v in sorted(by_version.items())]


def test_interval_idle_timeout_releases_an_outer_row_once_the_quiet_input_is_idle(tmp_path):
    join = runner(tmp_path)
    out = run(join)
    # version 3 reads the records of version 2 (processing time P0 + 90 s): the right input's
    # progress last advanced at P0, 90 s >= 1 minute ago, so the watermark is the left's alone
    assert [t.num_rows for t in out] == [0, 0, 0, 2]
    assert sorted(out[3].column("k").to_pylist()) == [1, 2] and out[3].column("t_right").null_count == 2
    assert watermarks(join)[3] == at(190)


def test_interval_idle_timeout_still_holds_before_the_timeout(tmp_path):
    join = runner(tmp_path, idle_timeout="2 minutes")
    out = run(join)
    assert [t.num_rows for t in out] == [0, 0, 0, 0]     # 90 s < 2 minutes: min over both inputs


def test_interval_without_idle_timeout_nothing_changes(tmp_path):
    join = runner(tmp_path, idle_timeout=None)
    out = run(join)
    assert [t.num_rows for t in out] == [0, 0, 0, 0]
    names = [f for _, _, files in os.walk(tmp_path / "ck" / "commits") for f in files]
    assert names and not any(".pt=" in f for f in names)   # records as before the option


def test_interval_idle_timeout_sets_aside_a_returning_inputs_rows_below_the_watermark_as_late(tmp_path):
    join = runner(tmp_path)
    run(join)
    # the right input comes back: a row below the watermark (190 s) is late, one above it joins
    out = join.run(rows((5, 400)), rows((2, 100), (5, 400)), processing_time=P0 + 110 * SECOND)
    pairs = out.filter(out.column("t_right").is_valid())
    assert pairs.column("k").to_pylist() == [5]
    late = join.set_aside("right")
    assert late is not None and late.column("k").to_pylist() == [2] and late.column("_reason").to_pylist() == ["late"]
    assert join.metric("late_rows_right") == 1
    # it is active again: its progress advanced at P0 + 110 s, so the next watermark is the min again
    join.run(rows((6, 1000)), rows(), processing_time=P0 + 120 * SECOND)
    join.run(rows(), rows(), processing_time=P0 + 130 * SECOND)
    assert watermarks(join)[-3:] == [at(290), at(390), at(390)]   # min(1000 s, 400 s) - 10 s, not 990 s


def test_interval_idle_timeout_version_executed_again_with_its_processing_time_gives_the_same_watermark(tmp_path):
    join = runner(tmp_path)
    first = run(join)
    marks = watermarks(join)
    names = sorted(os.listdir(tmp_path / "ck" / "commits" / "v=3"))
    join.lose_local_state()
    again = join.run(rows((4, 300)), rows(), version=3, processing_time=P0 + 100 * SECOND)
    assert sorted(again.column("k").to_pylist()) == sorted(first[3].column("k").to_pylist())
    assert watermarks(join) == marks
    assert sorted(os.listdir(tmp_path / "ck" / "commits" / "v=3")) == names


@pytest.mark.parametrize("partitions", [1, 3])
def test_interval_idle_timeout_partitions_without_rows_use_the_recorded_processing_time(tmp_path, partitions):
    """A partition with no rows of a version learns its processing time from the next version's
    commit records, so every partition computes one watermark."""
    join = runner(tmp_path, partitions=partitions)
    out = run(join)
    assert sum(t.num_rows for t in out) == 2 and len(watermarks(join)) == 4


def test_interval_idle_timeout_watermarks_match_the_reference(tmp_path):
    batches = [*BATCHES, ((5, 400), (2, 100), 110), ((6, 1000), None, 120), (None, None, 130),
               (None, (7, 1100), 300), ((8, 1200), None, 400)]
    join = runner(tmp_path)
    for left, right, seconds in batches:
        join.run(rows(left) if left else rows(), rows(right) if right else rows(),
                 processing_time=P0 + seconds * SECOND)
    given = [([{"t": at(left[1])}] if left else [], [{"t": at(right[1])}] if right else [])
             for left, right, _ in batches]
    expected = interval_watermarks(given, left_time="t", right_time="t", delay=10 * SECOND,
                                   idle_timeout=60 * SECOND,
                                   processing_times=[P0 + s * SECOND for _, _, s in batches])
    assert watermarks(join) == [NEG_INF if w is None else w for w in expected]
