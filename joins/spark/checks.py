"""Argument checks the PySpark join functions share: they fail before any query starts."""

from __future__ import annotations

from typing import Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import TimestampNTZType, TimestampType

from streamjoin.errors import JoinDefinitionError

__all__ = ["check_columns", "check_time", "column"]


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


def column(name: str) -> Column:
    """The column named exactly ``name``: quoted for Spark (backticks doubled), so names with dots,
    spaces or backticks are taken as they are, never parsed as a nested field or an expression."""
    return F.col(quoted(name))


def quoted(name: str) -> str:
    """``name`` as a Spark SQL identifier (backticks doubled), for ``selectExpr`` and ``F.expr``:
    one text is one Py4J call where a ``Column`` per name is several."""
    return "`" + name.replace("`", "``") + "`"
