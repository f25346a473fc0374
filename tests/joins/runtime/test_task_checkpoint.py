"""What the runtime does with its checkpoint: a partition starts empty only when the checkpoint
shows the join is new; a batch task never writes a streaming query's checkpoint; a store kind is
checked when the join is defined."""

from __future__ import annotations

import shutil

import pyarrow as pa
import pytest

from streamjoin.errors import CheckpointDamagedError, CheckpointMismatchError, JoinDefinitionError
from streamjoin.runtime.local import LocalRunner
from streamjoin.runtime.options import StateConfig
from streamjoin.runtime.task import TaskInfo, run_task
from tests.operators import RunningCount

SCHEMA = pa.schema([("k", pa.int64()), ("v", pa.string())])


def _rows(keys) -> pa.Table:
    return pa.table({"k": pa.array(keys, pa.int64()), "v": [f"r{k}" for k in keys]}, schema=SCHEMA)


def _counts(table: pa.Table) -> dict[int, int]:
    return dict(zip(table.column("k").to_pylist(), table.column("count").to_pylist()))


@pytest.mark.parametrize("lost", ["one partition", "every partition"])
@pytest.mark.parametrize("store", ["memory", "rocksdb"])
def test_runtime_missing_changelog_is_refused_not_restarted(tmp_path, lost, store):
    config = StateConfig(store=store, local_dir=str(tmp_path / "local"))
    runner = LocalRunner(RunningCount(SCHEMA, ["k"]), str(tmp_path / "ck"), partitions=2, config=config)
    runner.run(_rows(range(10)))
    runner.run(_rows(range(10)))
    for p in [0] if lost == "one partition" else [0, 1]:
        shutil.rmtree(tmp_path / "ck" / "state" / f"p={p}")
    with pytest.raises(CheckpointDamagedError, match=r"state/p=0 is missing.*versions before 2") as raised:
        runner.run(_rows(range(10)))
    assert raised.value.path.endswith("state/p=0")
    if lost == "one partition":
        assert "changelog file state/p=1" in str(raised.value)


@pytest.mark.parametrize("store", ["memory", "arranged"])
def test_runtime_lost_newest_delta_is_named_with_what_to_do(tmp_path, store):
    # the partition's commit record of version 1 shows it committed, so its changelog had the
    # delta of 1: the task names it, where the changelog alone said to restore version 0
    config = StateConfig(store=store, local_dir=str(tmp_path / "local"))
    runner = LocalRunner(RunningCount(SCHEMA, ["k"]), str(tmp_path / "ck"), partitions=2, config=config)
    runner.run(_rows(range(10)))
    runner.run(_rows(range(10)))
    log = tmp_path / "ck" / "state" / "p=0"
    (delta,) = [f for f in log.iterdir() if f.name.startswith("delta-") and "0000001-" in f.name]
    delta.unlink()
    with pytest.raises(CheckpointDamagedError, match=r"state/p=0 has no delta of version 1 .*commit record of "
                                                     r"version 1 .* shows the version committed.*Restore the "
                                                     r"changelog directory from a copy") as raised:
        runner.run(_rows(range(10)))
    assert raised.value.path.endswith("state/p=0")


def test_runtime_new_join_starts_empty_at_any_first_version(tmp_path):
    runner = LocalRunner(RunningCount(SCHEMA, ["k"]), str(tmp_path / "ck"), partitions=2)
    assert _counts(runner.run(_rows([1, 2, 2]), version=5)) == {1: 1, 2: 2}
    assert _counts(runner.run(_rows([1, 2, 2]), version=5)) == {1: 1, 2: 2}   # executed again
    assert _counts(runner.run(_rows([2]))) == {2: 3}


def test_runtime_batch_task_refuses_a_query_bound_checkpoint(tmp_path):
    runner = LocalRunner(RunningCount(SCHEMA, ["k"]), str(tmp_path / "ck"))
    config = StateConfig(store="memory")
    run_task(runner.operator, runner.checkpoint, config, TaskInfo(0, 0, 1, query_id="query-1"), (_rows([1]),))
    with pytest.raises(CheckpointMismatchError, match="belongs to streaming query query-1"):
        run_task(runner.operator, runner.checkpoint, config, TaskInfo(0, 0, 1, final=True), (_rows([1]),))
    assert runner.checkpoint.commits.read_metrics()[0]["output_rows"] == 1 and len(runner.checkpoint.commits.read_metrics()) == 1


@pytest.mark.parametrize("store, named", [("rockdb", "rocksdb"), ("no_such_package.stores:Store", "no_such_package")])
def test_state_config_unknown_store_is_refused_when_defined(store, named):
    with pytest.raises(JoinDefinitionError, match=f"store={store!r}.*{named}"):
        StateConfig(store=store)


def test_state_config_known_stores_are_accepted():
    for store in ("rocksdb", "lmdb", "memory", "streamjoin.statestore.memory:MemoryStore"):
        assert StateConfig(store=store).store == store


@pytest.mark.parametrize("arguments, message", [
    ({"snapshot_every": 0}, "snapshot_every must be an int of at least 1, not 0"),
    ({"snapshot_every": True}, "snapshot_every must be an int of at least 1, not True"),
    ({"retain_versions": 1}, "retain_versions must be an int of at least 2, not 1"),
    ({"retain_versions": 3.0}, "retain_versions must be an int of at least 2, not 3.0"),
])
def test_state_config_refuses_a_bad_count_when_defined(arguments, message):
    with pytest.raises(JoinDefinitionError) as error:
        StateConfig(store="memory", **arguments)
    assert message in str(error.value)


def _interval(tmp_path, name: str = "ck"):
    import datetime as dt

    from streamjoin.interval.operator import IntervalJoin
    from streamjoin.runtime.plan_runner import PlanRunner

    schema = pa.schema([("k", pa.int64()), ("t", pa.timestamp("us"))])
    join = IntervalJoin(schema, schema, "k", left_time="t", right_time="t", lower="-1 minute", upper="1 minute",
                        delay="0 seconds", how="inner")
    runner = PlanRunner(join.plan, str(tmp_path / name), partitions=2,
                        config=StateConfig(store="memory", local_dir=str(tmp_path / f"local-{name}")))

    def rows(*pairs):
        return pa.Table.from_pylist([{"k": k, "t": dt.datetime(2026, 1, 1) + dt.timedelta(seconds=s)}
                                     for k, s in pairs], schema=schema)
    return runner, rows


def _interval_versions(runner, rows):
    """Versions 0 and 1: both inputs advance to 0 s, then 600 s (keys on both partitions)."""
    runner.run(rows((1, 0), (2, 0)), rows((3, 0), (4, 0)))
    runner.run(rows((1, 600), (2, 600)), rows((3, 600), (4, 600)))


def test_runtime_refuses_a_committed_version_whose_commit_records_are_all_gone(tmp_path):
    """A partial copy of a checkpoint: version 1 is in every changelog, its records are not. The
    watermark after it is unknown; running version 2 on version 0's would join late rows."""
    runner, rows = _interval(tmp_path)
    _interval_versions(runner, rows)
    shutil.rmtree(tmp_path / "ck" / "commits" / "v=1")
    with pytest.raises(CheckpointDamagedError, match=r"version 1 was committed .*state/p=0/delta-0*1-.*commits/v=1"
                       r".*Restore .*commits/v=1.* or start the join from a new checkpoint") as raised:
        runner.run(rows((1, 30)), rows((1, 30)))     # late: below the watermark of 600 s
    assert raised.value.path.endswith("commits/v=1")
    shutil.rmtree(tmp_path / "ck" / "commits")        # none of them at all: refused as well
    with pytest.raises(CheckpointDamagedError, match=r"version 1 was committed"):
        runner.run(rows((1, 30)), rows((1, 30)))


def test_runtime_runs_on_from_the_half_committed_state_a_crash_leaves(tmp_path):
    """Every partition wrote its delta of version 1, none its record (a crash in between): the
    query executes version 1 again, and everything after it is as without the crash."""
    crashed, rows = _interval(tmp_path, "crashed")
    clean, _ = _interval(tmp_path, "clean")
    for runner in (crashed, clean):
        _interval_versions(runner, rows)
    shutil.rmtree(tmp_path / "crashed" / "commits" / "v=1")
    crashed.run(rows((1, 600), (2, 600)), rows((3, 600), (4, 600)), version=1)
    late = (rows((1, 30)), rows((1, 30)))
    assert crashed.run(*late).num_rows == clean.run(*late).num_rows == 0
    aside = [sum(m[f"late_rows_{side}"] for m in runner.runners[""].metrics[-2:] for side in ("left", "right"))
             for runner in (crashed, clean)]
    assert aside == [2, 2]
