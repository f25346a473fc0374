"""``table_table_join``'s ``left_bootstrap=`` / ``right_bootstrap=`` in Spark: a batch DataFrame of
a table's rows as snapshot upserts in its side's change schema (:mod:`streamjoin.table.bootstrap`),
built in the JVM."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DataType

from streamjoin.changes import ChangeFormat
from streamjoin.errors import JoinDefinitionError
from streamjoin.spark.checks import column
from streamjoin.spark.runtime import arrow_schema
from streamjoin.spark.times import as_time
from streamjoin.table.bootstrap import before_every_change, check_bootstrap

__all__ = ["bootstrap_changes"]


def bootstrap_changes(bootstrap: DataFrame, changes: DataFrame, fmt: ChangeFormat, argument: str,
                      expire_rows: bool) -> DataFrame:
    """``bootstrap`` (a batch DataFrame of the table's rows) as snapshot upserts in the schema of
    ``changes`` (the side's routable change stream, read in ``fmt``). Raises
    :class:`JoinDefinitionError` naming ``argument`` when the rows do not fit; a value that does not
    cast to its column's type fails the job writing the rows with a message naming the column and
    the value (:func:`_checked_cast`)."""
    if not isinstance(bootstrap, DataFrame) or bootstrap.isStreaming:
        raise JoinDefinitionError(f"{argument} must be a batch DataFrame of the table's rows (spark.read..., "
                                  "spark.createDataFrame(...)), not a stream")
    schema = arrow_schema(changes)
    check_bootstrap(bootstrap.columns, schema, fmt, argument, expire_rows)
    present = {f.name: f.dataType for f in bootstrap.schema.fields}
    columns = []
    for field, arrow_field in zip(changes.schema.fields, schema):
        value: Column | None
        if field.name == fmt.op:
            value = F.lit(fmt.snapshot_op())
        elif field.name in present:
            # a time in another time type keeps its microseconds (Spark's CAST would shift it by the session's zone)
            value = as_time(column(field.name), present[field.name], field.dataType)
            if value is None:
                value = _checked_cast(column(field.name), present[field.name], field.dataType, field.name, argument)
        elif field.name == fmt.time:
            value = F.lit(before_every_change(arrow_field.type, fmt))
        else:
            value = F.lit(None)
        columns.append(value.cast(field.dataType).alias(field.name))
    return bootstrap.select(columns)


def _checked_cast(value: Column, found: DataType, wanted: DataType, name: str, argument: str) -> Column:
    """``value`` (of type ``found``) cast to ``wanted``; a value that does not cast fails the job
    that writes the bootstrap, naming ``argument``, the column and the value (Spark's own cast would
    fail without them under ANSI mode, or give null without a word otherwise)."""
    if found == wanted:
        return value
    cast = value.try_cast(wanted)
    message = F.concat(F.lit(f"{argument}: column {name!r} ({found.simpleString()}) holds '"),
                       F.coalesce(value.cast("string"), F.lit("?")),
                       F.lit(f"', which does not cast to {wanted.simpleString()}, the type of the column in the "
                             "change stream: fix the value, or cast or filter the column in the bootstrap"))
    return F.when(value.isNotNull() & cast.isNull(), F.raise_error(message)).otherwise(cast)

