"""``streamjoin bench nexmark``: three Nexmark queries, one per join, beside Spark on the same data.

The workload (:mod:`streamjoin.bench.nexmark_data`) is ``--events`` seeded Nexmark events (persons,
auctions and bids, 1:3:46) split into ``--batches`` micro-batches, one Parquet file per stream and
micro-batch; the queries (:mod:`streamjoin.bench.nexmark_queries`) are q3 (table-table), q20
(stream-table as of) and q8w (an interval join in the spirit of q8). Every variant writes to the
``noop`` sink with ``trigger(availableNow=True)`` from a new checkpoint; its output rows (from the
sink's progress) must equal a numpy count of the query's answer (else ``MISMATCH``). Each variant
first runs untimed on a small copy; the timed runs are interleaved, ``--repeat`` of each, and the
table shows medians, and beside streamjoin's the largest Python worker's peak resident memory
(:class:`streamjoin.bench.interval.WorkerMemory`).

"events/s/core" follows the published Nexmark figures: all the events of the run's span (persons,
auctions and bids, whether the query reads them or not) over seconds times ``--cores``. Flink's
published figures stand beside them for context only: another machine, another engine, the
events generated in process rather than read from files.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import time
from typing import TYPE_CHECKING

from streamjoin.bench.harness import (
    HOSTED_HELP,
    Chart,
    Table,
    mode_variant,
    parse_mode_variant,
    parse_stores,
    results_dir,
    rotated,
    stage_modes,
    write_results,
)
from streamjoin.bench.interval import WorkerMemory
from streamjoin.bench.nexmark_data import Nexmark, generate, write
from streamjoin.bench.nexmark_queries import QUERIES, Query, Scratch
from streamjoin.bench.sparkutil import fresh_dir, local_session, run_to_noop
from streamjoin.statestore.registry import DEFAULT_KIND

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["add_arguments", "run", "summary_table", "FLINK_SOURCE"]

STORES = ("arranged", "rocksdb", "lmdb", "memory")
SPARK = "spark"
FLINK = "flink 1.13 (published)"
FLINK_SOURCE = ("Nexmark project's published results for Flink 1.13 (github.com/nexmark/nexmark README, "
                "\"Benchmark Results\", Throughput/Cores): 100M events generated in the job, "
                "parallelism 8, cores as measured by the suite's CPU collector, RocksDB state")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Nexmark q3 (table-table), q20 (stream-table as of) and q8w (interval) with streamjoin beside the "
        "nearest Spark join on the same seeded events; medians of interleaved runs. The default size takes "
        "about 5 minutes on 2 cores.")
    parser.add_argument("--events", type=int, default=1_000_000, help="Nexmark events in all (default 1,000,000)")
    parser.add_argument("--batches", type=int, default=5, help="micro-batches (default 5)")
    parser.add_argument("--queries", default=",".join(QUERIES), help=f"comma-separated (default {','.join(QUERIES)})")
    parser.add_argument("--stores", default=DEFAULT_KIND, help=f"streamjoin's stores, from {','.join(STORES)} "
                        f"or {HOSTED_HELP} (default {DEFAULT_KIND}, the joins' "
                        f"default)")
    parser.add_argument("--partitions", type=int, default=4, help="shuffle and state partitions (default 4)")
    parser.add_argument("--cores", type=int, default=2, help="Spark's local cores, the per-core divisor (default 2)")
    parser.add_argument("--repeat", type=int, default=2, help="timed runs of each variant, interleaved (default 2)")
    parser.add_argument("--seed", type=int, default=7, help="the generator's seed (default 7)")
    parser.add_argument("--key-stages", default="declared", metavar="MODE[,MODE]",
                        help="for q3: 'declared' (the default: persons, keyed by the join key, and auctions, "
                        "declared with an immutable join key, go straight to the join stage: one stage), "
                        "'fused' (auctions not declared: their key stage, then the join stage; variants "
                        "streamjoin-<store>-fused), 'three' (fuse_key_stages=False; variants "
                        "streamjoin-<store>-three), or several, alternated")


#: q3's plans (``--key-stages``), the default first.
_MODES = ("declared", "fused", "three")


def _queries(text: str) -> list[Query]:
    unknown = sorted(set(filter(None, text.split(","))) - set(QUERIES))
    if unknown:
        raise SystemExit(f"unknown queries {unknown}; choose from {','.join(QUERIES)}")
    return [QUERIES[name] for name in text.split(",") if name]


def measure(spark: SparkSession, query: Query, variant: str, inputs: str, partitions: int,
            memory: WorkerMemory | None = None) -> tuple[float, int, int]:
    """Seconds from building ``variant`` of ``query`` to its end, its output rows, and the largest
    Python worker's resident memory meanwhile (bytes; 0 without ``memory``, or for Spark's join)."""
    store, mode = parse_mode_variant(variant.removeprefix("streamjoin-"), _MODES)
    scratch = Scratch(inputs, fresh_dir(os.path.dirname(inputs), "run"), store, partitions, mode != "three",
                      mode == "declared")
    try:
        began, start = time.time(), time.perf_counter()
        df = query.spark(spark, scratch) if variant == SPARK else query.ours(spark, scratch)
        progress = run_to_noop(df, scratch.run, f"{query.name} {variant}").recentProgress
        seconds = time.perf_counter() - start
        rss = memory.peak(began, time.time())[0] if memory is not None and variant != SPARK else 0
        return seconds, sum(int(p["sink"].get("numOutputRows") or 0) for p in progress), rss
    finally:
        shutil.rmtree(scratch.run, ignore_errors=True)


def summary_table(data: Nexmark, cores: int, times: dict[tuple[str, str], list[float]],
                  outputs: dict[tuple[str, str], int], rss: dict[tuple[str, str], int] | None = None) -> Table:
    """One row a (query, variant): medians, events/s per core, the speed against Spark's, the largest
    Python worker's peak memory over its runs (streamjoin's); then Flink's figure."""
    events = data.persons.num_rows + data.auctions.num_rows + data.bids.num_rows
    rss = rss or {}
    table = Table(["query", "join", "variant", "median s", "rows read", "rows out", "events/s/core", "spark s / s",
                   "worker RSS MB"])
    for name in dict.fromkeys(q for q, _ in times):
        query = QUERIES[name]
        spark = statistics.median(times[(name, SPARK)]) if (name, SPARK) in times else None
        for (q, variant), samples in times.items():
            if q == name:
                median = statistics.median(samples)
                peak = rss.get((q, variant), 0)
                table.add(name, query.join, variant, median, query.input_rows(data), outputs[(q, variant)],
                          events / median / cores, spark / median if spark else "-",
                          round(peak / 2**20) if peak else "-")
        table.add(name, query.join, FLINK, "-", "-", "-", query.flink_per_core, "-", "-")
    return table


def run(args: argparse.Namespace) -> int:
    queries, stores = _queries(args.queries), parse_stores(args.stores, STORES)
    if min(args.events, args.batches, args.partitions, args.cores, args.repeat) < 1 or not queries:
        raise SystemExit("--events, --batches, --partitions, --cores and --repeat must be positive, --queries not empty")
    fusing = stage_modes(args.key_stages, _MODES)

    def variants_of(query: Query) -> list[str]:
        modes = fusing if query.fusable else ["declared"]   # (the other queries have no key stages)
        return [SPARK] + [mode_variant(f"streamjoin-{s}", mode, _MODES) for s in stores for mode in modes]
    root = fresh_dir(results_dir(), "nexmark")
    try:
        started = time.perf_counter()
        data = generate(args.events, args.batches, args.seed)
        write(os.path.join(root, "full"), data)
        write(os.path.join(root, "warm"), generate(min(args.events, 20_000), 2, args.seed))
        print(f"generated and wrote {args.events:,} events in {time.perf_counter() - started:.1f} s", flush=True)
        spark = local_session(cores=args.cores, shuffle_partitions=args.partitions,
                              extra={"spark.sql.streaming.numRecentProgressUpdates": "1000"})
        memory = WorkerMemory()
        memory.start()
        try:
            for query in queries:  # every plan once, untimed: the JVM compiles, the Python workers start
                for variant in variants_of(query):
                    measure(spark, query, variant, os.path.join(root, "warm"), args.partitions)
            times: dict[tuple[str, str], list[float]] = {}
            outputs: dict[tuple[str, str], int] = {}
            rss: dict[tuple[str, str], int] = {}
            problems = []
            for i in range(args.repeat):
                for query in queries:
                    for variant in rotated(variants_of(query), i):
                        seconds, rows, peak = measure(spark, query, variant, os.path.join(root, "full"),
                                                      args.partitions, memory)
                        times.setdefault((query.name, variant), []).append(seconds)
                        outputs[(query.name, variant)] = rows
                        rss[(query.name, variant)] = max(rss.get((query.name, variant), 0), peak)
                        print(f"run {i + 1}/{args.repeat} {query.name} {variant}: {seconds:.2f} s, {rows:,} rows",
                              flush=True)
                        if rows != query.expected(data):
                            problems.append(f"MISMATCH: {query.name} {variant} output {rows:,} rows, "
                                            f"expected {query.expected(data):,}")
        finally:
            memory.stop()
            spark.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    table = summary_table(data, args.cores, times, outputs, rss)
    notes = [f"{args.events:,} events ({data.persons.num_rows:,} persons, {data.auctions.num_rows:,} auctions, "
             f"{data.bids.num_rows:,} bids) in {args.batches} micro-batches, {args.partitions} partitions, "
             f"local[{args.cores}], medians of {args.repeat} interleaved runs, the variants' order rotated by "
             f"one each run (the query after another one runs slower); every variant's output rows "
             f"checked against a numpy count of the answer",
             "events/s/core: all the run's events over seconds x cores, as the published Nexmark figures count them",
             "worker RSS MB: the largest PySpark Python worker's resident memory during streamjoin's runs "
             "(sampled every 0.2 s); Spark's joins run in the JVM",
             f"flink: {FLINK_SOURCE}; q8w's row is Flink's q8 (a tumbling-window join of new persons and "
             f"their auctions)"] + problems
    print(table.render())
    for line in notes:
        print(line)
    chart = Chart(value="events/s/core", label=("query", "variant"),
                  title="Nexmark events/s per core (streamjoin and Spark: this machine; Flink: published)")
    print("results:", write_results("nexmark", table, vars(args), chart=chart, notes=notes))
    return 1 if problems else 0
