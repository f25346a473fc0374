"""The table-table join end to end through Spark: posts and follows as plain change
streams in micro-batches, with an update that moves a post to another author, a deleted post, an
unfollow, a change older than the retention horizon and a delete of an unknown row. After every
micro-batch, the view rebuilt from the change stream equals the reference join of the tables as
they stand."""

from __future__ import annotations

import datetime as dt
import json
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from streamjoin import table_table_join
from streamjoin.errors import JoinDefinitionError
from streamjoin.statestore import open_store
from streamjoin.table.retention import LATE_REASON
from streamjoin.table.spec import CDF_COLUMNS
from streamjoin.testing.table import Change, ReferenceTable, reference_view
from streamjoin.view import MaterializedView

pytestmark = pytest.mark.spark

POSTS = pa.schema([("post_id", pa.int64()), ("op", pa.string()), ("at", pa.timestamp("us", "UTC")),
                   ("author_id", pa.int64()), ("text", pa.string())])
FOLLOWS = pa.schema([("follow_id", pa.int64()), ("op", pa.string()), ("at", pa.timestamp("us", "UTC")),
                     ("follower_id", pa.int64()), ("followee_id", pa.int64())])
EPOCH = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)


def _post(pid, op, t, author=None, text=None):
    return {"post_id": pid, "op": op, "at": EPOCH + dt.timedelta(seconds=t), "author_id": author, "text": text}


def _follow(fid, op, t, follower=None, followee=None):
    return {"follow_id": fid, "op": op, "at": EPOCH + dt.timedelta(seconds=t), "follower_id": follower,
            "followee_id": followee}


POST_BATCHES = [
    [_post(1, "upsert", 1, 10, "hello"), _post(2, "upsert", 2, 10, "again"), _post(3, "upsert", 3, 20, "hi")],
    [_post(2, "update", 5, 20, "moved"), _post(9, "delete", 6)],               # 2 moves to author 20
    [_post(1, "delete", 8), _post(3, "update", 2, 20, "stale")],               # 3's change is late (horizon 6 - 2)
    [_post(4, "insert", 9, 10, "new")],
]
FOLLOW_BATCHES = [
    [_follow(100, "upsert", 1, 1, 10), _follow(101, "upsert", 1, 2, 20)],
    [_follow(102, "upsert", 4, 1, 20)],
    [_follow(100, "delete", 7)],                                               # user 1 unfollows 10
    [_follow(101, "update", 9, 2, 10)],                                        # user 2 now follows 10
]


def _write(directory, batches, schema):
    os.makedirs(directory)
    for i, rows in enumerate(batches):
        path = os.path.join(directory, f"part-{i:03d}.parquet")
        pq.write_table(pa.Table.from_pylist(rows, schema), path)
        os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))


def _plain(value):
    """A timestamp as seconds since the epoch (naive ones read as UTC), anything else as it is."""
    return value.timestamp() if hasattr(value, "timestamp") else value


def _changes(rows, key, columns):
    out = []
    for r in rows:
        op = "delete" if r["op"] == "delete" else "upsert"
        t = int((r["at"] - EPOCH).total_seconds())
        out.append(Change((r[key],), op, t, None, None if op == "delete" else {c: r[c] for c in columns}))
    return out


@pytest.mark.parametrize("how", ["left"])
def test_table_table_join_streaming_view_equals_the_join_after_every_batch(spark, tmp_path, how):
    root = str(tmp_path)
    _write(f"{root}/posts", POST_BATCHES, POSTS)
    _write(f"{root}/follows", FOLLOW_BATCHES, FOLLOWS)
    posts = spark.readStream.schema(POSTS_DDL).option("maxFilesPerTrigger", 1).parquet(f"{root}/posts")
    follows = spark.readStream.schema(FOLLOWS_DDL).option("maxFilesPerTrigger", 1).parquet(f"{root}/follows")
    view_changes = table_table_join(posts, follows, (["author_id"], ["followee_id"]), left_key="post_id",
                                    right_key="follow_id", how=how, left_time="at", right_time="at",
                                    retention="2 seconds", checkpoint=f"{root}/ck", partitions=3)
    query = (view_changes.writeStream.format("parquet").option("path", f"{root}/out")
             .option("checkpointLocation", f"{root}/spark").trigger(availableNow=True).start())
    query.awaitTermination()
    changes = pq.read_table(f"{root}/out")
    view_columns = [n for n in changes.column_names if n not in CDF_COLUMNS]
    view = MaterializedView(open_store("memory", f"{root}/view"), "post_id", "follow_id", changes.schema)
    left, right = ReferenceTable(["post_id"], retention=2), ReferenceTable(["follow_id"], retention=2)
    post_columns = ["post_id", "at", "author_id", "text"]
    follow_columns = ["follow_id", "at", "follower_id", "followee_id"]
    for version, (p, f) in enumerate(zip(POST_BATCHES, FOLLOW_BATCHES)):
        left.apply(_changes(p, "post_id", post_columns))
        right.apply(_changes(f, "follow_id", follow_columns))
        batch = changes.filter(pa.compute.equal(changes.column("_commit_version"), version))
        view.apply(batch)
        expected = reference_view(left.rows, right.rows, left_on=["author_id"], right_on=["followee_id"], how=how,
                                  left_columns=post_columns, right_columns=follow_columns)
        got = {tuple(_plain(r[c]) for c in view_columns) for r in view.rows().to_pylist()}
        assert got == {tuple(map(_plain, row)) for row in expected.values()}, f"after batch {version}"
    timeline = sorted((r["follower_id"], r["post_id"]) for r in view.rows().to_pylist() if r["follower_id"] is not None)
    assert timeline == [(1, 2), (1, 3), (2, 4)]
    assert left.late == 1 and left.stale == 0 and left.unknown_deletes == 1
    aside = pq.read_table(f"{root}/ck/left_keys/set_aside/changes").to_pylist()
    assert [(r["post_id"], r["_reason"]) for r in aside] == [(3, LATE_REASON)]
    # every stage numbers its partitions 0..2, the right key stage too (its tasks run in a union)
    for stage in ("left_keys", "right_keys", "join"):
        assert sorted(os.listdir(f"{root}/ck/{stage}/state")) == ["p=0", "p=1", "p=2"], stage


POSTS_DDL = "post_id bigint, op string, at timestamp, author_id bigint, text string"
FOLLOWS_DDL = "follow_id bigint, op string, at timestamp, follower_id bigint, followee_id bigint"


def test_table_table_join_bad_arguments_fail_before_the_query(spark):
    posts = spark.createDataFrame([], POSTS_DDL)
    follows = spark.createDataFrame([], FOLLOWS_DDL)
    args = dict(left_key="post_id", right_key="follow_id", left_time="at", right_time="at")
    with pytest.raises(JoinDefinitionError, match="how"):
        table_table_join(posts, follows, (["author_id"], ["followee_id"]), how="right", **args)
    with pytest.raises(JoinDefinitionError):
        table_table_join(posts, follows, (["nope"], ["followee_id"]), **args)
    with pytest.raises(JoinDefinitionError, match="change"):
        table_table_join(posts, follows, (["author_id"], ["followee_id"]), **{**args, "left_time": None})
    with pytest.raises(JoinDefinitionError, match="fuse_key_stages must be True, False or None"):
        table_table_join(posts, follows, (["author_id"], ["followee_id"]), fuse_key_stages=1, **args)


def test_table_table_join_micro_batch_in_which_one_table_is_quiet_runs_its_key_stage(spark, tmp_path):
    # micro-batch 1 has posts only: the follows key stage reads no row (no new file, no tick), and
    # must still run its version (Spark planned it as zero tasks, and version 2 then failed with
    # "version 1 is newer than the newest version in changelog")
    root = str(tmp_path)
    for name in ("posts", "follows"):
        os.makedirs(f"{root}/{name}")
    outputs: dict[int, list[tuple]] = {}

    def run(posts: list[dict], follows: list[dict], batch: int) -> None:
        if posts:
            pq.write_table(pa.Table.from_pylist(posts, POSTS), f"{root}/posts/part-{batch}.parquet")
        if follows:
            pq.write_table(pa.Table.from_pylist(follows, FOLLOWS), f"{root}/follows/part-{batch}.parquet")
        joined = table_table_join(
            spark.readStream.schema(POSTS_DDL).parquet(f"{root}/posts"),
            spark.readStream.schema(FOLLOWS_DDL).parquet(f"{root}/follows"), (["author_id"], ["followee_id"]),
            left_key="post_id", right_key="follow_id", left_time="at", right_time="at", checkpoint=f"{root}/ck",
            partitions=2)
        query = (joined.writeStream.option("checkpointLocation", f"{root}/spark").trigger(availableNow=True)
                 .foreachBatch(lambda df, b: outputs.setdefault(b, sorted(
                     (r.post_id, r.follower_id, r._change_type) for r in df.collect()))).start())
        query.awaitTermination()
        assert query.exception() is None

    run([_post(1, "insert", 1, 10, "a")], [_follow(100, "insert", 1, 1, 10)], 0)
    run([_post(2, "insert", 2, 10, "b")], [], 1)
    run([], [_follow(101, "insert", 3, 2, 10)], 2)
    assert outputs == {0: [(1, 1, "insert")], 1: [(2, 1, "insert")], 2: [(1, 2, "insert"), (2, 2, "insert")]}
    for stage in ("left_keys", "right_keys", "join"):   # every stage committed every version
        assert sorted(os.listdir(f"{root}/ck/{stage}/state")) == ["p=0", "p=1"], stage


ORDERS = pa.schema([("order_id", pa.int64()), ("op", pa.string()), ("at", pa.timestamp("us", "UTC")),
                    ("customer_id", pa.int64()), ("amount", pa.int64())])
CUSTOMERS = pa.schema([("customer_id", pa.int64()), ("op", pa.string()), ("at", pa.timestamp("us", "UTC")),
                       ("name", pa.string())])


def _orders_with_customers(spark, root: str, orders: list, customers: list, **options):
    """``orders JOIN customers ON customer_id`` over ``root``'s file streams, one availableNow run
    per micro-batch (its files written before it; checkpoint ``root/ck``): per micro-batch the
    sorted (order, customer, name, change type, _seq) rows out, and the last query."""
    outputs: dict[int, list[tuple]] = {}
    for name in ("orders", "customers"):
        os.makedirs(f"{root}/{name}")
    for batch in range(len(orders)):
        for name, rows, schema in (("orders", orders[batch], ORDERS), ("customers", customers[batch], CUSTOMERS)):
            if rows:
                table = pa.Table.from_pylist([dict(zip(schema.names, r)) for r in rows], schema)
                pq.write_table(table, f"{root}/{name}/part-{batch}.parquet")
        joined = table_table_join(
            spark.readStream.schema(ORDERS_DDL).parquet(f"{root}/orders"),
            spark.readStream.schema(CUSTOMERS_DDL).parquet(f"{root}/customers"),
            "customer_id", left_key="order_id", right_key="customer_id", left_time="at", right_time="at",
            checkpoint=f"{root}/ck", partitions=2, **options)
        query = (joined.writeStream.option("checkpointLocation", f"{root}/spark").trigger(availableNow=True)
                 .foreachBatch(lambda df, b: outputs.setdefault(b, sorted(
                     (r.order_id, r.customer_id_left, r.name, r._change_type, r._seq) for r in df.collect())))
                 .start())
        query.awaitTermination()
        assert query.exception() is None
    return outputs, query


def test_table_table_join_fused_key_stage_gives_the_three_stage_view_changes(spark, tmp_path):
    # orders JOIN customers ON customer_id: customers' primary key is the join key, so with
    # fuse_key_stages=True their changes go straight to the join stage (no right_keys stage)
    root = str(tmp_path)
    at = lambda t: EPOCH + dt.timedelta(seconds=t)   # noqa: E731
    orders = [[(1, "insert", at(1), 10, 5), (2, "insert", at(1), 20, 7)],
              [(1, "update", at(3), 20, 5)],                                # order 1 moves to customer 20
              [(2, "delete", at(4), None, None), (3, "insert", at(4), 30, 1)]]
    customers = [[(10, "insert", at(1), "ada"), (20, "insert", at(1), "bo")],
                 [],                                                         # a quiet micro-batch
                 [(20, "update", at(5), "bob"), (20, "update", at(2), "stale"), (30, "insert", at(4), "cy"),
                  (40, "merge", at(4), "??")]]                               # an unknown op: set aside
    outputs = {fuse: _orders_with_customers(spark, f"{root}/{fuse}", orders, customers, fuse_key_stages=fuse)[0]
               for fuse in (False, True)}
    assert outputs[True] == outputs[False]
    assert outputs[True][2] == [(1, 20, "bo", "update_preimage", 0), (1, 20, "bob", "update_postimage", 1),
                                (2, 20, "bo", "delete", 0), (3, 30, "cy", "insert", 1)]
    assert sorted(os.listdir(f"{root}/True/ck")) == ["join", "left_keys", "stages.json"]
    aside = pq.read_table(f"{root}/True/ck/join/set_aside/right_changes").to_pylist()
    assert [(r["customer_id"], r["op"]) for r in aside] == [(40, "merge")]
    from streamjoin.spark.state import read_state

    keys = read_state(spark, f"{root}/True/ck/join", side="right_keys").collect()
    assert sorted(r.primary_key for r in keys) == ["[10]", "[20]", "[30]"]
    assert read_state(spark, f"{root}/True/ck/join", side="left_keys").count() == 0


ORDERS_DDL = "order_id bigint, op string, at timestamp, customer_id bigint, amount bigint"
CUSTOMERS_DDL = "customer_id bigint, op string, at timestamp, name string"


def test_table_table_join_declared_immutable_join_key_runs_one_stage(spark, tmp_path):
    # orders that never change customer, declared so: with customers keyed by the join key the
    # join is one stage; its view changes are the three-stage join's, and a move is set aside
    root = str(tmp_path)
    at = lambda t: EPOCH + dt.timedelta(seconds=t)   # noqa: E731
    orders = [[(1, "insert", at(1), 10, 5), (2, "insert", at(1), 20, 7)],
              [(3, "insert", at(2), 10, 9), (1, "update", at(3), 10, 6)],
              [(2, "delete", at(4), 20, 7), (3, "update", at(4), 20, 9)]]   # the last moves order 3
    customers = [[(10, "insert", at(1), "ada"), (20, "insert", at(1), "bo")], [(10, "update", at(2), "al")], []]
    outputs, queries = {}, {}
    for declared in (False, True):
        outputs[declared], queries[declared] = _orders_with_customers(
            spark, f"{root}/{declared}", orders, customers, fuse_key_stages=declared, left_immutable_join_key=declared)
    drop_seq = {d: {b: [r[:-1] for r in rows] for b, rows in out.items()} for d, out in outputs.items()}
    assert drop_seq[True][0] == drop_seq[False][0] and drop_seq[True][1] == drop_seq[False][1]
    assert drop_seq[True][2] == [(2, 20, "bo", "delete")]             # order 3 stays with customer 10
    assert (3, 20, "bo", "insert") in drop_seq[False][2]              # (the three stages move it)
    assert "stages.json" not in os.listdir(f"{root}/True/ck")         # one stage: state in the checkpoint
    # no input carries an event time (no retention): no watermark, so no flush source
    assert len(queries[True].lastProgress["sources"]) == 2 and "flush" not in os.listdir(f"{root}/True/ck")
    aside = pq.read_table(f"{root}/True/ck/set_aside/left_changes").to_pylist()
    assert [(r["order_id"], r["customer_id"]) for r in aside] == [(3, 20)]
    from streamjoin.spark.state import read_state

    keys = read_state(spark, f"{root}/True/ck", side="left_keys").collect()
    assert sorted((r.primary_key, r.join_key, r._has_row) for r in keys) == [
        ("[1]", "[10]", True), ("[2]", "[20]", False), ("[3]", "[10]", True)]


LINES_DDL = "order_id bigint, op string, at timestamp, customer_id bigint, items array<struct<sku:string,qty:int>>"
PROFILES_DDL = "customer_id bigint, op string, at timestamp, tags map<string,array<string>>"


def test_table_table_join_keeps_lists_structs_and_maps(spark, tmp_path):
    # rows with an array of structs and a map of arrays: an update that changes only a nested
    # value is a view change, and read_state shows the values as their structure
    root = str(tmp_path)
    at = lambda t: EPOCH + dt.timedelta(seconds=t)   # noqa: E731
    orders = [[{"order_id": 1, "op": "insert", "at": at(1), "customer_id": 10, "items": [("a", 2), ("b", None)]}],
              [{"order_id": 1, "op": "update", "at": at(2), "customer_id": 10, "items": [("a", 3)]}]]
    profiles = [[{"customer_id": 10, "op": "insert", "at": at(1), "tags": {"vip": ["x", None]}}],
                [{"customer_id": 10, "op": "update", "at": at(2), "tags": {}}]]
    schemas = [spark.createDataFrame([], ddl).schema for ddl in (LINES_DDL, PROFILES_DDL)]
    outputs: dict[int, list] = {}
    for batch in range(2):
        for name, rows, schema in (("orders", orders[batch], schemas[0]), ("profiles", profiles[batch], schemas[1])):
            spark.createDataFrame(rows, schema).write.mode("append").parquet(f"{root}/{name}")
        joined = table_table_join(spark.readStream.schema(schemas[0]).parquet(f"{root}/orders"),
                                  spark.readStream.schema(schemas[1]).parquet(f"{root}/profiles"),
                                  "customer_id", left_key="order_id", right_key="customer_id", left_time="at",
                                  right_time="at", checkpoint=f"{root}/ck", partitions=2)
        query = (joined.writeStream.option("checkpointLocation", f"{root}/spark").trigger(availableNow=True)
                 .foreachBatch(lambda df, b: outputs.setdefault(b, sorted(
                     ([tuple(i) for i in r.items], dict(r.tags), r._change_type) for r in df.collect())))
                 .start())
        query.awaitTermination()
    assert outputs[0] == [([("a", 2), ("b", None)], {"vip": ["x", None]}, "insert")]
    assert outputs[1] == [([("a", 2), ("b", None)], {"vip": ["x", None]}, "update_preimage"),
                          ([("a", 3)], {}, "update_postimage")]
    from streamjoin.spark.state import read_state

    rows = read_state(spark, f"{root}/ck/join", side="left").collect()
    assert [json.loads(r.row)[-1] for r in rows] == [[{"sku": "a", "qty": 3}]]
