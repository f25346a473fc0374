"""Run plans: a counterexample's plan describes only disturbances that happen in its micro-batches."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given

from streamjoin.testing.plan import RunPlan, run_plans, without_rows

PLANS = run_plans([3, 0], max_batches=4, partitions=[1, 2], stores=["memory"])


@given(plan=PLANS)
def test_run_plans_draw_a_restart_and_a_repeat_only_among_the_micro_batches_the_rows_are_cut_into(plan):
    # rows all in micro-batch 0 of a drawn 4: a restart "before micro-batch 3" would never happen
    assert plan.restart_before is None or 1 <= plan.restart_before < plan.count
    assert plan.repeat is None or 0 <= plan.repeat < plan.count
    described = plan.describe([pa.table({"a": [1, 2, 3]}), pa.table({"b": pa.array([], pa.int64())})], ["x", "y"])
    for number in range(plan.count, 4):
        assert f"before micro-batch {number}" not in described and f"micro-batch {number} executed" not in described


@pytest.mark.parametrize("disturbance", [dict(restart_before=3), dict(restart_before=0), dict(repeat=1)])
def test_run_plan_refuses_a_disturbance_outside_its_micro_batches(disturbance):
    with pytest.raises(ValueError, match="micro-batch"):
        RunPlan(((0, 0, 0),), **disturbance)


def test_without_rows_drops_a_restart_left_before_the_first_micro_batch():
    plan = RunPlan(((0, 1),), restart_before=1, repeat=1)
    tables, smaller = without_rows([pa.table({"a": [1, 2]})], plan, 0, {0})
    assert smaller.count == 1 and smaller.restart_before is None and smaller.repeat == 0
    assert "restarted" not in smaller.describe(tables, ["x"])
