"""The interval join end to end through Spark (issue 5): a few examples, compared with Spark.

For random event files (no late rows: the watermark delay exceeds the disorder) split into random
micro-batches, the streaming join's output, once a final batch has pushed the watermark past every
window, equals Spark's own batch join of the same rows with the same condition.
"""

from __future__ import annotations

import os
from datetime import timedelta

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamjoin import interval_join, set_aside_rows
from streamjoin.errors import JoinDefinitionError

pytestmark = pytest.mark.spark

BASE = 1_767_225_600_000_000
SEC = 1_000_000


def _write(directory, name, rows, splits):
    """Write rows [(key, t_seconds)] as one Parquet file per split, oldest first."""
    os.makedirs(os.path.join(directory, name), exist_ok=True)
    bounds = [0] + sorted(splits) + [len(rows)]
    for i, (lo, hi) in enumerate(zip(bounds, bounds[1:])):
        chunk = rows[lo:hi]
        table = pa.table({
            "k": pa.array([k for k, _ in chunk], pa.int64()),
            "t": pa.array([BASE + t * SEC for _, t in chunk], pa.timestamp("us", tz="UTC")),
            f"{name}_id": pa.array(range(lo, hi), pa.int64()),
        })
        path = os.path.join(directory, name, f"part-{i:03d}.parquet")
        pq.write_table(table, path)
        os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))


events = st.lists(st.tuples(st.sampled_from([1, 2, 3, None]), st.integers(0, 60)), min_size=1, max_size=25)


@settings(max_examples=3, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(left=events, right=events, how=st.sampled_from(["inner", "left", "full", "left_anti"]), data=st.data())
def test_interval_join_streaming_equals_spark_batch_join(spark, tmp_path_factory, left, right, how, data):
    root = str(tmp_path_factory.mktemp("ij"))
    # sort by time so no row is late (delay 100 s covers the whole range), then close with a sentinel
    left = sorted(left, key=lambda r: r[1]) + [(99, 1000)]
    right = sorted(right, key=lambda r: r[1]) + [(99, 1000)]
    n = min(len(left), len(right))
    splits = data.draw(st.lists(st.integers(1, n - 1), max_size=3, unique=True)) if n > 1 else []
    _write(root, "l", left, [s for s in splits if s < len(left)])
    _write(root, "r", right, [s for s in splits if s < len(right)])
    schema = "k bigint, t timestamp, {0}_id bigint"
    ls = spark.readStream.schema(schema.format("l")).option("maxFilesPerTrigger", 1).parquet(f"{root}/l")
    rs = spark.readStream.schema(schema.format("r")).option("maxFilesPerTrigger", 1).parquet(f"{root}/r")
    bounds = dict(lower=timedelta(seconds=-3), upper=timedelta(seconds=5), delay=timedelta(seconds=100))
    joined = interval_join(ls, rs, "k", left_time="t", right_time="t", how=how, checkpoint=f"{root}/ck",
                           partitions=3, **bounds)
    query = (joined.writeStream.format("parquet").option("path", f"{root}/out")
             .option("checkpointLocation", f"{root}/spark").trigger(availableNow=True).start())
    query.awaitTermination()
    # the sentinels (t=1000) put the watermark past every window; one more batch emits what closed
    for name in ("l", "r"):
        _write(root, f"{name}_final", [(99, 2000)], [])
        os.replace(f"{root}/{name}_final/part-000.parquet", f"{root}/{name}/part-999.parquet")
        os.utime(f"{root}/{name}/part-999.parquet", (1_800_000_000, 1_800_000_000))
    query = (joined.writeStream.format("parquet").option("path", f"{root}/out")
             .option("checkpointLocation", f"{root}/spark").trigger(availableNow=True).start())
    query.awaitTermination()
    ours = spark.read.parquet(f"{root}/out").where("k is distinct from 99")

    lb, rb = spark.read.parquet(f"{root}/l").alias("a"), spark.read.parquet(f"{root}/r").alias("b")
    cond = ("a.k = b.k and b.t between a.t - interval 3 seconds and a.t + interval 5 seconds")
    spark_how = {"inner": "inner", "left": "left", "full": "full", "left_anti": "left_anti"}[how]
    from pyspark.sql import functions as F
    theirs = lb.join(rb, F.expr(cond), spark_how)
    if how == "left_anti":
        theirs = theirs.select("a.k", "a.t", "a.l_id")
    else:
        theirs = theirs.select(F.coalesce("a.k", "b.k").alias("k"), F.col("a.t").alias("t_left"), "a.l_id",
                               F.col("b.t").alias("t_right"), "b.r_id")
    theirs = theirs.where("k is distinct from 99")
    assert sorted(map(tuple, ours.collect()), key=repr) == sorted(map(tuple, theirs.collect()), key=repr)
    assert set_aside_rows(spark, f"{root}/ck", "left").where("_reason = 'late'").count() == 0


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
