"""How the join tests drive a join in process: two ways, one per level.

- :class:`InProcess`: through the runtime, the in-process runner
  (:class:`streamjoin.runtime.plan_runner.PlanRunner` over the join's plan, one stage or several,
  each a :class:`streamjoin.runtime.local.LocalRunner`): binding, versions, changelogs, commits,
  restore and rescale exactly as in Spark, over a fresh temporary checkpoint. Properties of
  recovery, backends and rescaling use it (``disturb`` loses its stores or switches its backend).
- :class:`StepDriver` (and :class:`StepChain` for a join of several stages): the operators'
  pure ``step`` per partition and version against open stores, rows routed as the runtime routes
  them without key groups, without changelogs or checkpoints; fast, for unit-level properties.

``closing`` makes drivers on demand for a fixture and closes them after the test.
"""

from __future__ import annotations

import itertools
import shutil
import tempfile
from typing import Any, Callable, Iterator, Sequence

import pyarrow as pa
from hypothesis import strategies as st

from streamjoin.runtime.local import LocalRunner, route
from streamjoin.runtime.operator import Operator, StepInput
from streamjoin.runtime.options import StateConfig
from streamjoin.runtime.plan_runner import PlanRunner
from streamjoin.runtime.task import progress_after
from streamjoin.statestore import backend_names, destroy_store, open_store

Batches = Callable[[int], Sequence[pa.Table]]


class InProcess:
    """``join`` run by the in-process runner (``self.runner``, a :class:`PlanRunner`) over a fresh
    temporary checkpoint and local directory, removed by :meth:`close`. ``batches(index)`` gives
    a scenario's input tables of batch ``index``; :meth:`run` runs one as a version (without a
    scenario, run tables with ``self.runner.run``)."""

    def __init__(self, join: Operator, batches: Batches | None = None, *, partitions: int = 1, store: str = "memory",
                 query_id: str | None = None) -> None:
        self.root = tempfile.mkdtemp(prefix="sj-run-")
        self.batches = batches
        self.config = StateConfig(store=store, local_dir=f"{self.root}/local", snapshot_every=3, retain_versions=3)
        self.runner = PlanRunner(join.plan, f"{self.root}/checkpoint", partitions=partitions, config=self.config,
                                 query_id=query_id)

    def run(self, index: int | None, *, version: int | None = None) -> pa.Table:
        """Run batch ``index`` (None: empty inputs, as the final version) as the next version
        (or as ``version``, executed again); its output."""
        assert self.batches is not None, "InProcess.run runs a scenario's batches: give batches="
        if index is None:
            tables = [t.schema.empty_table() for t in self.batches(0)]
            return self.runner.run(*tables, version=version, final=True)
        return self.runner.run(*self.batches(index), version=version)

    def stage(self, name: str = "") -> LocalRunner:
        """The runner of the plan's stage ``name`` ("" for a one-stage join)."""
        return self.runner.runners[name]

    def metric(self, name: str) -> int:
        """A metric summed over every stage, partition and version run so far."""
        return self.runner.metric(name)

    def set_aside(self, input_name: str, stage: str = "") -> pa.Table | None:
        """The rows of ``stage``'s input ``input_name`` set aside so far, with their reason."""
        return self.runner.set_aside(input_name, stage)

    def restart(self, partitions: int) -> None:
        """Continue on the same checkpoint with ``partitions`` partitions (a rescale when the count
        changes) from the next version; the metrics so far are kept."""
        old = self.runner
        self.runner = PlanRunner(old.plan, old.checkpoint_dir, partitions=partitions,
                                 config=self.stage(old.plan.output.name).config)
        self.runner.version = old.version
        for name, runner in self.runner.runners.items():
            runner.metrics = old.runners[name].metrics

    def close(self) -> None:
        self.runner.lose_local_state()
        shutil.rmtree(self.root, ignore_errors=True)


#: What a crash-and-restore property may do before a version ("none" twice: most versions run undisturbed).
DISTURBANCES = ("none", "none", "lose_all", "lose_one", "switch_store")


def disturb(run: InProcess, action: str, data: st.DataObject) -> None:
    """Lose all of ``run.runner``'s local stores, one partition's, or all and continue on
    another backend (``run.runner`` is replaced); "none" does nothing."""
    if action == "lose_all":
        run.runner.lose_local_state()
    elif action == "lose_one":
        run.runner.lose_local_state(data.draw(st.integers(0, run.runner.partitions - 1)))
    elif action == "switch_store":
        run.runner.lose_local_state()
        run.runner = run.runner.with_store(data.draw(st.sampled_from(backend_names())))


def replay_disturbed(chaos: InProcess, run: Callable[[Any, int | None], Any], versions: Sequence[Any],
                     expected: Sequence[Any], data: st.DataObject, actions: Sequence[str] = DISTURBANCES) -> None:
    """The crash-and-restore loop: before each of ``versions`` (batch indexes, None for the final
    one) a drawn disturbance of ``chaos`` (:func:`disturb`), then ``run(index, None)``, the next
    version, must give ``expected[version]``; at random the same version is executed again after
    another disturbance (``run(index, version)``) and must give it again."""
    for version, index in enumerate(versions):
        disturb(chaos, data.draw(st.sampled_from(actions)), data)
        assert run(index, None) == expected[version]
        if data.draw(st.booleans()):          # the task or batch is executed again
            disturb(chaos, data.draw(st.sampled_from(actions)), data)
            assert run(index, version) == expected[version]


_PATHS = itertools.count()


class StepDriver:
    """Runs ``operator.step`` per partition and version against open stores (no changelog), with
    each input's largest event time so far over all partitions, as the runtime does
    (:func:`streamjoin.runtime.task.progress_after`); ``recorded`` keeps every step's metrics."""

    def __init__(self, operator: Operator, partitions: int = 1, store: str = "memory") -> None:
        self.operator, self.partitions, self.kind = operator, partitions, store
        root = f"driver-{next(_PATHS)}" if store == "memory" else tempfile.mkdtemp(prefix="sj-steps-")
        self.paths = [f"{root}/p{p}" for p in range(partitions)]
        self.stores = [open_store(store, path) for path in self.paths]
        self.max_times: list[int | None] = [None] * len(operator.inputs)
        self.version = 0
        self.recorded: list[dict[str, Any]] = []

    def run(self, *tables: pa.Table, final: bool = False) -> tuple[pa.Table, tuple[pa.Table, ...]]:
        """Execute the next version; return its output and the rows set aside per input."""
        routed = [route(t, spec.key, self.partitions) for t, spec in zip(tables, self.operator.inputs)]
        max_times = tuple(self.max_times)          # a final version's too, as the runtime gives them
        outputs, asides = [], [[] for _ in tables]
        for p, store in enumerate(self.stores):
            result = self.operator.step(store, StepInput(self.version, p, tuple(r[p] for r in routed), max_times, final))
            result.write_to(store, self.version)
            outputs.append(result.output)
            self.recorded.append(dict(result.metrics))
            for i, aside in enumerate(result.set_aside):
                asides[i].append(aside)
        self.max_times = list(progress_after(self.operator, tuple(self.max_times), tables))
        self.version += 1
        return pa.concat_tables(outputs), tuple(pa.concat_tables(a) for a in asides)

    def metric(self, name: str) -> int:
        """A metric summed over every step so far."""
        return sum(int(m.get(name, 0)) for m in self.recorded)

    def state(self) -> list[list[tuple[bytes, bytes]]]:
        """Every partition's entries."""
        return [list(store.scan()) for store in self.stores]

    def close(self) -> None:
        for store, path in zip(self.stores, self.paths):
            store.close()
            destroy_store(self.kind, path)


class StepChain:
    """A join's stages' steps chained per version as its plan wires them (as :class:`PlanRunner`
    does, :meth:`streamjoin.runtime.plan.JoinPlan.feeds`), one :class:`StepDriver` per stage;
    ``batches`` and :meth:`run` as :class:`InProcess`'s."""

    def __init__(self, join: Operator, batches: Batches, *, partitions: int = 1) -> None:
        self.plan = join.plan
        self.batches = batches
        self.drivers = {stage.name: StepDriver(stage.operator, partitions) for stage in self.plan.stages}
        self.version = 0

    def run(self, index: int, *, version: int | None = None) -> pa.Table:
        """Run batch ``index`` as the next version (steps cannot execute a version again); the
        join's output of it."""
        assert version in (None, self.version), "a step chain runs each version once, in order"
        rows = self.batches(index)
        outputs: dict[str, object] = {}
        for stage in self.plan.stages:
            outputs[stage.name], _ = self.drivers[stage.name].run(*self.plan.feeds(stage, rows, outputs))
        self.version += 1
        result = outputs[self.plan.output.name]
        assert isinstance(result, pa.Table)
        return result

    def metric(self, name: str) -> int:
        """A metric summed over every stage's steps so far."""
        return sum(driver.metric(name) for driver in self.drivers.values())

    def close(self) -> None:
        for driver in self.drivers.values():
            driver.close()


def closing(cls: Callable[..., Any]) -> Iterator[Callable[..., Any]]:
    """A factory of ``cls(**options)``; every object it made is closed when the test ends."""
    made: list[Any] = []

    def make(**options: Any) -> Any:
        made.append(cls(**options))
        return made[-1]

    yield make
    for thing in made:
        thing.close()
