"""A streaming query's fixed cost (before its first micro-batch, after its last) from its recorded
progress events, and how ``bench runtime`` and ``bench interval`` show it beside the floor's (no Spark)."""

from __future__ import annotations

import datetime

from streamjoin.bench import report
from streamjoin.bench.interval import Outcome, Params, summary_table
from streamjoin.bench.runtime import runtime_table
from streamjoin.bench.sparkutil import QueryTimes, fixed_costs, progress_span

T0 = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc).timestamp()


def event(offset: float, millis: int) -> dict:
    """A progress event as Spark records it: the micro-batch's start (ISO, UTC, ms) and its duration."""
    started = datetime.datetime.fromtimestamp(T0 + offset, datetime.timezone.utc)
    return {"timestamp": started.strftime("%Y-%m-%dT%H:%M:%S.") + f"{started.microsecond // 1000:03d}Z",
            "durationMs": {"triggerExecution": millis, "addBatch": millis - 1}}


def test_fixed_costs_from_recorded_progress_events():
    progress = [event(2.5, 400), event(3.0, 1000), event(4.25, 250)]   # batches end at 2.9, 4.0, 4.5
    start, stop = fixed_costs(T0 + 0.5, T0 + 5.25, progress)
    assert round(start, 3) == 2.0 and round(stop, 3) == 0.75


def test_fixed_costs_take_the_earliest_start_and_latest_end_in_any_order():
    start, stop = fixed_costs(T0, T0 + 10, [event(6.0, 3000), event(1.0, 500)])
    assert round(start, 3) == 1.0 and round(stop, 3) == 1.0


def test_progress_span_is_the_first_start_to_the_last_end():
    assert [round(t - T0, 3) for t in progress_span([event(3.0, 1000), event(2.5, 400), event(4.25, 250)])] == [2.5, 4.5]


def test_fixed_costs_without_progress_count_all_as_start():
    assert fixed_costs(T0, T0 + 3, []) == (3.0, 0.0)


def test_runtime_table_shows_fixed_cost_beside_the_floors():
    times = {"floor": [QueryTimes(5, 3, 1.0, 0.5), QueryTimes(7, 4, 2.0, 0.5), QueryTimes(6, 3, 1.5, 0.5)],
             "ours": [QueryTimes(9, 4, 3.0, 1.0)]}
    rows = {r["variant"]: r for r in runtime_table(times, 600, "floor").as_records()}
    assert (rows["floor"]["start s"], rows["floor"]["stop s"], rows["floor"]["fixed s"]) == (1.5, 0.5, 2.0)
    assert rows["ours"]["fixed s"] == 4.0 and rows["ours"]["fixed - floor's s"] == 2.0
    assert rows["ours"]["time / floor"] == 1.5
    assert rows["ours"]["worker RSS MB"] == "-"   # (no memory sampled)


def test_runtime_table_shows_each_variants_largest_worker():
    times = {"floor": [QueryTimes(5, 3, 1.0, 0.5)], "ours": [QueryTimes(9, 4, 3.0, 1.0)]}
    rows = {r["variant"]: r for r in runtime_table(times, 600, "floor", {"floor": 90 * 2**20, "ours": 120 * 2**20})
            .as_records()}
    assert (rows["floor"]["worker RSS MB"], rows["ours"]["worker RSS MB"]) == (90, 120)


def test_interval_summary_shows_fixed_cost_beside_the_floors():
    params = Params(rows=100, batches=2, partitions=2, window_us=1, keys=1)
    results = {"floor": [Outcome(4.0, 0, (0, 0), start_seconds=1.0, stop_seconds=0.25)],
               "streamjoin-memory": [Outcome(5.0, 7, (0, 0), start_seconds=2.0, stop_seconds=0.5)]}
    rows = {r["variant"]: r for r in summary_table(params, results, 7).as_records()}
    assert rows["streamjoin-memory"]["fixed s"] == 2.5
    assert rows["streamjoin-memory"]["fixed - floor's s"] == 1.25
    assert rows["(expected pairs)"]["fixed s"] == "-"


def test_report_renders_kept_results_without_fixed_costs_and_new_ones_with():
    # results kept from before the fixed-cost columns existed (as docs/bench/runtime.json was)
    kept = {"columns": ["variant", "median s", "rows/s", "time / floor", "batches s", "batches / floor"],
            "rows": [{"variant": "repartition + mapInArrow (floor)", "median s": 4.12, "rows/s": 485480,
                      "time / floor": 1.0, "batches s": 4.02, "batches / floor": 1.0}]}
    assert report.markdown_table(kept).startswith("| variant | median s")
    table = runtime_table({"floor": [QueryTimes(5, 3, 1.0, 0.5)]}, 10, "floor")
    rendered = report.markdown_table({"columns": list(table.columns), "rows": table.as_records()})
    assert "| fixed s | fixed - floor's s |" in rendered and "| 1.50 | 0.00 |" in rendered
