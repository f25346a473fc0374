"""A partition's local store swapped with another partition's store of the same version (a copied
or restored local directory) is rebuilt from the partition's changelog, not reused: the next
version's output and state equal an uninterrupted run's, and the metrics count the rebuild."""

from __future__ import annotations

import os

import pyarrow as pa
import pytest

from streamjoin.runtime.local import LocalRunner
from streamjoin.runtime.options import StateConfig
from streamjoin.runtime.task import local_store_path
from streamjoin.statestore import warm
from tests.operators import RunningCount

SCHEMA = pa.schema([("k", pa.int64()), ("v", pa.string())])


def _rows(keys) -> pa.Table:
    return pa.table({"k": pa.array(keys, pa.int64()), "v": [f"r{k}" for k in keys]}, schema=SCHEMA)


def _counts(table: pa.Table) -> dict[int, int]:
    return dict(zip(table.column("k").to_pylist(), table.column("count").to_pylist()))


def _runner(tmp_path, name, store, query_id):
    config = StateConfig(store=store, local_dir=str(tmp_path / name / "local"))
    return LocalRunner(RunningCount(SCHEMA, ["k"]), str(tmp_path / name / "ck"), partitions=2, config=config,
                       query_id=query_id)


@pytest.mark.parametrize("store", ["rocksdb", "lmdb"])
@pytest.mark.parametrize("query_id", [None, "query-1"], ids=["batch", "query"])
def test_runtime_swapped_local_stores_are_rebuilt_not_reused(tmp_path, store, query_id):
    warm.evict_all()
    swapped, plain = _runner(tmp_path, "swapped", store, query_id), _runner(tmp_path, "plain", store, query_id)
    for keys in (range(10), range(0, 10, 2)):
        for runner in (swapped, plain):
            runner.run(_rows(keys))
    warm.evict_all()   # the stores are closed, as after a worker restart (warm swaps: tests/changelog)
    paths = [local_store_path(swapped.config, swapped.checkpoint, p) for p in (0, 1)]
    os.rename(paths[0], paths[0] + ".swap")
    os.rename(paths[1], paths[0])
    os.rename(paths[0] + ".swap", paths[1])
    try:
        for _ in range(2):
            assert _counts(swapped.run(_rows(range(10)))) == _counts(plain.run(_rows(range(10))))
        opens = {(m["version"], m["partition"]): m["state_open"] for m in swapped.checkpoint.commits.read_metrics()}
        assert opens[(2, 0)] == opens[(2, 1)] == "rebuilt"
        assert opens[(3, 0)] == opens[(3, 1)] == "reused"
    finally:
        warm.evict_all()


@pytest.mark.parametrize("store", ["rocksdb", "lmdb"])
@pytest.mark.parametrize("query_id", [None, "query-1"], ids=["batch", "query"])
def test_runtime_checkpoint_made_again_at_its_location_does_not_take_the_old_local_stores(tmp_path, store, query_id):
    """A checkpoint deleted and made again at the same location (a rerun of a test or a job that
    clears its checkpoint) starts from the empty state: its local stores, keyed by location, hold
    the deleted checkpoint's state, and are rebuilt rather than refused as the only copy."""
    import shutil

    warm.evict_all()
    first = _runner(tmp_path, "job", store, query_id)
    first.run(_rows(range(10)))
    first.run(_rows(range(0, 10, 2)))
    old_id = first.config.checkpoint_id
    warm.evict_all()
    shutil.rmtree(tmp_path / "job" / "ck")
    try:
        again = _runner(tmp_path, "job", store, query_id)
        assert again.config.checkpoint_id not in (None, old_id)
        assert _counts(again.run(_rows(range(4)))) == {k: 1 for k in range(4)}
        opens = {m["partition"]: m["state_open"] for m in again.checkpoint.commits.read_metrics()}
        assert opens == {0: "rebuilt", 1: "rebuilt"}
    finally:
        warm.evict_all()
