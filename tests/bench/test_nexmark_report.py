"""The Nexmark table (no Spark, no timing): each query's variants with their speed against Spark's
and the peak memory of streamjoin's Python workers beside them."""

from __future__ import annotations

from streamjoin.bench.harness import rotated
from streamjoin.bench.nexmark import FLINK, SPARK, summary_table
from streamjoin.bench.nexmark_data import generate


def test_nexmark_summary_shows_worker_memory_beside_streamjoin_figures():
    data = generate(5_000, 2)
    times = {("q8w", SPARK): [4.0, 6.0], ("q8w", "streamjoin-rocksdb"): [2.0, 3.0, 2.5]}
    outputs = {("q8w", SPARK): 10, ("q8w", "streamjoin-rocksdb"): 10}
    rss = {("q8w", "streamjoin-rocksdb"): 300 * 2**20}

    rows = {r["variant"]: r for r in summary_table(data, 2, times, outputs, rss).as_records()}

    assert rows["streamjoin-rocksdb"]["spark s / s"] == 5.0 / 2.5
    assert rows["streamjoin-rocksdb"]["worker RSS MB"] == 300
    assert rows[SPARK]["worker RSS MB"] == "-" and rows[FLINK]["worker RSS MB"] == "-"


def test_harness_rotated_puts_every_variant_in_every_place_in_turn():
    variants = ["spark", "streamjoin-arranged", "streamjoin-rocksdb"]
    orders = [rotated(variants, run) for run in range(4)]
    assert orders[1] == ["streamjoin-arranged", "streamjoin-rocksdb", "spark"] and orders[3] == orders[0]
    assert all(sorted(order) == sorted(variants) for order in orders)
    assert {order.index(v) for order in orders[:3] for v in variants[:1]} == {0, 1, 2}
