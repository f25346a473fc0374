"""Per-input delays of the interval join end to end through Spark: clicks never more than 10 s
late, orders up to 2 h late, joined left outer. Under ``watermark_policy="max"`` the join's
watermark follows the clicks (newest click time - 10 s), so a click's outer row comes out once the
clicks have moved 10 s past its window, and an order below that watermark (within its own 2 h)
is set aside as late and counted; under ``"min"`` (the default) the same order still joins and
the click's outer row waits for the orders' watermark."""

from __future__ import annotations

import pytest

from streamjoin import interval_join, join_metrics, set_aside_rows
from tests.joins.spark.clicks_orders import CLICKS, ORDERS, read_streams, write_batches

pytestmark = pytest.mark.spark

# per micro-batch: (clicks, orders) as (key, seconds after T0, id)
BATCHES = [
    ([(1, 0, "c1")], [(9, 0, "o9")]),
    ([(2, 15, "c2")], []),
    ([(3, 30, "c3")], [(9, 30, "o9b")]),
    ([], [(1, 5, "o1")]),          # the order of click 1, 25 s late: within the orders' 2 h
    ([], []),
]


def _run(spark, root: str, policy: str) -> list[list[tuple]]:
    """The join's output rows (click, order) per micro-batch."""
    write_batches(f"{root}/clicks", CLICKS, [b[0] for b in BATCHES])
    write_batches(f"{root}/orders", ORDERS, [b[1] for b in BATCHES])
    clicks, orders = read_streams(spark, root)
    joined = interval_join(clicks, orders, "k", left_time="t", right_time="t", lower="0 seconds",
                           upper="10 seconds", delay="10 seconds", right_delay="2 hours", how="left_outer",
                           watermark_policy=policy, checkpoint=f"{root}/ck", partitions=2)
    out: dict[int, list[tuple]] = {}

    def collect(df, batch_id):
        out[batch_id] = sorted((r.click, r.order) for r in df.collect())

    query = (joined.writeStream.foreachBatch(collect).option("checkpointLocation", f"{root}/spark")
             .trigger(availableNow=True).start())
    query.awaitTermination()
    return [out.get(v, []) for v in range(len(BATCHES))]


def test_interval_delays_max_policy_releases_fast_outer_rows_after_its_delay_and_sets_slow_late_rows_aside(
        spark, tmp_path):
    root = str(tmp_path)
    out = _run(spark, root, "max")
    # version 3's watermark: max(30 s - 10 s, 30 s - 2 h) = 20 s. Click 1's window ends at 10 s:
    # out, null-padded; click 2's ends at 25 s: still held; order 1 (5 s < 20 s) is late.
    assert out == [[], [], [], [("c1", None)], []]
    aside = set_aside_rows(spark, f"{root}/ck", "right").collect()
    assert [(r.order, r._reason) for r in aside] == [("o1", "late")]
    metrics = join_metrics(spark, f"{root}/ck").collect()
    assert sum(r.late_rows_right or 0 for r in metrics) == 1
    assert sum(r.late_rows_left or 0 for r in metrics) == 0


def test_interval_delays_min_policy_waits_for_the_slow_input_and_keeps_its_rows(spark, tmp_path):
    root = str(tmp_path)
    out = _run(spark, root, "min")
    # the watermark is 30 s - 2 h: nothing is released or late; order 1 joins click 1
    assert out == [[], [], [], [("c1", "o1")], []]
    assert set_aside_rows(spark, f"{root}/ck", "right").count() == 0
