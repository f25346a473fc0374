"""Argument checks the PySpark join functions share: they fail before any query starts."""

from __future__ import annotations

from typing import Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import TimestampNTZType, TimestampType

from streamjoin.errors import JoinDefinitionError
from streamjoin.kit.times import describe_duration

__all__ = ["check_columns", "check_time", "check_watermark", "column"]


def check_columns(df: DataFrame, side: str, columns: Sequence[str]) -> None:
    """Raise :class:`JoinDefinitionError` naming the ``columns`` that ``df`` (the ``side`` input) lacks."""
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise JoinDefinitionError(f"the {side} DataFrame has no column {missing}; its columns are {df.columns}")


def check_time(df: DataFrame, argument: str, column: str) -> None:
    """Raise :class:`JoinDefinitionError` unless ``column`` (given as ``argument``) is a timestamp."""
    data_type = df.schema[column].dataType
    if not isinstance(data_type, (TimestampType, TimestampNTZType)):
        raise JoinDefinitionError(
            f"{argument}={column!r} must be a timestamp column, but it is {data_type.simpleString()}; "
            f"convert it first, e.g. F.col({column!r}).cast('timestamp')"
        )


#: The field metadata Spark's ``withWatermark`` sets on its event-time column (milliseconds).
WATERMARK_DELAY = "spark.watermarkDelayMs"


def check_watermark(df: DataFrame, side: str, time: str, delay_us: int, argument: str) -> None:
    """Raise :class:`JoinDefinitionError` when ``df`` (the ``side`` input) carries Spark's
    ``withWatermark`` on the join's time column ``time`` with another delay than the join's
    (``delay_us``, given as ``argument``). The join's lateness is its own delay, never Spark's
    watermark; one that says the same is accepted, and one on another column (of an aggregation
    before the join) belongs to Spark's operators before the join."""
    field = next((f for f in df.schema.fields if f.name == time), None)
    if field is None or WATERMARK_DELAY not in (field.metadata or {}):
        return
    spark_us = int(field.metadata[WATERMARK_DELAY]) * 1000
    if spark_us == delay_us:
        return
    raise JoinDefinitionError(
        f"the {side} DataFrame carries withWatermark({time!r}, '{describe_duration(spark_us)}'), but the "
        f"join's {argument} for it is '{describe_duration(delay_us)}': the join judges lateness by its own "
        f"delay, never by Spark's watermark. Give {argument}='{describe_duration(spark_us)}' (the same delay), "
        "or leave withWatermark out of the join's input (put it after the join, for Spark's operators there)")


def column(name: str) -> Column:
    """The column named exactly ``name``: quoted for Spark (backticks doubled), so names with dots,
    spaces or backticks are taken as they are, never parsed as a nested field or an expression."""
    return F.col(quoted(name))


def quoted(name: str) -> str:
    """``name`` as a Spark SQL identifier (backticks doubled), for ``selectExpr`` and ``F.expr``:
    one text is one Py4J call where a ``Column`` per name is several."""
    return "`" + name.replace("`", "``") + "`"
