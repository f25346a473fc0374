"""A PostgreSQL table's changes as a Spark stream: the ``postgres_changes`` data source.

    register_postgres_source(spark)
    changes = (spark.readStream.format("postgres_changes").option("dsn", dsn)
               .option("slot", "orders_slot").option("table", "public.orders").load())
    stream_table_join(..., table_changes=changes, changes=postgres_change_format(["user_id"]))

Each micro-batch reads one range ``[start, end)`` of LSNs from a logical replication slot (made by
``streamjoin.cdc.create_slot``): the first starts at the slot's position, each ends at the
server's flushed log position when Spark plans it. Rows are the Debezium vocabulary of
``streamjoin.cdc.wal2json`` (``op``, ``before``, ``after``, ``ts_ms``, ``ts_us``, ``lsn``,
``source``, ``error``, and a ``heartbeat`` row per batch in which anything committed).

**A quiet database gives a quiet query.** Spark plans a micro-batch only when the offset moves, and
it moves only when the log since the last batch holds a change of the table, or (option
``heartbeats``, default true) a heartbeat is due: a transaction that is not a sink's own committed
at least ``heartbeat_interval`` (default ``10 seconds``, a Spark interval) after the commit time the
last batch ended with. Other tables' transactions carry the table's watermark forward at that pace;
a ``PostgresSink``'s own commits never start a batch (see
``streamjoin.cdc.wal2json.pending``). Offsets are ``{"lsn": "X/Y", "commit_us": n}``, the second
being that commit time (absent before the first batch). The slot is only peeked; it is advanced to a batch's end in ``commit``, which
Spark calls after the batch's output is committed, so a query that fails re-reads its last batch
(never skips one) and a restarted query resumes at its checkpoint's offset. Connections that fail
are retried with backoff (options ``retries``, ``retry_delay`` seconds), then the query fails with
``streamjoin.cdc.ConnectionLost``.
"""

from __future__ import annotations

from typing import Iterator, Sequence

import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import StructType

from streamjoin.cdc import (
    Retry,
    SourceSetupError,
    TableInfo,
    advance,
    change_schema,
    check_wal_level,
    confirmed_lsn,
    decode,
    flush_lsn,
    format_lsn,
    parse_lsn,
    peek,
    pending,
    psycopg,
    table_info,
    with_retry,
)
from streamjoin.changes import ChangeFormat
from streamjoin.kit.times import parse_duration

__all__ = ["PostgresChanges", "register_postgres_source", "postgres_change_format", "read_postgres_changes",
           "HEARTBEAT_INTERVAL"]

#: How much commit time passes between two heartbeat-only micro-batches, at most one per that much.
HEARTBEAT_INTERVAL = "10 seconds"


def postgres_change_format(key: str | Sequence[str]) -> ChangeFormat:
    """How the joins read the source's rows: Debezium, commit time ``ts_us``, ties broken by ``lsn``."""
    return ChangeFormat.debezium(key, time="ts_us", time_unit="us", sequence="lsn")


def register_postgres_source(spark: SparkSession) -> None:
    """Make ``spark.readStream.format("postgres_changes")`` available in this session."""
    spark.dataSource.register(PostgresChanges)


def read_postgres_changes(spark: SparkSession, dsn: str, slot: str, table: str, **options: str):
    """The streaming DataFrame of ``table``'s changes read through ``slot`` (see module)."""
    register_postgres_source(spark)
    reader = spark.readStream.format("postgres_changes").option("dsn", dsn).option("slot", slot).option("table", table)
    for name, value in options.items():
        reader = reader.option(name, str(value))
    return reader.load()


class _Options:
    """The source's options, checked: ``dsn``, ``slot``, ``table`` required."""

    def __init__(self, options: dict[str, str]) -> None:
        missing = [name for name in ("dsn", "slot", "table") if not options.get(name)]
        if missing:
            raise SourceSetupError(f"the postgres_changes source needs the options {missing} "
                                   "(a libpq connection string, a replication slot, a table as schema.table)")
        self.dsn, self.slot, self.table = options["dsn"], options["slot"], options["table"]
        self.heartbeats = options.get("heartbeats", "true").lower() != "false"
        self.heartbeat_us = parse_duration("heartbeat_interval", options.get("heartbeat_interval", HEARTBEAT_INTERVAL))
        self.retry = Retry(attempts=int(options.get("retries", "6")), first_delay=float(options.get("retry_delay", "0.5")))

    def info(self) -> TableInfo:
        def attempt() -> TableInfo:
            with psycopg().connect(self.dsn, autocommit=True) as conn:
                check_wal_level(conn)
                confirmed_lsn(conn, self.slot)
                return table_info(conn, self.table)
        return with_retry(attempt, self.dsn, self.retry)


class PostgresChanges(DataSource):
    """The ``postgres_changes`` streaming source (see module)."""

    @classmethod
    def name(cls) -> str:
        return "postgres_changes"

    def schema(self) -> StructType:
        info = _Options(dict(self.options)).info()
        return from_arrow_schema(change_schema(info.schema), prefer_timestamp_ntz=False)

    def streamReader(self, schema: StructType) -> "_Reader":
        return _Reader(_Options(dict(self.options)))


class LsnRange(InputPartition):
    """The transactions committed in ``[start, end)`` (integer LSNs)."""

    def __init__(self, start: int, end: int) -> None:
        self.start, self.end = start, end


class _Reader(DataSourceStreamReader):
    def __init__(self, options: _Options) -> None:
        self.options = options
        self.info = options.info()

    def _run(self, work):
        def attempt():
            with psycopg().connect(self.options.dsn, autocommit=True) as conn:
                return work(conn)
        return with_retry(attempt, self.options.dsn, self.options.retry)

    def initialOffset(self) -> dict:
        return {"lsn": format_lsn(self._run(lambda conn: confirmed_lsn(conn, self.options.slot)))}

    def latestOffset(self, start: dict, limit) -> dict:
        """``start`` unless the log since holds a change of the table or a due heartbeat (see module)."""
        options, info, begin = self.options, self.info, parse_lsn(start["lsn"])

        def work(conn) -> dict:
            conn.execute("SET TIME ZONE 'UTC'")
            latest = flush_lsn(conn)
            if latest <= begin:
                return start
            held = pending(peek(conn, options.slot, info, latest), info, begin, latest)
            last = start.get("commit_us")
            due = (options.heartbeats and held.last_commit_us is not None
                   and (last is None or held.last_commit_us >= last + options.heartbeat_us))
            if not (held.changes or due):
                return start
            commit_us = held.last_commit_us if held.last_commit_us is not None else last
            return {"lsn": format_lsn(latest), **({"commit_us": commit_us} if commit_us is not None else {})}

        return self._run(work)

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        return [LsnRange(parse_lsn(start["lsn"]), parse_lsn(end["lsn"]))]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """The range's change rows (``partition``: an ``LsnRange`` of ``partitions``);
        the slot does not move."""
        assert isinstance(partition, LsnRange)
        if partition.end <= partition.start:
            return iter(())
        options, info = self.options, self.info

        def work(conn) -> pa.Table:
            conn.execute("SET TIME ZONE 'UTC'")
            messages = peek(conn, options.slot, info, partition.end)
            return decode(messages, info, partition.start, partition.end, heartbeat=options.heartbeats)

        return iter(self._run(work).to_batches(max_chunksize=8192))

    def commit(self, end: dict) -> None:
        """Spark has committed every batch up to ``end``: release the slot up to there."""
        self._run(lambda conn: advance(conn, self.options.slot, parse_lsn(end["lsn"])))
