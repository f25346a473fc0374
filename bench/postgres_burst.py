"""End to end from PostgreSQL back to PostgreSQL: a burst of changes through a running view query.

Two tables (``burst_orders``, ``burst_products``) get a replication slot each; a
``table_table_join`` (orders x products) over the ``postgres_changes`` source, written by
``PostgresSink`` into ``burst_lines`` at a processing-time trigger, runs until it has applied its
first micro-batch (the products). Then ``changes`` orders are inserted in transactions of
``per_transaction`` rows, as fast as the server takes them. Each order records
``clock_timestamp()`` when written (its transaction commits right after), each view row
``clock_timestamp()`` when the sink inserts it: both on the server's clock. Measured:

* **burst seconds**: from the first order written to the last view row applied;
  changes/s = ``changes`` / that;
* **commit to view**: the median over orders of (view row applied - order written).
"""

from __future__ import annotations

import os
import statistics
import time
from dataclasses import dataclass

__all__ = ["Burst", "measure_burst"]

_SCHEMA = """
CREATE TABLE burst_products (product_id bigint PRIMARY KEY, name text NOT NULL);
CREATE TABLE burst_orders (order_id bigint PRIMARY KEY, product_id bigint NOT NULL, quantity integer NOT NULL,
                           written_at timestamptz NOT NULL DEFAULT clock_timestamp());
CREATE TABLE burst_lines (order_id bigint, product_id bigint, quantity integer, name text,
                          applied_at timestamptz NOT NULL DEFAULT clock_timestamp(), PRIMARY KEY (order_id, product_id));
"""
_RESULT = """
SELECT extract(epoch FROM l.applied_at - o.written_at)::float8, extract(epoch FROM o.written_at)::float8,
       extract(epoch FROM l.applied_at)::float8
FROM burst_lines l JOIN burst_orders o USING (order_id)
"""


@dataclass(frozen=True)
class Burst:
    """What one burst measured (see module)."""

    changes: int
    seconds: float
    commit_to_view_median: float

    @property
    def per_second(self) -> float:
        return self.changes / self.seconds


def measure_burst(spark, dsn: str, scratch: str, changes: int, per_transaction: int, trigger: str = "1 second",
                  timeout: float = 600.0) -> Burst:
    """Run one burst through a view query in ``spark`` (checkpoints under ``scratch``); see module."""
    from streamjoin import table_table_join
    from streamjoin.cdc import connect, create_slot
    from streamjoin.spark.postgres_sink import PostgresSink
    from streamjoin.spark.postgres_source import postgres_change_format, read_postgres_changes

    with connect(dsn) as conn:
        conn.execute(_SCHEMA)
        create_slot(dsn, "burst_orders_slot")
        create_slot(dsn, "burst_products_slot")
        conn.execute("INSERT INTO burst_products SELECT g, 'product-' || g FROM generate_series(1, 100) g")
    view = table_table_join(
        read_postgres_changes(spark, dsn, "burst_orders_slot", "public.burst_orders"),
        read_postgres_changes(spark, dsn, "burst_products_slot", "public.burst_products"), "product_id",
        left_key="order_id", right_key="product_id", left_format=postgres_change_format("order_id"),
        right_format=postgres_change_format("product_id"), checkpoint=os.path.join(scratch, "burst_view"),
        partitions=2)
    sink = PostgresSink(dsn, "public.burst_lines", key=["order_id", "product_id"], columns={
        "order_id": "order_id", "product_id": "product_id_left", "quantity": "quantity", "name": "name"})
    query = (view.writeStream.foreachBatch(sink).trigger(processingTime=trigger)
             .option("checkpointLocation", os.path.join(scratch, "burst_spark")).start())
    try:
        deadline = time.monotonic() + timeout
        while not query.recentProgress and time.monotonic() < deadline:  # the products are in the view
            _check(query)
            time.sleep(0.2)
        with connect(dsn) as conn:
            for low in range(1, changes + 1, per_transaction):
                conn.execute("INSERT INTO burst_orders (order_id, product_id, quantity) "
                             "SELECT g, g %% 100 + 1, 1 FROM generate_series(%s::bigint, %s::bigint) g",
                             (low, min(low + per_transaction - 1, changes)))
            while conn.execute("SELECT count(*) FROM burst_lines").fetchone()[0] < changes:
                _check(query)
                if time.monotonic() > deadline:
                    raise TimeoutError(f"the burst did not reach the view within {timeout:.0f} s")
                time.sleep(0.2)
            rows = conn.execute(_RESULT).fetchall()
    finally:
        query.stop()
    seconds = max(r[2] for r in rows) - min(r[1] for r in rows)
    return Burst(len(rows), seconds, statistics.median(r[0] for r in rows))


def _check(query) -> None:
    if query.exception() is not None:
        raise RuntimeError(f"the burst's view query failed: {query.exception()}")
