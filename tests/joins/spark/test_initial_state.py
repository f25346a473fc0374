"""A streaming join started from another checkpoint's state (``initial_state=`` with
``read_state``'s rows and ``state_progress``): a join reads the first files of its inputs, stops,
and a new query on new checkpoints starts from its state and reads the others; together they
write the rows of one query that read all of them (docs/operations/upgrades.md "Starting from
state"). For each join: interval, stream-table (table versions and waiting events) and
table-table (a key stage, and a fused one)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from pyspark.sql import functions as F

import streamjoin
from streamjoin.errors import JoinDefinitionError
from tests.joins.spark.test_enrichment import CHANGE_SCHEMA, CHANGES, EVENT_SCHEMA, EVENTS, _change, _event, _files
from tests.joins.spark.test_rescale import _committed, _table_changes, _write_events

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
    state = streamjoin.read_join_state(spark, str(before / "join"))
    progress = streamjoin.state_progress(str(before / "join"))
    assert set(state) == {"left", "right"}
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


def _enrichment(spark, root: Path, events: list, changes: list, partitions: int, **options) -> None:
    _files(str(root / "events"), events, EVENT_SCHEMA)
    _files(str(root / "changes"), changes, CHANGE_SCHEMA)
    stream = spark.readStream.schema(EVENTS).option("maxFilesPerTrigger", 1).parquet(str(root / "events"))
    table = spark.readStream.schema(CHANGES).option("maxFilesPerTrigger", 1).parquet(str(root / "changes"))
    joined = streamjoin.stream_table_join(stream, table, "user_id", stream_time="ts", table_key="user_id",
                                          table_time="changed_at", delay=dt.timedelta(seconds=10),
                                          checkpoint=str(root / "ck"), partitions=partitions, **options)
    query = (joined.writeStream.format("parquet").option("path", str(root / "out"))
             .option("checkpointLocation", str(root / "spark")).trigger(availableNow=True).start())
    query.awaitTermination()


def test_stream_table_join_started_from_state_continues_the_stopped_query(spark, tmp_path):
    """The table's versions and the events still waiting for the table watermark carry over."""
    events = [[_event(1, 10, "a"), _event(2, 12, "b"), _event(4, 14, "c")],
              [_event(3, 28, "d"), _event(1, 19, "f"), _event(2, 40, "g")],
              [_event(1, 50, "h"), _event(3, 45, "i")],
              [_event(1, 200, "sentinel")]]
    changes = [[_change(1, "upsert", 20, "pro", "DE"), _change(2, "upsert", 5, "free", "FR")],
               [_change(2, "upsert", 22, "free", "DE"), _change(3, "upsert", 24, "pro", "US")],
               [_change(3, "delete", 30), _change(1, "upsert", 48, "team", "DE")],
               [_change(None, "heartbeat", 300)]]
    plain, before, after = tmp_path / "plain", tmp_path / "before", tmp_path / "after"
    _enrichment(spark, plain, events, changes, 2)
    _enrichment(spark, before, events[:2], changes[:2], 2)
    state = {side: streamjoin.read_state(spark, str(before / "ck"), side=side) for side in ("table", "events")}
    assert state["events"].count() > 0   # events wait for the table watermark
    _enrichment(spark, after, events[2:], changes[2:], 3, initial_state=state,
                initial_progress=streamjoin.state_progress(str(before / "ck")))
    expected = _committed(spark, plain)
    assert len(expected) == 9
    assert sorted(_committed(spark, before) + _committed(spark, after), key=repr) == expected


def _table(spark, root: Path, files: range, partitions: int, **options) -> None:
    for name in ("posts", "authors"):
        _table_changes(root / name, name, files)
    posts = spark.readStream.schema("post_id bigint, author_id bigint, title string, op string, at timestamp") \
        .option("maxFilesPerTrigger", 1).parquet(str(root / "posts"))
    authors = spark.readStream.schema("author_id bigint, name string, op string, at timestamp") \
        .option("maxFilesPerTrigger", 1).parquet(str(root / "authors"))
    out = streamjoin.table_table_join(posts, authors, "author_id", left_key="post_id", right_key="author_id",
                                      how="full", left_time="at", right_time="at", checkpoint=str(root / "join"),
                                      partitions=partitions, state_dir=str(root / "local"), **options)
    query = (out.writeStream.option("checkpointLocation", str(root / "spark")).trigger(availableNow=True)
             .format("parquet").option("path", str(root / "out")).start())
    query.awaitTermination()


def test_table_table_join_started_from_state_continues_the_stopped_query(spark, tmp_path):
    """The posts' key stage, the join stage with the authors' key step fused in: the view's changes
    after the start are those of one query over every change (retractions of rows held included)."""
    plain, before, after = tmp_path / "plain", tmp_path / "before", tmp_path / "after"
    _table(spark, plain, range(5), 2)
    _table(spark, before, range(3), 2)
    state = streamjoin.read_join_state(spark, str(before / "join"))
    assert set(state) == {"left", "right", "left_keys", "right_keys"}
    assert state["left_keys"].count() > 0 and state["right"].count() > 0
    _table(spark, after, range(3, 5), 3, initial_state=state,
           initial_progress=streamjoin.state_progress(str(before / "join")))
    changes = [c for c in spark.read.parquet(str(plain / "out")).columns if not c.startswith("_commit")]

    def view(root: Path) -> list[tuple]:
        return sorted((tuple(r) for r in spark.read.parquet(str(root / "out")).select(*changes).collect()), key=repr)

    expected = view(plain)
    assert len(expected) > 20
    assert sorted(view(before) + view(after), key=repr) == expected
