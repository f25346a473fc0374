"""``streamjoin bench postgres``: changes per second from a PostgreSQL slot, decoded and joined.

A throw-away cluster gets two tables (orders, products) and a logical replication slot per stream,
then a burst of changes in transactions of ``--per-transaction`` rows: inserts, then updates of
every other order (half of them moving to another product), then deletes of every fifth. Measured
over the same slot range: decoding alone (:func:`streamjoin.cdc.peek` + :func:`streamjoin.cdc.decode`,
engine-free, median of ``--repeat``), the ``postgres_changes`` source into Spark's ``noop`` sink,
and the source into ``table_table_join`` (orders x products) into ``noop`` (``availableNow``: one
micro-batch over the whole range), timed by Spark's own ``triggerExecution`` (the query's start
left out). Rates count the orders' change rows (heartbeats excluded).

Then, end to end (:mod:`streamjoin.bench.postgres_burst`): a burst of ``--burst`` new orders
committed while a view query (``table_table_join`` into ``PostgresSink``, ``--trigger``) runs,
timed from the first order written to the last view row applied (changes/s), and the median from
an order's commit to its view row.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile

from streamjoin.bench.harness import Chart, Table, median_seconds, write_results
from streamjoin.bench.postgres_burst import Burst, measure_burst

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--changes", type=int, default=60_000, help="order inserts; updates and deletes add "
                        "about 70%% more (default 60,000)")
    parser.add_argument("--per-transaction", type=int, default=200, help="rows per transaction (default 200)")
    parser.add_argument("--repeat", type=int, default=3, help="repeats of the decoding measurement (default 3)")
    parser.add_argument("--burst", type=int, default=10_000, help="orders inserted in one burst while a view query "
                        "runs, measured end to end (default 10,000)")
    parser.add_argument("--trigger", default="1 second", help="the burst's view query trigger (default 1 second)")


def _load(conn, orders: int, per_txn: int) -> None:
    conn.execute("CREATE TABLE products (product_id bigint PRIMARY KEY, name text NOT NULL, price numeric(10,2))")
    conn.execute("CREATE TABLE orders (order_id bigint PRIMARY KEY, product_id bigint NOT NULL, "
                 "quantity integer NOT NULL, note text)")
    conn.execute("INSERT INTO products SELECT g, 'product-' || g, g % 100 + 0.99 FROM generate_series(1, 1000) g")
    statements = (
        "INSERT INTO orders SELECT g, g %% 1000 + 1, 1, 'order ' || g FROM generate_series(%s::bigint, %s::bigint) g",
        "UPDATE orders SET quantity = quantity + 1, product_id = CASE WHEN order_id %% 4 = 0 "
        "THEN product_id %% 1000 + 1 ELSE product_id END WHERE order_id BETWEEN %s::bigint AND %s::bigint AND order_id %% 2 = 0",
        "DELETE FROM orders WHERE order_id BETWEEN %s::bigint AND %s::bigint AND order_id %% 5 = 0",
    )
    for statement in statements:
        for low in range(1, orders + 1, per_txn):
            conn.execute(statement, (low, min(low + per_txn - 1, orders)))


def run(args: argparse.Namespace) -> int:
    from streamjoin.cdc import connect, create_slot, decode, flush_lsn, peek, table_info
    from streamjoin.cdc.cluster import start_cluster

    with start_cluster(prefix="streamjoin-bench-pg-") as cluster:
        dsn = cluster.dsn
        slots = {name: create_slot(dsn, name) for name in ("decode_orders", "spark_orders", "view_orders",
                                                           "view_products")}
        start = slots["decode_orders"].lsn
        print(f"loading {args.changes:,} orders and their updates and deletes into a throw-away cluster", flush=True)
        with connect(dsn) as conn:
            _load(conn, args.changes, args.per_transaction)
            end = flush_lsn(conn)
            info = table_info(conn, "public.orders")
            mb = (end - start) / 1e6
        with connect(dsn) as conn:
            changes = decode(peek(conn, "decode_orders", info, end), info, start, end)
            n = sum(1 for op in changes.column("op").to_pylist() if op != "heartbeat")

            def decode_once() -> None:
                decode(peek(conn, "decode_orders", info, end), info, start, end)

            decoding = median_seconds(decode_once, args.repeat)
        source, joined, burst = _spark(dsn, args)
    table = Table(["path", "changes", "seconds", "changes/s"])
    table.add("peek + decode (engine-free)", n, round(decoding, 2), n / decoding)
    table.add("postgres_changes -> noop (Spark)", n, round(source, 2), n / source)
    table.add("postgres_changes -> table_table_join -> noop", n, round(joined, 2), n / joined)
    table.add(f"burst: commit -> view in PostgresSink ({args.trigger} trigger)", burst.changes,
              round(burst.seconds, 2), burst.per_second)
    print(f"\n{mb:.0f} MB of log, orders' changes only counted (products' slot adds 1,000 inserts)\n")
    print(table.render())
    print(f"\nburst of {burst.changes:,} changes: {burst.seconds:.1f} s to the view ({burst.per_second:,.0f} changes/s "
          f"end to end), {burst.commit_to_view_median:.1f} s median from commit to view at a {args.trigger} trigger")
    params = vars(args) | {"func": None, "log_mb": round(mb), "commit_to_view_median_s": round(burst.commit_to_view_median, 2)}
    print("results:", write_results("postgres", table, params,
                                    chart=Chart(value="changes/s", label=("path",), title="PostgreSQL changes/s")))
    return 0


def _spark(dsn: str, args: argparse.Namespace) -> tuple[float, float, Burst]:
    """Seconds of micro-batches (Spark's ``triggerExecution``, the query's start left out) for the
    source alone and for the source into the table-table join; then the burst end to end."""
    from streamjoin import table_table_join
    from streamjoin.bench.sparkutil import local_session, run_to_noop
    from streamjoin.spark.postgres_source import postgres_change_format, read_postgres_changes

    spark = local_session(shuffle_partitions=2)
    scratch = tempfile.mkdtemp(prefix="streamjoin-bench-pg-q-")
    try:
        source = run_to_noop(read_postgres_changes(spark, dsn, "spark_orders", "public.orders"),
                             os.path.join(scratch, "source"), "the source")
        view = table_table_join(
            read_postgres_changes(spark, dsn, "view_orders", "public.orders"),
            read_postgres_changes(spark, dsn, "view_products", "public.products"), "product_id",
            left_key="order_id", right_key="product_id", left_format=postgres_change_format("order_id"),
            right_format=postgres_change_format("product_id"), checkpoint=os.path.join(scratch, "view"), partitions=2)
        joined = run_to_noop(view, os.path.join(scratch, "view_query"), "the view")
        burst = measure_burst(spark, dsn, scratch, args.burst, args.per_transaction, args.trigger)
        return _batch_seconds(source), _batch_seconds(joined), burst
    finally:
        spark.stop()
        shutil.rmtree(scratch, ignore_errors=True)


def _batch_seconds(query) -> float:
    return sum(p["durationMs"].get("triggerExecution", 0) for p in query.recentProgress) / 1000
