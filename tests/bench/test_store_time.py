"""``streamjoin bench store-time``: each join in process with its stores timed, one kept row per
join, which the state-store goal reads."""

from __future__ import annotations

import argparse
import json
import os

from streamjoin.bench import store_time
from streamjoin.bench.cli import BENCHMARKS
from streamjoin.bench.goals import GOALS, goal_status


def _goal():
    """The state-store goal (one goal reads ``streamjoin bench store-time``)."""
    found = [goal for goal in GOALS if goal.bench == "store-time"]
    assert len(found) == 1, found
    return found[0]


def _args(**given) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    store_time.add_arguments(parser)
    return parser.parse_args([f"--{k.replace('_', '-')}={v}" for k, v in given.items()])


def test_store_time_keeps_a_row_per_join_that_the_goal_reads(tmp_path, monkeypatch):
    monkeypatch.setattr("streamjoin.bench.harness.results_dir", lambda: str(tmp_path))

    assert store_time.run(_args(rows=2000, batches=2, partitions=2)) == 0   # the output counts checked

    written = [f for f in os.listdir(tmp_path) if f.startswith("store-time-") and f.endswith(".json")]
    results = json.loads((tmp_path / written[0]).read_text())
    rows = {row["variant"]: row for row in results["rows"]}
    assert list(rows) == ["streamjoin-arranged, interval", "streamjoin-arranged, enrichment", "streamjoin-arranged, table"]
    # every row the join's inputs gave it: interval both sides; enrichment the table's 2,000 rows
    # (initial), 200 updates, a heartbeat a micro-batch and the closing one, 2,000 events; table 2 x (load + changes)
    assert [r["input rows"] for r in rows.values()] == [2000, 2000 + 200 + 2 + 1 + 2000, 4 * 2000]
    for row in rows.values():
        assert row["store calls"] > 0 and 0 < row["store s"] < row["task s"]
        assert abs(row["store us/row"] - row["store s"] * 1e6 / row["input rows"]) < 0.001
        assert abs(row["store share"] - row["store s"] / row["task s"]) < 0.001 and 0 < row["store share"] < 1
        assert row["peak RSS MB"] > 10   # (this process's, while the join ran)

    os.replace(tmp_path / written[0], tmp_path / "store-time.json")
    status = goal_status(_goal(), str(tmp_path))
    assert status.reading is not None and status.met is not None
    assert [part.split(" ")[0] for part in status.reading.text.split(", ")] == ["interval", "enrichment", "table"]
    assert status.reading.value == max(row["store us/row"] for row in rows.values())
    assert status.reading.memory_mb == max(row["peak RSS MB"] for row in rows.values())


def test_store_time_goal_is_at_most_two_us_per_row_of_every_join():
    goal = _goal()
    assert "store-time" in BENCHMARKS and goal.command == "streamjoin bench store-time"
    assert (goal.text(), goal.at_most) == ("<= 1 us", True)


def test_store_time_measures_the_arranged_store_with_its_files_in_lmdb(tmp_path, monkeypatch):
    monkeypatch.setattr("streamjoin.bench.harness.results_dir", lambda: str(tmp_path))

    assert store_time.run(_args(rows=1000, batches=2, partitions=2, stores="arranged-lmdb", joins="interval")) == 0

    [written] = [f for f in os.listdir(tmp_path) if f.startswith("store-time-") and f.endswith(".json")]
    [row] = json.loads((tmp_path / written).read_text())["rows"]
    assert row["variant"] == "streamjoin-arranged-lmdb, interval" and row["input rows"] == 1000
    assert row["store calls"] > 0 and 0 < row["store s"] < row["task s"]
