"""``streamjoin checkpoint describe|verify``: a whole checkpoint, every partition;
and the checkpoint's records stay bounded (item 2)."""

from __future__ import annotations

import json
import os

import pyarrow as pa

from streamjoin.jobs.cli import main
from streamjoin.runtime.checkpoint import Checkpoint
from streamjoin.runtime.inspect import describe_checkpoint, verify_checkpoint
from streamjoin.runtime.local import LocalRunner
from streamjoin.runtime.options import StateConfig
from tests.operators import RunningCount

SCHEMA = pa.schema([("k", pa.int64()), ("v", pa.string())])


def _runner(tmp_path, versions: int, retain: int = 10) -> LocalRunner:
    config = StateConfig(store="memory", retain_versions=retain, snapshot_every=3)
    runner = LocalRunner(RunningCount(SCHEMA, ["k"]), str(tmp_path / "ck"), partitions=2, config=config)
    for _ in range(versions):
        keys = list(range(6)) + [None]
        runner.run(pa.table({"k": pa.array(keys, pa.int64()), "v": [str(k) for k in keys]}, schema=SCHEMA))
    return runner


def test_describe_checkpoint_reports_every_partition_and_the_binding(tmp_path):
    _runner(tmp_path, versions=3)
    report = describe_checkpoint(str(tmp_path / "ck"))
    assert report.kind == "running_count" and report.partitions == 2 and report.newest_version == 2
    assert [p.versions[-1] for p in report.parts] == [2, 2]
    assert sum(sum(c.values()) for p in report.parts for c in p.set_aside.values()) == 3  # a null key a version
    assert all(p.changelog_bytes > 0 for p in report.parts)


def test_verify_checkpoint_names_a_damaged_changelog_and_a_damaged_record(tmp_path, capsys):
    _runner(tmp_path, versions=3)
    root = tmp_path / "ck"
    assert verify_checkpoint(str(root)) == []
    assert main(["checkpoint", "verify", str(root)]) == 0
    delta = sorted((root / "state" / "p=1").glob("delta-*"))[-1]
    delta.write_bytes(delta.read_bytes()[:-8] + b"damaged!")
    (root / "query.json").write_text("{")
    (root / "flush.json").write_text("[]")
    capsys.readouterr()
    assert main(["checkpoint", "verify", str(root), "--json"]) == 1
    found = json.loads(capsys.readouterr().out)
    problems = found["problems"][str(root)]
    assert any("partition 1" in p and delta.name in p for p in problems), problems
    assert any("query.json" in p for p in problems), problems
    assert any("flush.json" in p for p in problems), problems


def test_checkpoint_describe_cli_prints_json_and_refuses_a_non_checkpoint(tmp_path, capsys):
    _runner(tmp_path, versions=2)
    assert main(["checkpoint", "describe", str(tmp_path / "ck"), "--json"]) == 0
    [report] = json.loads(capsys.readouterr().out)
    assert report["partitions"] == 2 and len(report["parts"]) == 2
    assert main(["checkpoint", "describe", str(tmp_path)]) == 1
    assert "not a join checkpoint" in capsys.readouterr().err


def test_runtime_commit_records_are_pruned_with_the_retention(tmp_path):
    _runner(tmp_path, versions=12, retain=4)
    root = tmp_path / "ck"
    assert sorted(os.listdir(root / "commits")) == [f"v={v}" for v in (10, 11, 7, 8, 9)]
    assert all(len(os.listdir(root / "commits" / f"v={v}")) == 2 for v in (7, 8, 9, 10, 11))
    assert not (root / "metrics").exists() and not (root / "progress").exists()
    assert Checkpoint(str(root)).commits.newest_version() == 11
    assert [m["version"] for m in Checkpoint(str(root)).commits.read_metrics()] == [7, 7, 8, 8, 9, 9, 10, 10, 11, 11]


def test_verify_checkpoint_names_a_missing_commit_record(tmp_path):
    _runner(tmp_path, versions=3)
    root = tmp_path / "ck"
    [record] = (root / "commits" / "v=2").glob("p=1.*")
    record.unlink()
    problems = verify_checkpoint(str(root))
    assert any("partition 1" in p and "commit record" in p for p in problems), problems


def test_checkpoint_describe_cli_says_no_snapshot_for_a_partition_without_one(tmp_path, capsys):
    _runner(tmp_path, versions=2)   # versions 0 and 1: the log's deltas, no snapshot yet
    capsys.readouterr()
    assert main(["checkpoint", "describe", str(tmp_path / "ck")]) == 0
    out = capsys.readouterr().out
    assert "no snapshot" in out and "vNone" not in out and "None entries" not in out
