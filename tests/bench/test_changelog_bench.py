"""``streamjoin bench changelog`` at a small size: every restore is checked, timed and measured
again in a new process, whose own peak memory the table reports."""

from __future__ import annotations

import argparse
import json

from streamjoin.bench import changelog


def test_changelog_bench_reports_each_restores_peak_memory(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(changelog, "results_dir", lambda: str(tmp_path))
    monkeypatch.setattr("streamjoin.bench.harness.results_dir", lambda: str(tmp_path))
    args = argparse.Namespace(entries="3000", backends="arranged,rocksdb-kv", value_bytes=20, deltas=3, repeat=1, seed=1)
    assert changelog.run(args) == 0
    path = capsys.readouterr().out.strip().splitlines()[-1].split("results: ")[1]
    rows = json.loads(open(path).read())["rows"]
    restores = [r for r in rows if r["what"].startswith("restore")]
    assert {(r["backend"], r["what"]) for r in restores} == {
        (b, f"restore {w}") for b in ("arranged", "rocksdb-kv") for w in ("compacted", "uncompacted")}
    # a new process's own peak (an interpreter with pyarrow is tens of MB), not this test process's
    assert all(20 < r["peak RSS MB"] < 1_000 for r in restores)
    assert all(r["peak RSS MB"] == "-" for r in rows if not r["what"].startswith("restore"))
