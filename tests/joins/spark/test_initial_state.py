"""A streaming join started from another checkpoint's state (``initial_state=`` with
``read_state``'s rows and ``state_progress``): an interval join reads three of six files, stops,
and a new query on new checkpoints starts from its state and reads the other three; together they
write the rows of one query that read all six (docs/operations/upgrades.md "Starting from state")."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from pyspark.sql import functions as F

import streamjoin
from streamjoin.errors import JoinDefinitionError
from tests.joins.spark.test_rescale import _committed, _write_events

pytestmark = pytest.mark.spark


def _interval(spark, root: Path, partitions: int, **options) -> None:
    src = spark.readStream.schema("side string, k bigint, ts timestamp, v string") \
        .option("maxFilesPerTrigger", 1).parquet(str(root / "in"))
    left = src.where(F.col("side") == "L").select("k", "ts", "v")
    right = src.where(F.col("side") == "R").select("k", "ts", "v")
    out = streamjoin.interval_join(left, right, "k", left_time="ts", right_time="ts", lower=dt.timedelta(seconds=-4),
                                   upper=dt.timedelta(seconds=12), delay=dt.timedelta(seconds=5), how="full",
                                   checkpoint=str(root / "join"), partitions=partitions,
                                   state_dir=str(root / "local"), **options)
    query = (out.writeStream.option("checkpointLocation", str(root / "spark")).trigger(availableNow=True)
             .format("parquet").option("path", str(root / "out")).start())
    query.awaitTermination()


def test_interval_join_started_from_state_continues_the_stopped_query(spark, tmp_path):
    plain, before, after = tmp_path / "plain", tmp_path / "before", tmp_path / "after"
    _write_events(plain / "in", range(6))
    _interval(spark, plain, 2)
    _write_events(before / "in", range(3))
    _interval(spark, before, 2)
    state = {side: streamjoin.read_state(spark, str(before / "join"), side=side) for side in ("left", "right")}
    progress = streamjoin.state_progress(str(before / "join"))
    assert set(progress) == {"left", "right"} and state["left"].count() > 0
    _write_events(after / "in", range(3, 6))
    _interval(spark, after, 3, initial_state=state, initial_progress=progress)
    expected = _committed(spark, plain)
    assert len(expected) > 30
    assert sorted(_committed(spark, before) + _committed(spark, after), key=repr) == expected


def test_interval_join_refuses_initial_state_it_cannot_load(spark, tmp_path):
    _write_events(tmp_path / "in", range(1))
    left = spark.read.parquet(str(tmp_path / "in")).select("k", "ts", "v")
    with pytest.raises(JoinDefinitionError, match=r"initial_state\['left'\] has no column '_matched'"):
        streamjoin.interval_join(left, left, "k", left_time="ts", right_time="ts", lower="0 seconds",
                                 upper="1 second", delay="0 seconds", initial_state={"left": left})
    with pytest.raises(JoinDefinitionError, match="no state side 'table'"):
        streamjoin.interval_join(left, left, "k", left_time="ts", right_time="ts", lower="0 seconds",
                                 upper="1 second", delay="0 seconds", initial_state={"table": left})
