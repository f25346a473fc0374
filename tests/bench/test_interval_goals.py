"""The interval bench prints its ratios beside the goals kept in ``streamjoin.bench.goals``."""

from types import SimpleNamespace

from streamjoin.bench.goals import GOALS
from streamjoin.bench.interval import goals_table


def _runs(seconds: float) -> list:
    return [SimpleNamespace(seconds=seconds)]


def _goal(measure: str) -> str:
    (target,) = [g.target for g in GOALS if g.bench == "interval" and g.measure == measure]
    return f">= {target:g}"


def test_interval_goals_table_reads_its_targets_from_the_kept_goals():
    results = {"streamjoin-arranged": _runs(10.0), "spark-rocksdb": _runs(70.0), "spark-memory": _runs(25.0),
               "floor": _runs(8.0)}
    rows = {row[0]: row[2:] for row in goals_table(results).rows}
    assert rows["streamjoin-arranged vs spark-rocksdb"] == [_goal("speed of streamjoin-arranged vs Spark's join on RocksDB"),
                                                          "yes"]   # 7x against 6x
    assert rows["streamjoin-arranged vs spark-memory"] == [_goal("speed of streamjoin-arranged vs Spark's join in memory"),
                                                         "NO"]    # 2.5x against 3x
    assert rows["streamjoin-arranged vs floor"] == [_goal("speed of streamjoin-arranged vs the floor (floor s / s)"),
                                                  "NO"]           # 0.8 against 0.9
