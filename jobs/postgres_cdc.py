"""The PostgreSQL change-data-capture job: two streaming joins over a database's change streams,
with the derived view written back to the database and checked against the database's own join.

It starts a throw-away PostgreSQL cluster (``streamjoin.cdc.cluster``), creates a shop's tables
(``streamjoin.jobs.postgres_workload``), loads users, creates one logical replication slot per
stream (the users' slot exports the snapshot that ``bootstrap=`` loads), and runs a seeded workload
of transactions while two queries read the slots through the ``postgres_changes`` source:

* orders enriched with their user as of the order's commit (``stream_table_join``, as-of), written
  to ``orders_enriched``; each enriched tier must equal the tier the order's own transaction read;
* the view orders x products (``table_table_join``), written to ``order_lines`` exactly once.

When the workload stops and both queries have caught up, it compares ``order_lines`` with
PostgreSQL's ``orders JOIN products`` and prints "derived view equals PostgreSQL's join: yes" (exit
status 0) or "no" (exit status 1).
"""

from __future__ import annotations

import argparse
import os
import time
from dataclasses import dataclass
from typing import Any

from streamjoin.jobs.common import help_text, prepare_root, stage
from streamjoin.jobs.postgres_workload import ENRICHED_CHECK, SCHEMA, VIEW_DIFFERENCES, Workload

__all__ = ["register", "add_arguments", "run", "prepare_database", "start_queries", "catch_up", "stop_queries",
           "shut_down", "check", "Check", "SLOTS", "DELAY", "HEARTBEAT_INTERVAL"]

#: One slot per stream that reads it: a slot's position is its one reader's.
SLOTS = {"users": ("users_slot", "public.users"), "orders_events": ("orders_events_slot", "public.orders"),
         "orders_view": ("orders_view_slot", "public.orders"), "products": ("products_slot", "public.products")}
#: How far the users' watermark trails their last commit seen.
DELAY = "1 second"
#: The sources' heartbeat interval: a quiet table's watermark follows the other tables' commits at
#: this pace, which bounds how long an enriched order waits (the source's default is 10 seconds).
HEARTBEAT_INTERVAL = "1 second"


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "postgres-cdc", help="run two streaming joins over PostgreSQL's change streams and write a view back",
        description=help_text(__doc__), formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    parser.set_defaults(func=run)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--transactions", type=int, default=600, help="workload transactions (default 600)")
    parser.add_argument("--users", type=int, default=200, help="users loaded before the slots exist (default 200)")
    parser.add_argument("--seed", type=int, default=17, help="workload seed (default 17)")
    parser.add_argument("--out", default=None, help="directory for checkpoints (default: a new temporary directory)")


@dataclass(frozen=True)
class Check:
    """The derived tables against PostgreSQL's own answers."""

    view_rows: int
    view_differences: int
    enriched: int
    enriched_wrong: int
    orders_inserted: int

    @property
    def ok(self) -> bool:
        return self.view_differences == 0 and self.enriched_wrong == 0 and self.enriched == self.orders_inserted


def prepare_database(dsn: str, root: str, workload: Workload, users: int) -> None:
    """Create the tables and the slots; write the users' snapshot to ``<root>/users_snapshot.parquet``."""
    import pyarrow.parquet as pq

    from streamjoin.cdc import connect, create_slot

    with connect(dsn) as conn:
        conn.execute(SCHEMA)
        workload.seed_users(conn, users)
    start = create_slot(dsn, SLOTS["users"][0], ["public.users"])
    pq.write_table(start.snapshot["public.users"], os.path.join(root, "users_snapshot.parquet"))
    for name in ("orders_events", "orders_view", "products"):
        create_slot(dsn, SLOTS[name][0])
    with connect(dsn) as conn:
        workload.seed_products(conn, 20)


def start_queries(spark: Any, dsn: str, root: str, trigger: str = "1 second", partitions: int = 2) -> list[Any]:
    """Start the enrichment and the view query (checkpoints under ``root``); they run until stopped."""
    from pyspark.sql import functions as F

    from streamjoin import stream_table_join, table_table_join
    from streamjoin.spark.postgres_sink import PostgresSink
    from streamjoin.spark.postgres_source import postgres_change_format, read_postgres_changes

    def changes(name: str):
        slot, table = SLOTS[name]
        return read_postgres_changes(spark, dsn, slot, table, retry_delay="0.5", retries="8",
                                     heartbeat_interval=HEARTBEAT_INTERVAL)

    events = (changes("orders_events").where("op = 'c' AND before IS NULL")
              .select("after.order_id", "after.user_id", "after.user_tier",
                      F.timestamp_micros("ts_us").alias("ordered_at")))
    enriched = stream_table_join(
        events, changes("users"), "user_id", stream_time="ordered_at", table_key="user_id",
        table_format=postgres_change_format("user_id"), delay=DELAY, how="left",
        bootstrap=spark.read.parquet(os.path.join(root, "users_snapshot.parquet")),
        checkpoint=os.path.join(root, "enrich"), partitions=partitions)
    view = table_table_join(
        changes("orders_view"), changes("products"), "product_id", left_key="order_id", right_key="product_id",
        left_format=postgres_change_format("order_id"), right_format=postgres_change_format("product_id"),
        checkpoint=os.path.join(root, "view"), partitions=partitions)
    enriched_sink = PostgresSink(dsn, "public.orders_enriched", key="order_id", columns={
        c: c for c in ("order_id", "user_id", "ordered_at", "user_tier", "tier")})
    view_sink = PostgresSink(dsn, "public.order_lines", key=["order_id", "product_id"], columns={
        "order_id": "order_id", "product_id": "product_id_left", "quantity": "quantity", "product_name": "name",
        "price": "price"})
    return [
        df.writeStream.foreachBatch(sink).queryName(name).trigger(processingTime=trigger)
        .option("checkpointLocation", os.path.join(root, f"{name}_spark")).start()
        for name, df, sink in (("enrich", enriched, enriched_sink), ("view", view, view_sink))
    ]


def catch_up(dsn: str, queries: list[Any], timeout: float = 180.0) -> None:
    """Wait until every query has completed a micro-batch reading past the log's end as of now,
    twice (the second time, the as-of join has seen a heartbeat past every order and released it).
    Each round commits one transaction more than :data:`HEARTBEAT_INTERVAL` after the last one, so
    that a heartbeat is due on every slot (the source moves its offset only for a change of its
    table or a due heartbeat). Raises on a failed query or after ``timeout`` seconds."""
    from streamjoin.cdc import connect, flush_lsn

    deadline = time.monotonic() + timeout
    for _ in range(2):
        time.sleep(1.5)  # past the as-of delay and the heartbeat interval, then one more commit
        with connect(dsn) as conn:
            conn.execute("SELECT pg_logical_emit_message(true, 'streamjoin', 'caught up?')")
            target = flush_lsn(conn)
        while min(_read_up_to(query) for query in queries) < target:
            for query in queries:
                if query.exception() is not None:
                    raise RuntimeError(f"query {query.name} failed: {query.exception()}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"the queries did not catch up with the log within {timeout:.0f} s")
            time.sleep(0.5)


def _read_up_to(query: Any) -> int:
    """The LSN up to which every ``postgres_changes`` source of ``query`` has read in a completed
    micro-batch (0: none).

    (The slots' own positions trail by one batch: Spark releases a batch's offsets to its source only
    when it plans the next one.)"""
    import json

    from streamjoin.cdc import parse_lsn

    progress = query.lastProgress
    if progress is None:
        return 0
    ends = [source["endOffset"] if isinstance(source, dict) else source.endOffset
            for source in (progress["sources"] if isinstance(progress, dict) else progress.sources)]
    ends = [json.loads(end) if isinstance(end, str) else end for end in ends]
    return min((parse_lsn(end["lsn"]) for end in ends if isinstance(end, dict) and "lsn" in end), default=0)


def stop_queries(queries: list[Any], timeout: float = 30.0) -> None:
    """Stop each query between two micro-batches (waiting up to ``timeout`` seconds for its running
    batch to end): stopping one inside a batch interrupts the sink's Python callback, and Spark
    prints the interruption as an error while it shuts the query down."""
    for query in queries:
        deadline = time.monotonic() + timeout
        while query.isActive and query.status["isTriggerActive"] and time.monotonic() < deadline:
            time.sleep(0.1)
        query.stop()


def shut_down(spark: Any, queries: list[Any], timeout: float = 30.0) -> None:
    """Stop ``queries`` and then the session, in order and quietly: each query between two
    micro-batches (waiting up to ``timeout`` seconds for its running one to end), then the
    session once no Spark job runs. Stopping a session while a batch's tasks still report their
    results makes Spark print a scheduler error (a ``RejectedExecutionException`` stack) at exit."""
    deadline = time.monotonic() + timeout
    stop_queries(queries, timeout)
    tracker = spark.sparkContext.statusTracker()
    while tracker.getActiveJobsIds() and time.monotonic() < deadline:
        time.sleep(0.05)
    spark.stop()


def check(dsn: str, orders_inserted: int) -> Check:
    """Compare the derived tables with PostgreSQL's own join and with the tiers the orders recorded."""
    from streamjoin.cdc import connect

    with connect(dsn) as conn:
        differences, view_rows = conn.execute(VIEW_DIFFERENCES).fetchone()
        enriched, wrong = conn.execute(ENRICHED_CHECK).fetchone()
    return Check(view_rows, differences, enriched, wrong, orders_inserted)


def run(args: argparse.Namespace) -> int:
    """Run the job (see module); exit status 0 when the derived tables are right."""
    from streamjoin.bench.sparkutil import local_session
    from streamjoin.cdc import connect
    from streamjoin.cdc.cluster import start_cluster

    started = time.perf_counter()
    root = prepare_root(args.out, "postgres-cdc")
    stage(1, 5, "starting a throw-away PostgreSQL cluster", started)
    with start_cluster() as cluster:
        print(f"      PostgreSQL on port {cluster.port}, data in {cluster.data}", flush=True)
        workload = Workload(seed=args.seed)
        stage(2, 5, f"creating users, products, orders; {args.users} users; slots and the users' snapshot", started)
        prepare_database(cluster.dsn, root, workload, args.users)
        stage(3, 5, "starting a local Spark session and the two queries", started)
        spark = local_session(shuffle_partitions=2)
        queries: list[Any] = []
        try:
            queries = start_queries(spark, cluster.dsn, root)
            stage(4, 5, f"running {args.transactions} transactions while the queries follow", started)
            with connect(cluster.dsn) as conn:
                for _ in range(max(args.transactions // 50, 1)):
                    workload.run(conn, 50)
                    time.sleep(0.2)
            catch_up(cluster.dsn, queries)
            batches = {q.name: len(q.recentProgress) for q in queries}
        finally:
            shut_down(spark, queries)
        stage(5, 5, "comparing the derived tables with PostgreSQL's own join", started)
        result = check(cluster.dsn, workload.orders_inserted)
    print(f"      micro-batches: {batches['enrich']} (enrichment), {batches['view']} (view)")
    print(f"      orders enriched: {result.enriched} of {result.orders_inserted} inserted; tier as of the order "
          f"differs from the one PostgreSQL read: {result.enriched_wrong}")
    print(f"      order_lines: {result.view_rows} rows in PostgreSQL's join, {result.view_differences} differences")
    print(f"derived view equals PostgreSQL's join: {'yes' if result.view_differences == 0 else 'no'}")
    print(f"      done in {time.perf_counter() - started:.0f} s", flush=True)
    return 0 if result.ok else 1
