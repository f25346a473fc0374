"""The table join's key stage fused into the join stage (``fuse_key_stages=True``,
:mod:`streamjoin.table.fused`): which sides fuse, the plan it makes, and that a checkpoint keeps
the stages it was started with. That the fused join gives the three-stage join's view changes is
a property of ``test_properties`` (its cases draw ``fuse``)."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

from streamjoin.errors import CheckpointMismatchError, JoinDefinitionError
from streamjoin.runtime.plan_runner import PlanRunner
from streamjoin.table.operator import TableTableJoin

ORDERS = pa.schema([("order_id", pa.int64()), ("customer_id", pa.int64()), ("op", pa.string()),
                    ("at", pa.timestamp("us"))])
CUSTOMERS = pa.schema([("customer_id", pa.int64()), ("name", pa.string()), ("op", pa.string()),
                       ("at", pa.timestamp("us"))])


def _join(right_key="customer_id", fuse=True, left=ORDERS, left_key="order_id") -> TableTableJoin:
    return TableTableJoin(left, CUSTOMERS, "customer_id", left_key=left_key, right_key=right_key,
                          left_time="at", right_time="at", fuse_key_stages=fuse)


def test_table_join_fused_plan_leaves_out_only_the_key_stage_of_a_side_keyed_by_its_join_key():
    assert _join(fuse=False).plan.names == ("left_keys", "right_keys", "join")
    fused = _join()
    assert fused.plan.names == ("left_keys", "join")
    assert [s.name for s in fused.plan.stage("join").operator.inputs] == ["left", "right_changes"]
    assert fused.plan.stage("join").inputs == ("left_keys", 1)
    both = _join(left=CUSTOMERS, left_key="customer_id")
    assert both.plan.names == ("",)
    assert [s.name for s in both.plan.output.operator.inputs] == ["left_changes", "right_changes"]
    neither = TableTableJoin(ORDERS, CUSTOMERS, "customer_id", left_key="order_id", right_key=["customer_id", "name"],
                             left_time="at", right_time="at", fuse_key_stages=True)
    assert neither.fused is None and neither.plan.names == ("left_keys", "right_keys", "join")
    with pytest.raises(JoinDefinitionError, match="fuse_key_stages must be True or False, not 'yes'"):
        _join(fuse="yes")


def _rows(schema, *rows):
    at = dt.datetime(2026, 1, 1)
    return pa.Table.from_pylist([dict(zip(schema.names, (*r, "upsert", at))) for r in rows], schema)


@pytest.mark.parametrize("first, then", [
    (dict(fuse=False), dict(fuse=True)),
    (dict(fuse=True), dict(fuse=False)),
    (dict(fuse=False, left=CUSTOMERS, left_key="customer_id"), dict(fuse=True, left=CUSTOMERS, left_key="customer_id")),
    (dict(fuse=True, left=CUSTOMERS, left_key="customer_id"), dict(fuse=False, left=CUSTOMERS, left_key="customer_id")),
], ids=["three-then-fused", "fused-then-three", "three-then-one", "one-then-three"])
def test_table_join_checkpoint_keeps_the_stages_it_was_started_with(tmp_path, first, then):
    join = _join(**first)
    runner = PlanRunner(join.plan, str(tmp_path / "ck"), partitions=2)
    left = _rows(ORDERS, (1, 10)) if first.get("left") is None else _rows(CUSTOMERS, (10, "bo"))
    runner.run(left, _rows(CUSTOMERS, (10, "ada")))
    with pytest.raises(CheckpointMismatchError, match="keeps the stages it was started with, fuse_key_stages"):
        PlanRunner(_join(**then).plan, str(tmp_path / "ck"), partitions=2)


def test_table_join_recorded_fusion_tells_how_a_checkpoint_was_started(tmp_path):
    # table_table_join's default (fuse_key_stages=None) follows it: a checkpoint of three stages
    # keeps them, a new one is fused
    assert TableTableJoin.recorded_fusion(str(tmp_path / "new")) is None
    for name, options, fused in (("three", dict(fuse=False), False), ("fused", {}, True),
                                 ("one", dict(left=CUSTOMERS, left_key="customer_id"), True)):
        runner = PlanRunner(_join(**options).plan, str(tmp_path / name), partitions=1)
        left = _rows(CUSTOMERS, (10, "bo")) if options.get("left") else _rows(ORDERS, (1, 10))
        runner.run(left, _rows(CUSTOMERS, (10, "ada")))
        assert TableTableJoin.recorded_fusion(str(tmp_path / name)) is fused, name
