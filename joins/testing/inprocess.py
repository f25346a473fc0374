"""The in-process engine of :func:`streamjoin.testing.assert_deterministic`: no JVM, no Spark.

The pipeline is a function of Arrow tables that calls its joins through ``joins``
(:class:`streamjoin.testing.local.LocalJoins`). A batch run calls it once with every row and a
final version; a streaming run calls it once per micro-batch (twice for a repeated one, keeping the
second output, as a retried micro-batch commits only its last attempt), restarts the joins with
their local state lost where the plan says, and ends with a final version over empty inputs. Each micro-batch has the plan's processing time
(:meth:`streamjoin.testing.plan.RunPlan.processing_time`).
A pipeline taking ``state_dir`` gets a new directory after each restart, as in Spark (its joins'
local stores, under the old one, are lost).
The micro-batches' outputs are appended, their rows put in the plan's order, then ``finish`` is
applied.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any, Callable, Sequence

import pyarrow as pa

from streamjoin.testing.compare import rows_of
from streamjoin.testing.determinism import Outcome, call_pipeline
from streamjoin.testing.local import LocalJoins
from streamjoin.testing.plan import RunPlan, shuffled

__all__ = ["InProcessEngine"]


def _arrow(output: Any) -> pa.Table:
    return output if isinstance(output, pa.Table) else pa.Table.from_pandas(output, preserve_index=False)


class InProcessEngine:
    """Runs ``pipeline`` over Arrow tables with :class:`LocalJoins` (see module docstring)."""

    def __init__(self, pipeline: Callable[..., Any], finish: Callable[[pa.Table], Any] | None = None) -> None:
        self.pipeline, self.finish = pipeline, finish

    def _call(self, joins: LocalJoins, tables: Sequence[pa.Table], state: int = 0) -> pa.Table:
        options = {"joins": joins, "checkpoint": joins.root + "/user", "store": joins.store,
                   "partitions": joins.partitions, "state_dir": os.path.join(joins.root, f"state-{state}")}
        return _arrow(call_pipeline(self.pipeline, tables, options))

    def _outcome(self, joins: LocalJoins, outputs: list[pa.Table], order: int | None = None) -> Outcome:
        whole = shuffled(pa.concat_tables(outputs), order)
        result = _arrow(self.finish(whole)) if self.finish is not None else whole
        return Outcome(rows_of(result), tuple(joins.notes))

    def batch(self, inputs: Sequence[pa.Table]) -> Outcome:
        root = tempfile.mkdtemp(prefix="streamjoin-testing-")
        try:
            joins = LocalJoins(root)
            joins.begin(0, final=True)
            return self._outcome(joins, [self._call(joins, inputs)])
        finally:
            shutil.rmtree(root, ignore_errors=True)

    def stream(self, inputs: Sequence[pa.Table], plan: RunPlan) -> Outcome:
        root = tempfile.mkdtemp(prefix="streamjoin-testing-")
        try:
            joins = LocalJoins(root, partitions=plan.partitions, store=plan.store)
            outputs, state = [], 0
            for version, tables in enumerate(plan.split(inputs)):
                if version == plan.restart_before:
                    joins.restart()
                    state += 1
                joins.begin(version, processing_time=plan.processing_time(version))
                output = self._call(joins, tables, state)
                if version == plan.repeat:
                    joins.begin(version, processing_time=plan.processing_time(version))
                    output = self._call(joins, tables, state)
                outputs.append(output)
            joins.begin(plan.count, final=True, processing_time=plan.processing_time(plan.count))
            outputs.append(self._call(joins, [t.slice(0, 0) for t in inputs], state))
            return self._outcome(joins, outputs, plan.shuffle)
        finally:
            shutil.rmtree(root, ignore_errors=True)
