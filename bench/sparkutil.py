"""What the Spark benchmarks share: a local session, Parquet inputs, and timing a streaming query."""

from __future__ import annotations

import datetime
import os
import shutil
import sys
import tempfile
import time
from typing import TYPE_CHECKING, Any, Callable, NamedTuple, Sequence

from streamjoin.spark.settings import SPARK_SETTINGS

if TYPE_CHECKING:
    from pyspark.sql.streaming import StreamingQuery

__all__ = ["local_session", "time_stream_parts", "QueryTimes", "fixed_costs", "fresh_dir", "run_to_noop"]


def local_session(cores: int = 2, shuffle_partitions: int = 4, extra: dict[str, str] | None = None):
    """A local Spark session whose Python workers run this interpreter, its driver on the loopback
    (127.0.0.1), with the settings the joins run best with (``streamjoin.SPARK_SETTINGS``, which
    the floor's ``mapInArrow`` gains from too); ``extra`` overrides any."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master(f"local[{cores}]")
        .appName("streamjoin-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "4g")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
    )
    for key, value in {**SPARK_SETTINGS, **(extra or {})}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def fresh_dir(parent: str, name: str) -> str:
    """A new empty directory under ``parent``."""
    os.makedirs(parent, exist_ok=True)
    return tempfile.mkdtemp(prefix=f"{name}-", dir=parent)


class QueryTimes(NamedTuple):
    """Where one streaming query's seconds went."""

    seconds: float        # from start() to the end of awaitTermination()
    batch_seconds: float  # in its micro-batches: the sum of Spark's triggerExecution
    start_seconds: float  # its fixed cost before: from start() to the first micro-batch's start
    stop_seconds: float   # its fixed cost after: from the last micro-batch's end to the query's end


def fixed_costs(started: float, ended: float, progress: Sequence[Any]) -> tuple[float, float]:
    """(seconds from ``started`` to the first micro-batch's start, seconds from the last micro-batch's
    end to ``ended``), from the query's progress events (``timestamp``: when a micro-batch started,
    ``durationMs.triggerExecution``: how long it took); ``started`` and ``ended`` are wall-clock
    (``time.time()``) seconds. A query without progress events counts all its time as start."""
    if not progress:
        return ended - started, 0.0
    first, last = progress_span(progress)
    return first - started, ended - last


def progress_span(progress: Sequence[Any]) -> tuple[float, float]:
    """The wall-clock span (epoch seconds) of the micro-batches of ``progress`` events: the first
    one's start to the last one's end (its start plus ``triggerExecution``)."""
    spans = [(_started(p), _started(p) + p["durationMs"].get("triggerExecution", 0) / 1000) for p in progress]
    return min(a for a, _ in spans), max(b for _, b in spans)


def _started(progress: Any) -> float:
    """A progress event's ``timestamp`` (ISO 8601, UTC, e.g. ``2026-01-01T00:00:00.123Z``) as epoch seconds."""
    return datetime.datetime.fromisoformat(progress["timestamp"].replace("Z", "+00:00")).timestamp()


def time_stream_parts(build: Callable[[str], StreamingQuery]) -> QueryTimes:
    """How long the streaming query that ``build(checkpoint_dir)`` starts took, in all, in its
    micro-batches (Spark's ``triggerExecution`` summed over its progress), and before its first
    and after its last micro-batch (see :func:`fixed_costs`). The query's scratch directory is
    removed after."""
    scratch = tempfile.mkdtemp(prefix="streamjoin-q-")
    try:
        wall, start = time.time(), time.perf_counter()
        query = build(scratch)
        query.awaitTermination()
        elapsed = time.perf_counter() - start
        if query.exception() is not None:
            raise RuntimeError(f"benchmark query failed: {query.exception()}")
        progress = query.recentProgress
        batches = sum(p["durationMs"].get("triggerExecution", 0) for p in progress) / 1000
        return QueryTimes(elapsed, batches, *fixed_costs(wall, wall + elapsed, progress))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)   # its checkpoint and local stores


def run_to_noop(df, scratch: str, what: str):
    """Run streaming ``df`` into the ``noop`` sink over all available input (checkpoint under
    ``scratch``) and return the finished query; raise naming ``what`` if it failed."""
    query = (df.writeStream.format("noop").option("checkpointLocation", os.path.join(scratch, "spark"))
             .trigger(availableNow=True).start())
    query.awaitTermination()
    if query.exception() is not None:
        raise RuntimeError(f"{what} failed: {query.exception()}")
    return query
