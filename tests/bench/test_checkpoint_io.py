"""``streamjoin bench checkpoint-io`` and ``soak`` at small sizes: a task's checkpoint calls do not
grow with the partition count, and a long run's checkpoint does not grow with the versions."""

from __future__ import annotations

import argparse

from streamjoin.bench.checkpoint_io import measure
from streamjoin.bench.soak import JOINS, soak


def test_checkpoint_io_calls_per_task_do_not_grow_with_partitions():
    few = measure(partitions=2, batches=3, rows=200, latency=0, store="memory")
    many = measure(partitions=12, batches=3, rows=200, latency=0, store="memory")
    assert few["calls"] < 20
    assert many["calls"] <= few["calls"] + 0.5   # partition 0's pruning, shared by more tasks


def test_soak_checkpoint_stays_flat_after_warm_up(tmp_path):
    """Sampled at one phase of the snapshot cycle (``snapshot_every`` 10), the files are the same."""
    args = argparse.Namespace(batches=40, every=10, keys=50, rows=20, partitions=2, store="memory", retain=3)
    rows = soak("interval", JOINS["interval"](args.keys, args.rows), args, str(tmp_path))
    assert [r["version"] for r in rows] == [9, 19, 29, 39]
    assert rows[1]["checkpoint files"] == rows[2]["checkpoint files"] == rows[3]["checkpoint files"]
    assert rows[3]["output rows"] > rows[2]["output rows"] > 0
