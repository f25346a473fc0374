"""Running an engine-free operator inside a Spark query, on the driver: one shuffle, one ``mapInArrow``.

:func:`run_operator` is the driver's sequence for one operator: check the arguments and the
workers' Python, resolve the checkpoint and bind it to the operator's definition, partition count
and kind of run (:func:`streamjoin.runtime.bind.bind_query`; the initial rows are routed and
written once, here or, for a query with the flush source, in a driver thread while the
query starts: :mod:`streamjoin.spark.initial_writer`), union the inputs into one flat DataFrame in shared lanes
(:mod:`streamjoin.spark.lanes`) with, for a streaming stage that reads the query's sources, the
no-data flush source (:mod:`streamjoin.spark.flush`), repartition by key group
(:mod:`streamjoin.spark.routing`), run the task on each partition (:mod:`streamjoin.spark.task`)
and report its metrics as observed metrics (:mod:`streamjoin.spark.progress`). It returns an
ordinary DataFrame of the operator's output.

A join of several stages (:mod:`streamjoin.spark.plan`) calls it once per stage and says where the
stage stands (``reads_sources``, ``first_task``); nothing here knows which join it runs. The
global watermark comes from the progress records that every partition writes to the checkpoint
when it commits a version (see ``docs/design/runtime.md``). An operator that reads processing time
(an ``idle_timeout``) gets the micro-batch's timestamp as a column added after the shuffle
(``current_timestamp()``, which Spark fixes per micro-batch and keeps in its offset log, so an
executed-again batch sees the same value). A batch (non-streaming) input runs as version 0 with a
final watermark of +infinity.
"""

from __future__ import annotations

import logging
import tempfile
from typing import Any, Mapping, Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from streamjoin.errors import JoinDefinitionError
from streamjoin.runtime.bind import BoundQuery, bind_query
from streamjoin.runtime.checkpoint import RunMode, resolve_location
from streamjoin.runtime.keygroups import check_count
from streamjoin.runtime.operator import Operator
from streamjoin.runtime.options import EndOfRun, StateConfig, check_end_of_run
from streamjoin.spark import initial_writer
from streamjoin.spark.flush import flush_stream, plan_flush
from streamjoin.spark.initial_state import check_initial_state, write_initial_state
from streamjoin.spark.lanes import INPUT_TAG, NOW, Layout, arrow_schema, tagged, union_inputs
from streamjoin.spark.progress import input_observation_name, observation_name, progress_schema, report_progress
from streamjoin.spark.queries import register_join
from streamjoin.spark.routing import common_key_types, owner, routing_keys, shuffle
from streamjoin.spark.task import TARGET, InitialWriter, PartitionTask, task_context
from streamjoin.spark.workers import check_worker_python

# arrow_schema, task_context and INPUT_TAG are re-exported: the joins and users import them from here
__all__ = ["run_operator", "resolve_partitions", "arrow_schema", "resolve_checkpoint", "task_context", "INPUT_TAG"]

log = logging.getLogger("streamjoin")


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
    waits: bool | None = None,
    pre_staged: Sequence[str] = (),
    reads_sources: bool = True,
    first_task: int | None = None,
    initial_state: Mapping[str, DataFrame] | None = None,
    initial_progress: Mapping[str, Any] | None = None,
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
    default) is recorded by a new checkpoint: rows are routed by key group
    (:func:`streamjoin.spark.routing.shuffle`), and
    the checkpoint can be restarted with any ``partitions`` up to it (:mod:`streamjoin.runtime.rescale`).
    ``end_of_run`` (streaming inputs; docs/design/end-of-input.md): ``"flush"`` (None, the
    default: an ``availableNow`` run ends with the no-data batch its advanced watermark needs, as
    Spark's own stateful operators do), ``"release"`` (as ``"flush"``, then one more batch that
    releases every row held for lateness and closes the inputs: a later run with rows is refused)
    or ``"hold"`` (what the run's last batch's watermark passed waits for the next run). ``waits``
    (None: the operator's :attr:`~streamjoin.runtime.operator.Operator.waits_for_watermark`;
    :func:`streamjoin.spark.plan.run_plan` gives its join's): whether some of the join's output
    waits for the watermark; a join none of whose output does (a no-data batch would release
    nothing), like one none of whose inputs carries an event time (no watermark), gets no flush
    source unless asked for ``"release"``. A checkpoint whose query ran with a flush source keeps
    it (:func:`streamjoin.spark.flush.plan_flush`).
    ``pre_staged``: the
    set-aside inputs whose rows a pre-stage before the shuffle writes to ``checkpoint``
    (:func:`streamjoin.spark.changes.plain_changes`); partition 0 counts them in its metrics
    (``set_aside_rows_<input>``), and so in ``join_metrics`` and the observed metrics.

    Where the operator stands in its join (:func:`streamjoin.spark.plan.run_plan` says it for
    each stage; the defaults are a one-stage join's): ``reads_sources``, its inputs are the
    query's own DataFrames, so a streaming run unions the no-data flush source into them (False
    for a stage fed by earlier stages' outputs, whose sources already run the query's batches:
    the table-table join's join stage); ``first_task``, the Spark task id of its partition 0
    (:func:`streamjoin.spark.task.task_partition`; None: the join's output, read by the user's
    query).

    ``initial_state`` (by side of the operator's state, batch DataFrames of ``read_state``'s rows)
    and ``initial_progress`` (by input name, as ``state_progress`` gives it, or ``datetime``) start a new checkpoint from that
    state (:mod:`streamjoin.spark.initial_state`): checked here, written once with the initial
    rows, loaded by each partition's first version.
    """
    check_end_of_run(end_of_run)
    if len(inputs) != len(operator.inputs):
        raise JoinDefinitionError(f"{operator.kind} takes {len(operator.inputs)} inputs, got {len(inputs)}")
    spark = inputs[0].sparkSession
    check_worker_python(spark)
    streaming = any(df.isStreaming for df in inputs)
    partitions = resolve_partitions(spark, partitions)
    checkpoint = resolve_checkpoint(checkpoint, streaming, operator.kind)
    mode = RunMode.STREAMING if streaming else RunMode.BATCH
    key_types = common_key_types(inputs, operator)
    layout = Layout.of(inputs, operator)
    given_state = dict(initial_state or {})
    progress = check_initial_state(operator, given_state, initial_progress) if given_state or initial_progress else {}
    from_state = bool(given_state or progress)
    given_initial = (initial is not None and any(df is not None for df in initial)) or from_state

    def write(b: BoundQuery) -> dict[str, int]:
        counts = _write_initial(initial or (), operator, key_types, b, layout)
        if from_state:
            counts.update(write_initial_state(given_state, progress, operator, key_types, b))
        return counts

    # a micro-batch whenever the join's watermark moves (streamjoin.spark.flush)
    flushed = streaming and reads_sources
    initial_writer.wait_for(checkpoint)   # (a writing this process started for it earlier)
    bound = bind_query(
        checkpoint, operator, partitions, mode=mode, key_groups=key_groups, state=state,
        write_initial=write if given_initial else None, defer_initial=flushed)
    if bound.epoch.number:
        log.info("streamjoin: %s runs in %d partitions (partitioning epoch %d)", checkpoint, partitions, bound.epoch.number)
    if given_initial and not bound.state.initial:
        log.info("streamjoin: %s has run without initial rows; not writing them now", checkpoint)
    groups, state = bound.key_groups, bound.state
    combined = union_inputs(inputs, operator, layout)
    waits = operator.waits_for_watermark if waits is None else waits
    timed = any(spec.time is not None for spec in operator.inputs)
    flush = plan_flush(checkpoint, end_of_run, operator.uses_processing_time, waits=waits,
                       timed=timed) if flushed else None
    # initial rows: written while the query starts where its flush source can wait for them
    in_background = bound.initial_pending and flush is not None and not flush.ticks
    if bound.initial_pending:
        initial_writer.write(bound, write, in_background=in_background, session=spark)
    if flush is not None:
        stream = flush_stream(spark, checkpoint, partitions, len(operator.inputs), flush,
                              initial_pending=in_background)
        combined = combined.unionByName(stream.select(F.lit(-1).cast("byte").alias(INPUT_TAG)),
                                        allowMissingColumns=True)
    if streaming:
        combined = combined.observe(input_observation_name(checkpoint), F.count(F.lit(1)).alias("rows"))
    shuffled = shuffle(combined, partitions, groups, routing_keys(operator, key_types, layout))
    if operator.uses_processing_time:   # after the shuffle: the rows cross it without it
        shuffled = shuffled.withColumn(NOW, F.current_timestamp())
    task = PartitionTask(bound.operator or operator, checkpoint, partitions, state, final=not streaming, layout=layout,
                         ticks=flush is not None and flush.ticks, release=flush is not None and flush.release,
                         pre_staged=tuple(pre_staged), first_task=first_task)
    out = shuffled.mapInArrow(task, from_arrow_schema(progress_schema(operator), prefer_timestamp_ntz=True))
    result = report_progress(out, operator, checkpoint)
    if streaming:
        register_join(result, observation_name(operator, checkpoint), checkpoint)
    return result


def resolve_partitions(spark: SparkSession, partitions: int | None) -> int:
    """``partitions``, or the session's ``spark.sql.shuffle.partitions`` when None; raises
    :class:`JoinDefinitionError` naming the one given unless it is a positive int."""
    if partitions is not None:
        return check_count(partitions, "partitions")
    return check_count(int(str(spark.conf.get("spark.sql.shuffle.partitions"))), "spark.sql.shuffle.partitions")


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
    location = tempfile.mkdtemp(prefix="streamjoin-batch-")
    log.info("streamjoin: %s on batch inputs without checkpoint=: its state and the rows it sets aside (read "
             "them with set_aside_rows) are in %s", what, location)
    return location


def _write_initial(
    initial: Sequence[DataFrame | None], operator: Operator, key_types: Sequence[str], bound: BoundQuery,
    layout: Layout,
) -> dict[str, int]:
    """Route each initial DataFrame by key as the query will (same key columns, types and
    partitioning: the :func:`streamjoin.spark.routing.owner` the query's shuffle sends a row to)
    and write, from each task of a Spark job per input, the rows it read to the checkpoint, as a
    piece of each partition's (no shuffle: the first version reads a partition's pieces); how
    many rows each input has. Called by :func:`streamjoin.runtime.bind.bind_query`, which marks
    them complete."""
    counts = {}
    for i, df in enumerate(initial):
        if df is None:
            continue
        spec = operator.inputs[i]
        if df.isStreaming:
            raise JoinDefinitionError(f"initial rows of input {spec.name!r} must be a batch DataFrame, not a stream")
        rows = tagged(df, i, operator, layout)
        routed = rows.withColumn(TARGET, owner(bound.partitions, bound.key_groups,
                                               routing_keys(operator, key_types, layout, only=i)))
        written = routed.mapInArrow(InitialWriter(operator, i, bound.uri, layout), "rows long").collect()
        counts[spec.name] = sum(int(r[0]) for r in written)
    return counts

