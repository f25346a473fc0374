"""A table-table join side's starting rows (``left_bootstrap=`` / ``right_bootstrap=``) as changes, engine-free.

A real table is never empty when its change stream starts: the rows that existed before the
stream's first change (a snapshot, e.g. :attr:`streamjoin.cdc.SlotStart.snapshot` read in the
replication slot's exported snapshot) are given to the side's key stage as initial rows of the
join's first version, as snapshot upserts (:meth:`streamjoin.changes.ChangeFormat.snapshot_op`).
A row keeps its change time when the bootstrap has the side's change-time column; otherwise it
gets :data:`BEFORE_EVERY_CHANGE` (a time before every change the stream can carry), so any change
of its key replaces it. With a ``retention`` the rows age from their change time, so the
bootstrap must then carry it. :func:`check_bootstrap` is the one check both engines run.
"""

from __future__ import annotations

import datetime
from typing import Sequence

import pyarrow as pa

from streamjoin.changes import ChangeFormat
from streamjoin.changes.internal import UNITS
from streamjoin.errors import JoinDefinitionError
from streamjoin.kit.columns import cast_values

__all__ = ["check_bootstrap", "before_every_change", "bootstrap_changes", "BEFORE_EVERY_CHANGE"]

#: The change time of a bootstrap row without one: the first instant a Spark timestamp holds.
BEFORE_EVERY_CHANGE = datetime.datetime(1, 1, 1, tzinfo=datetime.timezone.utc)


def check_bootstrap(columns: Sequence[str], changes: pa.Schema, fmt: ChangeFormat, argument: str,
                    expire_rows: bool) -> None:
    """Raise :class:`JoinDefinitionError` naming ``argument`` unless a bootstrap with ``columns``
    fits a side whose (routable) changes have schema ``changes``, read in ``fmt`` (see module)."""
    meta = {fmt.op, fmt.time, fmt.sequence} - {None}
    rows = [n for n in changes.names if n not in meta and not n.startswith("_commit_") and n != "_change_type"]
    missing = [k for k in fmt.key if k not in columns]
    unknown = [c for c in columns if c not in rows and c != fmt.time]
    if missing or unknown:
        raise JoinDefinitionError(
            f"{argument} must have the table's key {list(fmt.key)} and only its row columns {rows} (and the change "
            f"time {fmt.time!r}): it lacks {missing} and has {unknown} besides; select those columns")
    if expire_rows and fmt.time not in columns:
        raise JoinDefinitionError(
            f"with expire_rows, {argument}'s rows age from their change time: add the snapshot's time as column "
            f"{fmt.time!r} (e.g. F.lit(snapshot_time).alias({fmt.time!r})); a row without one would expire at once")
    if fmt.time not in columns:
        before_every_change(changes.field(fmt.time).type, fmt)


def before_every_change(type_: pa.DataType, fmt: ChangeFormat) -> object:
    """The change time of a bootstrap row without one, as a value of the change-time column's type."""
    if pa.types.is_timestamp(type_):
        return BEFORE_EVERY_CHANGE if type_.tz is not None else BEFORE_EVERY_CHANGE.replace(tzinfo=None)
    if pa.types.is_integer(type_):
        return -(1 << 62) // UNITS[fmt.time_unit or "us"]
    raise JoinDefinitionError(f"a bootstrap row needs a change time, and the change-time column {fmt.time!r} is "
                              f"{type_}: add it to the bootstrap")


def bootstrap_changes(snapshot: pa.Table, changes: pa.Schema, fmt: ChangeFormat, argument: str,
                      expire_rows: bool) -> pa.Table:
    """``snapshot`` (the table's rows) as snapshot upserts with schema ``changes`` (see module).
    Raises :class:`JoinDefinitionError` naming ``argument``, the column and a value that does not
    cast to the change stream's type."""
    check_bootstrap(snapshot.column_names, changes, fmt, argument, expire_rows)
    n, arrays = snapshot.num_rows, []
    for field in changes:
        if field.name == fmt.op:
            arrays.append(pa.repeat(pa.scalar(fmt.snapshot_op()), n).cast(field.type))
        elif field.name in snapshot.column_names:
            arrays.append(cast_values(snapshot.column(field.name), field.type, f"column {field.name!r} of {argument} "
                                      "(as its change stream's)", JoinDefinitionError))
        elif field.name == fmt.time:
            arrays.append(pa.repeat(pa.scalar(before_every_change(field.type, fmt), field.type), n))
        else:
            arrays.append(pa.nulls(n, field.type))
    return pa.Table.from_arrays(arrays, schema=changes)
