"""Running a join's plan (:mod:`streamjoin.runtime.plan`) in Spark: each stage one
:func:`streamjoin.spark.runtime.run_operator`, in the plan's order, over the join's inputs and the
earlier stages' outputs. The joins' Spark functions build the plan and call :func:`run_plan`;
nothing here knows which join it runs.

:func:`run_plan` tells each stage where it stands (:func:`placements`): whether it reads the
query's sources (then a streaming stage unions the no-data flush source into its inputs), and,
for a stage whose output is one part of a later stage's union, the Spark task id of its partition
0 there (its tasks run in that union's map stage, numbered after the earlier parts': each
earlier stage's output has the join's partition count of tasks)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence, cast

from pyspark.sql import DataFrame

from streamjoin.errors import JoinDefinitionError
from streamjoin.runtime.initial_state import check_given
from streamjoin.runtime.options import EndOfRun, StateConfig
from streamjoin.runtime.plan import JoinPlan, Stage, record_stages
from streamjoin.spark.runtime import resolve_partitions, run_operator

__all__ = ["run_plan", "check_streaming", "Placement", "placements"]


@dataclass(frozen=True)
class Placement:
    """Where a stage stands in its join, as :func:`streamjoin.spark.runtime.run_operator` takes it:
    ``reads_sources``, its inputs are the join's (the query's sources); ``first_task``, the Spark
    task id of its partition 0 when its output is a part of a later stage's union (None: the
    join's output)."""

    reads_sources: bool
    first_task: int | None


def run_plan(
    plan: JoinPlan, inputs: Sequence[DataFrame], *, checkpoint: str, partitions: int | None, state: StateConfig,
    key_groups: int | None, initial: Sequence[DataFrame | None] | None = None, end_of_run: EndOfRun | None = None,
    pre_staged: Mapping[int, str] | None = None, initial_state: Mapping[str, DataFrame] | None = None,
    initial_progress: Mapping[str, Any] | None = None,
) -> DataFrame:
    """The join's output over ``inputs`` (one DataFrame per join input). ``checkpoint`` is the
    join's (resolved): each stage keeps its state at ``plan.location(checkpoint, stage)``.
    ``initial[i]``: batch rows added to join input ``i`` in the first version, in the stage that
    reads that input (None: none). The other arguments are every stage's (``run_operator``;
    ``end_of_run`` matters in the stages that read join inputs, which have the no-data flush).
    ``pre_staged[i]``: the set-aside input under which join input ``i``'s pre-stage sets rows
    aside, in the stage reading it (``run_operator``'s ``pre_staged``). ``partitions`` (None: the
    session's ``spark.sql.shuffle.partitions``) is resolved once, and each stage is told it and
    its :class:`Placement`. ``initial_state``: the join's state rows by side name, each given to
    the stage holding that side (:meth:`JoinPlan.state_sides`); ``initial_progress``: by the
    join's input name, to the stages reading them (:meth:`JoinPlan.stage_progress`)."""
    if len(inputs) != plan.inputs:
        raise ValueError(f"the plan takes {plan.inputs} inputs, got {len(inputs)}")
    check_streaming(plan, inputs)
    given = list(initial) if initial is not None else [None] * plan.inputs
    partitions = resolve_partitions(inputs[0].sparkSession, partitions)
    placed = placements(plan, partitions)
    record_stages(plan, checkpoint)
    states = plan.state_sides(initial_state or {})
    check_given(initial_state, initial_progress)
    progresses = plan.stage_progress(initial_progress or {})
    outputs: dict[str, object] = {}
    for stage in plan.stages:
        sides = states.get(stage.name, {})
        progress = progresses.get(stage.name, {})
        frames = cast(list[DataFrame], plan.feeds(stage, inputs, outputs))
        rows = [given[i] if isinstance(i, int) else None for i in stage.inputs]
        staged = [(pre_staged or {})[i] for i in stage.inputs if isinstance(i, int) and i in (pre_staged or {})]
        outputs[stage.name] = run_operator(
            frames, stage.operator, checkpoint=plan.location(checkpoint, stage), partitions=partitions, state=state,
            key_groups=key_groups, initial=rows if any(r is not None for r in rows) else None,
            end_of_run=end_of_run, waits=plan.waits_for_watermark, pre_staged=staged,
            reads_sources=placed[stage.name].reads_sources,
            first_task=placed[stage.name].first_task,
            initial_state={side: (initial_state or {})[name] for name, side in sides.items()} or None,
            initial_progress=progress or None)
    result = outputs[plan.output.name]
    assert isinstance(result, DataFrame)
    return result


def placements(plan: JoinPlan, partitions: int) -> dict[str, Placement]:
    """Each stage's :class:`Placement` (by name) when every stage runs in ``partitions`` partitions.
    A stage reads the query's sources when no input of it is an earlier stage's output. A stage
    whose output a later stage reads is part ``k`` of that stage's union of inputs, numbered after
    the ``k`` parts before it; those are earlier stages' outputs of ``partitions`` tasks each
    (raises ValueError for a plan whose union puts a join input, of unknown partitions, before
    it, or that reads one stage's output twice)."""
    placed: dict[str, Placement] = {}
    readers: dict[str, list[tuple[Stage, int]]] = {}
    for stage in plan.stages:
        for position, source in enumerate(stage.inputs):
            if isinstance(source, str):
                readers.setdefault(source, []).append((stage, position))
    for stage in plan.stages:
        reads_sources = not any(isinstance(source, str) for source in stage.inputs)
        read_by = readers.get(stage.name, [])
        if not read_by:
            placed[stage.name] = Placement(reads_sources, None)
            continue
        if len(read_by) > 1:
            raise ValueError(f"stage {stage.name!r} is read by {len(read_by)} inputs; a plan reads each stage once")
        reader, position = read_by[0]
        if any(isinstance(source, int) for source in reader.inputs[:position]):
            raise ValueError(f"stage {reader.name!r} reads a join input before stage {stage.name!r}'s output; "
                             "a plan puts earlier stages' outputs first")
        placed[stage.name] = Placement(reads_sources, position * partitions)
    return placed


def check_streaming(plan: JoinPlan, inputs: Sequence[DataFrame]) -> None:
    """Raise :class:`JoinDefinitionError` unless the join's ``inputs`` are all streams or all
    batch DataFrames: a streaming join keeps each input's rows for the other input's later
    rows, which a batch input (read again in every micro-batch) would give again and again."""
    streaming = [df.isStreaming for df in inputs]
    if all(streaming) or not any(streaming):
        return
    names = [f"input {i}" for i in range(len(inputs))]
    for stage in plan.stages:   # the inputs' names as the join's first stages call them
        for position, i in enumerate(stage.inputs):
            if isinstance(i, int):
                names[i] = stage.operator.inputs[position].name
    batch = [n for n, s in zip(names, streaming) if not s]
    stream = [n for n, s in zip(names, streaming) if s]
    raise JoinDefinitionError(
        f"the {', '.join(stream)} input is a streaming DataFrame and the {', '.join(batch)} input a batch "
        "one: a join runs over streams, or over batch DataFrames (one version, the relational join). "
        "A stream joined with a static table is Spark's stream-static join: stream.join(table, on, how) "
        "(the table read again each micro-batch). For a table that changes, give stream_table_join its "
        "change stream (a Delta change data feed, Debezium or a plain change table read as a stream), "
        "and its current rows as bootstrap=. To replay batch rows as a stream, write them to files "
        "and read them with spark.readStream")
