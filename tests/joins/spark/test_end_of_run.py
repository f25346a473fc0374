"""What an interval join does when a ``trigger(availableNow=True)`` run has read its data.

``end_of_run="flush"`` (the default, as Spark's own join): the run ends with the no-data
micro-batch its advanced watermark needs, so an unmatched left row whose window that watermark
passed comes out in the same run (with ``"hold"`` it waits for the next run).
``end_of_run="release"``: one more micro-batch then releases every row held for lateness, so the
run's output is the batch join of the rows it read; the inputs are closed, and a later run with
new rows, or a run with another ``end_of_run``, is refused. A checkpoint whose query ran with
``"hold"`` keeps it (its flush's offsets are in the query's Spark offset log). Every mode works
on an ``s3://`` checkpoint (a local S3-compatible server)."""

from __future__ import annotations

import datetime as dt
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from streamjoin import interval_join, stream_table_join
from streamjoin.errors import CheckpointMismatchError, JoinDefinitionError
from streamjoin.runtime.checkpoint import Checkpoint
from streamjoin.spark.flush import closing_version

pytestmark = pytest.mark.spark

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
LEFT = pa.schema([("k", pa.int64()), ("t", pa.timestamp("us", "UTC")), ("l", pa.string())])
RIGHT = pa.schema([("k", pa.int64()), ("t", pa.timestamp("us", "UTC")), ("r", pa.string())])
# (key, seconds after T0, id). After them the watermark is 100 s - 10 s = 90 s: l1's window
# (0..10 s) has closed, l3's (100..110 s) has not.
LEFT_ROWS = [(1, 0, "l1"), (2, 100, "l2"), (3, 100, "l3")]
RIGHT_ROWS = [(2, 100, "r2")]


def _file(directory: str, schema: pa.Schema, rows: list[tuple], name: str = "part-0") -> None:
    os.makedirs(directory, exist_ok=True)
    table = pa.Table.from_pylist([dict(zip(schema.names, (k, T0 + dt.timedelta(seconds=s), v))) for k, s, v in rows],
                                 schema)
    pq.write_table(table, os.path.join(directory, f"{name}.parquet"))


def _join(spark, root: str, end_of_run: str | None, streaming: bool = True, checkpoint: str | None = None,
          how: str = "left_outer"):
    read = (lambda: spark.readStream.option("maxFilesPerTrigger", 1)) if streaming else (lambda: spark.read)
    left = read().schema("k bigint, t timestamp, l string").parquet(f"{root}/left")
    right = read().schema("k bigint, t timestamp, r string").parquet(f"{root}/right")
    return interval_join(left, right, "k", left_time="t", right_time="t", lower="0 seconds", upper="10 seconds",
                         delay="10 seconds", how=how, partitions=2,
                         **({"checkpoint": checkpoint or f"{root}/ck"} if streaming else {}),
                         **({"end_of_run": end_of_run} if streaming and end_of_run is not None else {}))


def _run(spark, root: str, end_of_run: str | None, checkpoint: str | None = None, name: str = "spark") -> list[tuple]:
    """One ``availableNow`` run (Spark's checkpoint at ``<root>/<name>``); the (l, r) pairs it output."""
    out: list[tuple] = []
    query = (_join(spark, root, end_of_run, checkpoint=checkpoint).writeStream
             .foreachBatch(lambda df, _: out.extend((r.l, r.r) for r in df.collect()))
             .option("checkpointLocation", f"{root}/{name}").trigger(availableNow=True).start())
    query.awaitTermination()
    return sorted(out, key=str)


def test_end_of_run_default_releases_a_closed_outer_row_in_the_same_available_now_run(spark, tmp_path):
    root = str(tmp_path)
    _file(f"{root}/left", LEFT, LEFT_ROWS)
    _file(f"{root}/right", RIGHT, RIGHT_ROWS)
    # l1 comes out in the run's trailing no-data batch, as Spark's own join emits it; l3 waits
    # for a watermark past 110 s
    assert _run(spark, root, None) == [("l1", None), ("l2", "r2")]


def test_end_of_run_default_of_an_inner_join_reads_no_flush_source_and_outputs_the_batch_join(spark, tmp_path):
    # nothing of an inner join waits for the watermark: its query reads its own sources only (no
    # Python process on the driver, about 1 s a query start; no tick folder), with the same output
    root = str(tmp_path)
    _file(f"{root}/left", LEFT, LEFT_ROWS)
    _file(f"{root}/right", RIGHT, RIGHT_ROWS)
    out: list[tuple] = []
    query = (_join(spark, root, None, how="inner").writeStream
             .foreachBatch(lambda df, _: out.extend((r.l, r.r) for r in df.collect()))
             .option("checkpointLocation", f"{root}/spark").trigger(availableNow=True).start())
    query.awaitTermination()
    sources = [source["description"] for source in query.lastProgress["sources"]]
    assert len(sources) == 2 and not any("flush" in d or "Python" in d for d in sources), sources
    assert sorted(out) == [("l2", "r2")]
    assert not os.path.exists(f"{root}/ck/flush.json") and not os.path.exists(f"{root}/ck/flush")


def test_end_of_run_release_outputs_the_batch_join_closing_after_every_micro_batch_and_refuses_new_rows_later(
        spark, tmp_path):
    root = str(tmp_path)
    for i, row in enumerate(LEFT_ROWS):   # one file a micro-batch: 3 data batches
        _file(f"{root}/left", LEFT, [row], name=f"part-{i}")
        os.utime(f"{root}/left/part-{i}.parquet", (1_700_000_000 + i, 1_700_000_000 + i))
    _file(f"{root}/right", RIGHT, RIGHT_ROWS)
    batch = sorted(((r.l, r.r) for r in _join(spark, root, "release", streaming=False).collect()), key=str)
    assert batch == [("l1", None), ("l2", "r2"), ("l3", None)]
    assert _run(spark, root, "release") == batch
    assert closing_version(Checkpoint(f"{root}/ck")) == 4   # data in 0..2, none in the trailing 3
    assert _run(spark, root, "release") == []   # a later run without new rows: nothing to do
    for other in (None, "flush", "hold"):   # each would set every new row aside as late
        with pytest.raises(CheckpointMismatchError, match="closed its inputs in version 4"):
            _join(spark, root, other)
    _file(f"{root}/left", LEFT, [(4, 200, "l4")], name="part-3")
    with pytest.raises(Exception, match="closed its inputs in version 4"):
        _run(spark, root, "release")


def test_end_of_run_keeps_the_file_flush_of_a_checkpoint_that_ran_with_hold(spark, tmp_path):
    root = str(tmp_path)
    _file(f"{root}/left", LEFT, LEFT_ROWS)
    _file(f"{root}/right", RIGHT, RIGHT_ROWS)
    _join(spark, root, "hold")
    Checkpoint(f"{root}/ck").commits.write(0, 0, 1, (None, None), {})   # as if its query had run
    with pytest.raises(JoinDefinitionError, match="has run with end_of_run='hold'"):
        _join(spark, root, "flush")
    with pytest.raises(JoinDefinitionError, match="end_of_run must be one of"):
        _join(spark, root, "at once")


EVENTS = pa.schema([("k", pa.int64()), ("t", pa.timestamp("us", "UTC")), ("e", pa.string())])
CHANGES = pa.schema([("k", pa.int64()), ("op", pa.string()), ("t", pa.timestamp("us", "UTC")),
                     ("v", pa.string())])


def _enrichment_run(spark, root: str, changes: list[dict], end_of_run: str) -> list[tuple]:
    """One ``availableNow`` run of an as-of enrichment of event e1 (key 1, at 10 s) over ``changes``;
    the (event, value) pairs it output."""
    _file(f"{root}/events", EVENTS, [(1, 10, "e1")])
    os.makedirs(f"{root}/changes")
    pq.write_table(pa.Table.from_pylist(changes, CHANGES), f"{root}/changes/part-0.parquet")
    events = spark.readStream.schema("k bigint, t timestamp, e string").parquet(f"{root}/events")
    table = spark.readStream.schema("k bigint, op string, t timestamp, v string").parquet(f"{root}/changes")
    joined = stream_table_join(events, table, "k", stream_time="t", table_key="k", table_time="t",
                               delay="0 seconds", checkpoint=f"{root}/ck", partitions=2, end_of_run=end_of_run)
    out: list[tuple] = []
    query = (joined.writeStream.foreachBatch(lambda df, _: out.extend((r.e, r.v) for r in df.collect()))
             .option("checkpointLocation", f"{root}/spark").trigger(availableNow=True).start())
    query.awaitTermination()
    return out


_UPSERT_AT_5 = {"k": 1, "op": "upsert", "t": T0 + dt.timedelta(seconds=5), "v": "a"}


def test_end_of_run_flush_releases_enrichment_events_a_heartbeat_passed_in_the_same_run(spark, tmp_path):
    heartbeat = {"k": None, "op": "heartbeat", "t": T0 + dt.timedelta(seconds=100), "v": None}
    # the heartbeat at 100 s moves the table watermark past e1 (10 s) after the run's only data batch
    assert _enrichment_run(spark, str(tmp_path), [_UPSERT_AT_5, heartbeat], "flush") == [("e1", "a")]


def test_end_of_run_works_on_an_s3_checkpoint(spark, moto_s3, tmp_path):
    """Each mode on one local S3-compatible server: a join checkpoint and a query of its own."""
    root = str(tmp_path)
    _file(f"{root}/left", LEFT, LEFT_ROWS)
    _file(f"{root}/right", RIGHT, RIGHT_ROWS)
    expected = {"hold": [("l2", "r2")],
                "flush": [("l1", None), ("l2", "r2")],
                "release": [("l1", None), ("l2", "r2"), ("l3", None)]}
    found = {mode: _run(spark, root, mode, checkpoint=f"{moto_s3}/ck-{mode}", name=f"spark-{mode}")
             for mode in expected}
    assert found == expected


def test_end_of_run_release_releases_enrichment_events_still_waiting_for_the_table_watermark(spark, tmp_path):
    # no heartbeat: the table watermark stays at the change's time (5 s), before e1 (10 s), so e1
    # waits; "release" closes the inputs at the end of the run and e1 comes out joined as the batch
    # join of what was read would join it
    assert _enrichment_run(spark, str(tmp_path), [_UPSERT_AT_5], "release") == [("e1", "a")]
    assert closing_version(Checkpoint(f"{tmp_path}/ck")) is not None
