"""``idle_timeout`` of the interval join end to end through Spark: the orders go quiet; after the
timeout of processing time (the micro-batches' timestamps) they stop holding the watermark, and a
click's outer row comes out in a later micro-batch in which only clicks have rows."""

from __future__ import annotations

import time

import pytest

from streamjoin import interval_join
from tests.joins.spark.clicks_orders import CLICKS, ORDERS, read_streams, write_batch

pytestmark = pytest.mark.spark



def test_interval_idle_timeout_releases_an_outer_row_when_the_other_input_goes_quiet(spark, tmp_path):
    root = str(tmp_path)
    write_batch(f"{root}/clicks", CLICKS, 0, [(1, 0, "c1")])
    write_batch(f"{root}/orders", ORDERS, 0, [(9, 0, "o9")])
    clicks, orders = read_streams(spark, root)
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
    write_batch(f"{root}/clicks", CLICKS, 1, [(2, 100, "c2")])
    write_batch(f"{root}/clicks", CLICKS, 2, [(3, 200, "c3")])
    run()
    released = [v for v, rows in out.items() if ("c1", None) in rows]
    # the first later batch records its timestamp (2.5 s after the orders' last progress); the
    # next one, with clicks only, leaves the orders out: watermark 100 s - 10 s passes click 1's window
    assert len(released) == 1 and released[0] > 0, out
    assert inputs[released[0]][0] > 0 and inputs[released[0]][1] == 0, inputs
    assert all(rows == [] for v, rows in out.items() if v < released[0]), out
