"""Through Spark: set-aside rows read back exactly, outputs refuse what is not a checkpoint, float keys
route and match as Spark's join does, and odd column names (a backtick) work."""

from __future__ import annotations

import math
from datetime import datetime, timedelta

import pyarrow as pa
import pytest
from pyspark.sql import functions as F

from streamjoin import interval_join, join_metrics, set_aside_rows
from streamjoin.errors import CheckpointDamagedError, JoinDefinitionError
from streamjoin.runtime.checkpoint import Checkpoint
from streamjoin.runtime.operator import NEG_INF

pytestmark = pytest.mark.spark

T0 = datetime(2024, 1, 1)
ZERO, SEC = timedelta(0), timedelta(seconds=1)


def test_set_aside_rows_read_back_exactly_with_version_and_partition_columns(spark, tmp_path):
    rows = [(1, "late-left", "p-value", 7, None), (2, "kept", "q", 8, T0)]
    left = spark.createDataFrame(rows, "k long, v string, p string, _version long, t timestamp")
    right = spark.createDataFrame([(1, T0)], "k long, t timestamp")
    ck = str(tmp_path / "ck")
    interval_join(left, right, "k", left_time="t", right_time="t", lower=ZERO, upper=timedelta(minutes=1),
                  delay=ZERO, how="left", checkpoint=ck, partitions=2).collect()
    aside = set_aside_rows(spark, ck, "left")
    assert aside.columns == ["k", "v", "p", "_version", "t", "_reason", "__version", "_partition"]
    (row,) = aside.collect()
    assert (row["k"], row["v"], row["p"], row["_version"], row["t"]) == (1, "late-left", "p-value", 7, None)
    assert row["_reason"] == "null event time" and row["__version"] == 0 and row["_partition"] in (0, 1)
    empty = set_aside_rows(spark, ck, "right")
    assert empty.count() == 0 and empty.columns == ["k", "t", "_reason", "_version", "_partition"]
    assert join_metrics(spark, ck).count() == 2


def test_set_aside_rows_and_join_metrics_refuse_a_wrong_input_or_path(spark, tmp_path):
    df = spark.createDataFrame([(1, T0)], "k long, t timestamp")
    ck = str(tmp_path / "ck")
    interval_join(df, df, "k", left_time="t", right_time="t", lower=ZERO, upper=ZERO, delay=ZERO,
                  checkpoint=ck, partitions=1).collect()
    with pytest.raises(JoinDefinitionError, match=r"interval_join, which has no input 'lefft'; its inputs are \['left', 'right'\]"):
        set_aside_rows(spark, ck, "lefft")
    for call in (lambda p: set_aside_rows(spark, p, "left"), lambda p: join_metrics(spark, p)):
        with pytest.raises(JoinDefinitionError, match="is not a join checkpoint"):
            call(str(tmp_path))
        with pytest.raises(JoinDefinitionError, match="is not a join checkpoint"):
            call(str(tmp_path / "missing"))


def test_join_metrics_gives_event_times_as_timestamps_and_null_where_none(spark, tmp_path):
    ck = Checkpoint(str(tmp_path / "ck"))
    ck.binding.bind({"kind": "interval_join"}, 1)
    t0 = 1_704_067_200_000_000   # 2024-01-01 00:00 UTC
    ck.commits.write(0, 0, 1, (None, None), {"version": 0, "partition": 0, "output_rows": 0, "state_open": "new",
                                            "state_open_seconds": 0.5, "watermark": NEG_INF})
    ck.commits.write(1, 0, 1, (t0, None), {"version": 1, "partition": 0, "output_rows": 2, "state_open": "reused",
                                          "state_open_seconds": 0.25, "watermark": t0 - 1, "max_time_left": t0})
    metrics = join_metrics(spark, str(tmp_path / "ck"))
    types = dict(metrics.dtypes)
    assert types["watermark"] == types["max_time_left"] == "timestamp"
    assert types["output_rows"] == "bigint" and types["state_open_seconds"] == "double"
    rows = metrics.orderBy("version").select(F.unix_micros("watermark"), F.unix_micros("max_time_left"),
                                             "state_open_seconds").collect()
    assert [tuple(r) for r in rows] == [(None, None, 0.5), (t0 - 1, t0, 0.25)]


def test_interval_join_float_keys_match_as_sparks_join(spark, tmp_path):
    nan = float("nan")
    keys = [0.0, -0.0, nan, 1.5, None]
    left = spark.createDataFrame([(k, T0, i) for i, k in enumerate(keys)], "k double, t timestamp, l int")
    right = spark.createDataFrame([(k, T0, 10 + i) for i, k in enumerate(reversed(keys))], "k double, t timestamp, r int")
    ours = interval_join(left, right, "k", left_time="t", right_time="t", lower=-SEC, upper=SEC,
                         delay=ZERO, how="full", checkpoint=str(tmp_path / "ck"), partitions=4)
    ours = sorted(((r["l"], r["r"]) for r in ours.collect()), key=repr)
    theirs = left.alias("a").join(right.alias("b"), "k", "full").select("a.l", "b.r")
    theirs = sorted(((r["l"], r["r"]) for r in theirs.collect()), key=repr)
    assert ours == theirs
    assert (1, 13) in ours and (2, 12) in ours     # -0.0 joins 0.0; NaN joins NaN, as in Spark


def test_interval_join_takes_column_names_with_a_backtick(spark, tmp_path):
    left = spark.createDataFrame([(1, T0, "x")], "`a``k` long, t timestamp, `v``1` string")
    right = spark.createDataFrame([(1, T0)], "`a``k` long, t timestamp")
    out = interval_join(left, right, "a`k", left_time="t", right_time="t", lower=ZERO, upper=ZERO,
                        delay=ZERO, checkpoint=str(tmp_path / "ck"), partitions=2).collect()
    assert [(r["a`k"], r["v`1"]) for r in out] == [(1, "x")]
    assert math.isfinite(out[0]["a`k"])


def _late_rows_checkpoint(tmp_path) -> str:
    """A checkpoint (written in process) whose left input set a row aside in version 1."""
    from streamjoin.interval.operator import IntervalJoin
    from streamjoin.runtime.options import StateConfig
    from streamjoin.runtime.plan_runner import PlanRunner

    schema = pa.schema([("k", pa.int64()), ("t", pa.timestamp("us"))])
    join = IntervalJoin(schema, schema, "k", left_time="t", right_time="t", lower="0 seconds", upper="0 seconds",
                        delay="0 seconds", how="inner")
    runner = PlanRunner(join.plan, str(tmp_path / "ck"), config=StateConfig(store="memory"))
    for seconds in (600, 0):
        rows = pa.Table.from_pylist([{"k": 1, "t": T0 + seconds * SEC}], schema=schema)
        runner.run(rows, rows)
    return str(tmp_path / "ck")


def test_set_aside_rows_and_join_metrics_name_an_empty_binding_record(spark, tmp_path):
    ck = _late_rows_checkpoint(tmp_path)
    (tmp_path / "ck" / "streamjoin.json").write_bytes(b"")
    for call in (lambda: set_aside_rows(spark, ck, "left"), lambda: join_metrics(spark, ck)):
        with pytest.raises(CheckpointDamagedError, match=r"ck/streamjoin.json is damaged \(empty or not a JSON "
                           r"object.*restore it from a copy of the checkpoint"):
            call()


def test_set_aside_rows_names_a_truncated_set_aside_file(spark, tmp_path):
    ck = _late_rows_checkpoint(tmp_path)
    assert set_aside_rows(spark, ck, "left").count() == 1
    [aside] = (tmp_path / "ck" / "set_aside" / "left").glob("v=1/p=0.parquet")
    aside.write_bytes(aside.read_bytes()[:-30])
    with pytest.raises(CheckpointDamagedError, match=f"set-aside file {aside} is damaged .*Restore it from a copy"
                       ".*move it out of the checkpoint"):
        set_aside_rows(spark, ck, "left")


def test_read_state_names_a_partition_whose_changelog_is_gone(spark, tmp_path):
    import shutil

    from streamjoin.interval.operator import IntervalJoin
    from streamjoin.runtime.options import StateConfig
    from streamjoin.runtime.plan_runner import PlanRunner
    from streamjoin.spark.state import read_state

    schema = pa.schema([("k", pa.int64()), ("t", pa.timestamp("us"))])
    join = IntervalJoin(schema, schema, "k", left_time="t", right_time="t", lower="0 seconds", upper="1 hour",
                        delay="1 hour", how="inner")
    ck = str(tmp_path / "ck")
    runner = PlanRunner(join.plan, ck, partitions=2, config=StateConfig(store="memory"))
    rows = pa.Table.from_pylist([{"k": k, "t": T0} for k in range(20)], schema=schema)
    runner.run(rows, rows.slice(0, 0))
    state = read_state(spark, ck, side="left")
    assert sorted(r["_partition"] for r in state.select("_partition").distinct().collect()) == [0, 1]
    shutil.rmtree(tmp_path / "ck" / "state" / "p=1")
    with pytest.raises(CheckpointDamagedError, match=r"partition 1's changelog .*ck/state/p=1 is missing or empty"
                       r".*Restore the directory from a copy of the checkpoint") as raised:
        read_state(spark, ck, side="left")
    assert raised.value.path.endswith("state/p=1")
