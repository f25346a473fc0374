"""A view over three tables for the fault tests: random changes of orders, customers and
products written as Parquet files (one a table a micro-batch), the view of the first two joined
left and the products joined full, and DuckDB's three-way join of the final tables to compare
it with."""

from __future__ import annotations

import datetime as dt
import os
import random

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession

from streamjoin import table_table_join

EPOCH = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
_CHANGE = [("op", pa.string()), ("at", pa.timestamp("us", "UTC"))]
SCHEMAS = {"orders": pa.schema([("order_id", pa.int64()), ("cust", pa.int64()), ("prod", pa.int64()),
                                ("qty", pa.int64()), *_CHANGE]),
           "customers": pa.schema([("customer_id", pa.int64()), ("name", pa.string()), *_CHANGE]),
           "products": pa.schema([("product_id", pa.int64()), ("title", pa.string()), *_CHANGE])}
DDL = {"orders": "order_id bigint, cust bigint, prod bigint, qty bigint, op string, at timestamp",
       "customers": "customer_id bigint, name string, op string, at timestamp",
       "products": "product_id bigint, title string, op string, at timestamp"}
KEYS = {"orders": "order_id", "customers": "customer_id", "products": "product_id"}


def write_history(root: str, seed: int, batches: int, per_batch: int) -> dict[str, list[dict]]:
    """Random changes of the three tables (inserts first, then updates, foreign-key moves and
    deletes), one Parquet file a table a micro-batch under ``root/<table>``; every change, by table."""
    rng = random.Random(seed)
    changes: dict[str, list[dict]] = {name: [] for name in SCHEMAS}
    t = 0
    for batch in range(batches):
        for name, schema in SCHEMAS.items():
            rows = []
            for _ in range(per_batch):
                t += 1
                row: dict[str, object]
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


def view(spark: SparkSession, root: str, partitions: int = 3, state_dirs: bool = True) -> DataFrame:
    """The streaming view over the files of ``root`` (one file a table a micro-batch), its joins'
    checkpoints under ``root``; their local stores under ``root`` too, or (``state_dirs`` False)
    in Spark's local directory of each executor, which a lost executor takes with it."""
    orders, customers, products = (spark.readStream.schema(DDL[name]).option("maxFilesPerTrigger", 1)
                                   .parquet(os.path.join(root, name)) for name in SCHEMAS)
    local = {1: f"{root}/local1", 2: f"{root}/local2"} if state_dirs else {1: None, 2: None}
    first = table_table_join(orders, customers, (["cust"], ["customer_id"]), left_key="order_id",
                             right_key="customer_id", how="left", left_time="at", right_time="at",
                             checkpoint=f"{root}/ck1", state_dir=local[1], partitions=partitions)
    return table_table_join(first, products, (["prod"], ["product_id"]), left_key="order_id",
                            right_key="product_id", how="full", right_time="at", checkpoint=f"{root}/ck2",
                            state_dir=local[2], partitions=partitions)


def _final(changes: list[dict], schema: pa.Schema, key: str) -> pa.Table:
    rows: dict[int, dict] = {}
    for row in sorted(changes, key=lambda r: r["at"]):
        if row["op"] == "delete":
            rows.pop(row[key], None)
        else:
            rows[row[key]] = row
    return pa.Table.from_pylist(list(rows.values()), schema).drop(["op", "at"])


def expected_view(changes: dict[str, list[dict]]) -> pa.Table:
    """DuckDB's three-way join of the final tables (the view's columns)."""
    con = duckdb.connect()
    for name, key in KEYS.items():
        con.register(name, _final(changes[name], SCHEMAS[name], key))
    return con.sql("SELECT o.order_id, o.cust, o.prod, o.qty, c.customer_id, c.name, p.product_id, p.title "
                   "FROM (orders o LEFT JOIN customers c ON o.cust = c.customer_id) "
                   "FULL JOIN products p ON o.prod = p.product_id").to_arrow_table()


def same_rows(got: pa.Table, expected: pa.Table) -> bool:
    """Whether ``got`` has ``expected``'s rows (in its columns), in any order."""
    columns = expected.column_names
    return sorted(got.select(columns).to_pylist(), key=repr) == sorted(expected.to_pylist(), key=repr)
