"""Run a join's plan (:mod:`streamjoin.runtime.plan`) in this process, as the Spark layer does.

``PlanRunner`` drives one :class:`streamjoin.runtime.local.LocalRunner` per stage, each on the
stage's own location under the join's checkpoint: version ``v`` runs the stages in the plan's
order, each on that version's rows of its inputs (the join's inputs, or an earlier stage's output
of ``v``). Rows are routed to each stage's partitions by its inputs' keys, so a table-table join's
row that moves to another join key is retracted on one partition and inserted on another. It runs
any join, one stage or several: the tests, the determinism kit and the benches use it.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Mapping

import pyarrow as pa
import pyarrow.parquet as pq

from streamjoin.runtime.local import LocalRunner
from streamjoin.runtime.options import StateConfig
from streamjoin.runtime.plan import JoinPlan, record_stages
from streamjoin.statestore.base import Store

__all__ = ["PlanRunner"]


class PlanRunner:
    """Drives a :class:`JoinPlan` through versions 0, 1, 2, ... over ``partitions`` partitions."""

    def __init__(self, plan: JoinPlan, checkpoint_dir: str, *, partitions: int = 1,
                 config: StateConfig | None = None, query_id: str | None = None,
                 key_groups: int | None = None, wrap_store: Callable[[Store], Store] | None = None) -> None:
        """``query_id``: run the stages as a streaming query's tasks; ``key_groups``: each new stage
        checkpoint's key groups (None: the default); ``wrap_store``: given to every stage's tasks
        (benchmark instrumentation) (:class:`LocalRunner`)."""
        self.plan = plan
        self.checkpoint_dir = checkpoint_dir
        record_stages(plan, checkpoint_dir)
        self.runners = {stage.name: LocalRunner(stage.operator, plan.location(checkpoint_dir, stage),
                                                partitions=partitions, config=config, query_id=query_id,
                                                key_groups=key_groups, wrap_store=wrap_store)
                        for stage in plan.stages}
        self.version = 0

    @property
    def partitions(self) -> int:
        return self.runners[self.plan.output.name].partitions

    def run(self, *rows: pa.Table, version: int | None = None, final: bool = False,
            processing_time: int | None = None) -> pa.Table:
        """Execute one version (the next one unless ``version`` is given) on the join's inputs'
        ``rows``; return the join's output of it. ``processing_time``: the version's, in µs
        (:meth:`LocalRunner.run`), the same for every stage."""
        if len(rows) != self.plan.inputs:
            raise ValueError(f"the join takes {self.plan.inputs} inputs, got {len(rows)}")
        version = self.version if version is None else version
        outputs: dict[str, object] = {}
        for stage in self.plan.stages:
            tables = self.plan.feeds(stage, rows, outputs)
            outputs[stage.name] = self.runners[stage.name].run(*tables, version=version, final=final,
                                                               processing_time=processing_time)
        self.version = version + 1
        result = outputs[self.plan.output.name]
        assert isinstance(result, pa.Table)
        return result

    def set_initial(self, index: int, rows: pa.Table) -> None:
        """Give the join's input ``index`` these rows in the first version, in the stage that reads
        that input (as the Spark layer's ``initial``)."""
        for stage, position in self._readers(index):
            self.runners[stage].set_initial(self.plan.stage(stage).operator.inputs[position].name, rows)

    def set_initial_state(self, rows: Mapping[str, pa.Table], progress: Mapping[str, int] | None = None) -> None:
        """Start the join from state rows, by the join's side names (:meth:`JoinPlan.state_sides`;
        :meth:`LocalRunner.set_initial_state` in each stage holding some), and ``progress``, by
        the join's input names (:meth:`JoinPlan.stage_progress`), in the stages reading them."""
        sides = self.plan.state_sides(rows)
        progress_of = self.plan.stage_progress(progress or {})
        prepared = {stage.name: self.runners[stage.name].prepare_initial_state(
                        {side: rows[name] for name, side in sides.get(stage.name, {}).items()},
                        progress_of.get(stage.name) or None)
                    for stage in self.plan.stages if sides.get(stage.name) or progress_of.get(stage.name)}
        for stage, ready in prepared.items():   # (every stage checked and routed before any is written)
            self.runners[stage].write_initial_state(ready)

    def wants_initial_state(self) -> bool:
        """Whether the join can still start from state rows (no stage has run a version or
        taken initial rows)."""
        return all(r.checkpoint.initial.done() is None and not r.checkpoint.commits.has_state()
                   for r in self.runners.values())

    def wants_initial(self, index: int) -> bool:
        """Whether the stages reading the join's input ``index`` can still take initial rows (none
        written yet, and no version run)."""
        checkpoints = [self.runners[stage].checkpoint for stage, _ in self._readers(index)]
        return all(cp.initial.done() is None and not cp.commits.has_state() for cp in checkpoints)

    def _readers(self, index: int) -> list[tuple[str, int]]:
        """(stage, its input position) of every stage reading the join's input ``index``."""
        return [(stage.name, position) for stage in self.plan.stages
                for position, source in enumerate(stage.inputs) if source == index]

    def lose_local_state(self, partition: int | None = None) -> None:
        """Delete every stage's local stores (one partition or all), as if their executor were lost."""
        for runner in self.runners.values():
            runner.lose_local_state(partition)

    def with_store(self, store: str) -> "PlanRunner":
        """The same runner, continuing on another backend's local stores (rebuilt from changelogs)."""
        clone = PlanRunner.__new__(PlanRunner)
        clone.__dict__.update(self.__dict__)
        clone.runners = {name: runner.with_store(store) for name, runner in self.runners.items()}
        return clone

    def metric(self, name: str, stage: str | None = None) -> int:
        """A metric summed over every partition and version run so far (of one stage, or all)."""
        stages = self.plan.names if stage is None else (stage,)
        return sum(int(m.get(name, 0)) for s in stages for m in self.runners[s].metrics)

    def metrics(self, stage: str = "") -> list[dict[str, Any]]:
        """Every step's metrics of ``stage`` (a name of the plan; "" for a one-stage join), in run order."""
        return list(self.runners[stage].metrics)

    def set_aside(self, input_name: str, stage: str = "") -> pa.Table | None:
        """The rows of ``stage``'s input ``input_name`` set aside so far, with their ``_reason``
        (None: none)."""
        root = os.path.join(self.plan.location(self.checkpoint_dir, stage), "set_aside", input_name)
        tables = [pq.read_table(os.path.join(d, f)) for d, _, files in sorted(os.walk(root))
                  if os.path.basename(d).startswith("v=")   # (not the schema the bind records)
                  for f in sorted(files) if f.endswith(".parquet")]
        return pa.concat_tables(tables) if tables else None
