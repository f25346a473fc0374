"""The Spark layer: the only part of ``joins`` that imports pyspark."""

from streamjoin.spark.runtime import arrow_schema, run_operator

__all__ = ["arrow_schema", "run_operator"]
