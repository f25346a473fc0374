"""wal2json (format 2) messages decoded into change rows in the Debezium vocabulary, as Arrow.

One row per change of the table, in commit order and, within a transaction, in log order:

    op (string) | before (struct) | after (struct) | ts_ms, ts_us (int64) | lsn (int64) | source (struct)
    | error (string)

``op`` is ``c`` (insert), ``u`` (update), ``d`` (delete), ``heartbeat`` or ``undecodable``: a change
with a value its column's Arrow type cannot hold (see :mod:`streamjoin.cdc.convert`) keeps its
``lsn``, ``ts_*`` and ``source``, has null ``before``/``after``, and says why in ``error`` (null on
every other row). The joins' Debezium vocabulary sets such a row aside (reason ``unknown op``, the
row's ``error`` and ``lsn`` kept), counted in the set-aside metrics, instead of stopping the query. An update that moves a row
to another primary key becomes a ``d`` of the old key and a ``c`` of the new one, as Debezium writes
it, so that a join keyed by the primary key retracts the old row; that ``c`` keeps the old key in
``before`` (a plain insert has a null ``before``), which tells a moved row from a new one. ``before`` holds what the log
keeps of the old row (its replica identity: the key columns unless ``REPLICA IDENTITY FULL``; the
other fields null); ``after`` the new row. ``ts_ms``/``ts_us`` are the transaction's commit time,
``lsn`` the change's own position (a key's changes have increasing ``lsn``: the sequence that
breaks ties of commit time), ``source`` the schema, table, transaction id and commit LSN.

A range ``[start, end)`` keeps the transactions whose commit record's LSN lies in it. When any
transaction commits in the range (whatever tables it touched), one ``heartbeat`` row with the last
commit time ends the batch: every later change commits after it, so it advances the table's
watermark in the joins even while the table itself does not change.

:func:`pending` tells the source whether a range is worth a micro-batch: whether it holds a change
of the table, and the last commit time of the transactions that are not a sink's own (a transaction
whose only changes, among the tables peeked, are to :data:`streamjoin.cdc.slot.SINK_PROGRESS_TABLE`).
Messages of other tables (the progress table is peeked for this) are never decoded as changes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Iterable

import pyarrow as pa
import pyarrow.compute as pc

from streamjoin.cdc.catalog import TableInfo
from streamjoin.cdc.convert import from_json_values
from streamjoin.cdc.lsn import parse_lsn
from streamjoin.cdc.slot import SINK_PROGRESS_TABLE

__all__ = ["change_schema", "decode", "pending", "Pending", "SOURCE_FIELDS", "HEARTBEAT_OP", "UNDECODABLE_OP"]

HEARTBEAT_OP = "heartbeat"
UNDECODABLE_OP = "undecodable"
SOURCE_FIELDS = pa.struct([("schema", pa.string()), ("table", pa.string()), ("txId", pa.int64()),
                           ("commit_lsn", pa.int64())])
_OPS = {"I": "c", "U": "u", "D": "d"}


def change_schema(row: pa.Schema) -> pa.Schema:
    """The schema of the change rows of a table whose rows have schema ``row``."""
    struct = pa.struct([f.with_nullable(True) for f in row])
    return pa.schema([("op", pa.string()), ("before", struct), ("after", struct), ("ts_ms", pa.int64()),
                      ("ts_us", pa.int64()), ("lsn", pa.int64()), ("source", SOURCE_FIELDS), ("error", pa.string())])


@dataclass
class _Rows:
    """Column lists of the rows being decoded."""

    names: list[str]
    op: list[str] = field(default_factory=list)
    before: list[dict[str, Any] | None] = field(default_factory=list)
    after: list[dict[str, Any] | None] = field(default_factory=list)
    time: list[str] = field(default_factory=list)
    lsn: list[int] = field(default_factory=list)
    xid: list[int] = field(default_factory=list)
    commit: list[int] = field(default_factory=list)

    def add(self, op: str, before: Any, after: Any, txn: tuple[int, int, str], lsn: int) -> None:
        self.op.append(op)
        self.before.append(before)
        self.after.append(after)
        self.xid.append(txn[0])
        self.commit.append(txn[1])
        self.time.append(txn[2])
        self.lsn.append(lsn)


def decode(messages: Iterable[str], info: TableInfo, start: int, end: int, *, heartbeat: bool = True) -> pa.Table:
    """The changes of ``info``'s table in transactions committed in ``[start, end)`` (see module)."""
    rows = _Rows(info.schema.names)
    key = info.key
    txn: tuple[int, int, str] | None = None
    last: tuple[int, int, str] | None = None
    for text in messages:
        message = json.loads(text, parse_float=str, parse_int=str)  # numbers as written: -0 keeps its sign
        action = message["action"]
        if action == "B":
            commit = parse_lsn(message["lsn"])
            txn = (int(message.get("xid", 0)), commit, message["timestamp"]) if start <= commit < end else None
        elif action == "C":
            last = txn or last
            txn = None
        elif txn is not None and action in _OPS and _of(message, info):
            _add_change(rows, message, key, txn)
    if heartbeat and last is not None:
        rows.add(HEARTBEAT_OP, None, None, last, last[1])
    return _to_arrow(rows, info)


@dataclass(frozen=True)
class Pending:
    """What a range holds: a change of the table; the last commit time (µs) of a transaction that
    is not a sink's own (None: there is none)."""

    changes: bool
    last_commit_us: int | None


def pending(messages: Iterable[str], info: TableInfo, start: int, end: int) -> Pending:
    """What the transactions committed in ``[start, end)`` hold for ``info``'s table (see module)."""
    changes, last, times = False, None, []
    in_range, own, sink = False, False, False
    for text in messages:
        message = json.loads(text, parse_float=str, parse_int=str)
        action = message["action"]
        if action == "B":
            in_range = start <= parse_lsn(message["lsn"]) < end
            own, sink, last = False, False, message["timestamp"]
        elif action == "C":
            if in_range and (own or not sink):
                times.append(last)
            in_range = False
        elif in_range and action in _OPS:
            own = own or _of(message, info)
            sink = sink or message.get("table") == SINK_PROGRESS_TABLE
            changes = changes or own
    micros = pa.array(times[-1:], pa.string()).cast(pa.timestamp("us", tz="UTC")).cast(pa.int64()).to_pylist()
    return Pending(changes, micros[0] if micros else None)


def _of(message: dict[str, Any], info: TableInfo) -> bool:
    """Whether a change message is of ``info``'s table."""
    return f"{message.get('schema')}.{message.get('table')}" == info.name


def _add_change(rows: _Rows, message: dict[str, Any], key: tuple[str, ...], txn: tuple[int, int, str]) -> None:
    lsn = parse_lsn(message["lsn"])
    after = {c["name"]: c["value"] for c in message.get("columns", ())} or None
    before = {c["name"]: c["value"] for c in message.get("identity", ())} or None
    op = _OPS[message["action"]]
    if op == "u" and before is not None and after is not None and any(before.get(k) != after.get(k) for k in key):
        rows.add("d", before, None, txn, lsn)  # a key move: retract the old key, create the new one
        rows.add("c", before, after, txn, lsn)
    else:
        rows.add(op, before, after, txn, lsn)


def _struct(values: list[dict[str, Any] | None], info: TableInfo, bad: dict[int, str]) -> list[pa.Array]:
    """The columns of ``values`` (rows or nulls); adds the rows a column cannot hold to ``bad``."""
    columns = []
    for f in info.schema:
        column, failed = from_json_values([None if v is None else v.get(f.name) for v in values], f.type)
        for i, reason in failed.items():
            bad.setdefault(i, f"column {f.name}: {reason}")
        columns.append(column)
    return columns


def _to_arrow(rows: _Rows, info: TableInfo) -> pa.Table:
    schema = change_schema(info.schema)
    micros = pa.array(rows.time, pa.string()).cast(pa.timestamp("us", tz="UTC")).cast(pa.int64())
    nsp, _, rel = info.name.partition(".")
    n = len(rows.op)
    source = pa.StructArray.from_arrays(
        [pa.array([nsp] * n, pa.string()), pa.array([rel] * n, pa.string()), pa.array(rows.xid, pa.int64()),
         pa.array(rows.commit, pa.int64())], fields=list(SOURCE_FIELDS))
    bad: dict[int, str] = {}
    before, after = _struct(rows.before, info, bad), _struct(rows.after, info, bad)
    ops = [UNDECODABLE_OP if i in bad else op for i, op in enumerate(rows.op)]
    fields = [f.with_nullable(True) for f in info.schema]
    structs = [pa.StructArray.from_arrays(columns, fields=fields,
                                          mask=pa.array([v is None or i in bad for i, v in enumerate(values)]))
               for columns, values in ((before, rows.before), (after, rows.after))]
    arrays = [pa.array(ops, pa.string()), *structs, pc.divide(micros, 1000), micros,
              pa.array(rows.lsn, pa.int64()), source, pa.array([bad.get(i) for i in range(n)], pa.string())]
    return pa.Table.from_arrays(arrays, schema=schema)
