"""``assert_deterministic``: a pipeline's output must not depend on how its inputs are streamed.

The pipeline runs once as one batch (every input whole, one final version), then as streams
under Hypothesis-drawn ``streamjoin.testing.plan.RunPlan`` s: the inputs cut into random
micro-batches, a random partition count and store backend, a restart with the local state lost
and a micro-batch executed twice. Every stream's final output must equal the batch run's, as a
multiset of rows (``streamjoin.testing.compare``). On a difference, Hypothesis shrinks the plan
(fewest micro-batches, plainest run) and then rows are removed while the difference stays, and
``NonDeterministicError`` shows that counterexample and the two outputs' difference. Shrinking
is bounded in runs and in time. A pipeline that raises is reported at once, with the run that
raised and its input, by ``PipelineError`` (nothing is shrunk: the exception is the pipeline's).

Errors::

    streamjoin.errors.JoinError
    ├── NonDeterministicError (also an AssertionError)   a stream's output differs from the batch's
    └── PipelineError                                    the pipeline raised (its exception is the cause)
"""

from __future__ import annotations

import inspect
import textwrap
import time
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any, Callable, Mapping, Protocol, Sequence

import pyarrow as pa

from streamjoin.errors import JoinError
from streamjoin.testing.compare import Rows, difference, format_table
from streamjoin.testing.plan import RunPlan, run_plans, without_rows

__all__ = ["assert_deterministic", "Mode", "NonDeterministicError", "PipelineError", "Report", "Outcome",
           "call_pipeline"]

#: The keyword arguments the kit passes to a pipeline that declares them.
RUN_OPTIONS = ("joins", "checkpoint", "store", "partitions", "state_dir")


class Mode(str, Enum):
    """Where the runs execute."""

    IN_PROCESS = "in_process"  #: engine-free operators over Arrow tables, no JVM (fast)
    SPARK = "spark"  #: a local Spark session, the pipeline over DataFrames (end to end)


class NonDeterministicError(JoinError, AssertionError):
    """A streaming run's output differs from the batch run's; the message shows the shrunk
    counterexample and the difference. ``failure`` holds it as data."""

    def __init__(self, message: str, failure: "Failure") -> None:
        super().__init__(message)
        self.failure = failure


class PipelineError(JoinError):
    """The pipeline raised while the kit ran it; the message names the run (the batch run, or a
    streaming run's plan) and shows its input; the pipeline's exception is ``__cause__``.
    ``inputs`` and ``plan`` (None: the batch run) hold that run as data."""

    def __init__(self, message: str, inputs: tuple[pa.Table, ...], plan: RunPlan | None) -> None:
        super().__init__(message)
        self.inputs, self.plan = inputs, plan


@dataclass(frozen=True)
class Outcome:
    """A run's final output and what the kit noticed about the pipeline while running it."""

    rows: Rows
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Failure:
    """One counterexample: the inputs, the streaming plan, and both outputs."""

    inputs: tuple[pa.Table, ...]
    plan: RunPlan
    batch: Outcome
    stream: Outcome


@dataclass
class Report:
    """What a passing ``assert_deterministic`` checked: streaming runs compared, time taken."""

    mode: Mode
    examples: int = 0
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    @property
    def examples_per_minute(self) -> float:
        return 60.0 * self.examples / self.seconds if self.seconds else float("inf")


class Engine(Protocol):
    """Runs a pipeline as one batch or as a planned stream (in process, or in Spark)."""

    def batch(self, inputs: Sequence[pa.Table]) -> Outcome: ...

    def stream(self, inputs: Sequence[pa.Table], plan: RunPlan) -> Outcome: ...


def call_pipeline(pipeline: Callable[..., Any], frames: Sequence[Any], options: Mapping[str, Any]) -> Any:
    """``pipeline(*frames, **options)``, passing only the options it declares (or all with ``**kwargs``)."""
    params = inspect.signature(pipeline).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return pipeline(*frames, **options)
    return pipeline(*frames, **{k: v for k, v in options.items() if k in params})


def _tables(inputs: Any) -> tuple[list[str], tuple[pa.Table, ...]]:
    if isinstance(inputs, Mapping):
        names, values = list(inputs), list(inputs.values())
    else:
        values = list(inputs)
        names = [f"input {i}" for i in range(len(values))]
    tables = tuple(v if isinstance(v, pa.Table) else pa.Table.from_pandas(v, preserve_index=False) for v in values)
    return names, tables


def assert_deterministic(
    pipeline: Callable[..., Any],
    inputs: Any,
    *,
    mode: Mode | str = Mode.IN_PROCESS,
    spark: Any = None,
    finish: Callable[[pa.Table], Any] | None = None,
    end: Sequence[Any] | None = None,
    max_examples: int | None = None,
    max_batches: int = 4,
    partitions: Sequence[int] = (1, 2, 3),
    stores: Sequence[str] | None = None,
    disturb: bool = True,
    reorder: bool = True,
    shrink_budget: int | None = None,
    shrink_seconds: float | None = None,
) -> Report:
    """Check that ``pipeline`` gives the batch run's output under every streaming plan tried.

    ``pipeline(*inputs, **options)``: Arrow tables in, an Arrow table (or pandas) out in
    ``Mode.IN_PROCESS``; DataFrames in, a DataFrame out in ``Mode.SPARK`` (``spark``: the session).
    Of the options ``joins`` (the joins to call: ``streamjoin.testing.local.LocalJoins``, or
    streamjoin's own in Spark), ``checkpoint`` (a fresh directory per run: give each join its own
    path under it), ``store``, ``partitions`` and ``state_dir`` (a new directory after a restart,
    so the local stores under the old one are lost), it is passed those it declares, in both modes.
    ``store`` and ``partitions`` are the plan's, drawn from ``stores`` and ``partitions``: a join
    keeps its state in the plan's store only when the pipeline passes ``store=store`` on (the
    joins' default is ``arranged``, in process as in Spark).

    ``inputs``: a sequence (or a name -> input mapping) of Arrow tables or pandas DataFrames, rows
    in arrival order, or a Hypothesis strategy of such sequences. ``finish`` maps a run's whole
    output to what is compared (an aggregation over an appended stream, a view from its changes);
    a stream's output reaches it with its rows in a plan-drawn order (``reorder=False``: in the
    order the run produced them), as a sink gets them in no defined order (without ``finish``,
    outputs are compared as multisets and their order does not matter).
    ``shrink_budget``: how many more runs Hypothesis' shrinking, then the row removal, may take
    each (default 40 in process, 6 in Spark); ``shrink_seconds``: how long each may take (default
    300); the smallest counterexample found by then is reported. ``end``: rows per input (or None)
    closing every run, as its last micro-batch (Spark streams
    have no final version: these rows push the watermarks past every window; the pipeline should
    drop what they produce). In process, a stream ends with a final version instead.

    Raises ``NonDeterministicError`` with a shrunk counterexample, ``PipelineError`` at the first
    run in which the pipeline (or a join it calls) raises; returns a ``Report``.
    """
    from streamjoin.testing._hypothesis import hypothesis
    from streamjoin.testing._hypothesis import strategies as st

    mode = Mode(mode)
    engine = _engine(mode, pipeline, spark, finish)
    fixed = not isinstance(inputs, st.SearchStrategy)
    names, given_tables = _tables(inputs) if fixed else ([], ())
    profile = hypothesis.settings()   # the profile loaded now (its max_examples, derandomize)
    examples = max_examples or (profile.max_examples if mode is Mode.IN_PROCESS else min(5, profile.max_examples))
    budget = shrink_budget if shrink_budget is not None else (40 if mode is Mode.IN_PROCESS else 6)
    seconds = 300.0 if shrink_seconds is None else shrink_seconds
    stores = tuple(stores or _stores(mode))
    closing = None if end is None else _tables(end if isinstance(end, Mapping) else
                                               [e if e is not None else t.slice(0, 0)
                                                for e, t in zip(end, given_tables)])[1]
    checker = _Checker(engine, closing)
    report = Report(mode)
    shrinks = [0]
    started = time.perf_counter()
    raised: list[tuple[PipelineError, Exception]] = []

    @hypothesis.settings(max_examples=examples, deadline=None, database=None, derandomize=profile.derandomize,
                         suppress_health_check=list(hypothesis.HealthCheck), print_blob=False)
    @hypothesis.given(data=st.data())
    def search(data: Any) -> None:
        tables = given_tables if fixed else _tables(data.draw(inputs, label="inputs"))[1]
        plan = data.draw(run_plans([t.num_rows for t in tables], max_batches=max_batches, partitions=partitions,
                                   stores=stores, disturb=disturb, reorder=reorder and finish is not None),
                         label="plan")
        if raised:   # the pipeline raised: reported below, nothing more is run or shrunk
            return
        if checker.last is not None:
            shrinks[0] += 1
            if shrinks[0] > budget or checker.overdue(seconds):   # the smallest failure so far is reported
                return
        else:
            report.examples += 1
        try:
            failed = checker.check(tables, plan)
        except Exception as exc:   # the pipeline's own error: no counterexample to shrink
            raised.append((_raised(pipeline, exc, tables, None if checker.running == "batch" else plan, names), exc))
            return   # Hypothesis is not told: it would shrink (and replay) the pipeline's error
        if failed is not None:
            raise AssertionError("not deterministic")

    try:
        search()
    except Exception:
        if checker.last is None and not raised:
            raise
    if raised:
        raise raised[0][0] from raised[0][1]
    report.seconds = time.perf_counter() - started
    if checker.last is None:
        report.notes = checker.notes
        return report
    checker.failed_at = None   # the row removal's own time bound
    failure = checker.shrink_rows(checker.last, budget, seconds)
    names = names or [f"input {i}" for i in range(len(failure.inputs))]
    raise NonDeterministicError(_message(pipeline, failure, names, mode, end is not None), failure)


def _raised(pipeline: Callable[..., Any], exc: Exception, inputs: Sequence[pa.Table], plan: RunPlan | None,
            names: Sequence[str]) -> PipelineError:
    """The :class:`PipelineError` of ``exc``, raised by the run of ``inputs`` under ``plan`` (None:
    the batch run)."""
    name = getattr(pipeline, "__qualname__", repr(pipeline))
    inputs = tuple(inputs)
    names = list(names) or [f"input {i}" for i in range(len(inputs))]
    if plan is None:
        run = "the batch run (every input whole, one version)"
        shown = "\n".join(f"{label}:\n" + textwrap.indent(
            format_table(table.column_names, [tuple(r.values()) for r in table.to_pylist()]), "    ")
            for label, table in zip(names, inputs))
    else:
        run, shown = "a streaming run", plan.describe(inputs, names)
    message = (f"{name} raised {type(exc).__name__}: {exc}\n\nin {run} of these inputs "
               f"(reported at once, not shrunk: fix the pipeline, or the input, and run again):\n{shown}")
    return PipelineError(message, inputs, plan)


def _stores(mode: Mode) -> tuple[str, ...]:
    from streamjoin.statestore import backend_names

    names = tuple(backend_names())
    return ("memory",) + tuple(n for n in names if n != "memory")


def _engine(mode: Mode, pipeline: Callable[..., Any], spark: Any, finish: Any) -> Engine:
    if mode is Mode.IN_PROCESS:
        from streamjoin.testing.inprocess import InProcessEngine

        return InProcessEngine(pipeline, finish)
    if spark is None:
        raise ValueError("assert_deterministic(mode='spark') needs spark=<a SparkSession> (the streamjoin_spark fixture)")
    from streamjoin.testing.spark import SparkEngine

    return SparkEngine(spark, pipeline, finish)


class _Checker:
    """Runs batch and stream, remembers the batch outputs and the last failure seen."""

    def __init__(self, engine: Engine, closing: tuple[pa.Table, ...] | None) -> None:
        self.engine, self.closing = engine, closing
        self.last: Failure | None = None
        #: when the first failure was seen (shrinking's time bound), and which run is running
        self.failed_at: float | None = None
        self.running = ""
        self.notes: list[str] = []
        self._batches: dict[tuple, tuple[tuple[pa.Table, ...], Outcome]] = {}

    def check(self, inputs: Sequence[pa.Table], plan: RunPlan) -> Failure | None:
        inputs = tuple(inputs)
        key = tuple(map(id, inputs))
        if key not in self._batches:
            whole = inputs if self.closing is None else tuple(pa.concat_tables([t, c.cast(t.schema)])
                                                               for t, c in zip(inputs, self.closing))
            self.running = "batch"
            self._batches[key] = (inputs, self.engine.batch(whole))
        expected = self._batches[key][1]
        streamed = plan
        if self.closing is not None:
            inputs_closed = tuple(pa.concat_tables([t, c.cast(t.schema)]) for t, c in zip(inputs, self.closing))
            last = plan.count
            streamed = replace(plan, batches=tuple(rows + (last,) * c.num_rows
                                                   for rows, c in zip(plan.batches, self.closing)))
        else:
            inputs_closed = inputs
        self.running = "stream"
        got = self.engine.stream(inputs_closed, streamed)
        for note in expected.notes + got.notes:
            if note not in self.notes:
                self.notes.append(note)
        if got.rows == expected.rows:
            return None
        self.last = Failure(inputs, plan, expected, got)
        if self.failed_at is None:
            self.failed_at = time.perf_counter()
        return self.last

    def overdue(self, seconds: float) -> bool:
        """Whether shrinking has taken ``seconds`` since the first failure (the kit's time bound;
        the wall clock decides only how small the reported counterexample is)."""
        return self.failed_at is not None and time.perf_counter() - self.failed_at >= seconds

    def shrink_rows(self, failure: Failure, budget: int, seconds: float = float("inf")) -> Failure:
        """Remove rows (halves, then smaller runs, then single rows) while the difference stays,
        for at most ``budget`` runs and ``seconds``."""
        began = time.perf_counter()

        def more() -> bool:
            return budget > 0 and time.perf_counter() - began < seconds
        for which in range(len(failure.inputs)):
            chunk = max(1, failure.inputs[which].num_rows // 2)
            while chunk >= 1 and more():
                start = 0
                while start < failure.inputs[which].num_rows and more():
                    drop = set(range(start, min(start + chunk, failure.inputs[which].num_rows)))
                    tables, plan = without_rows(failure.inputs, failure.plan, which, drop)
                    budget -= 1
                    smaller = self.check(tables, plan)
                    if smaller is not None:
                        failure = smaller
                    else:
                        start += chunk
                chunk //= 2
        return failure


def _message(pipeline: Callable[..., Any], failure: Failure, names: Sequence[str], mode: Mode,
             closed: bool) -> str:
    name = getattr(pipeline, "__qualname__", repr(pipeline))
    parts = [f"{name} is not deterministic ({mode.value}): a streaming run's output differs from the batch run's "
             f"({len(failure.stream.rows)} rows streamed, {len(failure.batch.rows)} in one batch)."]
    notes = list(dict.fromkeys(failure.batch.notes + failure.stream.notes))
    if mode is Mode.SPARK and not closed and len(failure.stream.rows) < len(failure.batch.rows):
        notes.append("the streams were not closed: rows still waiting for the watermark are missing; pass end=...")
    if notes:
        parts.append("Known batch-dependent steps: " + "; ".join(notes) + ".")
    parts.append("Counterexample (shrunk):\n" + failure.plan.describe(failure.inputs, names))
    parts.append("Difference:\n" + difference(failure.batch.rows, failure.stream.rows))
    return "\n\n".join(parts)
