"""``view_sink`` keeps a table-table join's view on the driver through ``foreachBatch``, and a
micro-batch that Spark runs again after a failure (the same batch id) is not applied twice."""

from __future__ import annotations

import datetime as dt
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from streamjoin import table_table_join, view_sink
from streamjoin.testing.table import Change, ReferenceTable, reference_view

pytestmark = pytest.mark.spark

EPOCH = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
POSTS = pa.schema([("post_id", pa.int64()), ("op", pa.string()), ("at", pa.timestamp("us", "UTC")),
                   ("author_id", pa.int64())])
FOLLOWS = pa.schema([("follow_id", pa.int64()), ("op", pa.string()), ("at", pa.timestamp("us", "UTC")),
                     ("follower_id", pa.int64()), ("followee_id", pa.int64())])
POSTS_DDL = "post_id bigint, op string, at timestamp, author_id bigint"
FOLLOWS_DDL = "follow_id bigint, op string, at timestamp, follower_id bigint, followee_id bigint"
# (post_id, op, seconds, author_id) and (follow_id, op, seconds, follower_id, followee_id) per batch
POST_BATCHES = [[(1, "insert", 1, 10), (2, "insert", 2, 20)], [(2, "update", 5, 10)], [(1, "delete", 8, None)]]
FOLLOW_BATCHES = [[(100, "insert", 1, 1, 10)], [(101, "insert", 4, 2, 10)], [(100, "delete", 7, None, None)]]


def _write(directory: str, batches: list, schema: pa.Schema, files: range) -> None:
    os.makedirs(directory, exist_ok=True)
    for i in files:
        rows = [dict(zip(schema.names, (r[0], r[1], EPOCH + dt.timedelta(seconds=r[2]), *r[3:]))) for r in batches[i]]
        path = os.path.join(directory, f"part-{i:03d}.parquet")
        pq.write_table(pa.Table.from_pylist(rows, schema), path)
        os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))


def _changes(spark, root: str):
    posts = spark.readStream.schema(POSTS_DDL).option("maxFilesPerTrigger", 1).parquet(f"{root}/posts")
    follows = spark.readStream.schema(FOLLOWS_DDL).option("maxFilesPerTrigger", 1).parquet(f"{root}/follows")
    return table_table_join(posts, follows, (["author_id"], ["followee_id"]), left_key="post_id",
                            right_key="follow_id", left_time="at", right_time="at", checkpoint=f"{root}/ck",
                            partitions=1)


def _run(changes, root: str, each) -> None:
    query = (changes.writeStream.foreachBatch(each).option("checkpointLocation", f"{root}/spark")
             .trigger(availableNow=True).start())
    query.awaitTermination()


def _expected(batches: int) -> set[tuple]:
    left, right = ReferenceTable(["post_id"]), ReferenceTable(["follow_id"])
    for p, f in zip(POST_BATCHES[:batches], FOLLOW_BATCHES[:batches]):
        left.apply([Change((r[0],), "delete" if r[1] == "delete" else "upsert", r[2], None,
                           {"post_id": r[0], "author_id": r[3]}) for r in p])
        right.apply([Change((r[0],), "delete" if r[1] == "delete" else "upsert", r[2], None,
                            {"follow_id": r[0], "follower_id": r[3], "followee_id": r[4]}) for r in f])
    view = reference_view(left.rows, right.rows, left_on=["author_id"], right_on=["followee_id"], how="inner",
                          left_columns=["post_id", "author_id"], right_columns=["follow_id", "follower_id"])
    return set(view.values())


def _got(sink) -> set[tuple]:
    return {(r["post_id"], r["author_id"], r["follow_id"], r["follower_id"]) for r in sink.rows().to_pylist()}


def test_view_sink_view_equals_the_join_and_a_replayed_batch_is_skipped(spark, tmp_path):
    root = str(tmp_path)
    _write(f"{root}/posts", POST_BATCHES, POSTS, range(2))
    _write(f"{root}/follows", FOLLOW_BATCHES, FOLLOWS, range(2))
    calls: list[int] = []
    changes = _changes(spark, root)
    with view_sink(f"{root}/view", left_key="post_id", right_key="follow_id", schema=changes) as sink:
        def each(df, batch_id):
            calls.append(batch_id)
            sink(df, batch_id)

        _run(changes, root, each)
        assert calls == [0, 1] and sink.version == 1
        assert _got(sink) == _expected(2) == {(2, 10, 100, 1), (1, 10, 100, 1), (1, 10, 101, 2), (2, 10, 101, 2)}
        # Spark dies after the sink applied batch 1 but before committing it: it runs batch 1 again
        commits = f"{root}/spark/commits"
        os.remove(f"{commits}/1")
        if os.path.exists(f"{commits}/.1.crc"):
            os.remove(f"{commits}/.1.crc")
        _write(f"{root}/posts", POST_BATCHES, POSTS, range(2, 3))
        _write(f"{root}/follows", FOLLOW_BATCHES, FOLLOWS, range(2, 3))
        _run(_changes(spark, root), root, each)
        assert calls == [0, 1, 1, 2], "Spark should have run batch 1 again"
        assert sorted(sink.applied) == [0, 1, 2] and sink.version == 2
        assert _got(sink) == _expected(3) == {(2, 10, 101, 2)}
        assert sink.get(2, 101)["follower_id"] == 2 and sink.get(1, 101) is None
        sink.write_parquet(f"{root}/view.parquet")
        assert pq.read_table(f"{root}/view.parquet").num_rows == 1

