"""A table-table join side's starting rows (``left_bootstrap=`` / ``right_bootstrap=``) as changes.

A real table is never empty when its change stream starts: the rows that existed before the
stream's first change (a snapshot, e.g. :attr:`streamjoin.cdc.SlotStart.snapshot` read in the
replication slot's exported snapshot, or any batch DataFrame of the table's rows) are given to the
side's first stage as initial rows of the join's first version, as snapshot upserts
(:meth:`streamjoin.changes.ChangeFormat.snapshot_op`). A row keeps its change time when the
bootstrap has the side's change-time column; otherwise it gets :data:`BEFORE_EVERY_CHANGE` (a
time before every change the stream can carry), so any change of its key replaces it. With a
``retention`` the rows age from their change time, so the bootstrap must then carry it.
"""

from __future__ import annotations

import datetime

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import IntegralType, TimestampNTZType, TimestampType

from streamjoin.changes import ChangeFormat
from streamjoin.changes.internal import UNITS
from streamjoin.errors import JoinDefinitionError

__all__ = ["bootstrap_changes", "BEFORE_EVERY_CHANGE"]

#: The change time of a bootstrap row without one: the first instant a Spark timestamp holds.
BEFORE_EVERY_CHANGE = datetime.datetime(1, 1, 1, tzinfo=datetime.timezone.utc)


def bootstrap_changes(bootstrap: DataFrame, changes: DataFrame, fmt: ChangeFormat, argument: str,
                      has_retention: bool) -> DataFrame:
    """``bootstrap`` (a batch DataFrame of the table's rows) as snapshot upserts in the schema of
    ``changes`` (the side's routable change stream, read in ``fmt``). Raises
    :class:`JoinDefinitionError` naming ``argument`` when the rows do not fit (see module)."""
    if not isinstance(bootstrap, DataFrame) or bootstrap.isStreaming:
        raise JoinDefinitionError(f"{argument} must be a batch DataFrame of the table's rows (spark.read..., "
                                  "spark.createDataFrame(...)), not a stream")
    meta = {fmt.op, fmt.time, fmt.sequence} - {None}
    rows = [n for n in changes.columns if n not in meta and not n.startswith("_commit_") and n != "_change_type"]
    missing = [k for k in fmt.key if k not in bootstrap.columns]
    unknown = [c for c in bootstrap.columns if c not in rows and c != fmt.time]
    if missing or unknown:
        raise JoinDefinitionError(
            f"{argument} must have the table's key {list(fmt.key)} and only its row columns {rows} (and the change "
            f"time {fmt.time!r}): it lacks {missing} and has {unknown} besides; select those columns")
    if has_retention and fmt.time not in bootstrap.columns:
        raise JoinDefinitionError(
            f"with a retention, {argument}'s rows age from their change time: add the snapshot's time as column "
            f"{fmt.time!r} (e.g. F.lit(snapshot_time).alias({fmt.time!r})); a row without one would be late at once")
    present = set(bootstrap.columns)
    columns = []
    for field in changes.schema.fields:
        if field.name == fmt.op:
            value = F.lit(fmt.snapshot_op())
        elif field.name in present:
            value = F.col(field.name)
        elif field.name == fmt.time:
            value = F.lit(_before_every_change(field.dataType, fmt))
        else:
            value = F.lit(None)
        columns.append(value.cast(field.dataType).alias(field.name))
    return bootstrap.select(columns)


def _before_every_change(data_type, fmt: ChangeFormat) -> object:
    if isinstance(data_type, (TimestampType, TimestampNTZType)):
        return BEFORE_EVERY_CHANGE if isinstance(data_type, TimestampType) else BEFORE_EVERY_CHANGE.replace(tzinfo=None)
    if isinstance(data_type, IntegralType):
        return -(1 << 62) // UNITS[fmt.time_unit or "us"]
    raise JoinDefinitionError(f"a bootstrap row needs a change time, and the change-time column {fmt.time!r} is "
                              f"{data_type.simpleString()}: add it to the bootstrap")
