"""The public functions through Spark Connect, against a local Connect server
the tests start (one for this module: ``spark-submit`` of PySpark's ``SparkConnectServer``).

A few end-to-end cases: an interval join and a stream-table join stream to Parquet and equal the
classic session's result; ``view_sink`` keeps a table-table join's view through ``foreachBatch``
(its function runs where the server runs); ``read_state`` and the observed metrics work too, and
``progress_metrics`` reads the same named, typed metrics from both sessions' progress.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from streamjoin import interval_join, progress_metrics, read_state, table_table_join, view_sink

pytestmark = pytest.mark.spark


_CONNECT_MODE = "SPARK_CONNECT_MODE_ENABLED"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def connect(tmp_path_factory):
    """A Spark Connect session on a local server started for these tests (stopped after them)."""
    import pyspark
    from pyspark.sql import SparkSession

    home = Path(pyspark.__file__).parent
    port = _free_port()
    logs = tmp_path_factory.mktemp("connect") / "server.log"
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_HOME=str(home))
    server = subprocess.Popen(
        [str(home / "bin" / "spark-submit"), "--class", "org.apache.spark.sql.connect.service.SparkConnectServer",
         "--master", "local[2,4]", "--conf", f"spark.connect.grpc.binding.port={port}",
         "--conf", "spark.connect.grpc.binding.address=127.0.0.1", "--conf", "spark.ui.enabled=false",
         "--conf", "spark.sql.shuffle.partitions=2", "--conf", "spark.sql.session.timeZone=UTC",
         "spark-internal"],
        env=env, stdout=open(logs, "wb"), stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120
        while True:
            if server.poll() is not None:
                raise RuntimeError(f"the Spark Connect server exited: {logs.read_text()[-2000:]}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        before = os.environ.get(_CONNECT_MODE)
        session = SparkSession.builder.remote(f"sc://127.0.0.1:{port}").create()
        yield session
        session.stop()
    finally:
        server.terminate()
        server.wait(60)
        if before is None:   # PySpark builds Connect columns while this is set: the classic tests need it unset
            os.environ.pop(_CONNECT_MODE, None)


@contextlib.contextmanager
def _classic():
    """Classic PySpark in this process while a Connect session is open (it builds Connect columns
    while ``SPARK_CONNECT_MODE_ENABLED`` is set)."""
    saved = os.environ.pop(_CONNECT_MODE, None)
    try:
        yield
    finally:
        if saved is not None:
            os.environ[_CONNECT_MODE] = saved


SCHEMA = pa.schema([("k", pa.int64()), ("t", pa.timestamp("us", "UTC")), ("v", pa.string())])


def _files(directory: Path, batches: list[list[tuple]]) -> None:
    directory.mkdir(parents=True)
    for i, rows in enumerate(batches):
        path = directory / f"part-{i}.parquet"
        table = pa.Table.from_pylist([{"k": k, "t": 1_700_000_000_000_000 + s * 1_000_000, "v": v} for k, s, v in rows],
                                     pa.schema([("k", pa.int64()), ("t", pa.int64()), ("v", pa.string())]))
        pq.write_table(table.cast(SCHEMA), path)
        os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))


def _interval(session, root: Path, name: str):
    read = session.readStream.schema("k bigint, t timestamp, v string").option("maxFilesPerTrigger", 1)
    left, right = read.parquet(str(root / "left")), read.parquet(str(root / "right"))
    joined = interval_join(left, right, "k", left_time="t", right_time="t", lower="-10 seconds", upper="10 seconds",
                           delay="0 seconds", how="full", store="rocksdb", checkpoint=str(root / f"{name}-join"))
    query = (joined.writeStream.format("parquet").option("path", str(root / f"{name}-out"))
             .option("checkpointLocation", str(root / f"{name}-spark")).trigger(availableNow=True).start())
    query.awaitTermination()
    return query


def test_connect_interval_join_equals_the_classic_session_and_reports_progress(spark, connect, tmp_path):
    _files(tmp_path / "left", [[(1, 0, "a"), (2, 0, "b")], [(1, 100, "c")], [(3, 200, "d")]])
    _files(tmp_path / "right", [[(1, 5, "x")], [(2, 100, "y")], [(3, 205, "z")]])
    query = _interval(connect, tmp_path, "connect")
    with _classic():
        classic = _interval(spark, tmp_path, "classic")
        got = {tuple(r) for r in spark.read.parquet(str(tmp_path / "connect-out")).collect()}
        assert got == {tuple(r) for r in spark.read.parquet(str(tmp_path / "classic-out")).collect()}
    # (1 c) and (2 y) at 100 s wait for a watermark past 110 s: the run's trailing no-data
    # micro-batch, after the last one's rows at 200 s, releases them (the default end_of_run)
    assert sorted(((r[0], r[2], r[4]) for r in got), key=str) == [
        (1, "a", "x"), (1, "c", None), (2, "b", None), (2, None, "y"), (3, "d", "z")]
    names = {n for p in query.recentProgress for n in p["observedMetrics"]}
    assert names == {f"streamjoin interval_join {tmp_path / 'connect-join'}", f"streamjoin-input {tmp_path / 'connect-join'}"}
    # the same named, typed values from both sessions (less what depends on timing and on which
    # Python worker ran a task: store opens, restores, RocksDB's size estimate)
    volatile = {"state_open_seconds_max", "stores_rebuilt", "stores_reopened", "entries_restored", "state_versions_replayed",
                "state_bytes"}
    ours, theirs = ([progress_metrics(p) for p in q.recentProgress] for q in (query, classic))
    assert [{k: type(v) for k, v in m.items()} for m in ours] == [{k: type(v) for k, v in m.items()} for m in theirs]
    assert [{k: v for k, v in m.items() if k not in volatile} for m in ours] == \
        [{k: v for k, v in m.items() if k not in volatile} for m in theirs]
    assert sum(m["output_rows"] for m in ours) == len(got) and ours[-1]["partitions"] == 2
    # the trailing no-data batch's: min(200 s, 205 s), the largest times of the run
    assert ours[-1]["watermark"] == datetime.fromtimestamp(1_700_000_200, timezone.utc)
    state = read_state(connect, str(tmp_path / "connect-join"), side="left").collect()
    assert {r["k"] for r in state} <= {1, 2, 3} and all(r["_matched"] is not None for r in state)


POSTS = pa.schema([("post_id", pa.int64()), ("author_id", pa.int64()), ("op", pa.string()), ("at", pa.int64())])
FOLLOWS = pa.schema([("follow_id", pa.int64()), ("follower_id", pa.int64()), ("followee_id", pa.int64()),
                     ("op", pa.string()), ("at", pa.int64())])


def test_connect_view_sink_keeps_the_view_where_the_server_runs(connect, tmp_path):
    pq.write_table(pa.Table.from_pylist([{"post_id": 1, "author_id": 10, "op": "upsert", "at": 1},
                                         {"post_id": 2, "author_id": 11, "op": "upsert", "at": 1}], POSTS),
                   tmp_path / "posts.parquet")
    pq.write_table(pa.Table.from_pylist([{"follow_id": 100, "follower_id": 7, "followee_id": 10, "op": "upsert",
                                          "at": 1}], FOLLOWS), tmp_path / "follows.parquet")
    (tmp_path / "p").mkdir()
    (tmp_path / "f").mkdir()
    os.rename(tmp_path / "posts.parquet", tmp_path / "p" / "part-0.parquet")
    os.rename(tmp_path / "follows.parquet", tmp_path / "f" / "part-0.parquet")
    posts = connect.readStream.schema("post_id bigint, author_id bigint, op string, at bigint").parquet(str(tmp_path / "p"))
    follows = connect.readStream.schema("follow_id bigint, follower_id bigint, followee_id bigint, op string, at bigint") \
        .parquet(str(tmp_path / "f"))
    changes = table_table_join(posts, follows, (["author_id"], ["followee_id"]), left_key="post_id",
                               right_key="follow_id", left_time="at", right_time="at",
                               checkpoint=str(tmp_path / "ck"), partitions=2)
    sink = view_sink(str(tmp_path / "view"), left_key="post_id", right_key="follow_id", schema=changes)
    query = (changes.writeStream.foreachBatch(sink).option("checkpointLocation", str(tmp_path / "spark"))
             .trigger(availableNow=True).start())
    query.awaitTermination()
    query.stop()
    deadline = time.monotonic() + 60
    while True:   # the server's foreachBatch worker lets the store go when the query has stopped
        try:
            rows = sink.rows()
            break
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
    assert [(r["post_id"], r["follow_id"], r["follower_id"]) for r in rows.to_pylist()] == [(1, 100, 7)]
    assert sink.version == 0
    sink.close()
