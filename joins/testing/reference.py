"""The reference joins as functions over Arrow tables or pandas DataFrames, for users' unit tests.

Each gives the relational result the streaming join must reach once every window has closed (no
late rows): the nested-loop references of ``streamjoin.testing.interval``,
``streamjoin.testing.enrichment`` and ``streamjoin.testing.table`` behind the joins' own
arguments. Outputs are Arrow tables with the joins' output columns; compare them as multisets
(``streamjoin.testing.compare.rows_of``).

    interval_join_reference(left, right, on, left_time=..., right_time=..., lower=..., upper=..., how=...)
    as_of_join_reference(events, changes, on, stream_time=..., table_key=..., table_time=..., how=...)
    view_reference(left_changes, right_changes, on, left_key=..., right_key=..., left_time=..., right_time=..., how=...)
    view_rows(changes, left_key=..., right_key=...)      the view a table-table join's changes build
"""

from __future__ import annotations

from typing import Any, Sequence

import pyarrow as pa

from streamjoin.kit.keys import common_key_type
from streamjoin.testing.enrichment import reference_as_of
from streamjoin.testing.interval import join_key, reference_interval_join
from streamjoin.testing.table import Change, ReferenceTable, reference_view

__all__ = ["interval_join_reference", "as_of_join_reference", "view_reference", "view_rows"]

_CDF = ("_change_type", "_commit_version", "_seq", "_change_timestamp")


def _arrow(table: Any) -> pa.Table:
    return table if isinstance(table, pa.Table) else pa.Table.from_pandas(table, preserve_index=False)


def _names(value: str | Sequence[str]) -> list[str]:
    return [value] if isinstance(value, str) else list(value)


def _micros(value: Any) -> Any:
    return None if value is None else pa.scalar(value, pa.timestamp("us", "UTC")).cast(pa.int64()).as_py()


def _duration(value: Any) -> int:
    from streamjoin.kit import parse_duration

    return parse_duration("duration", value)


def interval_join_reference(left: Any, right: Any, on: Any, *, left_time: str, right_time: str, lower: Any,
                            upper: Any, how: str = "inner", heartbeats: bool = False) -> pa.Table:
    """The interval join of all rows (the keys once, named as on the left, in the type both sides
    compare in; then the left's other columns, then the right's, a shared name suffixed
    ``_left``/``_right`` and a right column named as a left key ``_right``; semi and anti: the
    left columns). ``lower``/``upper``: timedeltas. ``heartbeats``: as the join's option, rows
    with only a time are left out (the batch join of the other rows)."""
    left, right = _arrow(left), _arrow(right)
    if isinstance(on, tuple) and len(on) == 2 and not isinstance(on[0], str):
        lk, rk = list(on[0]), list(on[1])
    else:
        lk = rk = _names(on)
    lrows, rrows = left.to_pylist(), right.to_pylist()
    for rows, column in ((lrows, left_time), (rrows, right_time)):
        for row in rows:
            row[column] = _micros(row[column])
    rows = reference_interval_join(lrows, rrows, left_key=lk, right_key=rk, left_time=left_time,
                                   right_time=right_time, lower=_duration(lower), upper=_duration(upper), how=how,
                                   left_columns=left.column_names, right_columns=right.column_names,
                                   heartbeats=heartbeats)
    if how in ("left_semi", "left_anti"):
        fields = list(left.schema)
    else:
        lrest = [f for f in left.schema if f.name not in lk]
        rrest = [f for f in right.schema if f.name not in rk]
        shared = {f.name for f in lrest} & {f.name for f in rrest}
        fields = [left.schema.field(k).with_type(common_key_type(k, left.schema.field(k).type, r,
                                                                 right.schema.field(r).type))
                  for k, r in zip(lk, rk)]
        fields += [f.with_name(f"{f.name}_left") if f.name in shared else f for f in lrest]
        fields += [f.with_name(f"{f.name}_right") if f.name in shared | set(lk) else f for f in rrest]
    times = {left_time, right_time, f"{left_time}_left", f"{right_time}_right"}
    columns = list(zip(*rows)) if rows else [()] * len(fields)
    arrays = [pa.array([_from_micros(v) if f.name in times and pa.types.is_timestamp(f.type) else v for v in c],
                       f.type) for c, f in zip(columns, fields)]
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


def _from_micros(value: Any) -> Any:
    return None if value is None else pa.scalar(value, pa.int64()).cast(pa.timestamp("us", "UTC")).as_py()


def as_of_join_reference(events: Any, changes: Any, on: str | Sequence[str], *, stream_time: str,
                         table_key: str | Sequence[str], table_time: str, how: str = "left",
                         heartbeats: bool = False) -> pa.Table:
    """Each event with its key's row as of the event's time, from a plain change table (``op`` in
    upsert/insert/update/delete/heartbeat, the change time ``table_time``): every event column,
    then the table's value columns (a name the events also have gets ``_table``). ``heartbeats``:
    as the join's option, events with only a time are left out."""
    events, changes = _arrow(events), _arrow(changes)
    on, key = _names(on), _names(table_key)
    values = [f for f in changes.schema if f.name not in key and f.name != "op"]
    batch_events = [{"key": tuple(r[k] for k in on), "time": _micros(r[stream_time]), "row": tuple(r.values())}
                    for r in events.to_pylist()]
    ops = {"insert": "upsert", "update": "upsert", "upsert": "upsert", "delete": "delete", "heartbeat": "heartbeat"}
    batch_changes = [{"key": tuple(r[k] for k in key), "op": ops[r["op"]], "time": _micros(r[table_time]),
                      "seq": None, "row": tuple(r[f.name] for f in values)} for r in changes.to_pylist()]
    rows = reference_as_of([(batch_events, batch_changes)], how=how, delay=0, width=len(values),
                           heartbeats=heartbeats)
    names = set(events.column_names)
    fields = list(events.schema) + [f.with_name(f"{f.name}_table") if f.name in names else f for f in values]
    columns = list(zip(*rows)) if rows else [()] * len(fields)
    return pa.Table.from_arrays([pa.array(list(c), f.type) for c, f in zip(columns, fields)], schema=pa.schema(fields))


def view_reference(left_changes: Any, right_changes: Any, on: Any, *, left_key: str | Sequence[str],
                   right_key: str | Sequence[str], left_time: str, right_time: str, how: str = "inner") -> pa.Table:
    """The join of two plain change tables' final tables (each key's latest change by change time;
    deletes remove): the left row's columns then the right's, as ``view_rows`` reads a view."""
    tables = []
    for changes, key, time in ((left_changes, left_key, left_time), (right_changes, right_key, right_time)):
        changes = _arrow(changes)
        table = ReferenceTable(_names(key))
        row_columns = [c for c in changes.column_names if c != "op"]
        table.apply([Change(_key(r, _names(key)), "delete" if r["op"] == "delete" else "upsert",
                            _micros(r[time]), None, {c: r[c] for c in row_columns})
                     for r in changes.to_pylist() if r["op"] != "heartbeat"])
        tables.append((table, changes.schema.remove(changes.schema.get_field_index("op"))))
    (left, lschema), (right, rschema) = tables
    lk, rk = (list(on[0]), list(on[1])) if isinstance(on, tuple) else (_names(on), _names(on))
    view = reference_view(left.rows, right.rows, left_on=lk, right_on=rk, how=how,
                          left_columns=lschema.names, right_columns=rschema.names)
    shared = set(lschema.names) & set(rschema.names)
    fields = [f.with_name(f"{f.name}_left") if f.name in shared else f for f in lschema]
    fields += [f.with_name(f"{f.name}_right") if f.name in shared else f for f in rschema]
    rows = list(view.values())
    columns = list(zip(*rows)) if rows else [()] * len(fields)
    return pa.Table.from_arrays([pa.array(list(c), f.type) for c, f in zip(columns, fields)], schema=pa.schema(fields))


def _key(row: dict[str, Any], names: Sequence[str]) -> tuple:
    """``row``'s values of ``names`` as the joins compare keys: ``-0.0`` is ``0.0`` and every NaN is
    one NaN (Spark's rule), so a key's changes meet whatever the sign of its zero or its NaN."""
    return tuple(join_key(row[k]) for k in names)


def view_rows(changes: Any, *, left_key: str | Sequence[str], right_key: str | Sequence[str]) -> pa.Table:
    """The view a table-table join's change stream builds, applied in (``_commit_version``,
    ``_seq``) order to an empty table: its rows without the change columns. The view key is
    (``left_key``, ``right_key``), the output's names of the two primary keys, compared as the
    join compares keys (``-0.0`` is ``0.0``, every NaN one NaN)."""
    changes = _arrow(changes)
    keys = _names(left_key) + _names(right_key)
    columns = [c for c in changes.column_names if c not in _CDF]
    view: dict[tuple, dict] = {}
    ordered = sorted(changes.to_pylist(), key=lambda r: (r["_commit_version"], r["_seq"]))
    for row in ordered:
        ident = _key(row, keys)
        if row["_change_type"] in ("delete", "update_preimage"):
            view.pop(ident, None)
        else:
            view[ident] = {c: row[c] for c in columns}
    schema = pa.schema([changes.schema.field(c) for c in columns])
    return pa.Table.from_pylist(list(view.values()), schema)
