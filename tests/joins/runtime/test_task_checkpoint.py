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
