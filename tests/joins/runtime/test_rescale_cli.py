"""``streamjoin checkpoint repartition --partitions N``: a stopped query's checkpoint changed
offline, then continued with the new count, gives the output of an uninterrupted run; a
checkpoint that cannot change (written before key groups, a version partly committed, a query
that looks to be running, a join that cannot split its state) is refused, saying why."""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
from collections import Counter

import pyarrow as pa
import pytest

from streamjoin.changes import ChangeFormat
from streamjoin.enrichment.operator import EnrichmentJoin
from streamjoin.errors import CheckpointDamagedError
from streamjoin.interval.operator import IntervalJoin
from streamjoin.jobs.cli import main
from streamjoin.runtime.checkpoint import Checkpoint
from streamjoin.runtime.local import LocalRunner
from streamjoin.runtime.options import StateConfig
from streamjoin.runtime.registry import kinds, operator_class
from streamjoin.runtime.rescale import can_rescale, epochs
from streamjoin.table.operator import TableTableJoin
from tests.joins.interval.cases import rows_of

SCHEMA = pa.schema([("k", pa.int64()), ("ts", pa.timestamp("us")), ("v", pa.string())])
OLD = 1_600_000_000


def _op() -> IntervalJoin:
    return IntervalJoin(SCHEMA, SCHEMA, "k", left_time="ts", right_time="ts", lower=dt.timedelta(seconds=-3),
                        upper=dt.timedelta(seconds=8), delay=dt.timedelta(seconds=2), how="full")


def _batch(i: int, side: str) -> pa.Table:
    return pa.Table.from_pylist([{"k": (i * 7 + j) % 9, "ts": dt.datetime(2024, 1, 1) + dt.timedelta(seconds=6 * i + j),
                                  "v": f"{side}{i}.{j}"} for j in range(7)], schema=SCHEMA)


def _run(root, plan, offline=None):
    """Run versions with the partition counts of ``plan``; before version ``offline[0]``, run the
    command with ``--partitions offline[1]`` (commit records aged, as a query stopped a while ago)."""
    config = StateConfig(store="memory", local_dir=str(root / "local"))
    found: Counter = Counter()
    for version, partitions in enumerate(plan):
        if offline is not None and version == offline[0]:
            _age(root / "ck")
            assert main(["checkpoint", "repartition", str(root / "ck"), "--partitions", str(offline[1])]) == 0
        runner = LocalRunner(_op(), str(root / "ck"), partitions=partitions, config=config)
        runner.version = version
        found += rows_of(runner.run(_batch(version, "L"), _batch(version, "R"), final=version == len(plan) - 1))
    return found


def _age(checkpoint) -> None:
    for directory, _, files in os.walk(checkpoint / "commits"):
        for name in files + ["."]:
            os.utime(os.path.join(directory, name), (OLD, OLD))


def test_checkpoint_repartition_then_run_equals_uninterrupted_run(tmp_path, capsys):
    expected = _run(tmp_path / "plain", [3] * 6)
    got = _run(tmp_path / "offline", [3, 3, 3, 5, 5, 5], offline=(3, 5))
    assert got == expected
    out = capsys.readouterr().out
    assert "3 -> 5 partitions (partitioning epoch 1), from state as of version 2" in out
    assert "new p=4 <- old p=2" in out
    assert [e.partitions for e in epochs(Checkpoint(str(tmp_path / "offline" / "ck")))] == [3, 5]


def test_checkpoint_repartition_help_and_json(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["checkpoint", "repartition", "--help"])
    assert exit_.value.code == 0
    assert "--partitions N" in capsys.readouterr().out
    _run(tmp_path, [2, 2])
    _age(tmp_path / "ck")
    assert main(["checkpoint", "repartition", str(tmp_path / "ck"), "--partitions", "1", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report == [{"checkpoint": Checkpoint(str(tmp_path / "ck")).uri, "from": 2, "to": 1, "epoch": 1,
                       "version": 1, "sources": [[0, 1]]}]


def test_checkpoint_repartition_refuses_a_running_or_half_committed_query(tmp_path, capsys):
    _run(tmp_path, [2, 2])
    assert main(["checkpoint", "repartition", str(tmp_path / "ck"), "--partitions", "3"]) == 1
    assert "looks to be running on it" in capsys.readouterr().err
    (record,) = (tmp_path / "ck" / "commits" / "v=1").glob("p=1.*.json")
    os.remove(record)
    assert main(["checkpoint", "repartition", str(tmp_path / "ck"), "--partitions", "3", "--force"]) == 1
    assert "version 1 is committed by 1 of 2 partitions" in capsys.readouterr().err
    assert [e.partitions for e in epochs(Checkpoint(str(tmp_path / "ck")))] == [2]


def test_checkpoint_repartition_refuses_checkpoint_written_before_key_groups(tmp_path, capsys):
    _run(tmp_path, [2])
    binding = tmp_path / "ck" / "streamjoin.json"
    record = json.loads(binding.read_text())
    del record["key_groups"]
    binding.write_text(json.dumps(record))
    assert main(["checkpoint", "repartition", str(tmp_path / "ck"), "--partitions", "3", "--force"]) == 1
    assert "before key groups, and cannot be rescaled" in capsys.readouterr().err
    shutil.rmtree(tmp_path / "ck")


def test_rescalable_kinds_are_the_registered_operators_with_a_regroup_hook():
    events = pa.schema([("k", pa.int64()), ("ts", pa.timestamp("us"))])
    table = pa.schema([("k", pa.int64()), ("v", pa.string()), ("op", pa.string()), ("at", pa.timestamp("us"))])
    posts = pa.schema([("id", pa.int64()), ("k", pa.int64()), ("op", pa.string()), ("at", pa.timestamp("us"))])
    join = TableTableJoin(posts, table, "k", left_key="id", right_key="k", left_time="at", right_time="at",
                          fuse_key_stages=True)
    operators = [_op(), join.left_stage, join.join_stage, join.fused,
                 EnrichmentJoin(events, table, "k", stream_time="ts", changes=ChangeFormat.plain("k", time="at"))]
    rescalable = {op.kind for op in operators if can_rescale(op)}
    assert rescalable == {k for k in kinds() if can_rescale(operator_class(k))} == {
        "interval_join", "table_join_keys", "table_join", "table_join_fused", "enrichment_join"}
    assert not can_rescale(operator_class("a kind nobody registered"))


@pytest.mark.parametrize("value, message", [
    ("0", "--partitions must be an int of at least 1, not 0"),
    ("-1", "--partitions must be an int of at least 1, not -1"),
    ("two", "--partitions must be an int of at least 1, not 'two'"),
])
def test_checkpoint_repartition_refuses_a_partition_count_below_one(tmp_path, capsys, value, message):
    _run(tmp_path, [2])
    _age(tmp_path / "ck")
    with pytest.raises(SystemExit) as exit_:
        main(["checkpoint", "repartition", str(tmp_path / "ck"), "--partitions", value])
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err
    assert [e.partitions for e in epochs(Checkpoint(str(tmp_path / "ck")))] == [2]


def test_checkpoint_repartition_refuses_more_partitions_than_key_groups(tmp_path, capsys):
    _run(tmp_path, [2])
    _age(tmp_path / "ck")
    assert main(["checkpoint", "repartition", str(tmp_path / "ck"), "--partitions", "5000"]) == 1
    assert ("partitions must be an int from 1 to 4096 (the join's key groups, max_partitions, fixed when its "
            "checkpoint is created), not 5000") in capsys.readouterr().err
    assert [e.partitions for e in epochs(Checkpoint(str(tmp_path / "ck")))] == [2]


@pytest.mark.parametrize("recorded", [0, -1, 5000])
def test_checkpoint_verify_flags_an_impossible_partitioning(tmp_path, capsys, recorded):
    _run(tmp_path, [2])
    (tmp_path / "ck" / "partitioning").mkdir()
    (tmp_path / "ck" / "partitioning" / "e=1.json").write_text(json.dumps({"partitions": recorded}))
    assert main(["checkpoint", "verify", str(tmp_path / "ck")]) == 1
    out = capsys.readouterr().out
    assert "partitioning/e=1.json records an impossible partitioning (epoch 1)" in out
    assert f"from 1 to 4096 (the join's key groups, max_partitions, fixed when its checkpoint is created), not {recorded}" in out


def test_checkpoint_repartition_again_before_a_run_says_the_first_one_waits_for_a_run(tmp_path, capsys):
    _run(tmp_path, [2, 2])
    _age(tmp_path / "ck")
    assert main(["checkpoint", "repartition", str(tmp_path / "ck"), "--partitions", "3"]) == 0
    capsys.readouterr()
    assert main(["checkpoint", "repartition", str(tmp_path / "ck"), "--partitions", "4", "--force"]) == 1
    err = capsys.readouterr().err
    assert "running" not in err
    assert ("was already repartitioned to 3 partitions (partitioning epoch 1) and no run has used that yet: its "
            "state is still in the changelogs of its 2 partitions as of version 1. Run the query once with "
            "partitions=3") in err
    assert main(["checkpoint", "repartition", str(tmp_path / "ck"), "--partitions", "3"]) == 0
    assert "already 3 partitions; nothing to do" in capsys.readouterr().out
    assert [e.partitions for e in epochs(Checkpoint(str(tmp_path / "ck")))] == [2, 3]


def test_checkpoint_repartition_again_after_a_run_of_the_new_count(tmp_path):
    expected = _run(tmp_path / "plain", [2] * 5)
    config = StateConfig(store="memory", local_dir=str(tmp_path / "local"))
    got: Counter = Counter()
    for version, partitions in enumerate([2, 2, 3, 3, 5]):
        if version in (2, 4):
            _age(tmp_path / "ck")
            assert main(["checkpoint", "repartition", str(tmp_path / "ck"), "--partitions", str(partitions)]) == 0
        runner = LocalRunner(_op(), str(tmp_path / "ck"), partitions=partitions, config=config)
        runner.version = version
        got += rows_of(runner.run(_batch(version, "L"), _batch(version, "R"), final=version == 4))
    assert got == expected
    assert [e.partitions for e in epochs(Checkpoint(str(tmp_path / "ck")))] == [2, 3, 5]


def test_lost_changelog_of_a_rescaled_epoch_is_named_by_run_and_verify(tmp_path, capsys):
    from streamjoin.errors import CheckpointDamagedError

    _run(tmp_path, [3, 3, 3, 5, 5])   # epoch 1 (5 partitions) committed versions 3 and 4
    lost = tmp_path / "ck" / "state" / "e=1" / "p=4"
    shutil.rmtree(lost)
    assert main(["checkpoint", "verify", str(tmp_path / "ck")]) == 1
    out = capsys.readouterr().out
    assert f"partition 4: changelog {Checkpoint(str(tmp_path / 'ck')).uri}/state/e=1/p=4 of partitioning epoch 1 " \
           "(5 partitions) is missing or empty" in out
    runner = LocalRunner(_op(), str(tmp_path / "ck"), partitions=5,
                         config=StateConfig(store="memory", local_dir=str(tmp_path / "local2")))
    runner.version = 5
    with pytest.raises(CheckpointDamagedError) as error:
        runner.run(_batch(5, "L"), _batch(5, "R"))
    assert str(error.value).startswith(f"changelog {Checkpoint(str(tmp_path / 'ck')).uri}/state/e=1/p=4 of "
                                       "partition 4 in partitioning epoch 1 (5 partitions) is missing or empty")
    assert error.value.path.endswith("state/e=1/p=4")


def test_checkpoint_verify_accepts_a_new_epoch_before_its_first_run(tmp_path, capsys):
    _run(tmp_path, [2, 2])
    _age(tmp_path / "ck")
    assert main(["checkpoint", "repartition", str(tmp_path / "ck"), "--partitions", "3"]) == 0
    capsys.readouterr()
    assert main(["checkpoint", "verify", str(tmp_path / "ck")]) == 0
    assert capsys.readouterr().out.strip().endswith(": ok")


@pytest.mark.parametrize("recorded", [0, -1, 5000])
def test_run_on_an_impossible_recorded_partitioning_names_the_record(tmp_path, recorded):
    _run(tmp_path, [2])
    (tmp_path / "ck" / "partitioning").mkdir()
    (tmp_path / "ck" / "partitioning" / "e=1.json").write_text(json.dumps({"partitions": recorded}))
    config = StateConfig(store="memory", local_dir=str(tmp_path / "local"))
    with pytest.raises(CheckpointDamagedError, match=r"partitioning/e=1\.json records -?\d+ partitions") as error:
        LocalRunner(_op(), str(tmp_path / "ck"), partitions=2, config=config)
    assert error.value.path.endswith("partitioning/e=1.json")
