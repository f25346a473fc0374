"""``streamjoin bench view``: a view over three tables (a chain of two joins) beside its first join alone.

**Workload**: the star of ``streamjoin bench table`` with a second dimension. ``orders`` (the fact
table) and ``customers`` are that benchmark's (:func:`streamjoin.bench.table.generate`), each
order also referencing a product (``product_id``, drawn among the loaded products); ``products``
is generated as the customers are (another seed, ``--rows`` // 10 rows, as many changes as each
other table), its columns renamed ``product_id``, ``title``, ``category``, ``brand``. The view
is ``(orders JOIN customers ON customer_id) JOIN products ON product_id``, inner: the first
join's change stream read as it comes by the second (its key ``order_id``).

**Variants**, in this process (:class:`streamjoin.runtime.plan_runner.PlanRunner` per join, as a
streaming query's tasks, each store kept open between micro-batches; no Spark yet):

* ``two tables``: the first join alone, over the orders' and customers' changes;
* ``three tables``: both joins, the first one's output of each micro-batch fed to the second
  with that micro-batch's product changes.

Per variant: the change micro-batches' seconds (wall) and, in process, the CPU seconds they
used (the process's, every thread's: steadier than the wall time on a machine whose speed
moves), input changes per second, the ratio of the
three-table to the two-table seconds (the goal: at most 1.5), the process's peak memory (its
maximum resident set: both run in this process), and the local stores' bytes per input row (every
file under the variant's local state directory, over the rows loaded and the changes), and what
each stage holds (its keys' and values' bytes, as the store counts them) per input row. Spark
recomputing the three-way join beside it is measured with ``--spark`` (below). Quiet machine only:
the load average is printed beside the figures.

``--spark`` runs the same variants as Spark streaming queries (each table a file stream, one
Parquet file per micro-batch: the load, then the change micro-batches; ``noop`` sink; the change
micro-batches' ``triggerExecution`` seconds), and ``spark-recompute``: the three current tables
rebuilt from every change file up to a micro-batch (``max_by`` of the latest change per key,
deletes dropped) and joined, after the first and the last change micro-batch; its seconds for
every micro-batch are their mean times the micro-batches (marked ``est.``). Both streaming queries
run once, untimed, on a small star first (a session's first query pays the JVM's compilation and
the workers' imports), then ``--spark-repeat`` times each, alternated, each in each place in turn;
the table shows medians. Beside each streaming
query, "worker RSS MB": the largest PySpark Python worker's peak resident memory while it ran
(:class:`streamjoin.bench.interval.WorkerMemory`, sampled every 0.2 s), and the CPU seconds
Spark's JVM and its Python workers used in the change micro-batches ("JVM CPU s", "worker CPU s":
:class:`streamjoin.bench.interval.SparkCpu`, read every 0.25 s and interpolated to the
micro-batches' span from the query's progress events).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet  # noqa: F401  (pa.parquet)

from streamjoin.bench.harness import Chart, Table, results_dir, rotated, write_results
from streamjoin.bench.sparkutil import fresh_dir
from streamjoin.bench.table import CUSTOMERS, ORDERS, bounds, generate
from streamjoin.statestore.registry import DEFAULT_KIND

__all__ = ["add_arguments", "run", "PRODUCTS", "Star", "star", "summary_table", "COLUMNS"]

PRODUCTS = pa.schema([("product_id", pa.int64()), ("op", pa.string()), ("changed_at", ORDERS.field("changed_at").type),
                      ("title", pa.string()), ("category", pa.string()), ("brand", pa.string())])
ORDER_LINES = ORDERS.append(pa.field("product_id", pa.int64()))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Maintain the view (orders JOIN customers) JOIN products, a chain of two table_table_join stages "
        "run in this process, beside the first join alone on the same changes: seconds, changes/s, the "
        "ratio, the view changes, peak memory and store bytes per input row, as one table saved as JSON "
        "(the 'results:' line; streamjoin bench report renders it, streamjoin bench compare alternates it with "
        "another revision). Quiet machine only; try --rows 10000 --changes 10000 first; the default size takes "
        "about 3 minutes in process and 6-7 with --spark on 2 cores.")
    parser.add_argument("--rows", type=int, default=1_000_000, help="orders and customers rows (default 1,000,000)")
    parser.add_argument("--changes", type=int, default=1_000_000,
                        help="changes per table after the load (default 1,000,000)")
    parser.add_argument("--batches", type=int, default=5, help="micro-batches of the changes (default 5: 200k each)")
    parser.add_argument("--partitions", type=int, default=4, help="state partitions per stage (default 4)")
    parser.add_argument("--store", default=DEFAULT_KIND, help=f"the local store (default {DEFAULT_KIND}, the joins' default)")
    parser.add_argument("--key-stages", choices=("fused", "three"), default="fused",
                        help="'fused' (the default, table_table_join's for a new checkpoint: customers and "
                        "products, keyed by their join keys, and the first view's changes, which carry their "
                        "pre-images, go straight to the join stages) or 'three' (fuse_key_stages=False)")
    parser.add_argument("--spark-repeat", type=int, default=1, metavar="N",
                        help="with --spark, timed runs of each streaming query, the two alternated (after one "
                        "untimed run of each on a small star); the table shows their medians (default 1)")
    parser.add_argument("--spark", action="store_true",
                        help="also run both variants as Spark streaming queries, beside Spark recomputing the "
                        "three-way join after the first and the last change micro-batch")


@dataclass
class Star:
    """The three tables: each one's load and changes."""

    orders: tuple[pa.Table, pa.Table]
    customers: tuple[pa.Table, pa.Table]
    products: tuple[pa.Table, pa.Table]


def star(rows: int, changes: int, seed: int = 7) -> Star:
    """The workload (see module)."""
    rng = np.random.default_rng(seed + 1)
    base = generate(rows, changes, seed)
    n_products = max(1, rows // 10)
    dimension = generate(n_products, changes, seed + 2).customers
    products = tuple(pa.Table.from_arrays(t.columns, schema=PRODUCTS) for t in (dimension.load, dimension.changes))

    def with_product(table: pa.Table) -> pa.Table:
        return table.append_column("product_id", pa.array(rng.integers(0, n_products, table.num_rows)))

    orders = (with_product(base.orders.load), with_product(base.orders.changes))
    return Star(orders, (base.customers.load, base.customers.changes), (products[0], products[1]))


def _joins(fuse: bool = False):
    from streamjoin.table.operator import TableTableJoin

    first = TableTableJoin(ORDER_LINES, CUSTOMERS, "customer_id", left_key="order_id", right_key="customer_id",
                           how="inner", left_time="changed_at", right_time="changed_at", fuse_key_stages=fuse)
    second = TableTableJoin(first.output_schema, PRODUCTS, "product_id", left_key="order_id", right_key="product_id",
                            how="inner", right_time="changed_at", fuse_key_stages=fuse)
    return first, second


def _runner(join, root: str, name: str, args: argparse.Namespace):
    from streamjoin.runtime.options import StateConfig
    from streamjoin.runtime.plan_runner import PlanRunner

    return PlanRunner(join.plan, os.path.join(root, name, "ckpt"), partitions=args.partitions,
                      config=StateConfig(store=args.store, local_dir=os.path.join(root, "state", name)),
                      query_id=f"bench-view-{name}")


def _bytes(path: str) -> int:
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(path) for f in files)


def _held_bytes(runner, stage: str) -> int:
    """The bytes of keys and values ``stage`` holds after its last version, over its partitions
    (the stores' own count: exact for the memory store, an estimate for the others)."""
    last: dict[int, int] = {}
    for m in runner.metrics(stage):
        last[m["partition"]] = int(m["state_bytes"])
    return sum(last.values())


def measure(data: Star, args: argparse.Namespace, three: bool) -> dict[str, Any]:
    """One variant (see module): change seconds, changes, store bytes, input rows."""
    root = fresh_dir(results_dir(), "view-three" if three else "view-two")
    try:
        first, second = _joins(args.key_stages == "fused")
        runners = [_runner(first, root, "first", args)] + ([_runner(second, root, "second", args)] if three else [])
        tables = [data.orders, data.customers] + ([data.products] if three else [])

        def step(inputs: list[pa.Table]) -> int:
            """The micro-batch through the chain; the view changes it made."""
            out = runners[0].run(inputs[0], inputs[1])
            if three:
                out = runners[1].run(out, inputs[2])
            return out.num_rows

        step([load for load, _ in tables])
        ends = bounds(args.changes, args.batches)
        seconds, cpu, made = 0.0, 0.0, 0
        for s, e in zip(np.r_[0, ends[:-1]], ends):
            start, used = time.perf_counter(), time.process_time()
            made += step([changes.slice(s, e - s) for _, changes in tables])
            seconds += time.perf_counter() - start
            cpu += time.process_time() - used
        rows = sum(load.num_rows + changes.num_rows for load, changes in tables)
        held = {f"{join}/{stage or 'join'}": _held_bytes(runner, stage) for join, runner in zip(("first", "second"), runners)
                for stage in runner.runners}
        return {"seconds": seconds, "cpu": cpu, "changes": args.changes * len(tables), "bytes": _bytes(os.path.join(root, "state")),
                "rows": rows, "held": held, "view changes": made}
    finally:
        from streamjoin.statestore.warm import evict_all

        evict_all()
        shutil.rmtree(root, ignore_errors=True)


_DDL = {"orders": "order_id bigint, op string, changed_at timestamp, customer_id bigint, amount bigint, "
                  "status string, product_id bigint",
        "customers": "customer_id bigint, op string, changed_at timestamp, name string, country string, tier string",
        "products": "product_id bigint, op string, changed_at timestamp, title string, category string, brand string"}


def _write_files(root: str, data: Star, batches: int) -> None:
    """``root/<table>/part-NNNNN.parquet``: the load, then one file per change micro-batch."""
    stamp = time.time() - batches - 10
    for name, (load, changes) in zip(_DDL, (data.orders, data.customers, data.products)):
        os.makedirs(os.path.join(root, name))
        ends = bounds(changes.num_rows, batches)
        tables = [load] + [changes.slice(s, e - s) for s, e in zip(np.r_[0, ends[:-1]], ends)]
        for b, table in enumerate(tables):
            path = os.path.join(root, name, f"part-{b:05d}.parquet")
            pa.parquet.write_table(table, path)
            os.utime(path, (stamp + b, stamp + b))


def spark_variants(data: Star, args: argparse.Namespace
                   ) -> tuple[dict[str, float], dict[str, int], dict[str, tuple[float, float]]]:
    """Change seconds of the chain and of its first join as streaming queries, and Spark's
    recompute estimated over every change micro-batch (see module); per streaming query, its
    largest Python worker's peak resident bytes, and the (JVM, workers') CPU seconds of its change
    micro-batches."""
    from pyspark.sql import functions as F

    from streamjoin import table_table_join
    from streamjoin.bench.interval import SparkCpu, WorkerMemory
    from streamjoin.bench.sparkutil import local_session, progress_span, run_to_noop

    spark = local_session(shuffle_partitions=args.partitions)
    root = fresh_dir(results_dir(), "view-spark")
    memory, cpu = WorkerMemory(), SparkCpu()
    memory.start()
    cpu.start()
    rss: dict[str, int] = {}
    cpus: dict[str, tuple[float, float]] = {}
    try:
        _write_files(root, data, args.batches)
        warm = os.path.join(root, "warm-up")
        os.makedirs(warm)
        _write_files(warm, star(20_000, 20_000), 2)

        def source(name: str, under: str = root):
            return spark.readStream.schema(_DDL[name]).option("maxFilesPerTrigger", 1).parquet(os.path.join(under, name))

        def query(name: str, under: str):
            """Run the streaming query ``name`` over the files under ``under``; its progress."""
            scratch = fresh_dir(root, name.replace(" ", "-"))
            view = table_table_join(source("orders", under), source("customers", under), "customer_id",
                                    left_key="order_id", right_key="customer_id", left_time="changed_at",
                                    right_time="changed_at", store=args.store, checkpoint=os.path.join(scratch, "first"),
                                    partitions=args.partitions, state_dir=os.path.join(scratch, "state"),
                                    fuse_key_stages=args.key_stages == "fused")
            if name == "spark three tables":
                view = table_table_join(view, source("products", under), "product_id", left_key="order_id",
                                        right_key="product_id", right_time="changed_at", store=args.store,
                                        checkpoint=os.path.join(scratch, "second"), partitions=args.partitions,
                                        state_dir=os.path.join(scratch, "state"),
                                        fuse_key_stages=args.key_stages == "fused")
            try:
                return sorted(run_to_noop(view, scratch, name).recentProgress, key=lambda p: p["batchId"])
            finally:
                shutil.rmtree(scratch, ignore_errors=True)

        names = ["spark two tables", "spark three tables"]
        for name in names:   # every code path once, untimed: the JVM's compilation and the workers' imports
            query(name, warm)
        runs: dict[str, list[float]] = {name: [] for name in names}
        used: dict[str, list[tuple[float, float]]] = {name: [] for name in names}
        for i in range(args.spark_repeat):
            for name in rotated(names, i):   # each query in each place in turn
                began = time.time()
                progress = query(name, root)
                rss[name] = max(rss.get(name, 0), memory.peak(began, time.time())[0])
                runs[name].append(sum(p["durationMs"]["triggerExecution"] for p in progress[1:]) / 1000)
                cpu.sample()
                used[name].append(cpu.between(*progress_span(progress[1:])))
                print(f"  {name}, run {i + 1}/{args.spark_repeat}: {runs[name][-1]:.2f} s of change micro-batches; "
                      f"load average {os.getloadavg()[0]:.2f}", flush=True)
        out = {name: statistics.median(runs[name]) for name in names}
        cpus.update({name: (statistics.median(c[0] for c in used[name]), statistics.median(c[1] for c in used[name]))
                     for name in names})

        def current(name: str, upto: int):
            files = [os.path.join(root, name, f"part-{b:05d}.parquet") for b in range(upto)]
            df = spark.read.schema(_DDL[name]).parquet(*files)
            key = df.columns[0]
            latest = df.groupBy(key).agg(F.max_by(F.struct(*df.columns), "changed_at").alias("r")).select("r.*")
            return latest.filter(F.col("op") != "delete").drop("op", "changed_at")

        seconds = []
        for upto in sorted({2, args.batches + 1}):
            view = (current("orders", upto).join(current("customers", upto), "customer_id")
                    .join(current("products", upto), "product_id"))
            start = time.perf_counter()
            view.write.format("noop").mode("overwrite").save()
            seconds.append(time.perf_counter() - start)
        out["spark recompute (est.)"] = sum(seconds) / len(seconds) * args.batches
        return out, rss, cpus
    finally:
        cpu.stop()
        memory.stop()
        spark.stop()
        shutil.rmtree(root, ignore_errors=True)


#: The results table's columns (one row per variant; "-" where a figure does not apply).
COLUMNS = ("variant", "tables", "changes", "view changes", "change s", "CPU s", "input changes/s", "s / two tables' s",
           "recompute s / s", "store B/input row", "held B/input row", "peak RSS MiB", "worker RSS MB", "JVM CPU s",
           "worker CPU s")


def summary_table(results: dict[str, dict[str, Any]], spark: dict[str, float], args: argparse.Namespace,
                  rss: dict[str, int] | None = None, cpus: dict[str, tuple[float, float]] | None = None) -> Table:
    """The run's figures as one table: the in-process variants (their process's peak memory so
    far), then (with ``--spark``) the streaming queries (their largest worker's, ``rss``: bytes by
    query) and Spark's recompute; the ratios are within a group (in process: three tables over
    two; in Spark: each query over the two-table one, and the recompute over each); ``cpus``: the
    (JVM, workers') CPU seconds of each query's change micro-batches."""
    rss, cpus = rss or {}, cpus or {}
    table = Table(list(COLUMNS))
    two = results["two tables"]["seconds"]
    for name, r in results.items():
        table.add(f"streamjoin-{args.store} {name}", 3 if name == "three tables" else 2, r["changes"],
                  r["view changes"], r["seconds"], r.get("cpu", "-"), r["changes"] / r["seconds"], r["seconds"] / two, "-", r["bytes"] / r["rows"],
                  sum(r["held"].values()) / r["rows"], r["peak"], "-", "-", "-")
    if spark:
        base, recompute = spark["spark two tables"], spark["spark recompute (est.)"]
        for name, seconds in spark.items():
            tables = 2 if name == "spark two tables" else 3
            changes = args.changes * tables
            own = name != "spark recompute (est.)"
            table.add(name if not own else f"{name}, {args.store}", tables, changes, "-", seconds, "-", changes / seconds,
                      seconds / base if own else "-", recompute / seconds if own else 1.0, "-", "-", "-",
                      round(rss[name] / 2**20) if rss.get(name) else "-",
                      *((round(c, 2) for c in cpus[name]) if name in cpus else ("-", "-")))
    return table


def run(args: argparse.Namespace) -> int:
    if min(args.rows, args.changes, args.batches, args.partitions, args.spark_repeat) < 1:
        raise SystemExit("--rows, --changes, --batches, --partitions and --spark-repeat must be positive")
    if round(args.changes * 0.05) > max(1, args.rows // 10):
        raise SystemExit("--changes: the product deletes (5%) must not outnumber the products (--rows // 10)")
    data = star(args.rows, args.changes)
    results = {}
    for name, three in (("two tables", False), ("three tables", True)):
        results[name] = measure(data, args, three)
        r = results[name]
        r["peak"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"{name}: {r['changes']:,} changes in {r['seconds']:.2f} s ({r['changes'] / r['seconds']:,.0f}/s; "
              f"{r['cpu']:.2f} CPU s), "
              f"{r['view changes']:,} view changes, "
              f"store {r['bytes'] / r['rows']:,.0f} bytes per input row, peak memory "
              f"{r['peak']:,.0f} MiB so far", flush=True)
        print(f"  held: {sum(r['held'].values()) / 1e6:,.1f} MB over {r['rows']:,} input rows; per input row, by stage: " + ", ".join(
            f"{stage} {value / r['rows']:,.1f} B" for stage, value in r["held"].items()), flush=True)
    ratio = results["three tables"]["seconds"] / results["two tables"]["seconds"]
    print(f"three tables / two tables: {ratio:.2f}x the seconds (goal: at most 1.5x); "
          f"load average {os.getloadavg()[0]:.2f}")
    spark: dict[str, float] = {}
    rss: dict[str, int] = {}
    cpus: dict[str, tuple[float, float]] = {}
    if args.spark:
        spark, rss, cpus = spark_variants(data, args)
        for name, seconds in spark.items():
            changes = args.changes * (2 if name == "spark two tables" else 3)
            peak = f"; largest worker {rss[name] / 2**20:,.0f} MB" if rss.get(name) else ""
            if name in cpus:
                peak += f"; CPU s: JVM {cpus[name][0]:.1f}, workers {cpus[name][1]:.1f}"
            print(f"{name}: {seconds:.2f} s for the change micro-batches ({changes / seconds:,.0f} changes/s{peak})")
        chain, recompute = spark["spark three tables"], spark["spark recompute (est.)"]
        print(f"spark: three tables / two tables {chain / spark['spark two tables']:.2f}x; recompute / three tables "
              f"{recompute / chain:.2f}x (goal: at least 5x); load average {os.getloadavg()[0]:.2f}")
    table = summary_table(results, spark, args, rss, cpus)
    print(table.render())
    print("results:", write_results("view", table, vars(args), Chart(
        "input changes/s", ("variant",), "three-table view (a chain of two joins) beside its first join: input changes/s")))
    return 0
