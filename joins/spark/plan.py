"""Running a join's plan (:mod:`streamjoin.runtime.plan`) in Spark: each stage one
:func:`streamjoin.spark.runtime.run_operator`, in the plan's order, over the join's inputs and the
earlier stages' outputs. The joins' Spark functions build the plan and call :func:`run_plan`;
nothing here knows which join it runs."""

from __future__ import annotations

from typing import Sequence, cast

from pyspark.sql import DataFrame

from streamjoin.runtime.options import EndOfRun, StateConfig
from streamjoin.runtime.plan import JoinPlan, record_stages
from streamjoin.spark.runtime import run_operator

__all__ = ["run_plan"]


def run_plan(
    plan: JoinPlan, inputs: Sequence[DataFrame], *, checkpoint: str, partitions: int | None, state: StateConfig,
    key_groups: int | None, initial: Sequence[DataFrame | None] | None = None, end_of_run: EndOfRun | None = None,
) -> DataFrame:
    """The join's output over ``inputs`` (one DataFrame per join input). ``checkpoint`` is the
    join's (resolved): each stage keeps its state at ``plan.location(checkpoint, stage)``.
    ``initial[i]``: batch rows added to join input ``i`` in the first version, in the stage that
    reads that input (None: none). The other arguments are every stage's (``run_operator``;
    ``end_of_run`` matters in the stages that read join inputs, which have the no-data flush)."""
    if len(inputs) != plan.inputs:
        raise ValueError(f"the plan takes {plan.inputs} inputs, got {len(inputs)}")
    given = list(initial) if initial is not None else [None] * plan.inputs
    record_stages(plan, checkpoint)
    outputs: dict[str, object] = {}
    for stage in plan.stages:
        frames = cast(list[DataFrame], plan.feeds(stage, inputs, outputs))
        rows = [given[i] if isinstance(i, int) else None for i in stage.inputs]
        outputs[stage.name] = run_operator(
            frames, stage.operator, checkpoint=plan.location(checkpoint, stage), partitions=partitions, state=state,
            key_groups=key_groups, initial=rows if any(r is not None for r in rows) else None,
            end_of_run=end_of_run)
    result = outputs[plan.output.name]
    assert isinstance(result, DataFrame)
    return result
