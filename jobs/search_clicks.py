"""The search-to-click job (DDIA ch. 11): which searches led to a click within 30 minutes.

Searches and clicks arrive as two event streams (Parquet files, one per micro-batch, written by a
seeded generator, some out of order and a few late). A left interval join on the session id, with
a click counting when ``search_time <= click_time <= search_time + 30 min``, gives every search
with its clicks (or none); the job writes the joined rows as Parquet and prints click-through per
query, the late events set aside, and whether the streaming result equals the same join run as
one batch over the events that were not late.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from datetime import timedelta

from streamjoin.jobs.generator import SearchClickConfig, write_search_clicks
from streamjoin.jobs.session import add_session_options
from streamjoin.statestore.registry import DEFAULT_KIND

__all__ = ["add_arguments", "run", "run_job"]

WINDOW = timedelta(minutes=30)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--searches", type=int, default=20_000, help="search events (default 20,000)")
    parser.add_argument("--batches", type=int, default=8, help="micro-batches per stream (default 8)")
    parser.add_argument("--delay-minutes", type=float, default=10.0,
                        help="watermark delay: how late an event may be and still join (default 10)")
    parser.add_argument("--store", default=DEFAULT_KIND, help="state store: arranged (default), rocksdb, lmdb, rocksdb-kv, lmdb-kv, memory")
    parser.add_argument("--partitions", type=int, default=4, help="state partitions (default 4)")
    parser.add_argument("--seed", type=int, default=7, help="generator seed (default 7)")
    add_session_options(parser)
    parser.add_argument("--workdir", default=None,
                        help="where inputs, output and checkpoints go (default: a new temporary directory)")


def run(args: argparse.Namespace) -> int:
    run_job(args)
    return 0


def run_job(args: argparse.Namespace, spark=None) -> None:
    """Generate the events, run the streaming join (one line per micro-batch on stderr) and print
    the summary. Uses ``spark`` if given (and leaves it running), else a session that it stops."""
    from streamjoin import interval_join
    from streamjoin.jobs.common import follow, stage
    from streamjoin.jobs.session import job_session

    started = time.perf_counter()
    root = args.workdir or tempfile.mkdtemp(prefix="streamjoin-search-clicks-")
    stage(1, 4, f"generating {args.searches:,} searches and their clicks in {args.batches} files each "
                f"(seed {args.seed})", started)
    config = SearchClickConfig(searches=args.searches, batches=args.batches, seed=args.seed)
    counts = write_search_clicks(os.path.join(root, "events"), config)
    print(f"      {counts['searches']:,} searches and {counts['clicks']:,} clicks under {root}/events", flush=True)
    own_session = spark is None
    if own_session:
        stage(2, 4, "starting Spark", started)
        spark = job_session(args.partitions, master=args.master, remote=args.remote)
    try:
        searches = (spark.readStream.schema("search_id bigint, session_id bigint, query string, search_time timestamp")
                    .option("maxFilesPerTrigger", 1).parquet(os.path.join(root, "events", "searches")))
        clicks = (spark.readStream.schema("click_id bigint, session_id bigint, result_rank int, click_time timestamp")
                  .option("maxFilesPerTrigger", 1).parquet(os.path.join(root, "events", "clicks")))
        checkpoint = os.path.join(root, "join-checkpoint")
        joined = interval_join(
            searches, clicks, "session_id", left_time="search_time", right_time="click_time",
            lower=timedelta(0), upper=WINDOW, how="left", delay=timedelta(minutes=args.delay_minutes),
            store=args.store, checkpoint=checkpoint, partitions=args.partitions,
        )
        out = os.path.join(root, "search_clicks")
        stage(3, 4, f"streaming left interval join (store={args.store}, {args.partitions} partitions): "
                    f"{args.batches} micro-batches, one line each on stderr", started)
        query = (joined.writeStream.format("parquet").option("path", out)
                 .option("checkpointLocation", os.path.join(root, "spark-checkpoint"))
                 .trigger(availableNow=True).start())
        follow(query)
        stage(4, 4, "summary, and the same join as one batch to compare", started)
        _summarise(spark, out, root, checkpoint, args.delay_minutes, args.store)
    finally:
        if own_session:
            spark.stop()


def _summarise(spark, out: str, root: str, checkpoint: str, delay_minutes: float, store: str) -> None:
    from pyspark.sql import functions as F

    from streamjoin import interval_join, set_aside_rows

    result = spark.read.parquet(out)
    per_search = result.groupBy("search_id", "query").agg(F.count("click_id").alias("clicks"))
    ctr = (per_search.groupBy("query")
           .agg(F.count("*").alias("searches"), F.sum((F.col("clicks") > 0).cast("int")).alias("clicked"))
           .withColumn("click_through", F.round(F.col("clicked") / F.col("searches"), 3))
           .orderBy(F.desc("click_through"), "query"))
    print(f"\njoined rows written to {out}: {result.count():,}")
    print("click-through per query (a click within 30 minutes after the search):")
    for row in ctr.collect():
        print(f"  {row['query']:<28s} {row['searches']:>6,d} searches  {row['click_through']:.3f}")
    # the same join over the same events as one batch, without the events that arrived late
    events = os.path.join(root, "events")
    searches = _without(spark.read.parquet(os.path.join(events, "searches")),
                        set_aside_rows(spark, checkpoint, "left"), "search_id")
    clicks = _without(spark.read.parquet(os.path.join(events, "clicks")),
                      set_aside_rows(spark, checkpoint, "right"), "click_id")
    batch = interval_join(searches, clicks, "session_id", left_time="search_time", right_time="click_time",
                          lower=timedelta(0), upper=WINDOW, how="left",
                          delay=timedelta(minutes=delay_minutes), store=store)
    emitted = result.select("search_id").distinct()
    expected = batch.join(emitted, "search_id", "left_semi").select(*result.columns)
    # both differences in one Spark job, so that the batch join and the reads run once (Spark reuses
    # a plan's repeated exchanges)
    same = expected.exceptAll(result).unionAll(result.exceptAll(expected)).isEmpty()
    pending = searches.count() - emitted.count()
    print(f"searches still open (their 30 minutes not yet passed by the watermark): {pending:,}")
    print("streaming result equals the batch join of the on-time events: " + ("yes" if same else "NO"))


def _without(events, aside, id_column: str):
    """``events`` minus the rows that the streaming join set aside."""
    n = 0 if aside is None else aside.count()
    print(f"{id_column.split('_')[0]} events set aside by the streaming join (late or null): {n}")
    return events if aside is None else events.join(aside.select(id_column), id_column, "left_anti")
