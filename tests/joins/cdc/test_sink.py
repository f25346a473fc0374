"""``PostgresSink``: one transaction per batch, each key's last change, a replayed batch skipped."""

from __future__ import annotations

import datetime as dt
import decimal
import threading

import pyarrow as pa
import pytest

from streamjoin.cdc import connect

pytestmark = pytest.mark.postgres


def _changes(rows: list[tuple]) -> pa.Table:
    """View changes (order_id, name, _change_type, _commit_version, _seq)."""
    names = ["order_id", "name", "_change_type", "_commit_version", "_seq"]
    return pa.table({n: [r[i] for r in rows] for i, n in enumerate(names)},
                    schema=pa.schema([("order_id", pa.int64()), ("name", pa.string()), ("_change_type", pa.string()),
                                      ("_commit_version", pa.int64()), ("_seq", pa.int64())]))


def _rows(conn) -> list[tuple]:
    return conn.execute("SELECT order_id, name FROM view ORDER BY order_id").fetchall()


def test_postgres_sink_applies_each_batch_once(dsn):
    from streamjoin.spark.postgres_sink import PostgresSink

    with connect(dsn) as conn:
        conn.execute("CREATE TABLE view (order_id bigint PRIMARY KEY, name text)")
        sink = PostgresSink(dsn, "public.view", key="order_id")
        first = _changes([(1, "a", "insert", 0, 0), (2, "", "insert", 0, 1), (3, None, "insert", 0, 2),
                          (1, "a", "update_preimage", 0, 3), (1, "b", "update_postimage", 0, 4)])
        assert sink.apply(first, 0)
        assert _rows(conn) == [(1, "b"), (2, ""), (3, None)]
        second = _changes([(2, "", "delete", 1, 1), (3, None, "delete", 1, 0), (3, "c", "insert", 1, 2)])
        assert sink.apply(second, 1)
        assert _rows(conn) == [(1, "b"), (3, "c")]
        # Spark runs batch 1 again after a failure: skipped, even with other contents
        assert not sink.apply(_changes([(9, "z", "insert", 1, 0)]), 1)
        assert _rows(conn) == [(1, "b"), (3, "c")]
        assert conn.execute("SELECT batch_id FROM streamjoin_sink_progress WHERE sink = 'public.view'").fetchone() == (1,)


def test_postgres_sink_upserts_append_rows_and_rolls_back_a_failed_batch(dsn):
    from streamjoin.spark.postgres_sink import PostgresSink

    with connect(dsn) as conn:
        conn.execute("CREATE TABLE view (order_id bigint PRIMARY KEY, name text NOT NULL)")
        sink = PostgresSink(dsn, "view", key="order_id", columns={"order_id": "id", "name": "label"})
        assert sink.apply(pa.table({"id": [1, 2, 1], "label": ["a", "b", "c"]}), 5)
        assert _rows(conn) == [(1, "c"), (2, "b")]
        with pytest.raises(Exception, match="null value"):
            sink.apply(pa.table({"id": [3], "label": pa.array([None], pa.string())}), 6)
        assert _rows(conn) == [(1, "c"), (2, "b")]
        assert sink.apply(pa.table({"id": [3], "label": ["d"]}), 6)  # the failed batch left no trace
        assert _rows(conn) == [(1, "c"), (2, "b"), (3, "d")]


def test_postgres_sink_first_batches_of_sinks_starting_together_all_apply(dsn):
    """Eight sinks apply their first batch at once on a database without the progress table."""
    from streamjoin.spark.postgres_sink import PostgresSink

    with connect(dsn) as conn:
        for i in range(8):
            conn.execute(f"CREATE TABLE view{i} (order_id bigint PRIMARY KEY, name text)")
    start = threading.Barrier(8)
    errors: list[BaseException] = []

    def first_batch(i: int) -> None:
        sink = PostgresSink(dsn, f"view{i}", key="order_id")
        start.wait()
        try:
            assert sink.apply(_changes([(i, "a", "insert", 0, 0)]), 0)
        except BaseException as exc:  # collected: a thread's exception would not fail the test
            errors.append(exc)

    threads = [threading.Thread(target=first_batch, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    with connect(dsn) as conn:
        assert conn.execute("SELECT count(*) FROM streamjoin_sink_progress WHERE batch_id = 0").fetchone() == (8,)


def test_postgres_sink_writes_bytes_and_floats_csv_cannot_carry(dsn):
    """Bytes (a zero byte, a comma, a newline, a quote) arrive as they were in a ``bytea`` column,
    floats that are not finite as themselves; the rows are a slice (offsets inside)."""
    from streamjoin.spark.postgres_sink import PostgresSink

    with connect(dsn) as conn:
        conn.execute("CREATE TABLE blobs (id bigint PRIMARY KEY, b bytea, f double precision)")
        rows = pa.table({"id": [0, 1, 2, 3], "b": pa.array([b"x", b"\x00\x01,\n\"", None, b""], pa.binary()),
                         "f": [0.0, float("nan"), float("inf"), float("-inf")]})
        assert PostgresSink(dsn, "blobs", key="id").apply(rows.slice(1), 0)
        got = conn.execute("SELECT id, b, f::text FROM blobs ORDER BY id").fetchall()
    assert got == [(1, b"\x00\x01,\n\"", "NaN"), (2, None, "Infinity"), (3, b"", "-Infinity")]


def test_postgres_sink_writes_lists_structs_and_maps_as_json(dsn):
    from streamjoin.spark.postgres_sink import PostgresSink

    kind = pa.struct([("d", pa.decimal128(5, 2)), ("t", pa.timestamp("us")), ("b", pa.binary()), ("f", pa.float64()),
                      ("m", pa.map_(pa.int32(), pa.list_(pa.float32())))])
    rows = pa.table({
        "id": [1, 2],
        "tags": pa.array([["a", None], None], pa.list_(pa.string())),
        "counts": pa.array([[("k", 1)], [('x"', None)]], pa.map_(pa.string(), pa.int64())),
        "info": pa.array([{"d": decimal.Decimal("1.50"), "t": dt.datetime(2026, 1, 1), "b": b"\x01", "f": float("nan"),
                           "m": [(1, [2.5])]}, None], kind)})
    with connect(dsn) as conn:
        conn.execute("CREATE TABLE docs (id bigint PRIMARY KEY, tags jsonb, counts json, info text)")
        assert PostgresSink(dsn, "docs", key="id").apply(rows, 0)
        got = conn.execute("SELECT id, tags, counts, info::jsonb FROM docs ORDER BY id").fetchall()
    assert got == [(1, ["a", None], {"k": 1}, {"d": 1.5, "t": "2026-01-01T00:00:00", "b": "\\x01", "f": "NaN",
                                               "m": [[1, [2.5]]]}),
                   (2, None, {'x"': None}, None)]


def test_postgres_sink_refuses_a_nested_column_whose_target_is_not_json(dsn):
    from streamjoin.errors import JoinDefinitionError
    from streamjoin.spark.postgres_sink import PostgresSink

    with connect(dsn) as conn:
        conn.execute("CREATE TABLE arrays (id bigint PRIMARY KEY, tags text[])")
        sink = PostgresSink(dsn, "arrays", key="id")
        with pytest.raises(JoinDefinitionError, match=r"as JSON text.*'tags': 'text\[\]'.*make them jsonb"):
            sink.apply(pa.table({"id": [1], "tags": pa.array([["a"]], pa.list_(pa.string()))}), 0)
        assert conn.execute("SELECT count(*) FROM arrays").fetchone() == (0,)
