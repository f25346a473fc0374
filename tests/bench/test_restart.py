"""``streamjoin bench restart`` at a small size: both restarts run in their own processes, the
column-added one records its evolution, and the table says how the two compare."""

from __future__ import annotations

import argparse
import json

from streamjoin.bench import restart


def test_restart_bench_times_both_restarts(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(restart, "results_dir", lambda: str(tmp_path))
    monkeypatch.setattr("streamjoin.bench.harness.results_dir", lambda: str(tmp_path))
    args = argparse.Namespace(rows=2_000, partitions=2, touch=100, repeat=1, store="arranged")
    assert restart.run(args) == 0
    out = capsys.readouterr().out
    path = out.strip().splitlines()[-1].split("results: ")[1]
    assert path.startswith(str(tmp_path))   # (a test's run never lands among a user's results for bench report)
    saved = json.loads(open(path).read())
    rows = {r["variant"]: r for r in saved["rows"]}
    assert set(rows) == {"same columns", "column added"} and rows["same columns"]["ratio"] == 1.0
    assert all(r["seconds"] > 0 and r["rows"] == 2_000 for r in rows.values())
    assert all(r["peak RSS MB"] > 10 for r in rows.values())   # (the restarting process's)


def test_restart_bench_child_records_the_evolution(tmp_path):
    from streamjoin.runtime.checkpoint import Checkpoint

    args = argparse.Namespace(rows=500, partitions=2, touch=50, repeat=1, store="memory")
    restart._prepare(str(tmp_path), args)
    assert restart._child(str(tmp_path), "column added", "memory", 2, 50, 500) > 0
    assert Checkpoint(str(tmp_path / "ck")).binding.evolutions()[0]["changes"] == ["table: added region (string)"]
