"""A quiet stream: the join's watermark releases rows without new input, and the join is in the
query's progress.

Two micro-batches (one file each), then no new files, a processing-time trigger: the left row
whose window the watermark closes after the second batch must appear within a few triggers, as
Spark's own stream-stream join emits it with a no-data micro-batch. ``lastProgress`` carries the
join's observed metrics: rows in and out, state, its watermark.
"""

from __future__ import annotations

import os
import time
from datetime import datetime, timezone

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from streamjoin import interval_join, read_state

pytestmark = pytest.mark.spark

SCHEMA = pa.schema([("k", pa.int64()), ("t", pa.timestamp("us", "UTC"))])
DDL = "k bigint, t timestamp"


def _at(minute: int) -> datetime:
    return datetime(2024, 1, 1, 0, minute, tzinfo=timezone.utc)


def _files(directory, batches) -> None:
    directory.mkdir(parents=True)
    for i, rows in enumerate(batches):
        path = directory / f"part-{i}.parquet"
        pq.write_table(pa.Table.from_pylist([{"k": k, "t": _at(m)} for k, m in rows], SCHEMA), path)
        os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))  # the file source takes files by age


def _streams(spark, root):
    # batch 0: left k=1 at 0:00 (never matched), both sides at 0:01; batch 1: both sides at 0:30
    _files(root / "left", [[(1, 0), (2, 1)], [(3, 30)]])
    _files(root / "right", [[(2, 1)], [(3, 30)]])
    read = spark.readStream.schema(DDL).option("maxFilesPerTrigger", 1)
    return read.parquet(str(root / "left")), read.parquet(str(root / "right"))


def _wait_for(query, rows, predicate, seconds: float) -> float:
    """Seconds until ``predicate(rows)``, at most ``seconds``."""
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        if query.exception() is not None:
            raise query.exception()
        if predicate(rows):
            return time.monotonic() - started
        time.sleep(0.2)
    raise AssertionError(f"not within {seconds} s; rows so far {rows}")


def test_interval_join_flushes_an_unmatched_row_on_a_quiet_stream_and_reports_progress(spark, tmp_path):
    left, right = _streams(spark, tmp_path)
    joined = interval_join(left, right, "k", left_time="t", right_time="t", lower="0 minutes",
                           upper="5 minutes", delay="1 minute", how="left", store="memory",
                           checkpoint=str(tmp_path / "join"), partitions=2)
    rows: list[tuple] = []
    query = (joined.writeStream.trigger(processingTime="1 second")
             .foreachBatch(lambda df, _: rows.extend(tuple(r) for r in df.collect()))
             .option("checkpointLocation", str(tmp_path / "spark")).start())
    try:
        # the watermark after batch 1 is 0:29, past k=1's window (0:00 .. 0:05): no new file needed
        _wait_for(query, rows, lambda got: any(r[0] == 1 for r in got), seconds=60)
        time.sleep(3)   # a few more triggers: no batch runs once nothing more can be released
        progress = query.lastProgress
        batches = len(query.recentProgress)
    finally:
        query.stop()
    assert sorted((r[0], r[2] is None) for r in rows) == [(1, True), (2, False), (3, False)]
    observed = progress["observedMetrics"][f"streamjoin interval_join {tmp_path / 'join'}"]["metrics"]
    assert observed["input_rows_left"] == 0 and observed["output_rows"] == 1 and observed["partitions"] == 2
    assert str(observed["watermark"]).startswith("2024-01-01 00:29:00")   # the join's, in the flush batch
    assert batches <= 4, f"{batches} micro-batches: the flush source must not run a batch at every trigger"
    # the state as rows: the left row at 0:30 is buffered (matched), k=1 and k=2 are evicted
    left = read_state(spark, str(tmp_path / "join"), side="left").collect()
    assert [(r["k"], r["_matched"], r["_version"]) for r in left] == [(3, True, 2)]
    assert {r["_matched"] for r in read_state(spark, str(tmp_path / "join"), side="right").collect()} == {None}
