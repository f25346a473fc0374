"""``streamjoin checkpoint describe|verify``: a whole checkpoint, every partition;
and the checkpoint's records stay bounded (item 2)."""

from __future__ import annotations

import json
import os
import shutil

import pyarrow as pa
import pytest

from streamjoin.errors import CheckpointDamagedError
from streamjoin.jobs.cli import main
from streamjoin.runtime.checkpoint import Checkpoint
from streamjoin.runtime.inspect import check_checkpoint, describe_checkpoint, verify_checkpoint
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


def _spark_checkpoint(tmp_path, batches: int):
    """A Spark checkpointLocation whose commit log has batches 0 .. ``batches - 1``."""
    (tmp_path / "spark" / "commits").mkdir(parents=True)
    for batch in range(batches):
        (tmp_path / "spark" / "commits" / str(batch)).write_text("v1\n{}")
    return str(tmp_path / "spark")


def test_checkpoint_verify_says_a_half_committed_version_is_normal_and_exits_0(tmp_path, capsys):
    """A stop during version 2: partition 1 wrote its delta, not its record. The next run executes
    version 2 again; only if the query's Spark commit log has batch 2 were records lost."""
    _runner(tmp_path, versions=3)
    root = tmp_path / "ck"
    [record] = (root / "commits" / "v=2").glob("p=1.*")
    record.unlink()
    assert verify_checkpoint(str(root)) == []
    capsys.readouterr()
    assert main(["checkpoint", "verify", str(root)]) == 0
    out = capsys.readouterr().out
    assert f"{root}: ok" in out
    assert "note: version 2 is half committed: partitions [0] recorded it, partitions [1] did not" in out
    assert "normal: the next run executes version 2 again, every partition from version 1" in out
    assert main(["checkpoint", "verify", str(root), "--spark-checkpoint", _spark_checkpoint(tmp_path, 2)]) == 0
    capsys.readouterr()
    assert main(["checkpoint", "verify", str(root), "--spark-checkpoint", str(tmp_path / "spark"), "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert found["ok"] and found["problems"] == {str(root): []}
    assert [n.split(":")[0] for n in found["notes"][str(root)]] == ["version 2 is half committed"]
    (tmp_path / "spark" / "commits" / "2").write_text("v1\n{}")
    assert main(["checkpoint", "verify", str(root), "--spark-checkpoint", str(tmp_path / "spark")]) == 1
    assert "version 2 was committed by the query (its Spark commit log has batch 2)" in capsys.readouterr().out


def test_checkpoint_verify_tells_records_lost_from_a_version_being_written(tmp_path, capsys):
    """Every record of version 2 gone, every delta there: a stop during version 2 (normal), or a
    partial copy of a checkpoint whose query committed it (the runtime refuses it)."""
    _runner(tmp_path, versions=3)
    root = tmp_path / "ck"
    shutil.rmtree(root / "commits" / "v=2")
    capsys.readouterr()
    assert main(["checkpoint", "verify", str(root)]) == 0
    assert "note: version 2 is half committed: partitions [0, 1] wrote its changelog delta" in capsys.readouterr().out
    assert main(["checkpoint", "verify", str(root), "--spark-checkpoint", _spark_checkpoint(tmp_path, 3)]) == 1
    assert "commit records were lost" in capsys.readouterr().out
    shutil.rmtree(root / "commits" / "v=1")             # and version 1's too: more than a stop leaves
    problems = verify_checkpoint(str(root))
    assert any("changelogs hold versions [1, 2] after version 0" in p and "commit records are missing" in p
               for p in problems), problems


def test_checkpoint_verify_flags_a_committed_versions_newest_delta_deleted(tmp_path, capsys):
    _runner(tmp_path, versions=4)    # snapshots at version 2; version 3 only in its delta
    root = tmp_path / "ck"
    [delta] = (root / "state" / "p=1").glob("delta-*3-*.arrow")
    delta.unlink()
    problems = verify_checkpoint(str(root))
    assert any(p.startswith("partition 1: its commit record of version 3") and "restores only up to version 2" in p
               and "the delta of version 3 is missing" in p for p in problems), problems
    assert main(["checkpoint", "verify", str(root)]) == 1


def test_checkpoint_verify_flags_a_truncated_set_aside_file_and_describe_names_it(tmp_path, capsys):
    _runner(tmp_path, versions=2)
    root = tmp_path / "ck"
    [aside] = [f for f in (root / "set_aside").rglob("v=1/p=*.parquet")]
    aside.write_bytes(aside.read_bytes()[:-20])
    problems = verify_checkpoint(str(root))
    assert len(problems) == 1 and f"set-aside file {aside} is damaged" in problems[0], problems
    assert main(["checkpoint", "verify", str(root)]) == 1
    with pytest.raises(CheckpointDamagedError, match=f"set-aside file {aside} is damaged.*Restore it from a copy"):
        describe_checkpoint(str(root))
    capsys.readouterr()
    assert main(["checkpoint", "describe", str(root)]) == 1
    assert f"set-aside file {aside} is damaged" in capsys.readouterr().err


def test_checkpoint_verify_help_states_its_exit_codes(capsys):
    with pytest.raises(SystemExit) as exited:
        main(["checkpoint", "verify", "--help"])
    assert exited.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "Exit status: 0 when nothing is damaged (notes may be printed), 1 when something is damaged" in text
    assert "2 for a usage error" in text and "--spark-checkpoint" in text


def test_checkpoint_verify_notes_a_first_version_being_written(tmp_path):
    _runner(tmp_path, versions=1)
    shutil.rmtree(tmp_path / "ck" / "commits")
    result = check_checkpoint(str(tmp_path / "ck"))
    assert result.problems == []
    assert [n.split(". ")[0] for n in result.notes] == [
        "version 0 is half committed: partitions [0, 1] wrote its changelog delta, no partition its commit record"]
    assert "every partition from an empty state" in result.notes[0]


def test_checkpoint_describe_cli_says_no_snapshot_for_a_partition_without_one(tmp_path, capsys):
    _runner(tmp_path, versions=2)   # versions 0 and 1: the log's deltas, no snapshot yet
    capsys.readouterr()
    assert main(["checkpoint", "describe", str(tmp_path / "ck")]) == 0
    out = capsys.readouterr().out
    assert "no snapshot" in out and "vNone" not in out and "None entries" not in out


def test_checkpoint_verify_notes_initial_rows_whose_writing_failed(tmp_path, capsys):
    from streamjoin.runtime.bind import bind_query

    bound = bind_query(str(tmp_path / "ck"), RunningCount(SCHEMA, ["k"]), 2, write_initial=lambda b: {"changes": 0},
                       defer_initial=True)
    bound.checkpoint.initial.mark_failed("ValueError: row 2 is damaged")
    assert main(["checkpoint", "verify", str(tmp_path / "ck")]) == 0
    out = capsys.readouterr().out
    assert "note: the initial rows (bootstrap or initial_state) could not be written: ValueError: row 2 is damaged; " \
           "the join's next definition writes them again" in out
