"""Schema evolution through Spark: a stream-table join stopped, its inputs' columns evolved (a
column added to the table, one dropped, an event column widened), restarted on the same
checkpoints; events waiting from before and table versions from before join as a batch join of
the evolved inputs would, the dropped column leaves the output, and the set-aside rows of both
schemas read back together. A change the state cannot follow is refused before the query starts.
A table-table join restarted with a column added to one table reads its rows stored before with
a null there, a dropped one gone and a widened one widened (each of its stages accepts the new
columns); an interval join's buffered rows from before match with the new columns null and
widened."""

from __future__ import annotations

import datetime as dt
import glob
import json
import os
from datetime import timedelta

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import functions as F

from streamjoin import interval_join, read_state, set_aside_rows, stream_table_join, table_table_join
from streamjoin.errors import CheckpointMismatchError
from streamjoin.runtime.checkpoint import Checkpoint

pytestmark = pytest.mark.spark

BASE = 1_767_225_600  # 2026-01-01T00:00:00Z, seconds
EVENTS = [("user_id", pa.int64()), ("ts", pa.timestamp("us", "UTC")), ("action", pa.string())]
OLD_EVENTS = pa.schema(EVENTS + [("n", pa.int32())])
NEW_EVENTS = pa.schema(EVENTS + [("n", pa.int64())])
CHANGES = [("user_id", pa.int64()), ("op", pa.string()), ("changed_at", pa.timestamp("us", "UTC")), ("plan", pa.string())]
OLD_CHANGES = pa.schema(CHANGES + [("country", pa.string())])
NEW_CHANGES = pa.schema(CHANGES + [("tier", pa.int32())])
SQL = {pa.int32(): "int", pa.int64(): "bigint", pa.string(): "string", pa.timestamp("us", "UTC"): "timestamp"}


def _at(seconds: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(BASE + seconds, dt.timezone.utc)


def _file(directory: str, index: int, rows: list[dict], schema: pa.Schema) -> None:
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, f"part-{index:03d}.parquet")
    pq.write_table(pa.Table.from_pylist(rows, schema), path)
    os.utime(path, (1_700_000_000 + index, 1_700_000_000 + index))


def _event(user, seconds, action, n):
    return {"user_id": user, "ts": _at(seconds), "action": action, "n": n}


def _change(user, op, seconds, plan=None, **extra):
    return {"user_id": user, "op": op, "changed_at": _at(seconds), "plan": plan, **extra}


def _run(spark, root: str, events: pa.Schema, changes: pa.Schema, out: str, defaults: dict | None = None):
    """``defaults``: existence defaults (Spark's EXISTS_DEFAULT) of table columns, given as a
    table's column added with DEFAULT carries them."""
    def ddl(schema: pa.Schema) -> str:
        return ", ".join(f"{f.name} {SQL[f.type]}" for f in schema)

    stream = spark.readStream.schema(ddl(events)).option("maxFilesPerTrigger", 1).parquet(f"{root}/events")
    table = spark.readStream.schema(ddl(changes)).option("maxFilesPerTrigger", 1).parquet(f"{root}/changes")
    for name, literal in (defaults or {}).items():
        table = table.withColumn(name, F.col(name).alias(name, metadata={"EXISTS_DEFAULT": literal}))
    joined = stream_table_join(stream, table, "user_id", stream_time="ts", table_key="user_id",
                               table_time="changed_at", delay=timedelta(seconds=10), checkpoint=f"{root}/ck",
                               partitions=2)
    query = (joined.writeStream.format("parquet").option("path", f"{root}/{out}")
             .option("checkpointLocation", f"{root}/spark").trigger(availableNow=True).start())
    query.awaitTermination()
    # the files themselves: the sink's log of the restarted query starts at its first batch id
    files = sorted(glob.glob(f"{root}/{out}/part-*.parquet"))
    return pa.concat_tables([pq.read_table(f) for f in files]).to_pylist(), pq.read_schema(files[0])


@pytest.mark.parametrize("tier_default", [None, 5])
def test_stream_table_join_restarts_with_evolved_columns(spark, tmp_path, tier_default):
    """With ``tier_default``, the added column has an existence default, which the table versions
    from before read instead of null (in the output and in ``read_state``); rows set aside before
    are shown as they arrived, without it."""
    root = str(tmp_path)
    defaults = None if tier_default is None else {"tier": str(tier_default)}
    _file(f"{root}/events", 0, [_event(1, 10, "a", 1), _event(2, 12, "b", 2)], OLD_EVENTS)
    _file(f"{root}/events", 1, [_event(1, 40, "c", 3)], OLD_EVENTS)       # waits: the table is at 20 s
    _file(f"{root}/changes", 0, [_change(1, "upsert", 5, "free", country="DE"),
                                 _change(2, "upsert", 6, "pro", country="FR")], OLD_CHANGES)
    _file(f"{root}/changes", 1, [_change(1, "upsert", 30, "max", country="DE"),
                                 _change(3, "bogus", 31, "x", country="US")], OLD_CHANGES)
    first, _ = _run(spark, root, OLD_EVENTS, OLD_CHANGES, "out1")
    assert sorted((r["action"], r["plan"], r["country"]) for r in first) == [("a", "free", "DE"), ("b", "pro", "FR")]

    # the evolved inputs: the table's country dropped and tier added, the events' n widened
    _file(f"{root}/events", 2, [_event(2, 50, "d", 2**40)], NEW_EVENTS)
    _file(f"{root}/changes", 2, [_change(2, "upsert", 45, "max", tier=3), _change(4, "bogus", 46, "y", tier=1)],
          NEW_CHANGES)
    _file(f"{root}/changes", 3, [_change(None, "heartbeat", 200)], NEW_CHANGES)
    second, schema = _run(spark, root, NEW_EVENTS, NEW_CHANGES, "out2", defaults)
    assert "country" not in schema.names and schema.field("n").type == pa.int64()
    # c waited from before the change: it joins the version of 30 s, written before tier existed
    assert sorted((r["action"], r["n"], r["plan"], r["tier"]) for r in second) == [("c", 3, "max", tier_default),
                                                                                   ("d", 2**40, "max", 3)]
    added = "table: added tier (int32)" if tier_default is None else f"table: added tier (int32, default {tier_default})"
    assert Checkpoint(f"{root}/ck").binding.evolutions()[0]["changes"] == [
        "stream: widened n int32 -> int64", added, "table: dropped country"]
    aside = set_aside_rows(spark, f"{root}/ck", "table")
    assert sorted((r.user_id, r.plan, r.tier, r._reason) for r in aside.collect()) == [
        (3, "x", None, "unknown op"), (4, "y", 1, "unknown op")]

    held = read_state(spark, f"{root}/ck", side="table")
    assert "country" not in held.columns
    assert sorted((r.user_id, r.plan, r.tier) for r in held.collect() if r.plan == "max") == [
        (1, "max", tier_default), (2, "max", 3)]

    narrowed = pa.schema(EVENTS + [("n", pa.int32())])
    with pytest.raises(CheckpointMismatchError, match="'n'.*int64 -> int32"):
        _run(spark, root, narrowed, NEW_CHANGES, "out3", defaults)


ORDERS = pa.schema([("order_id", pa.int64()), ("customer_id", pa.int64()), ("op", pa.string()),
                    ("at", pa.timestamp("us", "UTC"))])
OLD_CUSTOMERS = pa.schema([("customer_id", pa.int64()), ("name", pa.string()), ("op", pa.string()),
                           ("at", pa.timestamp("us", "UTC")), ("score", pa.int32()), ("email", pa.string())])
# evolved: email dropped, score widened, tier added
NEW_CUSTOMERS = pa.schema([("customer_id", pa.int64()), ("name", pa.string()), ("op", pa.string()),
                           ("at", pa.timestamp("us", "UTC")), ("score", pa.int64()), ("tier", pa.int32())])


def _run_view(spark, root: str, customers: pa.Schema, out: str):
    def ddl(schema: pa.Schema) -> str:
        return ", ".join(f"{f.name} {SQL[f.type]}" for f in schema)

    orders = spark.readStream.schema(ddl(ORDERS)).option("maxFilesPerTrigger", 1).parquet(f"{root}/orders")
    people = spark.readStream.schema(ddl(customers)).option("maxFilesPerTrigger", 1).parquet(f"{root}/customers")
    view = table_table_join(orders, people, "customer_id", left_key="order_id", right_key="customer_id",
                            left_time="at", right_time="at", checkpoint=f"{root}/view", partitions=2)
    query = (view.writeStream.format("parquet").option("path", f"{root}/{out}")
             .option("checkpointLocation", f"{root}/view-spark").trigger(availableNow=True).start())
    query.awaitTermination()
    files = sorted(glob.glob(f"{root}/{out}/part-*.parquet"))
    return pa.concat_tables([pq.read_table(f) for f in files]).to_pylist()


def test_table_table_join_restarts_with_columns_added_dropped_and_widened(spark, tmp_path):
    root = str(tmp_path)
    _file(f"{root}/orders", 0, [{"order_id": 1, "customer_id": 10, "op": "upsert", "at": _at(1)},
                                {"order_id": 2, "customer_id": 20, "op": "upsert", "at": _at(1)}], ORDERS)
    _file(f"{root}/customers", 0, [
        {"customer_id": 10, "name": "ann", "op": "upsert", "at": _at(1), "score": 7, "email": "a@x"},
        {"customer_id": 20, "name": "bob", "op": "upsert", "at": _at(1), "score": 8, "email": "b@x"}], OLD_CUSTOMERS)
    first = _run_view(spark, root, OLD_CUSTOMERS, "out1")
    assert sorted((r["_change_type"], r["order_id"], r["name"]) for r in first) == [
        ("insert", 1, "ann"), ("insert", 2, "bob")]

    _file(f"{root}/customers", 1, [{"customer_id": 10, "name": "ann", "op": "upsert", "at": _at(5), "score": 2**40,
                                    "tier": 1}], NEW_CUSTOMERS)
    _file(f"{root}/orders", 1, [{"order_id": 3, "customer_id": 20, "op": "upsert", "at": _at(5)}], ORDERS)
    second = _run_view(spark, root, NEW_CUSTOMERS, "out2")
    # bob's row is from before tier existed: null there, his score widened; ann's update shows her
    # old row with a null tier; email is gone from the view
    assert "email" not in second[0]
    assert sorted((r["_change_type"], r["order_id"], r["name"], r["score"], r["tier"]) for r in second) == [
        ("insert", 3, "bob", 8, None), ("update_postimage", 1, "ann", 2**40, 1), ("update_preimage", 1, "ann", 7, None)]
    # the join stage's rows read in the current columns, whatever columns they were stored under
    held = {json.loads(r.primary_key)[0]: json.loads(r.row)
            for r in read_state(spark, f"{root}/view/join", side="right").collect()}
    assert [held[20][1], *held[20][3:]] == ["bob", 8, None] and [held[10][1], *held[10][3:]] == ["ann", 2**40, 1]
    narrowed = NEW_CUSTOMERS.set(4, pa.field("score", pa.int32()))
    with pytest.raises(CheckpointMismatchError, match="'score'.*int64 -> int32"):
        _run_view(spark, root, narrowed, "out3")


CLICKS = [pa.schema([("k", pa.int64()), ("t", pa.timestamp("us", "UTC")), ("page", pa.string())]),
          pa.schema([("k", pa.int64()), ("t", pa.timestamp("us", "UTC")), ("page", pa.string()),
                     ("ref", pa.string())])]
BUYS = [pa.schema([("k", pa.int64()), ("t", pa.timestamp("us", "UTC")), ("n", pa.int32()), ("shop", pa.string())]),
        pa.schema([("k", pa.int64()), ("t", pa.timestamp("us", "UTC")), ("n", pa.int64())])]   # shop dropped


def _run_interval(spark, root: str, generation: int, out: str):
    def ddl(schema: pa.Schema) -> str:
        return ", ".join(f"{f.name} {SQL[f.type]}" for f in schema)

    clicks = spark.readStream.schema(ddl(CLICKS[generation])).option("maxFilesPerTrigger", 1).parquet(f"{root}/c")
    buys = spark.readStream.schema(ddl(BUYS[generation])).option("maxFilesPerTrigger", 1).parquet(f"{root}/b")
    joined = interval_join(clicks, buys, "k", left_time="t", right_time="t", lower=timedelta(0),
                           upper=timedelta(seconds=30), delay=timedelta(seconds=5), how="left",
                           checkpoint=f"{root}/ij", partitions=2)
    query = (joined.writeStream.format("parquet").option("path", f"{root}/{out}")
             .option("checkpointLocation", f"{root}/ij-spark").trigger(availableNow=True).start())
    query.awaitTermination()
    files = sorted(glob.glob(f"{root}/{out}/part-*.parquet"))
    return pa.concat_tables([pq.read_table(f) for f in files]).to_pylist() if files else []


def test_interval_join_restarts_with_columns_added_dropped_and_widened(spark, tmp_path):
    root = str(tmp_path)
    _file(f"{root}/c", 0, [{"k": 1, "t": _at(10), "page": "a"}, {"k": 2, "t": _at(12), "page": "b"}], CLICKS[0])
    _file(f"{root}/b", 0, [{"k": 1, "t": _at(15), "n": 3, "shop": "s1"}], BUYS[0])
    first = _run_interval(spark, root, 0, "out1")
    assert sorted((r["page"], r["n"]) for r in first) == [("a", 3)]
    # the clicks gain ref, the buys' n widens; click b (buffered from before) matches a new buy
    _file(f"{root}/c", 1, [{"k": 3, "t": _at(50), "page": "c", "ref": "ad"}], CLICKS[1])
    _file(f"{root}/b", 1, [{"k": 2, "t": _at(20), "n": 2**40}, {"k": 3, "t": _at(55), "n": 1}], BUYS[1])
    _file(f"{root}/c", 2, [{"k": 9, "t": _at(500), "page": "end", "ref": None}], CLICKS[1])
    _file(f"{root}/b", 2, [{"k": 9, "t": _at(500), "n": 0}], BUYS[1])
    second = _run_interval(spark, root, 1, "out2")
    assert "shop" not in second[0]
    assert sorted((r["page"], r["ref"], r["n"]) for r in second if r["page"] != "end") == [
        ("b", None, 2**40), ("c", "ad", 1)]
