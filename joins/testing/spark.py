"""The Spark engine of :func:`streamjoin.testing.assert_deterministic`, and the shared test session.

A batch run gives the pipeline batch DataFrames of the inputs. A streaming run writes each input's
micro-batches as Parquet files (one per micro-batch, empty ones too) and reads them with
``maxFilesPerTrigger=1``, so micro-batch ``v`` holds file ``v`` of every input; the query runs with
``spark.sql.shuffle.partitions`` set to the plan's partition count, into a ``foreachBatch`` sink
that collects each micro-batch (twice for the repeated one, keeping the second; ``complete`` output
mode keeps the last result), then one empty micro-batch more (emitting what the last one's rows
released). The collected rows reach ``finish`` in the plan's order. A restart stops the query before a micro-batch and starts it again
from its checkpoints, with a new ``state_dir`` when the pipeline takes one (its local stores lost).
This is the only module of :mod:`streamjoin.testing` that imports pyspark.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from typing import Any, Callable, Sequence

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession

from streamjoin.spark.settings import SPARK_SETTINGS
from streamjoin.statestore.registry import DEFAULT_KIND
from streamjoin.testing.compare import rows_of
from streamjoin.testing.determinism import Outcome, call_pipeline
from streamjoin.testing.plan import RunPlan, shuffled

__all__ = ["SparkEngine", "local_session", "SparkJoins"]


def local_session(app: str = "streamjoin-tests") -> SparkSession:
    """A local Spark session set up for testing joins: two cores with task retries (``local[2,4]``,
    as a cluster retries a failed task), two shuffle partitions, UTC, no UI, quiet logs, its driver
    on the loopback (127.0.0.1: a local session needs no other interface, whatever the machine's
    name resolves to), and the settings the joins run best with (``streamjoin.SPARK_SETTINGS``)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    session = (
        SparkSession.builder.master("local[2,4]")
        .appName(app)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.streaming.stopTimeout", "30s")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config(map=dict(SPARK_SETTINGS))
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    return session


class SparkJoins:
    """streamjoin's joins, as a pipeline's ``joins`` argument in Spark; notes batch-dependent calls."""

    def __init__(self) -> None:
        self.notes: list[str] = []

    def interval_join(self, *args: Any, **kwargs: Any) -> DataFrame:
        from streamjoin import interval_join
        from streamjoin.testing.local import IDLE_TIMEOUT_NOTE

        if kwargs.get("idle_timeout") is not None and IDLE_TIMEOUT_NOTE not in self.notes:
            self.notes.append(IDLE_TIMEOUT_NOTE)
        return interval_join(*args, **kwargs)

    def stream_table_join(self, *args: Any, **kwargs: Any) -> DataFrame:
        from streamjoin import stream_table_join

        if str(kwargs.get("mode", "as_of")).lower() == "latest":
            note = 'stream_table_join(mode="latest") is documented as dependent on micro-batch boundaries'
            if note not in self.notes:
                self.notes.append(note)
        elif _is_view(kwargs.get("table_changes", args[1] if len(args) > 1 else None),
                      kwargs.get("table_format", kwargs.get("changes"))):
            from streamjoin.testing.local import VIEW_AS_OF_NOTE

            if VIEW_AS_OF_NOTE not in self.notes:
                self.notes.append(VIEW_AS_OF_NOTE)
        return stream_table_join(*args, **kwargs)

    def table_table_join(self, *args: Any, **kwargs: Any) -> DataFrame:
        from streamjoin import table_table_join

        return table_table_join(*args, **kwargs)


def _is_view(table: Any, table_format: Any) -> bool:
    """Whether ``table`` (a DataFrame, when given) is read as a view's change stream (the
    ``streamjoin`` vocabulary: named, or detected from its columns)."""
    from streamjoin.changes import ChangeFormat
    from streamjoin.changes.registry import detect_vocabulary
    from streamjoin.spark.lanes import arrow_schema

    if isinstance(table_format, ChangeFormat):
        table_format = table_format.vocabulary.name
    elif table_format is None and isinstance(table, DataFrame):
        detected = detect_vocabulary(arrow_schema(table))
        table_format = detected.name if detected is not None else None
    return table_format == "streamjoin"


class SparkEngine:
    """Runs ``pipeline`` over DataFrames in ``spark`` (see module docstring)."""

    def __init__(self, spark: SparkSession, pipeline: Callable[..., Any],
                 finish: Callable[[pa.Table], Any] | None = None) -> None:
        self.spark, self.pipeline, self.finish = spark, pipeline, finish

    def _outcome(self, table: pa.Table, joins: SparkJoins, order: int | None = None) -> Outcome:
        table = shuffled(table, order)
        result = self.finish(table) if self.finish is not None else table
        return Outcome(rows_of(result), tuple(joins.notes))

    def _options(self, root: str, joins: SparkJoins, store: str, partitions: int, state: int) -> dict[str, Any]:
        return {"joins": joins, "checkpoint": os.path.join(root, "checkpoint"), "store": store,
                "partitions": partitions, "state_dir": os.path.join(root, f"state-{state}")}

    def batch(self, inputs: Sequence[pa.Table]) -> Outcome:
        root = tempfile.mkdtemp(prefix="streamjoin-testing-")
        try:
            joins = SparkJoins()
            frames = [self.spark.createDataFrame(t) for t in inputs]
            out = call_pipeline(self.pipeline, frames, self._options(root, joins, DEFAULT_KIND, 2, 0))
            return self._outcome(out.toArrow(), joins)
        finally:
            shutil.rmtree(root, ignore_errors=True)

    def stream(self, inputs: Sequence[pa.Table], plan: RunPlan) -> Outcome:
        root = tempfile.mkdtemp(prefix="streamjoin-testing-")
        previous = str(self.spark.conf.get("spark.sql.shuffle.partitions"))
        try:
            self.spark.conf.set("spark.sql.shuffle.partitions", str(plan.partitions))
            slices = plan.split(inputs) + [tuple(t.slice(0, 0) for t in inputs)]  # emits what the last released
            schemas = [self.spark.createDataFrame(t.slice(0, 0)).schema for t in inputs]
            sink = _Sink(plan.repeat)
            joins = SparkJoins()
            restart = plan.restart_before or 0
            parts = [(0, restart), (restart, len(slices))] if restart else [(0, len(slices))]
            for state, (first, stop) in enumerate(parts):
                _write(root, slices, first, stop)
                streams = [self.spark.readStream.schema(s).option("maxFilesPerTrigger", 1)
                           .parquet(os.path.join(root, "in", str(i))) for i, s in enumerate(schemas)]
                out = call_pipeline(self.pipeline, streams,
                                    self._options(root, joins, plan.store, plan.partitions, state))
                _run(out, sink, os.path.join(root, "spark"))
            return self._outcome(sink.result(), joins, plan.shuffle)
        finally:
            self.spark.conf.set("spark.sql.shuffle.partitions", previous)
            shutil.rmtree(root, ignore_errors=True)


def _write(root: str, slices: Sequence[Sequence[pa.Table]], first: int, stop: int) -> None:
    """Micro-batches ``first`` to ``stop - 1`` as one Parquet file per input, in read order."""
    for version in range(first, stop):
        for i, table in enumerate(slices[version]):
            directory = os.path.join(root, "in", str(i))
            os.makedirs(directory, exist_ok=True)
            path = os.path.join(directory, f"part-{version:05d}.parquet")
            pq.write_table(table, path)
            os.utime(path, (1_700_000_000 + version, 1_700_000_000 + version))


class _Sink:
    """A ``foreachBatch`` function collecting each micro-batch's rows (see module docstring)."""

    def __init__(self, repeat: int | None) -> None:
        self.repeat, self.complete = repeat, False
        self.tables: list[pa.Table] = []

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        table = df.toArrow()
        if batch_id == self.repeat:
            table = df.toArrow()
        self.tables = [table] if self.complete else self.tables + [table]

    def result(self) -> pa.Table:
        return pa.concat_tables(self.tables)


def _run(out: DataFrame, sink: _Sink, checkpoint: str) -> None:
    """Run the streaming query to the end of its files: append output mode, or complete when the
    pipeline aggregates (Spark refuses append for an aggregation without a watermark)."""
    for mode in ("append", "complete"):
        sink.complete = mode == "complete"
        try:
            query = (out.writeStream.outputMode(mode).foreachBatch(sink)
                     .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
        except Exception as exc:
            if mode == "append" and "output mode" in str(exc).lower() and "not supported" in str(exc).lower():
                continue
            raise
        query.awaitTermination()
        if query.exception() is not None:
            raise RuntimeError(f"the streaming run failed: {query.exception()}")
        return
