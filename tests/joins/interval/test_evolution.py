"""Schema evolution of an interval join's inputs on the same checkpoint: a restart with columns
added, dropped and widened gives what the evolved join gives from the start over the evolved
inputs (rows buffered from before read with nulls, without the dropped column, widened), for
every ``how``; a key or time type change is refused."""

from __future__ import annotations

import datetime as dt
import os

import pyarrow as pa
import pytest

from streamjoin.errors import CheckpointMismatchError
from streamjoin.interval.operator import IntervalJoin
from streamjoin.runtime.evolution import as_schema
from streamjoin.runtime.inspect import describe_checkpoint
from streamjoin.runtime.options import StateConfig
from streamjoin.runtime.plan_runner import PlanRunner

LEFT = pa.schema([("k", pa.int64()), ("ts", pa.timestamp("us")), ("a", pa.string()), ("n", pa.int32())])
RIGHT = pa.schema([("k", pa.int64()), ("ts", pa.timestamp("us")), ("b", pa.string()), ("old", pa.float32())])
# evolved: left's n widened and x added; right's old dropped, its b kept, price added
LEFT2 = pa.schema([("k", pa.int64()), ("ts", pa.timestamp("us")), ("a", pa.string()), ("n", pa.int64()),
                   ("x", pa.bool_())])
RIGHT2 = pa.schema([("k", pa.int64()), ("ts", pa.timestamp("us")), ("b", pa.string()), ("price", pa.float64()),
                    ("qty", pa.int16())])
T0 = dt.datetime(2024, 1, 1)


def _join(left: pa.Schema, right: pa.Schema, how: str) -> IntervalJoin:
    return IntervalJoin(left, right, "k", left_time="ts", right_time="ts", lower=dt.timedelta(seconds=-10),
                        upper=dt.timedelta(seconds=10), delay=dt.timedelta(0), how=how)


def _left(rows, schema):
    return pa.Table.from_pylist([{"k": k, "ts": T0 + dt.timedelta(seconds=s), "a": f"a{s}", "n": s, "x": True}
                                 for k, s in rows], schema=schema)


def _right(rows, schema):
    return pa.Table.from_pylist([{"k": k, "ts": T0 + dt.timedelta(seconds=s), "b": f"b{s}", "old": 0.5,
                                  "price": 1.5, "qty": 2} for k, s in rows], schema=schema)


BEFORE = [([(1, 10), (2, 11), (3, 12)], [(1, 5), (4, 6)]), ([(1, 30), (5, 31)], [(2, 15), (9, 29)])]
AFTER = [([(2, 35), (6, 40)], [(1, 33), (5, 36), (3, 15)]), ([(1, 60)], [(6, 45), (1, 62)])]


def _rows(table: pa.Table) -> list[tuple]:
    return sorted((tuple(sorted(r.items())) for r in table.to_pylist()), key=repr)


def _defaulted(schema: pa.Schema, **defaults: str) -> pa.Schema:
    """``schema`` with existence defaults (Spark's EXISTS_DEFAULT metadata) on some columns."""
    return pa.schema([f.with_metadata({"EXISTS_DEFAULT": defaults[f.name]}) if f.name in defaults else f
                      for f in schema])


@pytest.mark.parametrize("how, defaults", [("inner", False), ("left", False), ("full", False), ("left_semi", False),
                                           ("left_anti", False), ("full", True)])
def test_interval_evolution_equals_a_run_over_the_evolved_inputs(tmp_path, how, defaults):
    """With ``defaults``, the added columns carry existence defaults, which the rows buffered
    from before read instead of nulls."""
    left2, right2 = (_defaulted(LEFT2, x="FALSE"), _defaulted(RIGHT2, price="CAST(2.5 AS DOUBLE)", qty="7S")) \
        if defaults else (LEFT2, RIGHT2)

    def runner(join, name):
        config = StateConfig(store="arranged", local_dir=os.path.join(tmp_path, name, "local"), snapshot_every=2)
        return PlanRunner(join.plan, os.path.join(tmp_path, name, "ck"), partitions=2, config=config, query_id="q")

    old, new = _join(LEFT, RIGHT, how), _join(left2, right2, how)
    first = runner(old, "evolved")
    outputs = [first.run(_left(lt, LEFT), _right(rt, RIGHT)) for lt, rt in BEFORE]
    second = runner(new, "evolved")
    second.version = first.version
    outputs += [second.run(_left(lt, left2), _right(rt, right2)) for lt, rt in AFTER]
    outputs.append(second.run(left2.empty_table(), right2.empty_table(), final=True))

    reference = runner(new, "reference")
    expected = [reference.run(as_schema(_left(lt, LEFT), left2), as_schema(_right(rt, RIGHT), right2))
                for lt, rt in BEFORE]
    expected += [reference.run(_left(lt, left2), _right(rt, right2)) for lt, rt in AFTER]
    expected.append(reference.run(left2.empty_table(), right2.empty_table(), final=True))
    got = [_rows(as_schema(out, new.output_schema)) for out in outputs]
    assert got == [_rows(out) for out in expected]
    assert sum(len(g) for g in got[2:]) >= 2
    if defaults:   # rows buffered from before the change, matched after it, read with the defaults
        assert any(dict(r)["x"] is False for out in got[2:] for r in out)
        assert any(dict(r)["qty"] == 7 and dict(r)["price"] == 2.5 for out in got[2:] for r in out)
    report = describe_checkpoint(os.path.join(tmp_path, "evolved", "ck"))
    assert report.definition == new.definition()
    assert len(report.evolutions) == 1 and "left: widened n int32 -> int64" in report.evolutions[0]


def test_interval_evolution_refuses_a_key_type_change(tmp_path):
    config = StateConfig(store="memory", local_dir=str(tmp_path / "local"))
    first = PlanRunner(_join(LEFT, RIGHT, "inner").plan, str(tmp_path / "ck"), config=config, query_id="q")
    first.run(_left(BEFORE[0][0], LEFT), _right(BEFORE[0][1], RIGHT))
    left = LEFT.set(0, pa.field("k", pa.int32()))
    with pytest.raises(CheckpointMismatchError, match="'k'.*key or time column"):
        PlanRunner(_join(left, RIGHT, "inner").plan, str(tmp_path / "ck"), config=config, query_id="q")


def test_interval_definition_takes_a_longer_delay_and_refuses_a_shorter_one_or_another_how(tmp_path):
    def join(delay, how="inner"):
        return IntervalJoin(LEFT, RIGHT, "k", left_time="ts", right_time="ts", lower=dt.timedelta(seconds=-10),
                            upper=dt.timedelta(seconds=10), delay=dt.timedelta(seconds=delay), how=how)

    config = StateConfig(store="memory", local_dir=str(tmp_path / "local"))
    ck = str(tmp_path / "ck")
    PlanRunner(join(5).plan, ck, config=config, query_id="q").run(_left(BEFORE[0][0], LEFT), _right(BEFORE[0][1], RIGHT))
    PlanRunner(join(30).plan, ck, config=config, query_id="q")
    assert describe_checkpoint(ck).evolutions == (("delay: 5 seconds -> 30 seconds",),)
    with pytest.raises(CheckpointMismatchError, match="delay: 30 seconds -> 5 seconds shrinks"):
        PlanRunner(join(5).plan, ck, config=config, query_id="q")
    with pytest.raises(CheckpointMismatchError, match="(?s)another join definition.*how"):
        PlanRunner(join(30, "left").plan, ck, config=config, query_id="q")
