"""``idle_timeout`` of the interval join end to end through Spark: the orders go quiet; after the
timeout of processing time (the micro-batches' timestamps) they stop holding the watermark, and a
click's outer row comes out in a later micro-batch in which only clicks have rows."""

from __future__ import annotations

import datetime as dt
import os
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from streamjoin import interval_join

pytestmark = pytest.mark.spark

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
CLICKS = pa.schema([("k", pa.int64()), ("t", pa.timestamp("us", "UTC")), ("click", pa.string())])
ORDERS = pa.schema([("k", pa.int64()), ("t", pa.timestamp("us", "UTC")), ("order", pa.string())])


def _file(directory: str, schema: pa.Schema, index: int, rows: list[tuple]) -> None:
    os.makedirs(directory, exist_ok=True)
    table = pa.Table.from_pylist([dict(zip(schema.names, (k, T0 + dt.timedelta(seconds=s), v)))
                                  for k, s, v in rows], schema)
    path = os.path.join(directory, f"part-{index:03d}.parquet")
    pq.write_table(table, path)
    os.utime(path, (1_700_000_000 + index, 1_700_000_000 + index))


def test_interval_idle_timeout_releases_an_outer_row_when_the_other_input_goes_quiet(spark, tmp_path):
    root = str(tmp_path)
    _file(f"{root}/clicks", CLICKS, 0, [(1, 0, "c1")])
    _file(f"{root}/orders", ORDERS, 0, [(9, 0, "o9")])
    clicks, orders = (spark.readStream.schema(f"k bigint, t timestamp, {name} string").option("maxFilesPerTrigger", 1)
                      .parquet(f"{root}/{name}s") for name in ("click", "order"))
    joined = interval_join(clicks, orders, "k", left_time="t", right_time="t", lower="0 seconds",
                           upper="10 seconds", delay="10 seconds", how="left_outer", idle_timeout="1 second",
                           checkpoint=f"{root}/ck", partitions=2)
    out: dict[int, list[tuple]] = {}
    inputs: dict[int, tuple[int, int]] = {}   # batch -> rows read of (clicks, orders)

    def collect(df, batch_id):
        out[batch_id] = sorted((r.click, r.order) for r in df.collect())

    def run() -> None:
        query = (joined.writeStream.foreachBatch(collect).option("checkpointLocation", f"{root}/spark")
                 .trigger(availableNow=True).start())
        query.awaitTermination()
        for progress in query.recentProgress:
            inputs[progress["batchId"]] = tuple(sum(s["numInputRows"] for s in progress["sources"]
                                                    if name in s["description"]) for name in ("click", "order"))

    run()                            # both inputs have a row: the watermark is the orders' (0 s - 10 s)
    time.sleep(2.5)                  # the orders stay quiet for longer than idle_timeout
    _file(f"{root}/clicks", CLICKS, 1, [(2, 100, "c2")])
    _file(f"{root}/clicks", CLICKS, 2, [(3, 200, "c3")])
    run()
    released = [v for v, rows in out.items() if ("c1", None) in rows]
    # the first later batch records its timestamp (2.5 s after the orders' last progress); the
    # next one, with clicks only, leaves the orders out: watermark 100 s - 10 s passes click 1's window
    assert len(released) == 1 and released[0] > 0, out
    assert inputs[released[0]][0] > 0 and inputs[released[0]][1] == 0, inputs
    assert all(rows == [] for v, rows in out.items() if v < released[0]), out
