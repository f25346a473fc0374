"""A view over three tables whose second join was begun when its key step over the first join's
change stream kept state (design step 29 of docs/design/runtime.md; the fixture of
tests/fixtures/image_keys, made by its generate.py from that streamjoin's own code) runs on in its
layout, as an uninterrupted run of this streamjoin would have: the same view changes, and the same
rows as ``read_state`` shows them."""

from __future__ import annotations

import os
import shutil
import types

import pyarrow as pa
import pytest

from streamjoin.runtime.options import StateConfig
from streamjoin.runtime.plan_runner import PlanRunner
from streamjoin.table.operator import TableTableJoin
from tests.fixtures.image_keys import data
from tests.joins.table.test_initial_state import entries_of, read_state

FIXTURE = os.path.dirname(data.__file__)


def _joins(image_keys=()) -> tuple[TableTableJoin, TableTableJoin]:
    made: list[TableTableJoin] = []

    def fused(*args, **kwargs):
        # (the second join's left side is the first view's change stream)
        made.append(TableTableJoin(*args, **kwargs, fuse_key_stages=True, image_keys=image_keys if made else ()))
        return made[-1]
    return data.joins(types.SimpleNamespace(TableTableJoin=fused))


def _runners(joins, root: str) -> list[PlanRunner]:
    return [PlanRunner(join.plan, os.path.join(root, name), partitions=data.PARTITIONS, query_id="q",
                       config=StateConfig(store="arranged", local_dir=os.path.join(root, "local", name),
                                          snapshot_every=2))
            for name, join in (("first", joins[0]), ("second", joins[1]))]


def _run(runners: list[PlanRunner], batches) -> list[pa.Table]:
    return [runners[1].run(runners[0].run(orders, customers), products) for orders, customers, products in batches]


def _by_version(outputs: list[pa.Table]) -> list[list[str]]:
    return [sorted(map(repr, o.drop_columns(["_commit_version"]).to_pylist())) for o in outputs]


def _rows(join: TableTableJoin, checkpoint: str) -> dict[str, list[str]]:
    state = read_state(join.plan, checkpoint)
    return {side: sorted(map(repr, state[side].drop_columns(["_version"]).to_pylist())) for side in ("left", "right")}


def test_table_join_chain_with_image_keys_runs_on_as_an_uninterrupted_run(tmp_path):
    shutil.copytree(FIXTURE, tmp_path / "old", ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    old = str(tmp_path / "old")
    kept = TableTableJoin.recorded_image_keys(os.path.join(old, "second"))
    assert kept == {"left"}   # the first view's change stream
    assert TableTableJoin.recorded_image_keys(os.path.join(old, "first")) == frozenset()
    continued = _runners(_joins(kept), old)
    for runner in continued:
        runner.version = data.BEFORE
    batches = data.batches()
    after = _run(continued, batches[data.BEFORE:])

    new = str(tmp_path / "new")
    expected = _run(_runners(_joins(), new), batches)
    assert TableTableJoin.recorded_image_keys(os.path.join(new, "second")) == frozenset()

    # the old streamjoin's own output of the versions it ran, then this one's on its checkpoint
    written = pa.ipc.open_file(os.path.join(FIXTURE, "second.outputs.arrow")).read_all()
    by_version = [written.filter(pa.compute.equal(written.column("_version"), v)).drop_columns(["_version"])
                  for v in range(data.BEFORE)]
    assert _by_version(by_version) == _by_version(expected[:data.BEFORE])
    assert _by_version(after) == _by_version(expected[data.BEFORE:])
    assert sum(o.num_rows for o in after) > 0
    # the same rows in the two layouts; the old one keeps the view keys' entries, the new one none
    second_old, second_new = os.path.join(old, "second"), os.path.join(new, "second")
    assert _rows(_joins(kept)[1], second_old) == _rows(_joins()[1], second_new)
    keys = [[key for p in range(data.PARTITIONS) for key, _ in entries_of(path, p) if key[:2] == b"lK"]
            for path in (second_old, second_new)]
    assert keys[0] and not keys[1]


def test_table_join_chain_with_image_keys_refuses_the_other_layout(tmp_path):
    shutil.copytree(os.path.join(FIXTURE, "second"), tmp_path / "second")
    with pytest.raises(Exception, match=r"left_keys.stateless: \(none\) -> true"):
        _runners(_joins(), str(tmp_path))
