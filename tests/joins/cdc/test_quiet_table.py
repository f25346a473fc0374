"""An as-of enrichment against a quiet PostgreSQL table: the source's heartbeats, which carry the
commit times of other tables' transactions, move the table's watermark and release the events."""

from __future__ import annotations

import datetime
import threading
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from streamjoin.cdc import connect, create_slot

pytestmark = [pytest.mark.postgres, pytest.mark.spark]

_TABLES = "CREATE TABLE users (user_id bigint PRIMARY KEY, tier text); CREATE TABLE other (x int PRIMARY KEY)"


def _now(conn) -> datetime.datetime:
    """The server's clock: after the commit time of every transaction committed so far."""
    return conn.execute("SELECT clock_timestamp()").fetchone()[0]


def test_stream_table_join_quiet_postgres_table_released_by_other_tables_commits(spark, dsn, slot, tmp_path):
    from streamjoin import stream_table_join
    from streamjoin.spark.postgres_source import postgres_change_format, read_postgres_changes

    with connect(dsn) as conn:
        conn.execute("SET TIME ZONE 'UTC'")
        conn.execute(_TABLES)
        create_slot(dsn, slot)
        conn.execute("INSERT INTO users VALUES (1, 'silver')")
        between = _now(conn)  # after version 1 of user 1, before version 2
        conn.execute("UPDATE users SET tier = 'gold' WHERE user_id = 1")
        after = _now(conn)  # after version 2: the table's last change
        events = pa.table({"order_id": [10, 11], "user_id": [1, 1], "at": [between, after]},
                          schema=pa.schema([("order_id", pa.int64()), ("user_id", pa.int64()),
                                            ("at", pa.timestamp("us", tz="UTC"))]))
        (tmp_path / "events").mkdir()
        pq.write_table(events, tmp_path / "events" / "part-0.parquet")

        lock, written, batches = threading.Lock(), [], []

        def write(df, batch_id: int) -> None:
            rows = [(r.order_id, r.tier) for r in df.select("order_id", "tier").collect()]
            with lock:
                batches.append(batch_id)
                written.extend(rows)

        enriched = stream_table_join(
            spark.readStream.schema("order_id bigint, user_id bigint, at timestamp").parquet(str(tmp_path / "events")),
            read_postgres_changes(spark, dsn, slot, "public.users", heartbeat_interval="1 second"),
            "user_id", stream_time="at", table_key="user_id", table_format=postgres_change_format("user_id"),
            delay="0 seconds", how="left", checkpoint=str(tmp_path / "join"), partitions=2)
        query = (enriched.writeStream.foreachBatch(write).trigger(processingTime="1 second")
                 .option("checkpointLocation", str(tmp_path / "spark")).start())
        try:
            # order 10 comes before the update, which moved the table's watermark past it; order 11
            # comes after the table's last change: it waits for the table's watermark
            _wait(lambda: len(written) >= 1, query)
            time.sleep(6)  # six triggers: no commit anywhere, so nothing moves the table's watermark
            with lock:
                assert written == [(10, "silver")], f"order 11 left before any commit past it: {written}"
                quiet_batches = len(batches)
            for x in range(30):  # other tables' transactions, more than heartbeat_interval apart
                conn.execute("INSERT INTO other VALUES (%s)", (x,))
                if len(written) >= 2:
                    break
                time.sleep(1.2)
            _wait(lambda: len(written) >= 2, query)
        finally:
            query.stop()
        assert sorted(written) == [(10, "silver"), (11, "gold")]
        assert quiet_batches <= 3, f"{quiet_batches} micro-batches while the database was quiet"


def _wait(done, query, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert query.exception() is None, query.exception()
        assert time.monotonic() < deadline, f"no release within {timeout:.0f} s"
        time.sleep(0.2)
