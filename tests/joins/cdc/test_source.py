"""The slot and the ``postgres_changes`` reader: offsets, commit, restart, decoding, setup errors."""

from __future__ import annotations

import sys
import time
from decimal import Decimal

import pyarrow as pa
import pytest

from streamjoin.cdc import (
    ConnectionLost,
    PostgresDriverMissing,
    Retry,
    ServerBinariesMissing,
    SourceSetupError,
    confirmed_lsn,
    connect,
    create_slot,
    format_lsn,
    parse_lsn,
    psycopg,
    table_info,
    with_retry,
)

pytestmark = pytest.mark.postgres

_TABLE = "CREATE TABLE items (id bigint PRIMARY KEY, name text, price numeric(8,2), seen boolean)"


def _reader(dsn: str, slot: str, table: str = "public.items"):
    from streamjoin.spark.postgres_source import _Options, _Reader

    return _Reader(_Options({"dsn": dsn, "slot": slot, "table": table, "retry_delay": "0.05"}))


def _batch(reader, start: dict, end: dict) -> list[dict]:
    (partition,) = reader.partitions(start, end)
    return pa.Table.from_batches(list(reader.read(partition))).to_pylist() if end != start else []


def test_lsn_text_round_trip():
    assert parse_lsn("16/B374D848") == 0x16B374D848
    assert format_lsn(parse_lsn("0/16b3748")) == "0/16B3748"
    with pytest.raises(ValueError):
        parse_lsn("16B374D848")


def test_create_slot_snapshot_is_the_rows_at_the_slot_start(dsn, slot):
    with connect(dsn) as conn:
        conn.execute(_TABLE)
        conn.execute("INSERT INTO items VALUES (1, 'a', 1.50, true), (2, NULL, NULL, NULL)")
        start = create_slot(dsn, slot, ["items"])
        conn.execute("INSERT INTO items VALUES (3, 'c', 3, false)")
        snapshot = start.snapshot["public.items"]
        assert snapshot.sort_by("id").to_pylist() == [
            {"id": 1, "name": "a", "price": Decimal("1.50"), "seen": True},
            {"id": 2, "name": None, "price": None, "seen": None}]
        assert confirmed_lsn(conn, slot) == start.lsn


def test_reader_batches_ranges_commits_and_restarts_exactly(dsn, slot):
    with connect(dsn) as conn:
        conn.execute(_TABLE)
        create_slot(dsn, slot)
        reader = _reader(dsn, slot)
        first = reader.initialOffset()
        conn.execute("INSERT INTO items VALUES (1, 'a', 1, true)")
        with conn.transaction():
            conn.execute("UPDATE items SET name = 'b' WHERE id = 1")
            conn.execute("UPDATE items SET id = 2 WHERE id = 1")
        middle = reader.latestOffset(first, None)
        conn.execute("DELETE FROM items WHERE id = 2")
        conn.execute("CREATE TABLE other (x int PRIMARY KEY); INSERT INTO other VALUES (1)")
        end = reader.latestOffset(middle, None)

        rows = _batch(reader, first, middle)
        assert [(r["op"], (r["before"] or {}).get("id"), (r["after"] or {}).get("id")) for r in rows] == [
            ("c", None, 1), ("u", 1, 1), ("d", 1, None), ("c", 1, 2), ("heartbeat", None, None)]
        assert rows[1]["after"]["name"] == "b" and rows[1]["lsn"] < rows[2]["lsn"]
        assert rows[0]["ts_us"] // 1000 == rows[0]["ts_ms"] and rows[0]["ts_us"] <= rows[1]["ts_us"]
        # not committed: the slot has not moved, a new reader (a restarted query) reads the same batch
        assert _batch(_reader(dsn, slot), first, middle) == rows
        assert confirmed_lsn(conn, slot) == parse_lsn(first["lsn"])
        reader.commit(middle)
        assert confirmed_lsn(conn, slot) == parse_lsn(middle["lsn"])
        rows = _batch(_reader(dsn, slot), middle, end)
        assert [r["op"] for r in rows] == ["d", "heartbeat"]
        assert rows[0]["before"]["id"] == 2
        assert reader.latestOffset(end, None) == end  # nothing committed since: no new batch


def test_reader_setup_errors_say_what_to_do(dsn, slot):
    with connect(dsn) as conn:
        conn.execute(_TABLE)
        conn.execute("CREATE TABLE keyless (x int)")
        with pytest.raises(SourceSetupError, match="does not exist: create it first"):
            _reader(dsn, "missing")
        create_slot(dsn, slot)
        with pytest.raises(SourceSetupError, match="no primary key"):
            table_info(conn, "keyless")
        with pytest.raises(SourceSetupError, match="exists already"):
            create_slot(dsn, slot)
        assert conn.execute("SHOW wal_level").fetchone()[0] == "logical"


def test_with_retry_gives_up_with_connection_lost():
    attempts = []

    def attempt():
        attempts.append(1)
        return psycopg().connect("host=127.0.0.1 port=1 dbname=x user=x connect_timeout=1")

    with pytest.raises(ConnectionLost, match="after 3 attempts"):
        with_retry(attempt, "host=127.0.0.1 port=1", Retry(attempts=3, first_delay=0.01))
    assert len(attempts) == 3


def test_psycopg_missing_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "psycopg", None)
    with pytest.raises(PostgresDriverMissing, match=r'pip install "/path/to/streamjoin\[postgres\]"'):
        psycopg()


def test_cluster_without_server_binaries_says_how_to_install(monkeypatch, tmp_path):
    from streamjoin.cdc import cluster

    monkeypatch.setenv("STREAMJOIN_PG_BIN", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(cluster.glob, "glob", lambda pattern: [])
    with pytest.raises(ServerBinariesMissing, match="apt-get install -y postgresql-15 postgresql-15-wal2json"):
        cluster.start_cluster()


def test_reader_offset_moves_only_for_the_tables_changes_and_due_heartbeats(dsn, slot):
    from streamjoin.spark.postgres_sink import PostgresSink
    from streamjoin.spark.postgres_source import _Options, _Reader

    with connect(dsn) as conn:
        conn.execute(_TABLE)
        conn.execute("CREATE TABLE other (x int PRIMARY KEY); CREATE TABLE copy (id bigint PRIMARY KEY)")
        create_slot(dsn, slot)
        reader = _Reader(_Options({"dsn": dsn, "slot": slot, "table": "public.items", "heartbeat_interval": "5 seconds"}))
        start = reader.initialOffset()
        assert reader.latestOffset(start, None) == start
        PostgresSink(dsn, "public.copy", key="id").apply(pa.table({"id": [1]}), 0)
        assert reader.latestOffset(start, None) == start  # the sink's own commit: no batch
        conn.execute("INSERT INTO other VALUES (1)")
        first = reader.latestOffset(start, None)  # the first heartbeat is due at once
        assert first["lsn"] != start["lsn"] and first["commit_us"] > 0
        conn.execute("INSERT INTO other VALUES (2)")
        PostgresSink(dsn, "public.copy", key="id").apply(pa.table({"id": [2]}), 1)
        assert reader.latestOffset(first, None) == first  # the next one is not due yet
        conn.execute("INSERT INTO items VALUES (1, 'a', 1, true)")
        second = reader.latestOffset(first, None)  # a change of the table: at once
        assert second["lsn"] != first["lsn"]
        assert [r["op"] for r in _batch(reader, first, second)] == ["c", "heartbeat"]
        PostgresSink(dsn, "public.copy", key="id").apply(pa.table({"id": [3]}), 2)
        time.sleep(5.2)
        PostgresSink(dsn, "public.copy", key="id").apply(pa.table({"id": [4]}), 3)
        assert reader.latestOffset(second, None) == second  # a sink's commit is never a heartbeat
        conn.execute("INSERT INTO other VALUES (3)")
        third = reader.latestOffset(second, None)  # due: 5 seconds of commit time have passed
        assert third["lsn"] != second["lsn"] and third["commit_us"] >= second["commit_us"] + 5_000_000
        assert [r["op"] for r in _batch(reader, second, third)] == ["heartbeat"]


@pytest.mark.spark
def test_postgres_source_quiet_database_gives_a_quiet_query(spark, dsn, slot, tmp_path):
    from streamjoin.spark.postgres_sink import PostgresSink
    from streamjoin.spark.postgres_source import read_postgres_changes

    with connect(dsn) as conn:
        conn.execute(_TABLE)
        conn.execute("CREATE TABLE other (x int PRIMARY KEY); CREATE TABLE copy (id bigint PRIMARY KEY, name text)")
        create_slot(dsn, slot)
        sink, batches = PostgresSink(dsn, "public.copy", key="id"), []

        def write(df, batch_id: int) -> None:
            batches.append(batch_id)
            sink(df, batch_id)

        changes = read_postgres_changes(spark, dsn, slot, "public.items", heartbeat_interval="1 hour")
        query = (changes.where("op = 'c'").select("after.id", "after.name").writeStream.foreachBatch(write)
                 .trigger(processingTime="1 second").option("checkpointLocation", str(tmp_path / "cp")).start())
        try:
            conn.execute("INSERT INTO items VALUES (1, 'a', 1, true)")
            _wait_rows(conn, query, 1)
            time.sleep(2)
            seen = len(batches)
            for x in range(15):  # 15 s of a 1 s trigger: other tables change, the sink's commits are WAL
                conn.execute("INSERT INTO other VALUES (%s)", (x,))
                time.sleep(1)
            assert len(batches) == seen, f"{len(batches) - seen} micro-batches in a quiet window"
            conn.execute("INSERT INTO items VALUES (2, 'b', 2, false)")
            _wait_rows(conn, query, 2)
        finally:
            query.stop()
        assert len(batches) == seen + 1


def _wait_rows(conn, query, rows: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while conn.execute("SELECT count(*) FROM copy").fetchone()[0] < rows:
        assert query.exception() is None and time.monotonic() < deadline, query.exception()
        time.sleep(0.2)


@pytest.mark.spark
def test_postgres_undecodable_change_is_counted_in_join_metrics_and_progress(spark, dsn, slot, tmp_path):
    """A change holding a BC date is set aside before routing with its reason, and counted: in
    ``join_metrics`` and in the query's observed metrics, as docs/postgres.md says."""
    import json
    import os

    from streamjoin import join_metrics, progress_metrics, set_aside_rows, stream_table_join
    from streamjoin.spark.postgres_source import postgres_change_format, read_postgres_changes

    with connect(dsn) as conn:
        conn.execute("CREATE TABLE users (user_id bigint PRIMARY KEY, plan text, since date)")
        create_slot(dsn, slot)
        conn.execute("INSERT INTO users VALUES (1, 'free', '2024-01-01'), (2, 'pro', '0044-03-15 BC')")
    os.makedirs(tmp_path / "events")
    (tmp_path / "events" / "part-0.json").write_text(json.dumps({"user_id": 1, "ts": "2026-01-01T00:00:00Z"}) + "\n")
    events = spark.readStream.schema("user_id bigint, ts timestamp").json(str(tmp_path / "events"))
    changes = read_postgres_changes(spark, dsn, slot, "public.users", retry_delay="0.05")
    ck = str(tmp_path / "ck")
    joined = stream_table_join(events, changes, "user_id", stream_time="ts", table_key="user_id",
                               table_format=postgres_change_format("user_id"), delay="0 seconds", checkpoint=ck,
                               partitions=2)
    query = (joined.writeStream.format("noop").trigger(processingTime="1 second")
             .option("checkpointLocation", str(tmp_path / "spark")).start())
    try:
        deadline = time.monotonic() + 120
        while not any((progress_metrics(p) or {}).get("set_aside_rows_table_source") for p in query.recentProgress):
            assert query.exception() is None and time.monotonic() < deadline, query.exception()
            time.sleep(0.5)
        observed = [progress_metrics(p) or {} for p in query.recentProgress]
    finally:
        query.stop()
    assert sum(m.get("set_aside_rows_table_source", 0) for m in observed) == 1
    assert sum(r["set_aside_rows_table_source"] or 0 for r in join_metrics(spark, ck).collect()) == 1
    [aside] = set_aside_rows(spark, ck, "table_source").collect()
    assert aside["_reason"] == "unknown op" and aside["error"] == "column since: '0044-03-15 BC' does not fit date32[day]"
