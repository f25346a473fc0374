"""Python workers killed mid-query (``SIGKILL``, as the kernel's out-of-memory killer or a lost
machine does it): a view over three tables, two chained table-table joins in one streaming
query, equals DuckDB's three-way join of the final tables. A killed worker leaves what it was
writing half done, its locks, and the stores it kept warm for the next task; Spark retries its
task in another worker. The kills are few (at most one less than the session's task attempts),
so every task succeeds in the end, and at least one lands while the query runs."""

from __future__ import annotations

import datetime as dt
import os
import random
import signal
import threading

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from streamjoin import table_table_join, view_sink
from streamjoin.bench.interval import task_workers

pytestmark = pytest.mark.spark

EPOCH = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
_CHANGE = [("op", pa.string()), ("at", pa.timestamp("us", "UTC"))]
SCHEMAS = {"orders": pa.schema([("order_id", pa.int64()), ("cust", pa.int64()), ("prod", pa.int64()),
                                ("qty", pa.int64()), *_CHANGE]),
           "customers": pa.schema([("customer_id", pa.int64()), ("name", pa.string()), *_CHANGE]),
           "products": pa.schema([("product_id", pa.int64()), ("title", pa.string()), *_CHANGE])}
DDL = {"orders": "order_id bigint, cust bigint, prod bigint, qty bigint, op string, at timestamp",
       "customers": "customer_id bigint, name string, op string, at timestamp",
       "products": "product_id bigint, title string, op string, at timestamp"}
BATCHES, PER_BATCH = 6, 120
#: Kills at most: the session tries a task four times (``local[2,4]``).
KILLS = 3


def _history(root: str, seed: int) -> dict[str, list[dict]]:
    """Random changes of the three tables (inserts first, then updates, foreign-key moves and
    deletes), one Parquet file a table a micro-batch; every change, by table."""
    rng = random.Random(seed)
    changes: dict[str, list[dict]] = {name: [] for name in SCHEMAS}
    t = 0
    for batch in range(BATCHES):
        for name, schema in SCHEMAS.items():
            rows = []
            for _ in range(PER_BATCH):
                t += 1
                op = rng.choice(["insert", "update", "update", "delete"]) if batch else "insert"
                if name == "orders":
                    row = {"order_id": rng.randrange(300), "cust": rng.randrange(120), "prod": rng.randrange(30),
                           "qty": rng.randrange(9)}
                elif name == "customers":
                    row = {"customer_id": rng.randrange(120), "name": f"c{rng.randrange(1000)}"}
                else:
                    row = {"product_id": rng.randrange(30), "title": f"p{rng.randrange(1000)}"}
                rows.append({**row, "op": op, "at": EPOCH + dt.timedelta(seconds=t)})
            changes[name] += rows
            os.makedirs(os.path.join(root, name), exist_ok=True)
            path = os.path.join(root, name, f"part-{batch:03d}.parquet")
            pq.write_table(pa.Table.from_pylist(rows, schema), path)
            os.utime(path, (1_700_000_000 + batch, 1_700_000_000 + batch))
    return changes


def _final(changes: list[dict], schema: pa.Schema, key: str) -> pa.Table:
    rows: dict[int, dict] = {}
    for row in sorted(changes, key=lambda r: r["at"]):
        if row["op"] == "delete":
            rows.pop(row[key], None)
        else:
            rows[row[key]] = row
    return pa.Table.from_pylist(list(rows.values()), schema).drop(["op", "at"])


class _Killer(threading.Thread):
    """Kills a random Python worker every 0.4-1.2 s until ``KILLS`` are done or it is stopped."""

    def __init__(self, seed: int) -> None:
        super().__init__(daemon=True)
        self.rng, self.kills, self.done = random.Random(seed), 0, threading.Event()

    def run(self) -> None:
        while self.kills < KILLS and not self.done.wait(self.rng.uniform(0.4, 1.2)):
            workers = task_workers(os.getpid())   # (this session's own, not another test process's)
            if workers:
                try:
                    os.kill(self.rng.choice(workers), signal.SIGKILL)
                    self.kills += 1
                except ProcessLookupError:
                    pass


def test_table_chain_with_python_workers_killed_equals_duckdbs_three_way_join(spark, tmp_path):
    root = str(tmp_path)
    changes = _history(root, seed=5)
    orders, customers, products = (spark.readStream.schema(DDL[name]).option("maxFilesPerTrigger", 1)
                                   .parquet(os.path.join(root, name)) for name in SCHEMAS)
    first = table_table_join(orders, customers, (["cust"], ["customer_id"]), left_key="order_id",
                             right_key="customer_id", how="left", left_time="at", right_time="at",
                             checkpoint=f"{root}/ck1", state_dir=f"{root}/local1", partitions=3)
    view = table_table_join(first, products, (["prod"], ["product_id"]), left_key="order_id", right_key="product_id",
                            how="full", right_time="at", checkpoint=f"{root}/ck2", state_dir=f"{root}/local2",
                            partitions=3)
    killer = _Killer(seed=11)
    with view_sink(f"{root}/view", left_key="order_id", right_key="product_id", schema=view) as sink:
        query = (view.writeStream.foreachBatch(sink).option("checkpointLocation", f"{root}/spark")
                 .trigger(availableNow=True).start())
        killer.start()
        query.awaitTermination()
        killer.done.set()
        killer.join()
        got = sink.rows()
    assert query.exception() is None
    assert killer.kills >= 1, "no worker was killed while the query ran"
    con = duckdb.connect()
    for name, key in (("orders", "order_id"), ("customers", "customer_id"), ("products", "product_id")):
        con.register(name, _final(changes[name], SCHEMAS[name], key))
    expected = con.sql("SELECT o.order_id, o.cust, o.prod, o.qty, c.customer_id, c.name, p.product_id, p.title "
                       "FROM (orders o LEFT JOIN customers c ON o.cust = c.customer_id) "
                       "FULL JOIN products p ON o.prod = p.product_id").to_arrow_table()
    columns = expected.column_names
    assert sorted(got.select(columns).to_pylist(), key=repr) == sorted(expected.to_pylist(), key=repr)
