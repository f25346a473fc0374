"""Heartbeats of an event stream end to end through Spark: a left-outer interval join whose right
input (orders) goes quiet. With ``heartbeats=True`` a right row with only a time moves the join's
watermark, so a click whose window has closed comes out null-padded; the heartbeat itself is never
output nor set aside, and is counted."""

from __future__ import annotations

import pyarrow as pa
import pytest

from streamjoin import interval_join, join_metrics, progress_metrics, set_aside_rows
from tests.joins.spark.clicks_orders import CLICKS, ORDERS, T0, read_streams, write_batches

pytestmark = pytest.mark.spark

# per micro-batch: (clicks, orders) as (key, seconds after T0, id); (None, s, None) is a heartbeat
BATCHES = [
    ([(1, 0, "c1")], [(9, 0, "o9")]),
    ([(2, 30, "c2")], []),          # the orders go quiet: the watermark stays at 0 s
    ([], [(None, 30, None)]),       # a heartbeat of the orders at 30 s
    ([], []),                       # watermark min(30 s, 30 s) = 30 s > 0 + 10 s: c1 comes out
]


def test_interval_join_right_heartbeat_releases_the_unmatched_left_row_of_a_quiet_stream(spark, tmp_path):
    root = str(tmp_path)
    write_batches(f"{root}/clicks", CLICKS, [b[0] for b in BATCHES])
    write_batches(f"{root}/orders", ORDERS, [b[1] for b in BATCHES])
    clicks, orders = read_streams(spark, root)
    joined = interval_join(clicks, orders, "k", left_time="t", right_time="t", lower="0 seconds",
                           upper="10 seconds", delay="0 seconds", how="left_outer", checkpoint=f"{root}/ck",
                           partitions=2, heartbeats=True)
    out: dict[int, list[tuple]] = {}

    def collect(df, batch_id):
        out[batch_id] = sorted((r.k, r.click, r.order) for r in df.collect())

    query = (joined.writeStream.foreachBatch(collect).option("checkpointLocation", f"{root}/spark")
             .trigger(availableNow=True).start())
    query.awaitTermination()
    assert [out.get(v, []) for v in range(len(BATCHES))] == [[], [], [], [(1, "c1", None)]]
    assert set_aside_rows(spark, f"{root}/ck", "right").count() == 0
    metrics = join_metrics(spark, f"{root}/ck").collect()
    assert sum(r.heartbeat_rows_right or 0 for r in metrics) == 1
    observed = [progress_metrics(p) for p in query.recentProgress]
    assert sum((m or {}).get("heartbeat_rows_right") or 0 for m in observed) == 1


def test_interval_join_heartbeat_is_a_row_that_may_move_the_watermark_so_it_asks_for_a_tick():
    from streamjoin.interval.operator import IntervalJoin
    from streamjoin.spark.task import timed_rows

    join = IntervalJoin(CLICKS, ORDERS, "k", left_time="t", right_time="t", lower="0 seconds", upper="10 seconds",
                        delay="0 seconds", how="left", heartbeats=True)
    beat = pa.Table.from_pylist([{"k": None, "t": T0, "order": None}], ORDERS)
    assert timed_rows((CLICKS.empty_table(), beat), join)
    assert not timed_rows((CLICKS.empty_table(), ORDERS.empty_table()), join)
