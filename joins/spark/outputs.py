"""Reading what a join set aside (late rows, dead letters) and its metrics, as DataFrames."""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession

from streamjoin.runtime.checkpoint import Checkpoint

__all__ = ["set_aside_rows", "join_metrics"]


def set_aside_rows(spark: SparkSession, checkpoint: str, input_name: str) -> DataFrame | None:
    """Rows of input ``input_name`` the join did not process, with a ``_reason`` column and the
    version ``v`` and partition ``p`` they arrived in; None when there are none.

    Input names: ``left`` / ``right`` for interval joins.
    """
    uri = Checkpoint(checkpoint).set_aside_uri(input_name)
    return None if uri is None else spark.read.parquet(uri)


def join_metrics(spark: SparkSession, checkpoint: str) -> DataFrame:
    """One row per version and partition: rows in, out and set aside, state size, restores."""
    records = Checkpoint(checkpoint).read_metrics()
    if not records:
        return spark.createDataFrame([], "version long, partition long")
    return spark.createDataFrame(records)
