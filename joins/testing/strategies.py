"""Hypothesis strategies for event streams, change streams and their micro-batch splits.

    event_streams(schema, time=..., key=...)        an event table, rows in arrival order
    change_streams(schema, key=..., time=...)       a table's change stream (plain, delta, debezium)
    micro_batches(*tables)                          the tables cut into micro-batches, interleaved

Keys come from a small domain so that joins match; times drift forward with bounded disorder;
events and changes come again (redelivered) unless turned off; late rows, nulls, stale changes and
heartbeats come on request. Values of other columns are drawn from a few per type. Needs
Hypothesis (``pip install "/path/to/streamjoin[testing]"``).
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Mapping, Sequence

import pyarrow as pa

from streamjoin.testing._hypothesis import strategies as st
from streamjoin.testing.plan import run_plans

__all__ = ["event_streams", "change_streams", "micro_batches", "VOCABULARIES", "START"]

#: Where generated times start (UTC).
START = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
#: The change vocabularies ``change_streams`` writes.
VOCABULARIES = ("plain", "delta", "debezium")


def _names(key: str | Sequence[str]) -> list[str]:
    return [key] if isinstance(key, str) else list(key)


def _values(kind: pa.DataType, start: dt.datetime) -> Any:
    if pa.types.is_integer(kind):
        return st.integers(0, 3)
    if pa.types.is_floating(kind):
        return st.sampled_from([0.5, -1.0, 2.0])
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return st.sampled_from(["a", "b", "c"])
    if pa.types.is_boolean(kind):
        return st.booleans()
    if pa.types.is_timestamp(kind):
        return st.integers(0, 30).map(lambda s: start + dt.timedelta(seconds=s))
    return st.none()


def _key_values(keys: Sequence[Any] | Mapping[str, Sequence[Any]], column: str) -> list[Any]:
    return list(keys[column] if isinstance(keys, Mapping) else keys)


def _value(draw: Any, field: pa.Field, keys: Sequence[Any] | Mapping[str, Sequence[Any]], start: dt.datetime,
           nulls: bool, is_key: bool) -> Any:
    if nulls and draw(st.integers(0, 9)) == 0:
        return None
    return draw(st.sampled_from(_key_values(keys, field.name))) if is_key else draw(_values(field.type, start))


def _zone(value: dt.datetime, kind: pa.DataType) -> dt.datetime:
    return value if kind.tz is not None else value.replace(tzinfo=None)


def event_streams(schema: pa.Schema, *, time: str, key: str | Sequence[str],
                  keys: Sequence[Any] | Mapping[str, Sequence[Any]] = (0, 1, 2, 3),
                  min_rows: int = 0, max_rows: int = 12, start: dt.datetime = START,
                  step: dt.timedelta = dt.timedelta(seconds=1), disorder: dt.timedelta = dt.timedelta(seconds=2),
                  late: bool = False, nulls: bool = False, duplicates: bool = True, heartbeats: bool = False) -> Any:
    """Tables of ``schema``, rows in arrival order (key values drawn from ``keys``, or from
    ``keys[column]`` per key column): row ``i`` at ``start + i * step`` minus up to
    ``disorder``; with ``late``, some rows are a minute further back than that (late for any
    watermark delay below it); with ``nulls``, some keys, values and (rarely) times are null.
    With ``duplicates`` (the default, as at-least-once sources redeliver), row ``i`` is sometimes
    an earlier row again, one whose time is at most ``disorder`` before row ``i - 1``'s place (no
    older than a new row there could be: not late for a watermark delay of ``disorder``); a
    micro-batch split puts it in the same micro-batch as the first delivery or a later one.
    With ``heartbeats``, some rows are heartbeats: every column but ``time`` null (for a join
    with ``heartbeats=True``: progress of the stream, never a row)."""
    key_names = set(_names(key))

    @st.composite
    def tables(draw: Any) -> pa.Table:
        rows: list[dict[str, Any]] = []
        for i in range(draw(st.integers(min_rows, max_rows))):
            floor = start + (i - 1) * step - disorder
            again = [r for r in rows if r[time] is not None and r[time] >= _zone(floor, schema.field(time).type)]
            if duplicates and again and draw(st.integers(0, 3)) == 3:  # shrinks to a new row
                rows.append(dict(draw(st.sampled_from(again))))
                continue
            back = draw(st.integers(0, int(disorder.total_seconds() * 1000))) * dt.timedelta(milliseconds=1)
            if late and draw(st.integers(0, 4)) == 0:
                back += dt.timedelta(minutes=1)
            if heartbeats and draw(st.integers(0, 4)) == 0:
                row: dict[str, Any] = {f.name: None for f in schema}
                row[time] = _zone(start + i * step - back, schema.field(time).type)
                rows.append(row)
                continue
            row = {}
            for f in schema:
                if f.name == time:
                    null = nulls and draw(st.integers(0, 19)) == 0
                    row[f.name] = None if null else _zone(start + i * step - back, f.type)
                else:
                    row[f.name] = _value(draw, f, keys, start, nulls, f.name in key_names)
            rows.append(row)
        return pa.Table.from_pylist(rows, schema)

    return tables()


def _plain_changes(draw: Any, schema: pa.Schema, key: list[str], keys: Sequence[Any], n: int, start: dt.datetime,
                   step: dt.timedelta, *, deletes: bool, stale: bool, duplicates: bool, heartbeats: bool
                   ) -> list[tuple[str, dt.datetime, dict, dict | None, int]]:
    """(op, time, row, previous row, sequence) per change: op is upsert, delete or heartbeat."""
    kinds = ["upsert"] * 4 + ["delete"] * deletes + ["heartbeat"] * heartbeats + ["stale"] * stale \
        + ["duplicate"] * duplicates
    current: dict[tuple, dict] = {}
    out: list[tuple[str, dt.datetime, dict, dict | None, int]] = []
    for i in range(n):
        at = start + i * step
        kind = draw(st.sampled_from(kinds))
        if kind in ("stale", "duplicate") and out:
            op, when, row, before, seq = out[draw(st.integers(0, len(out) - 1))]
            older = when - dt.timedelta(milliseconds=500)
            out.append((op, when, row, before, seq) if kind == "duplicate" else (op, older, row, before, i))
            continue
        if kind == "heartbeat":
            out.append(("heartbeat", at, {f.name: None for f in schema}, None, i))
            continue
        pk = {k: draw(st.sampled_from(list(keys))) for k in key}
        ident = tuple(pk.values())
        if kind == "delete":
            out.append(("delete", at, current.pop(ident, pk), None, i))
            continue
        row = {f.name: pk[f.name] if f.name in pk else draw(_values(f.type, start)) for f in schema}
        out.append(("upsert", at, row, current.get(ident), i))
        current[ident] = row
    return out


def change_streams(schema: pa.Schema, *, key: str | Sequence[str], time: str = "changed_at",
                   vocabulary: str = "plain", keys: Sequence[Any] = (0, 1, 2, 3), min_changes: int = 0,
                   max_changes: int = 12, start: dt.datetime = START, step: dt.timedelta = dt.timedelta(seconds=1),
                   deletes: bool = True, stale: bool = False, duplicates: bool = True,
                   heartbeats: bool = False) -> Any:
    """Change tables of a table whose rows have ``schema`` (key and value columns), in arrival order.

    Change ``i`` happens at ``start + i * step``: an insert or an update (new values: an update
    may move the row to another join key), a delete, a duplicate (an earlier change again, as
    at-least-once sources redeliver; ``duplicates=False`` turns them off), and on request a
    heartbeat or a stale change (an earlier change again, half a second older).
    ``vocabulary``: ``plain`` (``op``, the change time ``time``, the row), ``delta`` (the row,
    ``_change_type`` with update pre- and post-images, ``_commit_version``, ``_commit_timestamp``)
    or ``debezium`` (``op``, ``before``, ``after``, ``ts_ms``)."""
    if vocabulary not in VOCABULARIES:
        raise ValueError(f"vocabulary must be one of {VOCABULARIES}, not {vocabulary!r}")
    names = _names(key)

    @st.composite
    def tables(draw: Any) -> pa.Table:
        n = draw(st.integers(min_changes, max_changes))
        changes = _plain_changes(draw, schema, names, keys, n, start, step, deletes=deletes, stale=stale,
                                 duplicates=duplicates, heartbeats=heartbeats)
        return _spell(changes, schema, time, vocabulary)

    return tables()


def _spell(changes: list, schema: pa.Schema, time: str, vocabulary: str) -> pa.Table:
    stamp = pa.timestamp("us", "UTC")
    if vocabulary == "plain":
        rows = [{**row, "op": op, time: at} for op, at, row, _, _ in changes]
        fields = [*schema, pa.field("op", pa.string()), pa.field(time, stamp)]
        return pa.Table.from_pylist(rows, pa.schema(fields))
    if vocabulary == "delta":
        rows = []
        for op, at, row, before, version in changes:
            if op == "upsert" and before is not None:
                rows.append({**before, "_change_type": "update_preimage", "_commit_version": version,
                             "_commit_timestamp": at})
            kind = {"upsert": "update_postimage" if before is not None else "insert"}.get(op, op)
            rows.append({**row, "_change_type": kind, "_commit_version": version, "_commit_timestamp": at})
        fields = [*schema, pa.field("_change_type", pa.string()), pa.field("_commit_version", pa.int64()),
                  pa.field("_commit_timestamp", stamp)]
        return pa.Table.from_pylist(rows, pa.schema(fields))
    row_type = pa.struct(list(schema))
    rows = [{"op": {"upsert": "u" if before is not None else "c", "delete": "d"}.get(op, op),
             "before": before if op != "delete" else row, "after": row if op == "upsert" else None,
             "ts_ms": int(at.timestamp() * 1000)} for op, at, row, before, _ in changes]
    fields = [pa.field("op", pa.string()), pa.field("before", row_type), pa.field("after", row_type),
              pa.field("ts_ms", pa.int64())]
    return pa.Table.from_pylist(rows, pa.schema(fields))


def micro_batches(*tables: pa.Table, max_batches: int = 4) -> Any:
    """``tables`` (several inputs' rows in arrival order) cut into 1 to ``max_batches`` micro-batches:
    a list of tuples, one slice of every input per micro-batch (an input may have none in one)."""
    plans = run_plans([t.num_rows for t in tables], max_batches=max_batches, partitions=[1], stores=["memory"],
                      disturb=False, reorder=False)
    return plans.map(lambda plan: plan.split(tables))
