"""Running an engine-free operator inside a Spark query: one ``mapInArrow`` after one shuffle.

The inputs are unioned into one flat DataFrame: an input tag, then the inputs' columns in shared
*lanes* (:class:`_Layout`: a lane holds one Spark type, and each input puts its columns of that
type in lanes of it, so the rows are as wide as the widest input, not as all inputs together;
a lane an input does not use is null in its rows). A repartition
by an expression of the key group (:func:`_shuffle`: the join key cast to one type per key column,
so equal keys hash equally whichever input they come from) sends equal keys to one partition,
without carrying the routing key or the target in the shuffled rows;
``mapInArrow`` then runs :func:`streamjoin.runtime.task.run_task` on each partition's rows. The task
reads the micro-batch id from the task's local property ``streaming.sql.batchId`` (the version),
its partition id, its attempt number and the streaming query's id. A batch (non-streaming) input
runs as version 0 with a final watermark of +infinity.

The global watermark comes from the progress records that every partition writes to the
checkpoint when it commits a version (see ``docs/design/runtime.md``). An operator that reads
processing time (an ``idle_timeout``) gets the micro-batch's timestamp as a column added after the
shuffle (``current_timestamp()``, which Spark fixes per micro-batch and keeps in its offset log,
so an executed-again batch sees the same value); a task without rows learns it from the commit
records of the next versions. A streaming join also unions the
no-data flush source (:mod:`streamjoin.spark.flush`) into its input, and reports its metrics as
observed metrics (:mod:`streamjoin.spark.progress`).
"""

from __future__ import annotations

import logging
import os
import tempfile
import threading
from dataclasses import dataclass, replace
from typing import Iterator, Sequence

import pyarrow as pa
import pyarrow.compute as pc
from pyspark import TaskContext
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema, from_arrow_type, to_arrow_schema

from streamjoin.errors import CheckpointMismatchError, JoinDefinitionError
from streamjoin.kit.keys import routing_key_type
from streamjoin.runtime.bind import BoundQuery, bind_query
from streamjoin.runtime.checkpoint import Checkpoint, RunMode, resolve_location
from streamjoin.runtime.keygroups import check_count, slot_values
from streamjoin.runtime.operator import InputSpec, Operator
from streamjoin.runtime.options import EndOfRun, StateConfig, check_end_of_run
from streamjoin.runtime.task import Arrived, TaskInfo, step_task
from streamjoin.spark.checks import quoted
from streamjoin.spark.flush import closing_version, flush_stream, plan_flush, write_tick
from streamjoin.spark.progress import metrics_batch, observation_name, progress_schema, report_progress
from streamjoin.spark.queries import register_join
from streamjoin.spark.workers import check_worker_python

__all__ = ["run_operator", "arrow_schema", "resolve_checkpoint", "task_context", "INPUT_TAG"]

log = logging.getLogger("streamjoin")


def _configure_worker_logging() -> None:
    """Log one line per task to the executor's stderr at ``$STREAMJOIN_LOG_LEVEL`` (default WARNING)."""
    if not log.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
        log.addHandler(handler)
        log.setLevel(os.environ.get("STREAMJOIN_LOG_LEVEL", "WARNING").upper())

INPUT_TAG = "_sj_input"
#: Set on the DataFrames run_operator returns (their partitions are a join's partitions).
_STAGE_MARK = "_streamjoin_stage"
#: The micro-batch's timestamp, beside the rows of an operator that reads processing time.
_NOW = "_sj_now"
#: A lane of the unioned rows (flat columns shuffle and cross into Arrow faster than one struct
#: per input, and shared lanes faster than a column per input's column).
_LANE = "_sj_{}"


@dataclass(frozen=True)
class _Layout:
    """Where the inputs' columns travel in the unioned rows: input ``i``'s column ``j`` in lane
    ``lanes[i][j]``. Each input fills lanes of its columns' Spark types in order, key columns
    first, so inputs whose key types agree carry each key column in the same lane."""

    lanes: tuple[tuple[int, ...], ...]

    @classmethod
    def of(cls, inputs: Sequence[DataFrame], operator: Operator) -> "_Layout":
        pools: dict[str, list[int]] = {}
        count = 0
        lanes = []
        for df, spec in zip(inputs, operator.inputs):
            names = spec.schema.names
            fields = {f.name: f for f in df.schema.fields}   # one schema call (a round trip on Connect)
            order = [names.index(k) for k in spec.key] + [j for j, n in enumerate(names) if n not in spec.key]
            used: dict[str, int] = {}
            mine = [0] * len(names)
            for j in order:
                kind = fields[names[j]].dataType.json()
                n = used.get(kind, 0)
                used[kind] = n + 1
                pool = pools.setdefault(kind, [])
                if n == len(pool):
                    pool.append(count)
                    count += 1
                mine[j] = pool[n]
            lanes.append(tuple(mine))
        return cls(tuple(lanes))

    def name(self, i: int, j: int) -> str:
        """The lane column of input ``i``'s column ``j``."""
        return _LANE.format(self.lanes[i][j])


def arrow_schema(df: DataFrame) -> pa.Schema:
    """The Arrow schema an operator sees for ``df``'s rows (timestamps in UTC microseconds)."""
    return to_arrow_schema(df.schema, timezone="UTC")


def run_operator(
    inputs: Sequence[DataFrame],
    operator: Operator,
    *,
    checkpoint: str | None,
    partitions: int | None = None,
    state: StateConfig | None = None,
    initial: Sequence[DataFrame | None] | None = None,
    key_groups: int | None = None,
    end_of_run: EndOfRun | None = None,
    pre_staged: Sequence[str] = (),
) -> DataFrame:
    """A DataFrame of ``operator``'s output over ``inputs`` (streaming or batch DataFrames).

    ``checkpoint`` is required when any input is streaming; it is resolved to one absolute
    location here (tasks write exactly there) and bound to the operator's definition, partition
    count and kind of run before the query starts: a batch run refuses a streaming query's
    checkpoint and a streaming query a batch run's (:class:`CheckpointMismatchError`). ``partitions`` defaults to the
    session's ``spark.sql.shuffle.partitions``. ``initial[i]``, a batch DataFrame of input ``i``'s
    schema, is added to input ``i``'s rows of the join's first version: a Spark job run here
    routes it by key into the checkpoint, once (a checkpoint whose first version has run, or
    whose initial rows are complete, keeps them). ``key_groups`` (``max_partitions``; None: the
    default) is recorded by a new checkpoint: rows are routed by key group (:func:`_shuffle`), and
    the checkpoint can be restarted with any ``partitions`` up to it (:mod:`streamjoin.runtime.rescale`).
    ``end_of_run`` (streaming inputs; docs/design/end-of-input.md): ``"flush"`` (None, the
    default: an ``availableNow`` run ends with the no-data batch its advanced watermark needs, as
    Spark's own stateful operators do), ``"release"`` (as ``"flush"``, then one more batch that
    releases every row held for lateness and closes the inputs: a later run with rows is refused)
    or ``"hold"`` (what the run's last batch's watermark passed waits for the next run; the flush
    starts no Python process on a local or ``hdfs://`` checkpoint). A checkpoint whose query ran
    with the tick flush (``"hold"``, the default before 0.3) keeps it (:func:`streamjoin.spark.flush.plan_flush`).
    ``pre_staged``: the
    set-aside inputs whose rows a pre-stage before the shuffle writes to ``checkpoint``
    (:func:`streamjoin.spark.changes.plain_changes`); partition 0 counts them in its metrics
    (``set_aside_rows_<input>``), and so in ``join_metrics`` and the observed metrics.
    """
    check_end_of_run(end_of_run)
    if len(inputs) != len(operator.inputs):
        raise JoinDefinitionError(f"{operator.kind} takes {len(operator.inputs)} inputs, got {len(inputs)}")
    spark = inputs[0].sparkSession
    check_worker_python(spark)
    streaming = any(df.isStreaming for df in inputs)
    given = partitions is not None
    if partitions is None:
        partitions = int(str(spark.conf.get("spark.sql.shuffle.partitions")))
    check_count(partitions, "partitions" if given else "spark.sql.shuffle.partitions")
    checkpoint = resolve_checkpoint(checkpoint, streaming, operator.kind)
    mode = RunMode.STREAMING if streaming else RunMode.BATCH
    key_types = _common_key_types(inputs, operator)
    layout = _Layout.of(inputs, operator)
    given_initial = initial is not None and any(df is not None for df in initial)
    bound = bind_query(
        checkpoint, operator, partitions, mode=mode, key_groups=key_groups, state=state,
        write_initial=(lambda b: _write_initial(initial or (), operator, key_types, b, layout)) if given_initial else None)
    if bound.epoch.number:
        log.info("streamjoin: %s runs in %d partitions (partitioning epoch %d)", checkpoint, partitions, bound.epoch.number)
    if given_initial and not bound.state.initial:
        log.info("streamjoin: %s has run without initial rows; not writing them now", checkpoint)
    groups, state = bound.key_groups, bound.state
    combined = _union_inputs(inputs, operator, layout)
    # A micro-batch whenever the join's watermark moves (streamjoin.spark.flush). Not in a stage
    # fed by another join's output (a table_table_join's join stage): unioned there, the source
    # would break the partition-aligned union of the earlier stages' outputs, whose tasks take
    # their partition id from it; those stages' sources already run the query's batches.
    flushed = streaming and not any(vars(df).get(_STAGE_MARK, False) for df in inputs)
    flush = plan_flush(checkpoint, end_of_run, operator.uses_processing_time) if flushed else None
    if flush is not None:
        stream = flush_stream(spark, checkpoint, partitions, len(operator.inputs), flush)
        combined = combined.unionByName(stream.select(F.lit(-1).cast("byte").alias(INPUT_TAG)),
                                        allowMissingColumns=True)
    shuffled = _shuffle(combined, partitions, groups, _routing_keys(operator, key_types, layout))
    if operator.uses_processing_time:   # after the shuffle: the rows cross it without it
        shuffled = shuffled.withColumn(_NOW, F.current_timestamp())
    task = _PartitionTask(operator, checkpoint, partitions, state, final=not streaming, layout=layout,
                          ticks=flush is not None and flush.ticks, release=flush is not None and flush.release,
                          pre_staged=tuple(pre_staged))
    out = shuffled.mapInArrow(task, from_arrow_schema(progress_schema(operator), prefer_timestamp_ntz=True))
    result = report_progress(out, operator, checkpoint)
    if streaming:
        register_join(result, observation_name(operator, checkpoint), checkpoint)
    vars(result)[_STAGE_MARK] = True
    return result


def _tagged(df: DataFrame, i: int, operator: Operator, layout: _Layout) -> DataFrame:
    """Input ``i``'s rows as: input tag, then its columns (values as they are) in their lanes."""
    spec = operator.inputs[i]
    columns = [f"CAST({i} AS TINYINT) AS {quoted(INPUT_TAG)}"]
    columns += [f"{quoted(name)} AS {quoted(layout.name(i, j))}" for j, name in enumerate(spec.schema.names)]
    return df.selectExpr(*columns)


def _routing_keys(operator: Operator, key_types: Sequence[str], layout: _Layout,
                  only: int | None = None) -> list[Column]:
    """The routing key of the unioned rows, one expression per key column: the key column of the
    row's input cast to the common type (floating-point ones normalised, :func:`_routing_key`);
    one lane where every input's key column travels in it, else chosen by the input tag.
    ``only``: the rows all come from that input."""
    tag = F.col(INPUT_TAG)
    keys = []
    for j, data_type in enumerate(key_types):
        lanes = {i: layout.name(i, spec.schema.names.index(spec.key[j]))
                 for i, spec in enumerate(operator.inputs) if only is None or i == only}
        if len(set(lanes.values())) == 1:
            keys.append(_routing_key(F.col(next(iter(lanes.values()))).cast(data_type), data_type))
            continue
        picked: Column | None = None
        for i, lane in lanes.items():
            value = _routing_key(F.col(lane).cast(data_type), data_type)
            picked = F.when(tag == i, value) if picked is None else picked.when(tag == i, value)
        assert picked is not None
        keys.append(picked)
    return keys


def _routing_key(key: Column, data_type: str) -> Column:
    """``key`` as the hash partitioning must see it: a floating-point key with ``-0.0`` made ``0.0``
    and every NaN one NaN (as Spark's joins compare them, and as the operators match them)."""
    if data_type not in ("float", "double"):
        return key
    return (F.when(key == 0, F.lit(0.0).cast(data_type))
            .when(F.isnan(key), F.lit(float("nan")).cast(data_type))
            .otherwise(key))


def _shuffle(df: DataFrame, partitions: int, groups: int, keys: Sequence[Column]) -> DataFrame:
    """``df`` repartitioned so that task ``p`` gets the rows of the key groups partition ``p`` owns
    (:mod:`streamjoin.runtime.keygroups`): the key group ``pmod(hash(keys), groups)`` and its owner
    are computed in the JVM, and mapped to the owner's *slot*, an int Spark's own hash
    partitioning sends to task ``p``. The repartition is by that expression: no column is added
    to the shuffled rows."""
    slots = F.array(*[F.lit(x) for x in slot_values(partitions)])
    group = F.pmod(F.hash(*keys), F.lit(groups)).cast("bigint")
    owner = F.call_function("div", group * F.lit(partitions), F.lit(groups)).cast("int")
    return df.repartition(partitions, F.element_at(slots, owner + 1))


def resolve_checkpoint(checkpoint: str | None, streaming: bool, what: str) -> str:
    """``checkpoint`` as one absolute location, resolved here on the driver (a relative path
    against the driver's working directory; ``s3a://``, ``dbfs:/`` and the other schemes Spark
    users write mapped as :func:`streamjoin.changelog.storage.resolve_uri` does); for batch inputs without
    one, a new temporary directory. Raises :class:`JoinDefinitionError` for a streaming input
    without one, or a location whose scheme cannot be opened."""
    if checkpoint is not None:
        if not isinstance(checkpoint, str):
            raise JoinDefinitionError(f"{what}: checkpoint must be a str (a path or URI), not {checkpoint!r}")
        return resolve_location(checkpoint)
    if streaming:
        raise JoinDefinitionError(
            f"{what} on a streaming DataFrame needs checkpoint=... : a durable location "
            "(a path or a file:, dbfs:, s3:, s3a:, gs:, hdfs: or abfss: URI) for its state "
            "changelogs, one per join"
        )
    return tempfile.mkdtemp(prefix="streamjoin-batch-")


def _union_inputs(inputs: Sequence[DataFrame], operator: Operator, layout: _Layout) -> DataFrame:
    """One DataFrame: input tag, then each input's columns in their lanes (:func:`_tagged`)."""
    parts = [_tagged(df, i, operator, layout) for i, df in enumerate(inputs)]
    combined = parts[0]
    for part in parts[1:]:
        combined = combined.unionByName(part, allowMissingColumns=True)
    return combined


def _common_key_types(inputs: Sequence[DataFrame], operator: Operator) -> list[str]:
    """The Spark type each key column is cast to before routing, one per key column: the inputs'
    type when all agree, else :func:`streamjoin.kit.keys.routing_key_type` of their Arrow types
    (the key-type rule the joins compare keys with)."""
    widths = {len(spec.key) for spec in operator.inputs}
    if len(widths) != 1:
        raise JoinDefinitionError(f"every input of {operator.kind} needs the same number of key columns")
    schemas = [arrow_schema(df) for df in inputs]
    types = []
    for j in range(widths.pop()):
        found = {df.schema[spec.key[j]].dataType.simpleString() for df, spec in zip(inputs, operator.inputs)}
        if len(found) == 1:
            types.append(found.pop())
            continue
        columns = [(spec.key[j], schema.field(spec.key[j]).type) for schema, spec in zip(schemas, operator.inputs)]
        types.append(from_arrow_type(routing_key_type(columns)).simpleString())
    return types


def _write_initial(
    initial: Sequence[DataFrame | None], operator: Operator, key_types: Sequence[str], bound: BoundQuery,
    layout: _Layout,
) -> dict[str, int]:
    """Route each initial DataFrame by key as the query will (same key columns, types and
    partitioning, :func:`_shuffle`) and write each partition's rows to the checkpoint (a Spark
    job per input); how many rows each input has. Called by
    :func:`streamjoin.runtime.bind.bind_query`, which marks them complete."""
    counts = {}
    for i, df in enumerate(initial):
        if df is None:
            continue
        spec = operator.inputs[i]
        if df.isStreaming:
            raise JoinDefinitionError(f"initial rows of input {spec.name!r} must be a batch DataFrame, not a stream")
        routed = _shuffle(_tagged(df, i, operator, layout), bound.partitions, bound.key_groups,
                          _routing_keys(operator, key_types, layout, only=i))
        writer = _InitialWriter(operator, i, bound.uri, layout)
        written = routed.mapInArrow(writer, "rows long").agg(F.sum("rows")).collect()[0][0]
        counts[spec.name] = int(written or 0)
    return counts


class _InitialWriter:
    """Writes one partition's initial rows of one input to the checkpoint; yields the count."""

    def __init__(self, operator: Operator, index: int, checkpoint: str, layout: _Layout):
        self.operator, self.index, self.checkpoint, self.layout = operator, index, checkpoint, layout

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        spec = self.operator.inputs[self.index]
        found = list(batches)
        rows = _rows(pa.Table.from_batches(found), self.index, spec, self.layout) if found \
            else spec.schema.empty_table()
        if rows.num_rows:
            Checkpoint(self.checkpoint).initial.write(spec.name, task_context().partitionId(), rows)
        yield pa.RecordBatch.from_pydict({"rows": pa.array([rows.num_rows], pa.int64())})


class _PartitionTask:
    """The function ``mapInArrow`` runs: picklable, holding only the operator and the settings."""

    def __init__(self, operator: Operator, checkpoint: str, partitions: int, state: StateConfig, final: bool,
                 layout: _Layout, ticks: bool = False, release: bool = False, pre_staged: tuple[str, ...] = ()):
        """``ticks``: after a version with rows that may move the watermark, ask for one more
        micro-batch (:func:`streamjoin.spark.flush.write_tick`). ``release``: the version that
        closed the inputs runs final, a later one with rows is refused
        (:func:`streamjoin.spark.flush.closing_version`). ``pre_staged``: as :func:`run_operator`'s."""
        self.operator = operator
        self.pre_staged = pre_staged
        self.release = release
        self.ticks = ticks
        self.layout = layout
        self.checkpoint = checkpoint
        self.partitions = partitions
        self.state = state
        self.final = final

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        _configure_worker_logging()
        ctx = task_context()
        batch_id = ctx.getLocalProperty("streaming.sql.batchId")
        task = TaskInfo(
            version=int(batch_id) if batch_id is not None else 0,
            # a task's partition of this operator: Spark's task partition id counts on through a
            # union of several operators' outputs in one stage (the table join's key stages)
            partition=ctx.partitionId() % self.partitions,
            partitions=self.partitions,
            attempt=ctx.attemptNumber(),
            final=self.final or batch_id is None,
            query_id=ctx.getLocalProperty("sql.streaming.queryId"),
        )
        arriving = _Arriving(batches, self.operator, self.layout)   # drained while the store opens
        closed = closing_version(Checkpoint(self.checkpoint)) if self.release and batch_id is not None else None
        if closed is not None:
            task = replace(task, final=task.version == closed)

        def arrived() -> Arrived:
            found = arriving.rows()
            _refuse_after_close(self.checkpoint, closed, task.version, found, self.operator)
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
        if self.ticks and batch_id is not None and _timed_rows(arriving.rows(), self.operator):
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


class _Arriving:
    """A task's input rows, drained from Spark's iterator by a thread of their own from the start,
    so that the JVM keeps sending them while the task reads the checkpoint and opens its store
    (a store handed over by another Python worker can take tens of milliseconds)."""

    def __init__(self, batches: Iterator[pa.RecordBatch], operator: Operator, layout: _Layout) -> None:
        self._batches, self._operator, self._layout = batches, operator, layout
        self._rows: tuple[pa.Table, ...] | None = None
        #: The micro-batch's timestamp the rows carried (:func:`_batch_time`), once they arrived.
        self.time: int | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._drain, name="streamjoin-input", daemon=True)
        self._thread.start()

    def _drain(self) -> None:
        try:
            found = list(self._batches)
            self.time = _batch_time(found)
            self._rows = _split_inputs(found, self._operator, self._layout)
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


def _refuse_after_close(checkpoint: str, closed: int | None, version: int, rows: tuple[pa.Table, ...],
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


def task_context() -> TaskContext:
    """The running Spark task's context (this code runs only inside ``mapInArrow``)."""
    ctx = TaskContext.get()
    if ctx is None:
        raise RuntimeError("streamjoin: a partition function ran outside a Spark task")
    return ctx


def _timed_rows(rows: tuple[pa.Table, ...], operator: Operator) -> bool:
    """Whether any input's rows of this task have an event time (they may move the watermark)."""
    return any(table.num_rows and spec.time is not None and table.column(spec.time).null_count < table.num_rows
               for table, spec in zip(rows, operator.inputs))


def _batch_time(batches: list[pa.RecordBatch]) -> int | None:
    """The micro-batch's timestamp (µs) the rows carry (:data:`_NOW`); None without rows or column."""
    if not batches or _NOW not in batches[0].schema.names:
        return None
    values = pa.chunked_array([b.column(_NOW) for b in batches])
    latest = pc.max(values.cast(pa.timestamp("us", tz=values.type.tz)).cast(pa.int64())).as_py()
    return None if latest is None else int(latest)


def _split_inputs(batches: list[pa.RecordBatch], operator: Operator, layout: _Layout) -> tuple[pa.Table, ...]:
    """Each input's rows as a table of that input's schema."""
    if not batches:
        return tuple(spec.schema.empty_table() for spec in operator.inputs)
    table = pa.Table.from_batches(batches)
    if len(operator.inputs) == 1:
        return (_rows(table, 0, operator.inputs[0], layout),)   # the flush source's stream has no rows
    tags = table.column(INPUT_TAG)
    return tuple(_rows(table.filter(pc.equal(tags, i)), i, spec, layout) for i, spec in enumerate(operator.inputs))


def _rows(table: pa.Table, index: int, spec: InputSpec, layout: _Layout) -> pa.Table:
    """Input ``index``'s columns of ``table`` (from their lanes) as a table of the input's schema."""
    names = spec.schema.names
    columns = [table.column(layout.name(index, j)) for j in range(len(names))]
    return pa.Table.from_arrays(columns, names=names).cast(spec.schema).combine_chunks()


def spark_local_state_dir() -> str:
    """Local stores' root on this executor: under Spark's local directory, else the temp dir."""
    dirs = [d for d in os.environ.get("SPARK_LOCAL_DIRS", "").split(",") if d]
    if not dirs:
        return os.path.join(tempfile.gettempdir(), "streamjoin-state")
    root = dirs[0]
    if os.path.basename(root).startswith("blockmgr-"):
        root = os.path.dirname(root)  # local mode points at the application's block manager
    return os.path.join(root, "streamjoin-state")
