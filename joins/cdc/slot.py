"""A logical replication slot read through SQL: create it with a snapshot, peek, advance.

The source never consumes changes with ``pg_logical_slot_get_changes``: it *peeks* a range of LSNs
(``peek``), and moves the slot (``advance``) only once Spark has committed the micro-batch
that read them, so that a crash re-reads and never skips. A transaction belongs to the range
``[start, end)`` that holds its commit record's LSN; PostgreSQL keeps every transaction whose commit
record starts at or after the slot's confirmed position, so advancing to ``end`` releases exactly
the transactions of the ranges read so far.

``create_slot`` creates the slot over a replication connection that exports its snapshot, and
reads the tables in that snapshot: the rows as they stood at the slot's first LSN, which every
change the slot decodes comes after (for ``bootstrap=``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import pyarrow as pa

from streamjoin.cdc.catalog import TableInfo, check_wal_level, table_info
from streamjoin.cdc.driver import psycopg
from streamjoin.cdc.errors import CdcError, SourceSetupError
from streamjoin.cdc.lsn import format_lsn, parse_lsn
from streamjoin.cdc.snapshot import read_table

__all__ = ["SINK_PROGRESS_TABLE", "SlotStart", "create_slot", "drop_slot", "confirmed_lsn", "flush_lsn", "advance", "peek",
           "PLUGIN", "PLUGIN_OPTIONS"]

PLUGIN = "wal2json"
#: The table in which ``streamjoin.spark.postgres_sink.PostgresSink`` records its batches (in
#: the connection's default schema): a transaction that changes only it, among the tables a source
#: peeks, is a sink's own write, which is no reason for a micro-batch.
SINK_PROGRESS_TABLE = "streamjoin_sink_progress"
#: wal2json's options: one JSON message per change (format 2) with its LSN, commit time and xid.
PLUGIN_OPTIONS = ("format-version", "2", "include-lsn", "1", "include-timestamp", "1", "include-xids", "1")


@dataclass(frozen=True)
class SlotStart:
    """A new slot's first LSN (the source's initial offset), the snapshot of the tables at it, and
    the snapshot's rows set aside per table (a value the column's type cannot hold: the columns
    as text and ``_reason``, see ``streamjoin.cdc.snapshot``)."""

    slot: str
    lsn: int
    snapshot: dict[str, pa.Table]
    set_aside: dict[str, pa.Table] = field(default_factory=dict)


def create_slot(dsn: str, slot: str, tables: Sequence[str] = ()) -> SlotStart:
    """Create logical replication slot ``slot`` (wal2json) and read ``tables`` as of its start.

    Raises ``SourceSetupError`` when wal_level is not logical, the slot exists already, or a
    table is unknown or has no primary key.
    """
    pg = psycopg()
    with pg.connect(dsn, autocommit=True) as conn:
        check_wal_level(conn)
        infos = [table_info(conn, t) for t in tables]
        if conn.execute("SELECT 1 FROM pg_replication_slots WHERE slot_name = %s", (slot,)).fetchone():
            raise SourceSetupError(f"replication slot {slot!r} exists already: drop it "
                                   f"(SELECT pg_drop_replication_slot('{slot}')) or read from it")
    with pg.connect(dsn, autocommit=True, replication="database") as repl:
        result = repl.pgconn.exec_(f'CREATE_REPLICATION_SLOT "{slot}" LOGICAL {PLUGIN} EXPORT_SNAPSHOT'.encode())
        if result.status != pg.pq.ExecStatus.TUPLES_OK:
            raise CdcError(f"could not create replication slot {slot!r}: "
                           f"{result.error_message.decode(errors='replace').strip()}")
        lsn, snapshot_name = result.get_value(0, 1).decode(), result.get_value(0, 2).decode()
        read = _read_snapshot(dsn, snapshot_name, infos)  # while the exporting session stays idle
    return SlotStart(slot, parse_lsn(lsn), {name: rows for name, (rows, _) in read.items()},
                     {name: aside for name, (_, aside) in read.items()})


def _read_snapshot(dsn: str, snapshot_name: str, infos: list[TableInfo]) -> dict[str, tuple[pa.Table, pa.Table]]:
    with psycopg().connect(dsn) as conn:
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        conn.execute(f"SET TRANSACTION SNAPSHOT '{snapshot_name}'")
        tables = {info.name: read_table(conn, info) for info in infos}
        conn.rollback()
    return tables


def drop_slot(conn: Any, slot: str) -> None:
    """Drop ``slot`` if it exists."""
    conn.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = %s", (slot,))


def confirmed_lsn(conn: Any, slot: str) -> int:
    """The slot's confirmed position. Raises ``SourceSetupError`` when there is no such slot."""
    row = conn.execute("SELECT confirmed_flush_lsn::text, plugin FROM pg_replication_slots WHERE slot_name = %s",
                       (slot,)).fetchone()
    if row is None:
        raise SourceSetupError(
            f"replication slot {slot!r} does not exist: create it first with "
            f"streamjoin.cdc.create_slot(dsn, {slot!r}, tables) (which also returns the snapshot for bootstrap=)")
    if row[1] != PLUGIN:
        raise SourceSetupError(f"replication slot {slot!r} decodes with {row[1]!r}; the source reads {PLUGIN} slots")
    return parse_lsn(row[0])


def flush_lsn(conn: Any) -> int:
    """The server's log flushed so far: no change at or past it can be decoded yet."""
    return parse_lsn(conn.execute("SELECT pg_current_wal_flush_lsn()::text").fetchone()[0])


def advance(conn: Any, slot: str, lsn: int) -> None:
    """Move ``slot`` to ``lsn`` (never backwards): the server may then drop the log before it."""
    if lsn > confirmed_lsn(conn, slot):
        conn.execute("SELECT pg_replication_slot_advance(%s, %s::pg_lsn)", (slot, format_lsn(lsn)))


def peek(conn: Any, slot: str, info: TableInfo, end: int) -> list[str]:
    """The slot's wal2json messages (one JSON text each) of transactions committed before ``end``,
    for ``info``'s table and ``SINK_PROGRESS_TABLE`` (in any schema), plus every transaction's
    begin and commit; the slot does not move."""
    options = (*PLUGIN_OPTIONS, "add-tables", f"{info.wal2json_name},*.{SINK_PROGRESS_TABLE}")
    placeholders = ", ".join(["%s"] * len(options))
    rows = conn.execute(
        f"SELECT data FROM pg_logical_slot_peek_changes(%s, %s::pg_lsn, NULL, {placeholders})",
        (slot, format_lsn(end), *options)).fetchall()
    return [row[0] for row in rows]
