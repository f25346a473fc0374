"""A join as the engines run it: its stages, declared once.

A join is one operator (:mod:`streamjoin.runtime.operator`) or a chain of them. Its
:class:`JoinPlan` names each *stage*: the operator, where its state lives (a sub-checkpoint under
the join's checkpoint, or the checkpoint itself), and what feeds each of its inputs (one of the
join's inputs, or an earlier stage's output of the same version). The Spark layer
(``streamjoin.spark.plan.run_plan``), the in-process runner
(:class:`streamjoin.runtime.plan_runner.PlanRunner`), the testing kit and the benches all execute
this one declaration; none of them knows which join it runs.

The interval and enrichment joins are one stage (:meth:`JoinPlan.single`); the table-table join
is up to three (``left_keys``, ``right_keys``, ``join``; a side keyed by its join key has no key stage:
:attr:`streamjoin.table.operator.TableTableJoin.plan`).
A plan of several stages records their names in the join's checkpoint folder
(:data:`STAGES_FILE`, :func:`record_stages`), so that what reads a checkpoint (``streamjoin
checkpoint``, ``read_state``, ``set_aside_rows``) finds its stages without knowing the join.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

from streamjoin.errors import CheckpointMismatchError, JoinDefinitionError
from streamjoin.runtime.checkpoint.binding import ROOT as ROOT_FILE
from streamjoin.runtime.checkpoint.files import CheckpointFiles
from streamjoin.runtime.operator import Operator

__all__ = ["Stage", "JoinPlan", "STAGES_FILE", "UNRECORDED_STAGES", "record_stages", "recorded_stages"]

#: The file in a join's checkpoint folder naming the stages of a plan of several, in order.
STAGES_FILE = "stages.json"
#: The stages of a table-table join checkpoint written before plans recorded their stages (and of
#: streamjoin 0.2's, its only join of several): read only where the folder records none.
UNRECORDED_STAGES = ("left_keys", "right_keys", "join")
_KEEPS_STAGES = ("(a table_table_join keeps the stages it was started with, fuse_key_stages and "
                 "left_immutable_join_key / right_immutable_join_key included)")


@dataclass(frozen=True)
class Stage:
    """One operator of a join.

    ``name``: its sub-checkpoint under the join's checkpoint ("": the checkpoint itself, for a
    one-stage join). ``inputs[i]`` feeds the operator's input ``i``: an int is the join's input of
    that index (its rows, and its initial rows if the join has any), a str an earlier stage's
    output."""

    name: str
    operator: Operator
    inputs: tuple[int | str, ...]


@dataclass(frozen=True)
class JoinPlan:
    """A join's stages in the order a version runs them; the last one's output is the join's."""

    stages: tuple[Stage, ...]
    #: The join's input names, by index (empty: a one-stage join's are its operator's)
    input_names: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        seen: set[str] = set()
        for stage in self.stages:
            if len(stage.inputs) != len(stage.operator.inputs):
                raise ValueError(f"stage {stage.name!r}: {len(stage.inputs)} inputs wired, "
                                 f"its operator takes {len(stage.operator.inputs)}")
            for source in stage.inputs:
                if isinstance(source, str) and source not in seen:
                    raise ValueError(f"stage {stage.name!r} reads stage {source!r}, which does not run before it")
            if stage.name in seen:
                raise ValueError(f"two stages named {stage.name!r}")
            seen.add(stage.name)
        if not self.stages or (len(self.stages) > 1 and "" in seen):
            raise ValueError("a plan has one stage named '' (the checkpoint itself) or several named ones")

    @classmethod
    def single(cls, operator: Operator) -> "JoinPlan":
        """A one-stage join: ``operator`` over the join's inputs, its state in the checkpoint."""
        return cls((Stage("", operator, tuple(range(len(operator.inputs)))),))

    @property
    def output(self) -> Stage:
        """The stage whose output is the join's."""
        return self.stages[-1]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.stages)

    @property
    def waits_for_watermark(self) -> bool:
        """Whether some of the join's output waits for a later version's watermark: some stage's
        does (:attr:`streamjoin.runtime.operator.Operator.waits_for_watermark`)."""
        return any(stage.operator.waits_for_watermark for stage in self.stages)

    @property
    def inputs(self) -> int:
        """How many inputs the join takes."""
        return 1 + max(i for s in self.stages for i in s.inputs if isinstance(i, int))

    def stage(self, name: str) -> Stage:
        for stage in self.stages:
            if stage.name == name:
                return stage
        raise KeyError(f"no stage {name!r}; the stages are {list(self.names)}")

    def location(self, checkpoint: str, stage: Stage | str) -> str:
        """Where ``stage`` keeps its state: ``checkpoint`` itself, or its sub-checkpoint."""
        name = stage if isinstance(stage, str) else stage.name
        if not name:
            return checkpoint
        return f"{checkpoint.rstrip('/')}/{name}"   # as CheckpointFiles.location names a checkpoint's files

    @property
    def join_inputs(self) -> tuple[str, ...]:
        """The join's input names, by index (``initial_progress``'s keys)."""
        if self.input_names:
            return self.input_names
        if len(self.stages) == 1:
            return tuple(spec.name for spec in self.stages[0].operator.inputs)
        return tuple(f"input{i}" for i in range(self.inputs))

    def input_wiring(self) -> dict[str, dict[str, str]]:
        """By stage, the names of its inputs that are the join's inputs, to the join's names."""
        names = self.join_inputs
        return {stage.name: {stage.operator.inputs[position].name: names[source]
                             for position, source in enumerate(stage.inputs) if isinstance(source, int)}
                for stage in self.stages}

    def stage_progress(self, progress: Mapping[str, int]) -> dict[str, dict[str, int]]:
        """``progress`` (by the join's input names; a one-stage join's operator's names too, as
        its checkpoint records them) as each stage's, by its own input names. Raises
        :class:`JoinDefinitionError` for a name that is not one of the join's inputs."""
        own = {spec.name for spec in self.stages[0].operator.inputs} if len(self.stages) == 1 else set()
        unknown = sorted(set(progress) - set(self.join_inputs) - own)
        if unknown:
            raise JoinDefinitionError(f"initial_progress: this join has no input {unknown[0]!r}; its inputs are "
                                      f"{list(self.join_inputs)}")
        return {stage: {mine: progress[name] if name in progress else progress[mine]
                        for mine, name in wired.items() if name in progress or mine in progress}
                for stage, wired in self.input_wiring().items()}

    def state_sides(self, names: Iterable[str]) -> dict[str, dict[str, str]]:
        """Where the join's state sides ``names`` are (``initial_state``'s keys): by stage, each
        name's side of that stage. A name is a stage's name when that stage has one side (a
        table-table join's ``left_keys`` stage, whose side is ``keys``), else a side of the stage
        whose state views name it (a one-stage join's sides; a table-table join's ``left`` /
        ``right`` rows, and a fused stage's ``left_keys`` / ``right_keys``). Raises
        :class:`JoinDefinitionError` naming the sides a name could have been."""
        found: dict[str, dict[str, str]] = {}
        for name in names:
            stage = next((s for s in self.stages if s.name == name and len(s.operator.state_views) == 1), None)
            side = next(iter(stage.operator.state_views)) if stage is not None else name
            if stage is None:   # (a side of a stage of one side is named by the stage, in a plan of several)
                stage = next((s for s in self.stages if name in s.operator.state_views
                              and (len(s.operator.state_views) > 1 or len(self.stages) == 1)), None)
            if stage is None:
                known = sorted({v for s in self.stages for v in s.operator.state_views
                                if len(s.operator.state_views) > 1 or len(self.stages) == 1}
                               | {s.name for s in self.stages if len(s.operator.state_views) == 1 and s.name})
                raise JoinDefinitionError(f"initial_state: this join has no state side {name!r}; its sides are {known}")
            if side in found.get(stage.name, {}).values():
                raise JoinDefinitionError(f"initial_state: {name!r} and another name are the same side of the state")
            found.setdefault(stage.name, {})[name] = side
        return found

    def feeds(self, stage: Stage, items: Sequence[object], outputs: dict[str, object]) -> list[object]:
        """``stage``'s inputs: the join's ``items`` (its inputs' rows, or initial rows) by index,
        and earlier stages' ``outputs`` by name."""
        return [items[i] if isinstance(i, int) else outputs[i] for i in stage.inputs]


def record_stages(plan: JoinPlan, checkpoint: str) -> None:
    """Record the stage names of ``plan`` in ``checkpoint`` (:data:`STAGES_FILE`) when it has
    several stages (one stage keeps its state in the folder itself); called on the driver before
    the stages bind. Raises :class:`CheckpointMismatchError` when the folder records other stages
    (another join's checkpoint, or the same join with ``fuse_key_stages`` the other way), or
    when a plan of several stages finds a one-stage join's state in the folder itself, or a
    one-stage plan a folder of stages."""
    files = CheckpointFiles(checkpoint)
    found = files.read_json(STAGES_FILE)
    if len(plan.stages) < 2:
        if found is not None:
            raise CheckpointMismatchError(
                f"{checkpoint} holds a join of stages {found.get('stages')}, and this join is one stage: give "
                f"it a checkpoint of its own {_KEEPS_STAGES}")
        return
    wanted = [stage.name for stage in plan.stages]
    if found is None and files.read_json(ROOT_FILE) is not None:
        raise CheckpointMismatchError(
            f"{checkpoint} holds a one-stage join's state, and this join runs the stages {wanted}: give it a "
            f"checkpoint of its own {_KEEPS_STAGES}")
    if found is None:   # (with the join's inputs each stage reads, for state_progress)
        files.write_json(STAGES_FILE, {"stages": wanted, "inputs": plan.input_wiring()})
    elif found.get("stages") != wanted:
        raise CheckpointMismatchError(
            f"{checkpoint} holds a join of stages {found.get('stages')}, not {wanted}: give this join a "
            f"checkpoint of its own {_KEEPS_STAGES}")


def recorded_stages(files: CheckpointFiles) -> list[str] | None:
    """The stage names the checkpoint folder of ``files`` records (None: it records none)."""
    found = files.read_json(STAGES_FILE)
    if found is None:
        return None
    stages = found.get("stages")
    if not isinstance(stages, list) or not all(isinstance(name, str) and name for name in stages):
        raise CheckpointMismatchError(f"{files.uri}: {STAGES_FILE} does not name stages: {found!r}")
    return stages
