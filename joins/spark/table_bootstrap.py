"""``table_table_join``'s ``left_bootstrap=`` / ``right_bootstrap=`` in Spark: a batch DataFrame of
a table's rows as snapshot upserts in its side's change schema (:mod:`streamjoin.table.bootstrap`),
built in the JVM."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

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
    :class:`JoinDefinitionError` naming ``argument`` when the rows do not fit."""
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
                value = column(field.name)
        elif field.name == fmt.time:
            value = F.lit(before_every_change(arrow_field.type, fmt))
        else:
            value = F.lit(None)
        columns.append(value.cast(field.dataType).alias(field.name))
    return bootstrap.select(columns)

