"""Change data capture from PostgreSQL, engine-free: slots, snapshots, and wal2json decoded into
change rows in the Debezium vocabulary (see the documentation's guide "Change data capture from PostgreSQL").

    create_slot(dsn, slot, tables)   a logical replication slot and the tables' rows at its start
    table_info(conn, table)          a table's columns (Arrow) and primary key, checked
    peek / advance / confirmed_lsn   read a range of the slot without moving it; move it
    decode(messages, info, s, e)     wal2json messages of [s, e) -> Debezium change rows (Arrow)
    pending(messages, info, s, e)    whether [s, e) is worth a micro-batch (a change, a commit's time)

psycopg 3 is the ``postgres`` extra, imported only when a connection is made. The Spark source and
sink are in :mod:`streamjoin.spark.postgres_source` and :mod:`streamjoin.spark.postgres_sink`.
"""

from streamjoin.cdc.catalog import TableInfo, check_wal_level, table_info
from streamjoin.cdc.driver import Retry, connect, psycopg, with_retry
from streamjoin.cdc.errors import (
    CdcError,
    ConnectionLost,
    PostgresDriverMissing,
    ServerBinariesMissing,
    SourceSetupError,
)
from streamjoin.cdc.lsn import format_lsn, parse_lsn
from streamjoin.cdc.slot import SlotStart, advance, confirmed_lsn, create_slot, drop_slot, flush_lsn, peek
from streamjoin.cdc.wal2json import HEARTBEAT_OP, UNDECODABLE_OP, Pending, change_schema, decode, pending

__all__ = [
    "TableInfo", "table_info", "check_wal_level", "Retry", "connect", "psycopg", "with_retry",
    "CdcError", "ConnectionLost", "PostgresDriverMissing", "ServerBinariesMissing", "SourceSetupError",
    "format_lsn", "parse_lsn", "SlotStart", "create_slot", "drop_slot", "confirmed_lsn", "flush_lsn", "advance",
    "peek", "HEARTBEAT_OP", "UNDECODABLE_OP", "Pending", "change_schema", "decode", "pending",
]
