"""The task a join runs in Spark's Python worker: one partition of one version of one operator.

``mapInArrow`` calls a :class:`PartitionTask` (picklable: the operator and the settings, nothing
else) with the partition's unioned rows. The task learns what Spark hands it and nothing more:
the version from the local property ``streaming.sql.batchId`` (no batch id: a batch run, version
0 and final), its partition from its task id (:func:`task_partition`), its attempt number and the
streaming query's id. It drains its rows on a thread of their own (:class:`Arriving`) while it
opens its store, runs :func:`streamjoin.runtime.task.step_task`, yields the output, commits the
version and yields one metrics row. :class:`InitialWriter` writes the initial rows one task of
their routing job read to the checkpoint, before the query's first version. Local stores live under Spark's local directory
(:func:`spark_local_state_dir`); the worker logs one line per task at ``$STREAMJOIN_LOG_LEVEL``.
"""

from __future__ import annotations

import logging
import os
import tempfile
import threading
from dataclasses import replace
from typing import Iterator

import pyarrow as pa
from pyspark import TaskContext

from streamjoin.errors import CheckpointMismatchError
from streamjoin.runtime.checkpoint import Checkpoint
from streamjoin.runtime.keygroups import by_owner
from streamjoin.runtime.operator import InputSpec, Operator
from streamjoin.runtime.options import StateConfig
from streamjoin.runtime.task import Arrived, TaskInfo, step_task
from streamjoin.spark.flush import closing_version, write_tick
from streamjoin.spark.lanes import Layout, batch_time, input_rows, split_inputs
from streamjoin.spark.progress import metrics_batch, progress_schema
from streamjoin.spark.worker_gc import before_task

__all__ = ["PartitionTask", "InitialWriter", "TARGET", "Arriving", "task_context", "task_partition", "spark_local_state_dir",
           "refuse_after_close", "timed_rows"]

#: The column of the initial rows' routing job that holds each row's partition.
TARGET = "_sj_target"

log = logging.getLogger("streamjoin")


def _configure_worker_logging() -> None:
    """Log one line per task to the executor's stderr at ``$STREAMJOIN_LOG_LEVEL`` (default WARNING)."""
    if not log.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
        log.addHandler(handler)
        log.setLevel(os.environ.get("STREAMJOIN_LOG_LEVEL", "WARNING").upper())


def task_context() -> TaskContext:
    """The running Spark task's context (this code runs only inside ``mapInArrow``)."""
    ctx = TaskContext.get()
    if ctx is None:
        raise RuntimeError("streamjoin: a partition function ran outside a Spark task")
    return ctx


def task_partition(task_id: int, partitions: int, first_task: int | None) -> int:
    """The operator's partition that the Spark task numbered ``task_id`` runs.

    An operator's tasks are numbered by the Spark stage they run in, and an operator whose output
    a later operator unions with others runs in that union's map stage. Spark numbers such a
    union's partitions one part after another (part ``k``'s tasks follow the ``k`` parts before
    it), or, where every part has the same partitioning (one partition each), partition by
    partition (task ``p`` runs every part's partition ``p``). ``first_task``: the task id of
    partition 0 in the first way, given by whoever placed the operator
    (:func:`streamjoin.spark.plan.run_plan`, for a stage whose output is one part of a later
    stage's union); the partition is ``task_id - first_task`` for an id from there, the id itself
    for an id below ``partitions`` (the second way), and any other id raises. None: a join's
    output, consumed by the user's query: the id modulo ``partitions`` (outputs of joins of as
    many partitions each, unioned, keep their numbering)."""
    if first_task is None:
        return task_id % partitions
    if first_task <= task_id < first_task + partitions:
        return task_id - first_task
    if 0 <= task_id < partitions:
        return task_id
    raise RuntimeError(
        f"streamjoin: Spark task {task_id} runs a stage placed at tasks {first_task}..{first_task + partitions - 1} "
        f"(or 0..{partitions - 1}): Spark numbered the union of the join's stages otherwise than the join "
        "expects; please report this with the query's plan (df.explain())")


class PartitionTask:
    """The function ``mapInArrow`` runs: picklable, holding only the operator and the settings."""

    def __init__(self, operator: Operator, checkpoint: str, partitions: int, state: StateConfig, final: bool,
                 layout: Layout, ticks: bool = False, release: bool = False, pre_staged: tuple[str, ...] = (),
                 first_task: int | None = None):
        """``ticks``: after a version with rows that may move the watermark, ask for one more
        micro-batch (:func:`streamjoin.spark.flush.write_tick`). ``release``: the version that
        closed the inputs runs final, a later one with rows is refused
        (:func:`streamjoin.spark.flush.closing_version`). ``pre_staged``: as
        :func:`streamjoin.spark.runtime.run_operator`'s. ``first_task``: as :func:`task_partition`'s."""
        self.operator = operator
        self.pre_staged = pre_staged
        self.release = release
        self.ticks = ticks
        self.layout = layout
        self.checkpoint = checkpoint
        self.partitions = partitions
        self.state = state
        self.final = final
        self.first_task = first_task

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        _configure_worker_logging()
        before_task()   # PySpark collects after every task: keep what the imports made out of it
        ctx = task_context()
        batch_id = ctx.getLocalProperty("streaming.sql.batchId")
        task = TaskInfo(
            version=int(batch_id) if batch_id is not None else 0,
            partition=task_partition(ctx.partitionId(), self.partitions, self.first_task),
            partitions=self.partitions,
            attempt=ctx.attemptNumber(),
            final=self.final or batch_id is None,
            query_id=ctx.getLocalProperty("sql.streaming.queryId"),
        )
        arriving = Arriving(batches, self.operator, self.layout)   # drained while the store opens
        closed = closing_version(Checkpoint(self.checkpoint)) if self.release and batch_id is not None else None
        if closed is not None:
            task = replace(task, final=task.version == closed)

        def arrived() -> Arrived:
            found = arriving.rows()
            refuse_after_close(self.checkpoint, closed, task.version, found, self.operator)
            return Arrived(found, arriving.time)
        state = self.state if self.state.local_dir else replace(self.state, local_dir=spark_local_state_dir())
        try:
            stepped = step_task(self.operator, Checkpoint(self.checkpoint), state, task, arrived)
        finally:
            arriving.join()
        try:
            # the output goes to the JVM first, and the version commits while Spark converts and
            # writes it: the task's output counts only once the task ends, after the commit
            schema = progress_schema(self.operator)
            output = stepped.output.cast(self.operator.output_schema)
            extra = [pa.nulls(output.num_rows, f.type) for f in schema][len(output.schema):]
            yield from pa.Table.from_arrays([*output.columns, *extra], schema=schema).to_batches()
            metrics = stepped.commit(self._set_aside_before_routing(task))
        finally:
            stepped.abandon()
        log.info("streamjoin %s version %d partition %d: %s", self.operator.kind, task.version, task.partition, metrics)
        if self.ticks and batch_id is not None and timed_rows(arriving.rows(), self.operator):
            write_tick(self.checkpoint, task.version)
        yield metrics_batch(self.operator, metrics, schema)

    def _set_aside_before_routing(self, task: TaskInfo) -> dict[str, int]:
        """Partition 0's count of the rows the pre-stage set aside in the task's version, per
        input (``set_aside_rows_<input>``). The pre-stage runs on the map side of the shuffle,
        which has finished (every file written) before any task of the join runs."""
        if task.partition != 0 or not self.pre_staged:
            return {}
        aside = Checkpoint(self.checkpoint).set_aside
        return {f"set_aside_rows_{name}": aside.count(name, task.version) for name in self.pre_staged}


class InitialWriter:
    """Writes the initial rows of one input that one task of the routing job read, each
    partition's as a piece of that partition's rows (:meth:`~streamjoin.runtime.checkpoint.initial.Initial.write_piece`,
    named by the task's partition, so a task run again replaces its own); yields the count. Each
    row carries its partition in :data:`TARGET`, computed in the JVM as the query's shuffle
    computes it, so the rows need no shuffle of their own."""

    def __init__(self, operator: Operator, index: int, checkpoint: str, layout: Layout):
        self.operator, self.index, self.checkpoint, self.layout = operator, index, checkpoint, layout

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        spec = self.operator.inputs[self.index]
        # each batch is routed as it comes, while the JVM converts the next ones; only the files'
        # writes are left after the last
        count = 0
        parts: dict[int, list[pa.Table]] = {}
        for batch in batches:
            if batch.num_rows:
                count += batch.num_rows
                for target, rows in _routed(batch, self.index, spec, self.layout):
                    parts.setdefault(target, []).append(rows)
        initial, piece = Checkpoint(self.checkpoint).initial, task_context().partitionId()
        for target in sorted(parts):
            initial.write_piece(spec.name, target, piece, pa.concat_tables(parts[target]))
        yield pa.RecordBatch.from_pydict({"rows": pa.array([count], pa.int64())})


def _routed(batch: pa.RecordBatch, index: int, spec: InputSpec, layout: Layout) -> Iterator[tuple[int, pa.Table]]:
    """The rows of ``batch`` of input ``index`` by the partition :data:`TARGET` gives each, in
    ascending partition order, each partition's in the order they came."""
    table = pa.Table.from_batches([batch])
    rows = input_rows(table.drop_columns([TARGET]), index, spec, layout)
    return by_owner(rows, table.column(TARGET).to_numpy())


class Arriving:
    """A task's input rows, drained from Spark's iterator by a thread of their own from the start,
    so that the JVM keeps sending them while the task reads the checkpoint and opens its store
    (a store handed over by another Python worker can take tens of milliseconds)."""

    def __init__(self, batches: Iterator[pa.RecordBatch], operator: Operator, layout: Layout) -> None:
        self._batches, self._operator, self._layout = batches, operator, layout
        self._rows: tuple[pa.Table, ...] | None = None
        #: The micro-batch's timestamp the rows carried (:func:`streamjoin.spark.lanes.batch_time`), once they arrived.
        self.time: int | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._drain, name="streamjoin-input", daemon=True)
        self._thread.start()

    def _drain(self) -> None:
        try:
            # each batch is split into its inputs' rows as it comes, while the JVM sends the next
            # ones; only joining those pieces is left after the last
            pieces, times = [], []
            for batch in self._batches:
                if batch.num_rows:
                    pieces.append(split_inputs([batch], self._operator, self._layout))
                    times.append(batch_time([batch]))
            self.time = max((t for t in times if t is not None), default=None)
            self._rows = _joined(pieces, self._operator)
        except BaseException as exc:   # handed to the task's thread by rows()
            self._error = exc

    def join(self) -> None:
        """Wait until every row has arrived (or the input failed)."""
        self._thread.join()

    def rows(self) -> tuple[pa.Table, ...]:
        """Each input's rows, once all have arrived; raises what draining the input raised."""
        self._thread.join()
        if self._error is not None:
            raise self._error
        assert self._rows is not None
        return self._rows


def _joined(pieces: list[tuple[pa.Table, ...]], operator: Operator) -> tuple[pa.Table, ...]:
    """Each input's rows of ``pieces`` (each batch's rows split by input, in the order the batches
    came) as one table of one chunk a column, as :func:`~streamjoin.spark.lanes.split_inputs`
    gives them for all the batches at once."""
    if not pieces:
        return tuple(spec.schema.empty_table() for spec in operator.inputs)
    if len(pieces) == 1:
        return pieces[0]
    return tuple(pa.concat_tables(parts).combine_chunks() for parts in zip(*pieces))


def refuse_after_close(checkpoint: str, closed: int | None, version: int, rows: tuple[pa.Table, ...],
                       operator: Operator) -> None:
    """Raises :class:`CheckpointMismatchError` for rows of a version after the one that closed
    the join's inputs (``closed``; None: not closed)."""
    if closed is not None and version > closed and any(table.num_rows for table in rows):
        names = [spec.name for spec, table in zip(operator.inputs, rows) if table.num_rows]
        raise CheckpointMismatchError(
            f"the join with checkpoint {checkpoint} closed its inputs in version {closed} "
            f"(end_of_run='release': every row held for lateness was released then), and version {version} "
            f"has new rows of {', '.join(names)}: results joined with them would contradict what was "
            "emitted. Give the new data to a join with a new checkpoint (and its query a new Spark "
            "checkpoint location), or use end_of_run='flush' for inputs that continue")


def timed_rows(rows: tuple[pa.Table, ...], operator: Operator) -> bool:
    """Whether any input's rows of this task have an event time (they may move the watermark)."""
    return any(table.num_rows and spec.time is not None and table.column(spec.time).null_count < table.num_rows
               for table, spec in zip(rows, operator.inputs))


def spark_local_state_dir() -> str:
    """Local stores' root on this executor: under Spark's local directory, else the temp dir."""
    dirs = [d for d in os.environ.get("SPARK_LOCAL_DIRS", "").split(",") if d]
    if not dirs:
        return os.path.join(tempfile.gettempdir(), "streamjoin-state")
    root = dirs[0]
    if os.path.basename(root).startswith("blockmgr-"):
        root = os.path.dirname(root)  # local mode points at the application's block manager
    return os.path.join(root, "streamjoin-state")
