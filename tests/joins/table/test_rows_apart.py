"""A fused table join checkpoint written before a key step held its side's rows (design step 28
of docs/design/runtime.md; the fixture of tests/fixtures/rows_apart, made by its generate.py from
that streamjoin's own code) runs on in its layout, as an uninterrupted run of this streamjoin
would have: the same view changes, and the same state as ``read_state`` shows it."""

from __future__ import annotations

import os
import shutil
import types

import pyarrow as pa
import pytest

from streamjoin.changes import ChangeFormat
from streamjoin.runtime.options import StateConfig
from streamjoin.runtime.plan_runner import PlanRunner
from streamjoin.table.operator import TableTableJoin
from tests.fixtures.format1 import data
from tests.joins.table.test_initial_state import entries_of, read_state

FIXTURE = os.path.join(os.path.dirname(data.__file__), os.pardir, "rows_apart")


def _join(rows_apart=()) -> TableTableJoin:
    def fused(*args, **kwargs):
        return TableTableJoin(*args, **kwargs, fuse_key_stages=True, rows_apart=rows_apart)
    return data.table_join(types.SimpleNamespace(ChangeFormat=ChangeFormat, TableTableJoin=fused))


def _runner(join: TableTableJoin, checkpoint: str, local: str, partitions: int = data.PARTITIONS) -> PlanRunner:
    config = StateConfig(store="arranged", local_dir=local, snapshot_every=2)
    return PlanRunner(join.plan, checkpoint, partitions=partitions, config=config, query_id="q")


def _by_version(table: pa.Table, first: int) -> list[list[tuple]]:
    rows = [tuple(r.values()) for r in table.to_pylist()]
    return [sorted(map(repr, (r[:-1] for r in rows if r[-1] == v))) for v in range(first, data.VERSIONS + 1)]


def _tagged(outputs: list[pa.Table], first: int) -> pa.Table:
    return pa.concat_tables([o.append_column("_version", pa.array([first + i] * o.num_rows, pa.int64()))
                             for i, o in enumerate(outputs)])


def _state(join: TableTableJoin, checkpoint: str) -> dict[str, list[str]]:
    return {side: sorted(map(repr, table.drop_columns(["_version"]).to_pylist()))
            for side, table in read_state(join.plan, checkpoint).items()}


def test_table_join_checkpoint_with_rows_apart_runs_on_as_an_uninterrupted_run(tmp_path):
    checkpoint = str(tmp_path / "table")
    shutil.copytree(os.path.join(FIXTURE, "table"), checkpoint)
    apart = TableTableJoin.recorded_rows_apart(checkpoint)
    assert apart == {"right"}   # the customers: keyed by their join key, fused
    inputs = data.table_batches()
    continued = _runner(_join(apart), checkpoint, str(tmp_path / "local"))
    continued.version = data.BEFORE
    after = [continued.run(*rows) for rows in inputs[data.BEFORE:]]

    reference = _runner(_join(), str(tmp_path / "reference"), str(tmp_path / "reference-local"))
    expected = [reference.run(*rows) for rows in inputs]
    assert TableTableJoin.recorded_rows_apart(str(tmp_path / "reference")) == frozenset()

    # the old streamjoin's own output of the versions it ran, then this one's on its checkpoint
    old = pa.ipc.open_file(os.path.join(FIXTURE, "table.outputs.arrow")).read_all()
    assert _by_version(old, 0)[:data.BEFORE] == _by_version(_tagged(expected, 0).select(old.column_names), 0)[:data.BEFORE]
    assert _by_version(_tagged(after, data.BEFORE), data.BEFORE) == _by_version(_tagged(expected, 0), data.BEFORE)
    assert sum(o.num_rows for o in after) > 0
    # the same state as read_state shows it, in the two layouts: rows beside the keys, and in them
    assert _state(_join(apart), checkpoint) == _state(_join(), str(tmp_path / "reference"))
    entries = [key for p in range(data.PARTITIONS) for key, _ in entries_of(os.path.join(checkpoint, "join"), p)]
    assert any(key.startswith(b"R") for key in entries)
    held = [key for p in range(data.PARTITIONS) for key, _ in entries_of(str(tmp_path / "reference" / "join"), p)]
    assert not any(key.startswith(b"R") for key in held) and any(key.startswith(b"rK") for key in held)


def test_table_join_checkpoint_with_rows_apart_refuses_the_other_layout(tmp_path):
    checkpoint = str(tmp_path / "table")
    shutil.copytree(os.path.join(FIXTURE, "table"), checkpoint)
    with pytest.raises(Exception, match=r"right_keys.holds_rows: \(none\) -> true"):
        _runner(_join(), checkpoint, str(tmp_path / "local"))
