"""``streamjoin bench checkpoint-io`` and ``soak`` at small sizes: a task's checkpoint calls do not
grow with the partition count, and a long run's checkpoint does not grow with the versions."""

from __future__ import annotations

import argparse

import pytest

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
    rows = soak("interval", JOINS["interval"](args.keys, args.rows, True), args, str(tmp_path))
    assert [r["version"] for r in rows] == [9, 19, 29, 39]
    assert rows[1]["checkpoint files"] == rows[2]["checkpoint files"] == rows[3]["checkpoint files"]
    assert rows[3]["output rows"] > rows[2]["output rows"] > 0


def _soak_ttl(name: str, ttl: bool, path: str) -> list[dict[str, object]]:
    args = argparse.Namespace(batches=60, every=10, keys=100, rows=20, partitions=2, store="memory", retain=3)
    return soak(name, JOINS[name](args.keys, args.rows, ttl), args, path)


@pytest.mark.parametrize("name", ["enrichment", "table"])
def test_soak_state_stays_flat_with_ttl_and_grows_without(tmp_path, name):
    """The live keys slide by 2 keys a version; the TTL (20 versions of event time) removes the
    keys left behind: after warm-up the rows held stay within a band, without the TTL they grow."""
    kept = _soak_ttl(name, True, str(tmp_path / "ttl"))
    held = [int(r["state rows"]) for r in kept]   # type: ignore[call-overload]
    assert [r["version"] for r in kept][-1] == 59 and min(held) > 0
    assert max(held[3:]) - min(held[3:]) < 0.2 * max(held[3:])
    assert kept[5]["checkpoint files"] == kept[4]["checkpoint files"] == kept[3]["checkpoint files"]
    grown = [int(r["state rows"]) for r in _soak_ttl(name, False, str(tmp_path / "no-ttl"))]  # type: ignore[call-overload]
    assert grown[5] - grown[2] >= 20 and grown[5] > max(held[3:])   # about one key left behind a version
