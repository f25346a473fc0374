"""The interval join end to end through Spark: a few examples, compared with Spark.

For random event streams (the kit's ``event_streams``; no late rows: the watermark delay exceeds
the disorder), the kit's Spark mode (:func:`streamjoin.testing.assert_deterministic`) checks that
the streaming join over random micro-batch splits and partition counts, closed by rows that push
the watermark past every window, gives the batch join's output; and the batch join equals Spark's
own batch join of the same rows with the same condition.
"""

from __future__ import annotations

from datetime import timedelta

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F

from streamjoin import interval_join
from streamjoin.errors import JoinDefinitionError
from streamjoin.testing import assert_deterministic
from streamjoin.testing.strategies import START, event_streams
from tests.examples import scaled

pytestmark = pytest.mark.spark

UTC_US = pa.timestamp("us", "UTC")
BOUNDS = dict(lower=timedelta(seconds=-3), upper=timedelta(seconds=5), delay=timedelta(seconds=100))


def _schema(name: str) -> pa.Schema:
    return pa.schema([("k", pa.int64()), ("t", UTC_US), (f"{name}_id", pa.int64())])


def _events(name: str):
    return event_streams(_schema(name), time="t", key="k", keys=(1, 2, 3, None), min_rows=1, max_rows=15,
                         step=timedelta(seconds=4), disorder=timedelta(seconds=3))


def _sentinel(name: str) -> pa.Table:
    """A row far after every event: its watermark closes every window (k=99 joins nothing else)."""
    return pa.table({"k": [99], "t": pa.array([START + timedelta(seconds=1000)], UTC_US), f"{name}_id": [0]})


@settings(max_examples=scaled(2), deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(left=_events("l"), right=_events("r"), how=st.sampled_from(["inner", "left", "full", "left_anti"]))
def test_interval_join_streaming_equals_spark_batch_join(spark, left, right, how):
    def pipeline(ls, rs, *, checkpoint, partitions):
        joined = interval_join(ls, rs, "k", left_time="t", right_time="t", how=how, checkpoint=f"{checkpoint}/ij",
                               partitions=partitions, **BOUNDS)
        return joined.where("k is distinct from 99")

    assert_deterministic(pipeline, {"left": left, "right": right}, mode="spark", spark=spark,
                         end=[_sentinel("l"), _sentinel("r")], max_examples=2, max_batches=3, shrink_budget=0)
    ours = interval_join(spark.createDataFrame(left), spark.createDataFrame(right), "k", left_time="t",
                         right_time="t", how=how, **BOUNDS)
    lb, rb = spark.createDataFrame(left).alias("a"), spark.createDataFrame(right).alias("b")
    cond = "a.k = b.k and b.t between a.t - interval 3 seconds and a.t + interval 5 seconds"
    theirs = lb.join(rb, F.expr(cond), how)
    if how == "left_anti":
        theirs = theirs.select("a.k", "a.t", "a.l_id")
    else:
        theirs = theirs.select(F.coalesce("a.k", "b.k").alias("k"), F.col("a.t").alias("t_left"), "a.l_id",
                               F.col("b.t").alias("t_right"), "b.r_id")
    assert sorted(map(tuple, ours.collect()), key=repr) == sorted(map(tuple, theirs.collect()), key=repr)


def test_interval_join_bad_arguments_fail_before_the_query(spark, tmp_path):
    df = spark.createDataFrame([(1, 2)], "k int, t int")
    ok = spark.sql("select 1 as k, current_timestamp() as t")
    args = dict(left_time="t", right_time="t", lower=timedelta(0), upper=timedelta(1), delay=timedelta(0))
    with pytest.raises(JoinDefinitionError, match="must be a timestamp column"):
        interval_join(df, ok, "k", **args)
    with pytest.raises(JoinDefinitionError, match="no column"):
        interval_join(ok, ok, "nope", **args)
    with pytest.raises(JoinDefinitionError, match="lower"):
        interval_join(ok, ok, "k", **{**args, "lower": timedelta(2)})
    with pytest.raises(JoinDefinitionError, match="how"):
        interval_join(ok, ok, "k", how="sideways", **args)
    with pytest.raises(JoinDefinitionError, match=r"watermark_policy must be one of \('min', 'max'\)"):
        interval_join(ok, ok, "k", watermark_policy="slowest", **args)
    with pytest.raises(JoinDefinitionError, match="right_delay"):
        interval_join(ok, ok, "k", right_delay="-1 second", **args)


def test_interval_join_refuses_more_partitions_than_key_groups_before_writing(spark, tmp_path):
    ok = spark.sql("select 1 as k, current_timestamp() as t")
    args = dict(left_time="t", right_time="t", lower=timedelta(0), upper=timedelta(1), delay=timedelta(0))
    with pytest.raises(JoinDefinitionError, match=r"partitions must be an int from 1 to 4096 \(the join's key groups"):
        interval_join(ok, ok, "k", partitions=5000, checkpoint=str(tmp_path / "ck"), **args)
    with pytest.raises(JoinDefinitionError, match="partitions must be an int of at least 1, not 0"):
        interval_join(ok, ok, "k", partitions=0, checkpoint=str(tmp_path / "ck"), **args)
    assert not (tmp_path / "ck" / "streamjoin.json").exists()


def test_interval_join_sets_aside_a_click_that_spark_joins_one_micro_batch_after_the_watermark_moved(spark, tmp_path):
    """docs/coming-from/spark.md "Late rows": the worked example, run by both joins on the same files."""
    import os
    from datetime import datetime

    from streamjoin import set_aside_rows

    def write(kind: str, batch: int, rows: list, schema: str) -> None:
        spark.createDataFrame(rows, schema).coalesce(1).write.parquet(str(tmp_path / kind / f"b{batch}"))
        for name in (tmp_path / kind / f"b{batch}").glob("*.parquet"):   # the file source takes files by age
            os.replace(name, tmp_path / kind / f"{batch}.parquet")
            os.utime(tmp_path / kind / f"{batch}.parquet", (1_700_000_000 + batch,) * 2)
    search, click = "session_id string, search_time timestamp", "session_id string, click_time timestamp"
    write("searches", 0, [("s1", datetime(2026, 1, 1, 9, 0))], search)
    write("clicks", 0, [("s0", datetime(2026, 1, 1, 9, 0))], click)
    write("searches", 1, [("s2", datetime(2026, 1, 1, 9, 30))], search)
    write("clicks", 1, [("s9", datetime(2026, 1, 1, 9, 30))], click)
    write("clicks", 2, [("s1", datetime(2026, 1, 1, 9, 15))], click)   # below the watermark of 9:20

    def read(kind: str, schema: str):
        return spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(str(tmp_path / kind))

    def run(joined, name: str) -> list:
        query = (joined.writeStream.format("memory").queryName(name).trigger(availableNow=True)
                 .option("checkpointLocation", str(tmp_path / f"{name}-spark")).start())
        query.awaitTermination()
        return [tuple(r) for r in spark.table(name).collect()]
    s = read("searches", search).withWatermark("search_time", "10 minutes").alias("s")
    c = read("clicks", click).withWatermark("click_time", "10 minutes").alias("c")
    sparks = run(s.join(c, F.expr("s.session_id = c.session_id AND c.click_time BETWEEN s.search_time AND "
                                  "s.search_time + interval 30 minutes"), "inner")
                 .select("s.session_id", "c.click_time"), "spark_late_click")
    ours = run(interval_join(read("searches", search), read("clicks", click), "session_id",
                             left_time="search_time", right_time="click_time", lower="0 seconds",
                             upper="30 minutes", delay="10 minutes", checkpoint=str(tmp_path / "join"))
               .select("session_id", "click_time"), "ours_late_click")
    assert sparks == [("s1", datetime(2026, 1, 1, 9, 15))]   # Spark: late only below 8:50, the previous watermark
    assert ours == []
    aside = set_aside_rows(spark, str(tmp_path / "join"), "right").collect()
    assert [(r["session_id"], r["_reason"], r["_version"]) for r in aside] == [("s1", "late", 2)]
