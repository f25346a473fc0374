"""``streamjoin bench runtime``: the runtime's overhead beside a bare repartition + mapInArrow.

The same rows (Parquet files, one per micro-batch) go through (a) ``repartition(N, key)`` and a
``mapInArrow`` that passes them through, the floor any Python operator pays, and (b) streamjoin's
runtime with the ``PassThrough`` operator, once per store backend: the same shuffle and the same
mapInArrow, plus loading and committing versioned state, progress records and metrics. Variants
run interleaved, ``--repeat`` times each; the table shows medians and the ratio to the floor, of
the whole query and of its micro-batches alone (Spark's ``triggerExecution``): the difference is
starting the query. That fixed cost is shown split: ``start s`` from ``start()`` to the first micro-batch's start, ``stop s``
from the last micro-batch's end to the query's end (from the query's progress events), their sum
``fixed s``, and ``fixed - floor's s``, how much more than the floor's it is. ``worker RSS MB``:
the largest PySpark Python worker's peak resident memory while a variant's timed runs ran
(sampled every 0.2 s; the workers are shared by the variants, so it includes what an earlier
variant's worker still holds).

``--flush-sources``: the no-data flush each runtime variant has. ``none`` (the default) is a
join none of whose output waits for the watermark, which gets no flush source at all;
``ticks`` is a join whose output does, run with ``end_of_run="hold"`` (Spark's file source over
its tick folder: a listing a trigger, a tick file a version); ``jvm`` is such a join with the
default ``end_of_run="flush"`` (an outer interval join, an as-of enrichment): the flush source
as a join gets it in a classic session, the JVM flush source (:mod:`streamjoin.spark.flush_jvm`),
whose offsets this process computes; ``python`` the same join with the Python flush source (as on
Spark Connect), which Spark starts a Python process for before the first micro-batch.
``--flush-sources none,ticks,python,jvm`` shows what each adds to ``batches s`` and ``start s``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from streamjoin.bench.harness import Chart, Table, results_dir, rotated, write_results
from streamjoin.bench.interval import WorkerMemory
from streamjoin.bench.sparkutil import QueryTimes, fresh_dir, local_session, time_stream_parts

__all__ = ["add_arguments", "run", "runtime_table"]

#: Each ``--flush-sources`` value and what its variants' names end with.
_FLUSH_SUFFIX = {"none": "", "ticks": ", ticks", "python": ", Python flush source", "jvm": ", JVM flush source"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rows", type=int, default=2_000_000, help="input rows in all (default 2,000,000)")
    parser.add_argument("--batches", type=int, default=10, help="micro-batches (default 10)")
    parser.add_argument("--keys", type=int, default=10_000, help="distinct keys (default 10,000)")
    parser.add_argument("--partitions", type=int, default=4, help="shuffle partitions (default 4)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each variant (default 3)")
    parser.add_argument("--stores", default="arranged,rocksdb,lmdb,memory", help="backends to run (default all)")
    parser.add_argument("--flush-sources", default="none",
                        help="no-data flushes to run, comma-separated, each a variant per store: none (a join "
                             "whose output never waits for the watermark: no flush source), ticks (one whose "
                             "output does, with end_of_run='hold': Spark's file source over its ticks), jvm "
                             "(one whose output does, with the default end_of_run='flush': the JVM flush source), "
                             "python (the same with the Python flush source, as on Spark Connect); default none")


def _write_inputs(directory: str, rows: int, batches: int, keys: int) -> None:
    rng = np.random.default_rng(7)
    per = rows // batches
    for b in range(batches):
        start = b * per * 1000
        table = pa.table({
            "k": pa.array(rng.integers(0, keys, per), pa.int64()),
            "t": pa.array(start + np.arange(per, dtype=np.int64) * 1000, pa.timestamp("us", tz="UTC")),
            "payload": pa.array(np.char.add("p", rng.integers(0, 1 << 30, per).astype(str)).tolist()),
        })
        pq.write_table(table, os.path.join(directory, f"part-{b:04d}.parquet"))


def runtime_table(times: dict[str, list[QueryTimes]], rows: int, floor_name: str,
                  rss: dict[str, int] | None = None) -> Table:
    """One row a variant: medians of its runs' seconds, in all and in micro-batches, and of its fixed
    cost (start: from ``start()`` to the first micro-batch; stop: after the last one), each beside the
    floor's; and (``rss``: bytes by variant) the largest Python worker's peak memory over its runs."""
    rss = rss or {}
    def median(name: str, field: str) -> float:
        return statistics.median(getattr(t, field) for t in times[name])
    floor_fixed = median(floor_name, "start_seconds") + median(floor_name, "stop_seconds")
    table = Table(["variant", "median s", "rows/s", "time / floor", "batches s", "batches / floor",
                   "start s", "stop s", "fixed s", "fixed - floor's s", "worker RSS MB"])
    for name in times:
        seconds, batches = median(name, "seconds"), median(name, "batch_seconds")
        start, stop = median(name, "start_seconds"), median(name, "stop_seconds")
        table.add(name, seconds, rows / seconds, seconds / median(floor_name, "seconds"), batches,
                  batches / median(floor_name, "batch_seconds"), start, stop, start + stop, start + stop - floor_fixed,
                  round(rss[name] / 2**20) if rss.get(name) else "-")
    return table


def run(args: argparse.Namespace) -> int:
    spark = local_session(shuffle_partitions=args.partitions)
    root = fresh_dir(results_dir(), "runtime")
    try:
        _measure(spark, root, args)
    finally:
        shutil.rmtree(root, ignore_errors=True)   # the inputs written for the run
        spark.stop()
    return 0


def _measure(spark, root: str, args: argparse.Namespace) -> None:
    """Write the inputs under ``root``, run every variant (warmed up, then ``args.repeat`` times,
    rotated) and print and save the table."""
    from streamjoin.bench.operators import PassThrough
    from streamjoin.runtime.options import StateConfig
    from streamjoin.spark import arrow_schema, flush_jvm, run_operator

    inputs, warm = os.path.join(root, "in"), os.path.join(root, "warm")
    os.makedirs(inputs)
    os.makedirs(warm)
    _write_inputs(inputs, args.rows, args.batches, args.keys)
    _write_inputs(warm, 20_000, 2, args.keys)
    schema = "k bigint, t timestamp, payload string"
    reading = [inputs]

    def source():
        return spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(reading[0])

    def floor(ck: str):
        src = source()
        out = src.repartition(args.partitions, "k").mapInArrow(lambda it: it, src.schema)
        return out.writeStream.format("noop").option("checkpointLocation", ck).trigger(availableNow=True).start()

    def ours(store: str, flush: str):
        def build(ck: str):
            src = source()
            op = PassThrough(arrow_schema(src), ["k"], "t", waits=flush != "none")
            state = StateConfig(store=store, local_dir=os.path.join(ck, "local"))
            flush_jvm.ENABLED = flush != "python"
            try:
                out = run_operator([src], op, checkpoint=os.path.join(ck, "join"), partitions=args.partitions,
                                   state=state, end_of_run="hold" if flush == "ticks" else None)
            finally:
                flush_jvm.ENABLED = True
            return out.writeStream.format("noop").option("checkpointLocation", os.path.join(ck, "spark")).trigger(availableNow=True).start()
        return build

    variants = {"repartition + mapInArrow (floor)": floor}
    flushes = args.flush_sources.split(",")
    unknown = sorted(set(flushes) - set(_FLUSH_SUFFIX))
    if unknown:
        raise SystemExit(f"--flush-sources: unknown {', '.join(unknown)}; give none, ticks, jvm or python, or several")
    for store in args.stores.split(","):
        for flush in flushes:
            suffix = _FLUSH_SUFFIX[flush]
            variants[f"streamjoin runtime, {store}{suffix}"] = ours(store, flush)
    # Warm up the JVM and the Python workers with every variant on a small input: a variant's
    # first query in a session pays once for what its plan and its workers load (streamjoin's
    # modules, a store's library, the JVM's code for a new plan), about 1.5 s here.
    reading[0] = warm
    for name in variants:
        time_stream_parts(variants[name])
    reading[0] = inputs
    times: dict[str, list[QueryTimes]] = {name: [] for name in variants}
    rss: dict[str, int] = {name: 0 for name in variants}
    memory = WorkerMemory()
    memory.start()
    try:
        for i in range(args.repeat):
            for name in rotated(list(variants), i):   # each variant in every place in turn
                began = time.time()
                times[name].append(time_stream_parts(variants[name]))
                rss[name] = max(rss[name], memory.peak(began, time.time())[0])
    finally:
        memory.stop()
    table = runtime_table(times, args.rows, "repartition + mapInArrow (floor)", rss)
    print(f"{args.rows:,} rows, {args.batches} micro-batches, {args.partitions} partitions, "
          f"medians of {args.repeat} runs, load average {os.getloadavg()[0]:.2f} as the runs ended")
    print(table.render())
    print("results:", write_results("runtime", table, vars(args) | {"func": None},
                                    chart=Chart(value="rows/s", label=("variant",),
                                                title="runtime pass-through rows/s beside the floor")))
