"""What the Spark benchmarks share: a local session, Parquet inputs, and timing a streaming query."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from typing import Callable

__all__ = ["local_session", "time_stream_parts", "fresh_dir", "run_to_noop"]


def local_session(cores: int = 2, shuffle_partitions: int = 4, extra: dict[str, str] | None = None):
    """A local Spark session whose Python workers run this interpreter."""
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
    )
    for key, value in (extra or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def fresh_dir(parent: str, name: str) -> str:
    """A new empty directory under ``parent``."""
    os.makedirs(parent, exist_ok=True)
    return tempfile.mkdtemp(prefix=f"{name}-", dir=parent)


def time_stream_parts(build: Callable[[str], object]) -> tuple[float, float]:
    """(seconds from start to end, seconds in its micro-batches) of the streaming query that
    ``build(checkpoint_dir)`` starts: the second is the sum of Spark's ``triggerExecution`` over
    the query's progress, so the difference is what starting and stopping the query took. The
    query's scratch directory is removed after."""
    scratch = tempfile.mkdtemp(prefix="streamjoin-q-")
    try:
        start = time.perf_counter()
        query = build(scratch)
        query.awaitTermination()
        elapsed = time.perf_counter() - start
        if query.exception() is not None:
            raise RuntimeError(f"benchmark query failed: {query.exception()}")
        batches = sum(p["durationMs"].get("triggerExecution", 0) for p in query.recentProgress) / 1000
        return elapsed, batches
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
