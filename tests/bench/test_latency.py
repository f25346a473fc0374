"""``streamjoin bench latency``'s computation, over recorded times: which step's watermark releases a
row, which micro-batch read a step, and each row's delay in seconds and micro-batches."""

from __future__ import annotations

import datetime

import pytest

from streamjoin.bench.latency import (
    Latency,
    Written,
    latencies,
    latency_table,
    read_batches,
    release_step,
    step_watermarks,
    summary,
    workload,
)


def test_step_watermarks_follow_the_slower_input_less_the_delay():
    # the right input lags at step 1, and is quiet (an old file) at step 3
    assert step_watermarks([10, 20, 30, 40], [12, 15, 35, 5], delay_us=2) == [8, 13, 28, 33]


def test_release_step_is_the_first_step_whose_watermark_passes_the_window():
    watermarks = [8, 13, 28, 33]
    assert release_step(5, 2, watermarks) == 0    # 8 > 7
    assert release_step(6, 2, watermarks) == 1    # 8 is not > 8: strictly past the window
    assert release_step(25, 2, watermarks) == 2
    assert release_step(26, 2, watermarks) == 3
    assert release_step(31, 2, watermarks) is None  # no step's watermark passes 33


def test_read_batches_maps_steps_to_the_micro_batch_that_completed_them():
    # 10 rows a side a step; batch 2 reads the left of step 1, batch 3 its right and all of step 2;
    # batches 1 and 4 have no data (a no-data micro-batch)
    progress = [(0, 10, 10), (1, 0, 0), (2, 10, 0), (3, 10, 20), (4, 0, 0)]
    assert read_batches(progress, per_step=10, steps=3) == {0: 0, 1: 3, 2: 3}
    assert read_batches(list(reversed(progress)), per_step=10, steps=3) == {0: 0, 1: 3, 2: 3}


def test_latencies_count_seconds_and_batches_from_the_releasing_step():
    written = [Written(row=1, batch=4, at=103.5), Written(row=2, batch=5, at=106.0), Written(row=3, batch=4, at=103.5),
               Written(row=9, batch=1, at=99.0)]
    release = {1: 1, 2: 2, 3: 2, 9: 0}
    available, read = {0: 97.0, 1: 102.0, 2: 103.0}, {0: 0, 1: 3, 2: 4}

    measured = latencies(written, release, available, read, counted={1, 2}, data_batches={0, 3, 4})

    # row 9 is released by step 0, which is not counted; row 3 comes in the batch that read its step;
    # batch 5 read no rows
    assert measured == [Latency(1.5, 1, True), Latency(3.0, 1, False), Latency(0.5, 0, True)]


def test_summary_gives_median_nearest_rank_p95_and_batches():
    measured = [Latency(float(s), b, s <= 5) for s, b in zip(range(1, 21), [1] * 19 + [3])]
    assert summary(measured) == (20, 10.5, 19.0, 1, 3, 0.25)
    assert summary([Latency(2.0, 2, False)]) == (1, 2.0, 2.0, 2, 2, 0.0)
    with pytest.raises(ValueError, match="no released row"):
        summary([])


def test_latency_table_sets_sparks_median_over_ours_beside_the_load():
    results = {("streamjoin-rocksdb", "quiet"): [Latency(1.0, 1), Latency(2.0, 1)],
               ("spark-rocksdb", "quiet"): [Latency(3.0, 1)]}
    rows = latency_table(results, {key: 1.5 for key in results}).as_records()
    assert rows[0] == {"run": "streamjoin-rocksdb, quiet", "rows": 2, "median s": 1.5, "p95 s": 2.0,
                       "median batches": 1, "max batches": 1, "with data": 1.0, "spark s / s": 2.0,
                       "load": 1.5, "worker RSS MB": "-"}
    assert rows[1]["run"] == "spark-rocksdb, quiet" and rows[1]["spark s / s"] == "-"
    # a streamjoin run's largest Python worker, where it was sampled
    rows = latency_table(results, {key: 1.5 for key in results}, {("streamjoin-rocksdb", "quiet"): 200 * 2**20}).as_records()
    assert rows[0]["worker RSS MB"] == 200 and rows[1]["worker RSS MB"] == "-"


def test_workload_releases_the_unmatched_left_rows_the_watermark_passes():
    data = workload(rows=800, steps=4)
    steps = [{side: step[side].to_pylist() for side in step} for step in data.steps]
    left = [r for step in steps for r in step["left"]]
    right = [r for step in steps for r in step["right"]]
    window, delay = datetime.timedelta(seconds=1), datetime.timedelta(seconds=2)
    # the watermark once steps 0..s are read, by hand
    watermarks = [min(max(r["lt"] for step in steps[:s + 1] for r in step["left"]),
                      max(r["rt"] for step in steps[:s + 1] for r in step["right"])) - delay for s in range(4)]
    expected = {}
    for row in left:
        unmatched = not any(r["k"] == row["k"] and abs(r["rt"] - row["lt"]) <= window for r in right)
        passed = [s for s, w in enumerate(watermarks) if w > row["lt"] + window]
        if unmatched and passed:
            expected[row["lid"]] = passed[0]
    assert data.per_step == 100 and data.release == expected
    assert 0 < len(expected) < len(left) and set(expected.values()) == {0, 1, 2, 3}
