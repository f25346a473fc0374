"""A streaming join restarted with another partition count gives the rows of an uninterrupted run
(docs/design/runtime.md "Partitions and rescaling"): an interval join reading Parquet files as a stream
(one file per micro-batch) is stopped at 4 partitions, restarted at 6, then at 2; and a
table-table join (whose join stage reads the key stages' outputs) is restarted from 3 to 5. Each
committed output is compared with a run that never changed its partition count."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import functions as F

from streamjoin.interval.operator import IntervalJoin
from streamjoin.runtime.checkpoint import Checkpoint
from streamjoin.runtime.keygroups import key_groups, owners
from streamjoin.runtime.options import StateConfig
from streamjoin.runtime.rescale import epochs
from streamjoin.spark import arrow_schema, run_operator
from streamjoin.spark.state import read_state
from streamjoin.spark.table import table_table_join
from streamjoin.table.operator import JOIN, LEFT_KEYS, RIGHT_KEYS

pytestmark = pytest.mark.spark

N_FILES = 3   # one per epoch: a third of each file's rows match rows of the next file, after a restart
START = dt.datetime(2024, 1, 1)


def _write_events(directory: Path, files: range) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for i in files:
        rows = [{"side": side, "k": (i * 5 + j * 3) % 13, "ts": START + dt.timedelta(seconds=10 * i + j),
                 "v": f"{side}{i}.{j}"} for side in ("L", "R") for j in range(9)]
        path = directory / f"part-{i:03d}.parquet"
        pq.write_table(pa.Table.from_pylist(rows, schema=pa.schema(
            [("side", pa.string()), ("k", pa.int64()), ("ts", pa.timestamp("us")), ("v", pa.string())])), path)
        os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))  # the file source takes files by age


def _interval(spark, root: Path, partitions: int) -> None:
    src = spark.readStream.schema("side string, k bigint, ts timestamp, v string") \
        .option("maxFilesPerTrigger", 1).parquet(str(root / "in"))
    left = src.where(F.col("side") == "L").select("k", "ts", "v")
    right = src.where(F.col("side") == "R").select("k", "ts", "v")
    op = IntervalJoin(arrow_schema(left), arrow_schema(right), "k", left_time="ts", right_time="ts",
                      lower=dt.timedelta(seconds=-4), upper=dt.timedelta(seconds=12),
                      delay=dt.timedelta(seconds=5), how="left")
    state = StateConfig(store="rocksdb", local_dir=str(root / "local"), snapshot_every=2)
    out = run_operator([left, right], op, checkpoint=str(root / "join"), partitions=partitions, state=state)
    query = (out.writeStream.option("checkpointLocation", str(root / "spark")).trigger(availableNow=True)
             .format("parquet").option("path", str(root / "out")).start())
    query.awaitTermination()


def _committed(spark, root: Path) -> list[tuple]:
    return sorted((tuple(r) for r in spark.read.parquet(str(root / "out")).collect()), key=repr)


def test_interval_join_restarted_at_6_then_2_partitions_equals_uninterrupted_run(spark, tmp_path):
    plain, rescaled = tmp_path / "plain", tmp_path / "rescaled"
    _write_events(plain / "in", range(N_FILES))
    _interval(spark, plain, 4)
    for files, partitions in ((range(0, 1), 4), (range(1, 2), 6), (range(2, N_FILES), 2)):
        _write_events(rescaled / "in", files)
        _interval(spark, rescaled, partitions)
    expected = _committed(spark, plain)
    assert len(expected) > N_FILES * 9
    assert _committed(spark, rescaled) == expected
    assert [e.partitions for e in epochs(Checkpoint(str(rescaled / "join")))] == [4, 6, 2]
    states = [sorted((tuple(r) for r in read_state(spark, str(root / "join"), side="left")
                      .drop("_partition", "_version").collect()), key=repr) for root in (plain, rescaled)]
    assert states[0] == states[1]


def test_spark_routes_each_key_group_to_its_owning_task(spark, tmp_path):
    """The JVM's routing (hash, key group, slot) and the Python key groups agree, row by row."""
    df = spark.createDataFrame([(k, f"s{k % 7}") for k in range(200)], "a bigint, b string")
    from streamjoin.spark.routing import shuffle

    routed = shuffle(df, 5, 64, [F.col("a"), F.col("b")])
    got = routed.select(F.spark_partition_id().alias("p"), "a", "b").toArrow() \
        if hasattr(routed, "toArrow") else pa.Table.from_pandas(routed.select(
            F.spark_partition_id().alias("p"), "a", "b").toPandas())
    expected = owners(key_groups(got, ["a", "b"], 64), 5, 64)
    assert got.column("p").to_pylist() == expected.tolist()


def _table_changes(directory: Path, name: str, files: range) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for i in files:
        if name == "posts":
            rows = [{"post_id": (i * 4 + j) % 10, "author_id": (i + j) % 4, "title": f"t{i}.{j}", "op": "upsert",
                     "at": START + dt.timedelta(seconds=i * 10 + j)} for j in range(5)]
            schema = pa.schema([("post_id", pa.int64()), ("author_id", pa.int64()), ("title", pa.string()),
                                ("op", pa.string()), ("at", pa.timestamp("us"))])
        else:
            rows = [{"author_id": (i + j) % 5, "name": f"n{i}.{j}", "op": "delete" if (i + j) % 6 == 0 else "upsert",
                     "at": START + dt.timedelta(seconds=i * 10 + j)} for j in range(3)]
            schema = pa.schema([("author_id", pa.int64()), ("name", pa.string()), ("op", pa.string()),
                                ("at", pa.timestamp("us"))])
        path = directory / f"part-{i:03d}.parquet"
        pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)
        os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))


def _table(spark, root: Path, partitions: int) -> None:
    posts = spark.readStream.schema("post_id bigint, author_id bigint, title string, op string, at timestamp") \
        .option("maxFilesPerTrigger", 1).parquet(str(root / "posts"))
    authors = spark.readStream.schema("author_id bigint, name string, op string, at timestamp") \
        .option("maxFilesPerTrigger", 1).parquet(str(root / "authors"))
    out = table_table_join(posts, authors, "author_id", left_key="post_id", right_key="author_id", how="left",
                           left_time="at", right_time="at", checkpoint=str(root / "join"), partitions=partitions,
                           state_dir=str(root / "local"), max_partitions=64)
    query = (out.writeStream.option("checkpointLocation", str(root / "spark")).trigger(availableNow=True)
             .format("parquet").option("path", str(root / "out")).start())
    query.awaitTermination()


def test_table_join_restarted_at_5_partitions_equals_uninterrupted_run(spark, tmp_path):
    plain, rescaled = tmp_path / "plain", tmp_path / "rescaled"
    for name in ("posts", "authors"):
        _table_changes(plain / name, name, range(4))
    _table(spark, plain, 3)
    for files, partitions in ((range(0, 2), 3), (range(2, 4), 5)):
        for name in ("posts", "authors"):
            _table_changes(rescaled / name, name, files)
        _table(spark, rescaled, partitions)
    expected = _committed(spark, plain)
    assert len(expected) > 10
    assert _committed(spark, rescaled) == expected
    # authors are keyed by the join key: their key stage runs inside the join stage
    assert [Checkpoint(str(rescaled / "join" / stage)).binding.key_groups() for stage in (LEFT_KEYS, JOIN)] == [64, 64]
    assert not os.path.exists(rescaled / "join" / RIGHT_KEYS)
