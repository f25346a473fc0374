"""``streamjoin bench table``: the table-table join (a maintained view) beside recomputing it in Spark.

**Workload** (a foreign-key join whose view stays about the size of the tables):
``orders(order_id, op, changed_at, customer_id, amount, status)`` JOIN
``customers(customer_id, op, changed_at, name, country, tier)`` ON ``customer_id``, inner.
Both tables are plain change streams (``op`` in ``insert``/``update``/``delete``, change time
``changed_at``). ``--rows`` rows per table are loaded first, as inserts, in ``--load-batches``
micro-batches (every order references one of the loaded customers, so the view starts with
``--rows`` rows); then ``--changes`` changes per side, in change-time order, 20% updates, 5%
deletes and 75% inserts, split evenly over ``--batches`` micro-batches (one Parquet file per
side and micro-batch). Deleted keys are distinct rows of the load and are never updated; updates
hit random other loaded rows. Half of the order updates **reassign the order to another
customer** (the join key changes: the expensive path, a retraction at the old key's partition and
an insert at the new one's); the other half change amount and status. New orders and reassigned
ones reference a random customer that exists at that time (a loaded one, possibly deleted since,
or one inserted before). Customer updates change name, country and tier.

Variants, per batching (``--batches 10,100`` measures 1M changes in 10 and in 100 micro-batches):

* ``streamjoin-<store>``: :func:`streamjoin.table_table_join` with each store as a streaming query
  over both file streams (``maxFilesPerTrigger`` 1, ``trigger(availableNow=True)``), writing the
  view's change stream to the ``noop`` sink. Times are Spark's own per micro-batch
  (``durationMs.triggerExecution`` of each progress): the load micro-batches ("load s") apart
  from the change micro-batches ("changes s"). ``observe`` counts the view changes and the net
  rows they add, per micro-batch: after **every** micro-batch the view's row count must equal the
  join's, computed here with numpy from the generated changes (else ``MISMATCH``).
* ``spark-recompute``: what a Spark user does today. After a micro-batch, rebuild both current
  tables from every change file up to it (``groupBy(key).agg(max_by(struct(*), changed_at))``,
  drop deletes), join them and write the view (``noop`` sink): a batch job whose cost follows the
  tables, not the changes. It is measured after ``--spark-points`` of the change micro-batches
  (spread evenly, the first and last included); the others are **interpolated linearly** between
  the measured points, so "changes s" is measured + interpolated (marked ``est.`` unless every
  point was measured). Each measured point's view row count is checked too.
* ``spark-join-only`` (``--join-only``): a lower bound for any recompute: the current tables of the
  same points already materialized as Parquet (written untimed), read and joined (``noop`` sink).
* ``spark-floor`` (``--floor``): what Spark alone costs for streamjoin's plan, the floor under any
  Python operator there: the same streaming query over the same file streams, with the fused
  join's two exchanges and two ``mapInArrow`` stages (orders repartitioned by ``order_id``; their
  rows and the customers' changes repartitioned together by ``customer_id``), each stage passing
  its Arrow batches through unchanged, into the ``noop`` sink. Timed as ``streamjoin-<store>`` is;
  ``floor s / s`` is its changes s over a variant's (1.0: a join that costs nothing in Python).
* ``spark-floor-packed`` (``--floor-packed``): the same floor with the first stage's rows
  packed, as a design that routed each key-stage change as its join key and one binary column
  of its row would send them: that stage outputs ``customer_id`` and the row's ``pack`` bytes
  (:func:`streamjoin.statestore.packed_columns.pack_array`, the bytes the join stage stores), so
  the second exchange and Spark's conversions carry two columns of the orders' rows instead of
  six. It measures what the JVM would save, and the packing's cost in Python, not a join.

Each variant first runs untimed on a tiny copy of the inputs (the JVM compiles its code paths,
the Python workers start); before each timed run that tiny run repeats (idle Python workers exit
after a minute). ``--profile`` runs the three stages in this process (``PlanRunner``)
under cProfile instead, over the first batching, and prints where the time goes per stage;
``--in-process`` runs them without the profiler and prints each batch's wall and CPU seconds, and
keeps the stages' sums as results (``table-in-process``), so that ``streamjoin bench compare REV
table --in-process`` alternates in-process runs of two checkouts (from a checkout that has them). Both
run the stages as a streaming query's tasks (``LocalRunner(query_id=...)``): each stage's store
stays open between micro-batches, as it does in a Spark query's Python workers.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from streamjoin.bench.harness import (
    HOSTED_HELP,
    Chart,
    Table,
    key_stage_variant,
    key_stages,
    parse_key_stage_variant,
    parse_stores,
    results_dir,
    rotated,
    store_spec,
    write_results,
)
from streamjoin.bench.interval import WorkerMemory, spark_cpu_seconds
from streamjoin.bench.sparkutil import fresh_dir, local_session, run_to_noop

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from streamjoin.table.operator import TableTableJoin

__all__ = ["add_arguments", "run", "Params", "generate", "Workload", "Side", "expected_view_rows"]

EPOCH_US = 1_767_225_600_000_000  # 2026-01-01T00:00:00Z: the first change; the load is a day earlier
LOAD_US = EPOCH_US - 86_400_000_000
STEP_US = 1_000                   # one change per side a millisecond
UPDATE, DELETE = 0.20, 0.05       # of the changes; the rest are inserts
MOVE = 0.5                        # of the order updates: reassigned to another customer
STORES = ("arranged", "rocksdb", "lmdb", "memory")
STATUSES = ("new", "paid", "packed", "shipped", "delivered", "returned")
COUNTRIES = ("DE", "FR", "US", "GB", "IN", "BR", "JP", "NG", "CA", "ES", "IT", "MX")
TIERS = ("bronze", "silver", "gold", "platinum")
TS = pa.timestamp("us", tz="UTC")
ORDERS = pa.schema([("order_id", pa.int64()), ("op", pa.string()), ("changed_at", TS),
                    ("customer_id", pa.int64()), ("amount", pa.int64()), ("status", pa.string())])
CUSTOMERS = pa.schema([("customer_id", pa.int64()), ("op", pa.string()), ("changed_at", TS),
                       ("name", pa.string()), ("country", pa.string()), ("tier", pa.string())])
DDL = {"orders": "order_id bigint, op string, changed_at timestamp, customer_id bigint, amount bigint, status string",
       "customers": "customer_id bigint, op string, changed_at timestamp, name string, country string, tier string"}
KEYS = {"orders": "order_id", "customers": "customer_id"}
OPS = ("insert", "update", "delete")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Maintain the view orders JOIN customers ON customer_id (inner) with streamjoin's table_table_join "
        "per store, beside recomputing the join in Spark after each micro-batch: --rows rows per table "
        "loaded first, then --changes changes per side (20% updates, half of the order updates moving the "
        "order to another customer; 5% deletes; 75% inserts) in --batches micro-batches. One table of "
        "medians from one run. The full default size takes about 30-60 minutes on 2 cores; try "
        "--rows 100000 --changes 100000 first.")
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows per table at steady state (default 1,000,000)")
    parser.add_argument("--changes", type=int, default=1_000_000, help="changes per side after the load (default 1,000,000)")
    parser.add_argument("--batches", default="10", metavar="N[,N...]",
                        help="micro-batches the changes are split into; a comma-separated list measures each "
                        "batching (e.g. 10,100; default 10)")
    parser.add_argument("--load-batches", type=int, default=1, help="micro-batches of the initial load (default 1)")
    parser.add_argument("--partitions", type=int, default=4, help="shuffle and state partitions (default 4)")
    parser.add_argument("--repeat", type=int, default=1, help="timed runs of each variant, interleaved (default 1)")
    parser.add_argument("--stores", default=",".join(STORES),
                        help=f"comma-separated stores, from {','.join(STORES)} or {HOSTED_HELP} "
                             f"('' for none; default {','.join(STORES)})")
    parser.add_argument("--spark-points", type=int, default=3,
                        help="change micro-batches after which Spark's recompute is measured, spread evenly, "
                        "the rest interpolated (0: every one; default 3)")
    parser.add_argument("--no-spark", action="store_true", help="skip Spark's recompute")
    parser.add_argument("--floor", action="store_true",
                        help="also measure spark-floor: the same streaming query's two exchanges and two mapInArrow "
                        "stages passing rows through (no join), what Spark alone costs under any Python operator; "
                        "adds the column floor s / s")
    parser.add_argument("--floor-packed", action="store_true",
                        help="also measure spark-floor-packed: the floor with the first stage's rows packed into one "
                        "binary column beside their join key (see the module)")
    parser.add_argument("--join-only", action="store_true",
                        help="also measure joining the current tables already materialized (a lower bound)")
    parser.add_argument("--key-stages", default="fused", metavar="MODE[,MODE]",
                        help="'fused' (the default, table_table_join's for a new checkpoint: customers, keyed by "
                        "the join key, go straight to the join stage), 'three' (fuse_key_stages=False: each "
                        "side's key stage, then the join stage; variants streamjoin-<store>-three), or both, "
                        "alternated")
    parser.add_argument("--profile", action="store_true", help="run the three stages for the first store in this "
                        "process under cProfile (no Spark) and print where the time goes")
    parser.add_argument("--in-process", action="store_true", help="run the three stages for the first store in this "
                        "process (no Spark, no profiler), print each change batch's wall and CPU seconds per stage and keep "
                        "the stages' sums as results (for streamjoin bench compare)")


@dataclass(frozen=True)
class Params:
    """One benchmark's workload."""

    rows: int
    changes: int
    batchings: tuple[int, ...]
    load_batches: int
    partitions: int

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> "Params":
        try:
            batchings = tuple(int(b) for b in str(args.batches).split(",") if b.strip())
        except ValueError:
            raise SystemExit(f"--batches: a comma-separated list of integers, got {args.batches!r}") from None
        if min(args.rows, args.changes, args.load_batches, args.partitions, *batchings, 1) < 1 or not batchings:
            raise SystemExit("--rows, --changes, --batches, --load-batches and --partitions must be positive")
        if max(batchings) > args.changes:
            raise SystemExit("--batches: more micro-batches than changes")
        if round(args.changes * DELETE) > args.rows:
            raise SystemExit("--changes: the deletes (5%) must not outnumber the loaded rows")
        return cls(args.rows, args.changes, batchings, args.load_batches, args.partitions)


# -- inputs ------------------------------------------------------------------------------------

@dataclass
class Side:
    """One table's load and changes (change-time order), and, as arrays, what :func:`expected_view_rows` needs."""

    name: str
    load: pa.Table
    changes: pa.Table
    keys: np.ndarray                  # per change: primary key
    ops: np.ndarray                   # per change: 0 insert, 1 update, 2 delete (index into OPS)
    customer: np.ndarray              # per change: the customer it references (orders) or is (customers)


@dataclass
class Workload:
    orders: Side
    customers: Side
    moves: int                        # order updates that change customer_id

    def sides(self) -> tuple[Side, Side]:
        return self.orders, self.customers


def _pick(values: tuple[str, ...], rng: np.random.Generator, n: int) -> pa.Array:
    return pa.array(values).take(pa.array(rng.integers(0, len(values), n)))


def _kinds(n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` change kinds (0 insert, 1 update, 2 delete) in random order, 20% updates, 5% deletes."""
    updates, deletes = round(n * UPDATE), round(n * DELETE)
    kinds = np.r_[np.zeros(n - updates - deletes, np.int8), np.ones(updates, np.int8), np.full(deletes, 2, np.int8)]
    rng.shuffle(kinds)
    return kinds


def _change_keys(kinds: np.ndarray, rows: int, rng: np.random.Generator) -> np.ndarray:
    """Primary keys: inserts new (``rows``, ``rows + 1``, ...), deletes distinct loaded rows, updates
    random loaded rows that are never deleted."""
    n = len(kinds)
    keys = np.empty(n, np.int64)
    ins, upd, dele = kinds == 0, kinds == 1, kinds == 2
    keys[ins] = rows + np.arange(int(ins.sum()), dtype=np.int64)
    deleted = rng.choice(rows, int(dele.sum()), replace=False).astype(np.int64)
    keys[dele] = deleted
    kept = np.setdiff1d(np.arange(rows, dtype=np.int64), deleted, assume_unique=True)
    keys[upd] = kept[rng.integers(0, len(kept), int(upd.sum()))] if len(kept) else 0
    return keys


def generate(rows: int, changes: int, seed: int = 7) -> Workload:
    """The workload (see module), vectorised but for one pass over the order updates."""
    rng = np.random.default_rng(seed)
    n, c = rows, changes
    times = pa.array(EPOCH_US + np.arange(c, dtype=np.int64) * STEP_US, TS)
    load_time = pa.array(np.full(n, LOAD_US, np.int64), TS)

    # customers
    ids = np.arange(n, dtype=np.int64)
    c_kinds = _kinds(c, rng)
    c_keys = _change_keys(c_kinds, n, rng)

    def names(keys: np.ndarray) -> pa.Array:
        return pc.binary_join_element_wise("customer-", pc.cast(pa.array(keys), pa.string()), "")

    customers_load = pa.Table.from_arrays([
        pa.array(ids), pa.array(np.full(n, "insert")), load_time, names(ids), _pick(COUNTRIES, rng, n),
        _pick(TIERS, rng, n)], schema=CUSTOMERS)
    c_rows = c_kinds != 2
    customers_changes = pa.Table.from_arrays([
        pa.array(c_keys), pa.array(np.array(OPS)[c_kinds]), times,
        pc.if_else(pa.array(c_rows), names(c_keys), pa.nulls(c, pa.string())),
        pc.if_else(pa.array(c_rows), _pick(COUNTRIES, rng, c), pa.nulls(c, pa.string())),
        pc.if_else(pa.array(c_rows), _pick(TIERS, rng, c), pa.nulls(c, pa.string()))], schema=CUSTOMERS)
    customers = Side("customers", customers_load, customers_changes, c_keys, c_kinds, c_keys)

    # orders: a referenced customer exists at the change's time (loaded, or inserted before it)
    load_customer = rng.integers(0, n, n).astype(np.int64)
    orders_load = pa.Table.from_arrays([
        pa.array(ids), pa.array(np.full(n, "insert")), load_time, pa.array(load_customer),
        pa.array(rng.integers(100, 100_000, n)), _pick(STATUSES, rng, n)], schema=ORDERS)
    o_kinds = _kinds(c, rng)
    o_keys = _change_keys(o_kinds, n, rng)
    known = n + np.cumsum(c_kinds == 0)            # customers existing after change i of their side
    fresh = (rng.random(c) * known).astype(np.int64)
    moves = (o_kinds == 1) & (rng.random(c) < MOVE)
    customer = np.where(o_kinds == 0, fresh, -1)
    current = load_customer.copy()                 # the orders' current customer, for plain updates
    for i in np.flatnonzero(o_kinds == 1):
        key = o_keys[i]
        if moves[i]:
            current[key] = fresh[i]
        customer[i] = current[key]
    o_rows = o_kinds != 2
    orders_changes = pa.Table.from_arrays([
        pa.array(o_keys), pa.array(np.array(OPS)[o_kinds]), times,
        pa.array(np.where(o_rows, customer, 0), mask=~o_rows),
        pa.array(np.where(o_rows, rng.integers(100, 100_000, c), 0), mask=~o_rows),
        pc.if_else(pa.array(o_rows), _pick(STATUSES, rng, c), pa.nulls(c, pa.string()))], schema=ORDERS)
    orders = Side("orders", orders_load, orders_changes, o_keys, o_kinds, customer)
    return Workload(orders, customers, int(moves.sum()))


def bounds(changes: int, batches: int) -> np.ndarray:
    """Where each change micro-batch ends (an index into the changes), for ``batches`` even splits."""
    return (np.arange(1, batches + 1, dtype=np.int64) * changes) // batches


def expected_view_rows(workload: Workload, ends: np.ndarray) -> list[int]:
    """The join's row count after the load and after the changes up to each of ``ends``: live
    orders whose customer is live."""
    rows = workload.orders.load.num_rows
    size = rows + len(workload.customers.keys)
    order_customer = np.full(rows + len(workload.orders.keys), -1, np.int64)
    order_customer[:rows] = workload.orders.load.column("customer_id").to_numpy()
    customer_live = np.zeros(size, bool)
    customer_live[:rows] = True
    counts, start = [], 0

    def count() -> int:
        held = order_customer[order_customer >= 0]
        return int(customer_live[held].sum())

    counts.append(count())
    o, c = workload.orders, workload.customers
    for end in ends:
        part = slice(start, int(end))
        # in change-time order, so the last assignment per key wins (numpy fancy assignment keeps the last)
        order_customer[o.keys[part]] = np.where(o.ops[part] == 2, -1, o.customer[part])
        customer_live[c.keys[part]] = c.ops[part] != 2
        counts.append(count())
        start = int(end)
    return counts


def write_inputs(root: str, workload: Workload, batches: int, load_batches: int) -> int:
    """``root/<side>/part-NNNNN.parquet``: the load in ``load_batches`` files, then one file per
    change micro-batch, with increasing modification times (the file source takes the oldest
    first). Returns the number of files per side."""
    ends = bounds(len(workload.orders.keys), batches)
    stamp = time.time() - load_batches - batches - 10
    for side in workload.sides():
        os.makedirs(os.path.join(root, side.name))
        load_ends = bounds(side.load.num_rows, load_batches)
        tables = [side.load.slice(s, e - s) for s, e in zip(np.r_[0, load_ends[:-1]], load_ends)]
        tables += [side.changes.slice(s, e - s) for s, e in zip(np.r_[0, ends[:-1]], ends)]
        for b, table in enumerate(tables):
            path = os.path.join(root, side.name, f"part-{b:05d}.parquet")
            pq.write_table(table, path)
            os.utime(path, (stamp + b, stamp + b))
    return load_batches + batches


def files(root: str, side: str, upto: int) -> list[str]:
    """The first ``upto`` files of ``side`` under ``root``."""
    return [os.path.join(root, side, f"part-{b:05d}.parquet") for b in range(upto)]


# -- variants ----------------------------------------------------------------------------------

@dataclass
class Outcome:
    """What one run of one variant over one batching measured."""

    load_seconds: float               # streamjoin: the load micro-batches
    batch_seconds: list[float]        # per change micro-batch (spark: measured or interpolated)
    view_changes: list[int]           # streamjoin: view changes per change micro-batch
    view_rows: list[int]              # the view's row count after the load and each (measured) batch
    measured: list[int] = field(default_factory=list)   # spark: the change micro-batches measured
    wall: float = 0.0
    notes: list[str] = field(default_factory=list)
    rss: int = 0                      # streamjoin: the largest Python worker's peak resident memory (bytes)
    anon: int = 0                     # and its peak anonymous resident memory (without mapped files' pages)
    jvm_cpu: float = 0.0              # CPU seconds of Spark's JVM during the run (load, changes, start and stop)
    worker_cpu: float = 0.0           # and of its Python workers

    @property
    def change_seconds(self) -> float:
        return sum(self.batch_seconds)


def streamed(variant: str) -> bool:
    """Whether ``variant`` runs as a streaming query timed per micro-batch (streamjoin's, the floor)."""
    return variant.startswith("streamjoin-") or variant.startswith("spark-floor")


def pass_through(batches):
    """The floor's ``mapInArrow`` function: its input batches, unchanged."""
    yield from batches


def pack_routed(batches):
    """The packed floor's first ``mapInArrow`` function: each order change as ``customer_id`` and
    ``_row``, the ``pack`` bytes of all its columns."""
    from streamjoin.statestore.packed_columns import pack_array

    for batch in batches:   # (in physical types, as the join stage stores a row: a time as its µs)
        columns = [c.cast(pa.int64()) if pa.types.is_timestamp(c.type) else c for c in batch.columns]
        yield pa.RecordBatch.from_arrays([batch.column("customer_id"), pack_array(columns, batch.num_rows)],
                                         names=["customer_id", "_row"])


class Bench:
    """Builds and times each variant over the inputs under ``root`` for one batching."""

    def __init__(self, spark: SparkSession, root: str, params: Params, batches: int, expected: list[int],
                 memory: WorkerMemory | None = None) -> None:
        self.spark, self.root, self.params, self.batches, self.expected = spark, root, params, batches, expected
        self.load_batches = params.load_batches
        self.memory = memory

    # streamjoin ---------------------------------------------------------------------------------

    def source(self, side: str) -> DataFrame:
        return (self.spark.readStream.schema(DDL[side]).option("maxFilesPerTrigger", 1)
                .parquet(os.path.join(self.root, side)))

    def streamjoin(self, store: str, fused: bool, scratch: str) -> Outcome:
        from pyspark.sql import functions as F

        from streamjoin import table_table_join

        start = time.perf_counter()
        store_kind, store_options = store_spec(store)
        view = table_table_join(
            self.source("orders"), self.source("customers"), "customer_id", left_key="order_id",
            right_key="customer_id", how="inner", left_time="changed_at", right_time="changed_at",
            store=store_kind, store_options=store_options, checkpoint=os.path.join(scratch, "join"),
            partitions=self.params.partitions, state_dir=os.path.join(scratch, "state"), fuse_key_stages=fused)
        kind = F.col("_change_type")
        view = view.observe("view", F.count(F.lit(1)).alias("changes"),
                            F.sum(F.when(kind == "insert", 1).when(kind == "delete", -1).otherwise(0)).alias("net"))
        return self._timed(view, scratch, f"streamjoin-{store}", start)

    def floor(self, scratch: str, packed: bool = False) -> Outcome:
        """``spark-floor`` (see module): the fused plan's exchanges and stages, passing rows through;
        ``packed``: ``spark-floor-packed``, its first stage's rows packed (:func:`pack_routed`)."""
        from pyspark.sql import functions as F

        start = time.perf_counter()
        orders, customers = self.source("orders"), self.source("customers")
        n = self.params.partitions
        by_order = orders.repartition(n, "order_id")
        keyed = by_order.mapInArrow(pack_routed, "customer_id bigint, _row binary") if packed \
            else by_order.mapInArrow(pass_through, orders.schema)
        both = keyed.unionByName(customers, allowMissingColumns=True)
        view = both.repartition(n, "customer_id").mapInArrow(pass_through, both.schema)
        view = view.observe("view", F.count(F.lit(1)).alias("changes"), F.sum(F.lit(0)).alias("net"))
        return self._timed(view, scratch, "spark-floor-packed" if packed else "spark-floor", start)

    def _timed(self, view: DataFrame, scratch: str, what: str, start: float) -> Outcome:
        """Run streaming ``view`` (observed as ``view``: ``changes`` and ``net`` rows a micro-batch)
        to the ``noop`` sink and time each micro-batch (Spark's ``triggerExecution``)."""
        query = run_to_noop(view, scratch, what)
        wall = time.perf_counter() - start
        progress = sorted(query.recentProgress, key=lambda p: p["batchId"])
        seconds, changes, rows, total = [], [], [], 0
        for p in progress:
            seconds.append(p["durationMs"]["triggerExecution"] / 1000)
            observed = p["observedMetrics"]["view"]
            changes.append(int(observed["changes"]))
            total += int(observed["net"] or 0)
            rows.append(total)
        files_each = self.load_batches + self.batches
        if len(progress) != files_each:
            raise RuntimeError(f"{what}: {len(progress)} micro-batches, expected {files_each}")
        load = self.load_batches
        return Outcome(sum(seconds[:load]), seconds[load:], changes[load:], rows[load - 1:], wall=wall)

    # spark --------------------------------------------------------------------------------------

    def current(self, side: str, upto: int) -> DataFrame:
        """``side``'s table after its first ``upto`` files: the latest change per key, deletes dropped."""
        from pyspark.sql import functions as F

        df = self.spark.read.schema(DDL[side]).parquet(*files(self.root, side, upto))
        latest = (df.groupBy(KEYS[side]).agg(F.max_by(F.struct(*df.columns), "changed_at").alias("r"))
                  .select("r.*"))
        return latest.filter(F.col("op") != "delete").drop("op")

    def recompute(self, upto: int) -> DataFrame:
        orders = self.current("orders", upto).withColumnRenamed("changed_at", "order_changed_at")
        customers = self.current("customers", upto).withColumnRenamed("changed_at", "customer_changed_at")
        return orders.join(customers, "customer_id", "inner")

    def timed_write(self, df: DataFrame) -> tuple[float, int]:
        """Seconds to write ``df`` to the ``noop`` sink, and its row count (observed, no pruning)."""
        from pyspark.sql import Observation
        from pyspark.sql import functions as F

        observation = Observation("view")
        start = time.perf_counter()
        df.observe(observation, F.count(F.lit(1)).alias("rows")).write.format("noop").mode("overwrite").save()
        seconds = time.perf_counter() - start
        return seconds, int(observation.get["rows"])

    def points(self, count: int) -> list[int]:
        """The change micro-batches (0-based) after which Spark is measured: evenly spread, first and last."""
        if count <= 0 or count >= self.batches:
            return list(range(self.batches))
        return sorted({int(round(x)) for x in np.linspace(0, self.batches - 1, count)})

    def spark_variant(self, join_only: bool, scratch: str) -> Outcome:
        measured, seconds, rows = self.points(self.spark_points), [], []
        start = time.perf_counter()
        for b in measured:
            upto = self.load_batches + b + 1
            if join_only:
                paths = {}
                for side in ("orders", "customers"):
                    paths[side] = os.path.join(scratch, f"{side}-{b}")
                    self.current(side, upto).write.parquet(paths[side])
                orders = self.spark.read.parquet(paths["orders"]).withColumnRenamed("changed_at", "order_changed_at")
                customers = (self.spark.read.parquet(paths["customers"])
                             .withColumnRenamed("changed_at", "customer_changed_at"))
                s, n = self.timed_write(orders.join(customers, "customer_id", "inner"))
            else:
                s, n = self.timed_write(self.recompute(upto))
            seconds.append(s)
            rows.append(n)
        every = np.interp(np.arange(self.batches), measured, seconds)
        return Outcome(0.0, list(every), [], rows, measured, wall=time.perf_counter() - start)

    # driver -------------------------------------------------------------------------------------

    spark_points = 3

    def measure(self, variant: str, warm: "Bench | None") -> Outcome:
        """Run ``variant`` once from new checkpoints; remove them after; check the view's row counts."""
        if warm is not None:
            warm.measure(variant, None)
        os.sync()
        scratch = fresh_dir(self.root, "run")
        cpu = spark_cpu_seconds()
        try:
            if variant.startswith("streamjoin-"):
                began = time.time()
                outcome = self.streamjoin(*parse_key_stage_variant(variant.split("-", 1)[1]), scratch)
                if self.memory is not None:
                    outcome.rss = self.memory.peak(began, time.time())[0]
                    outcome.anon = self.memory.peak_anon(began, time.time())
                expected = self.expected  # after the load, then after each change micro-batch
                if outcome.view_rows != expected:
                    bad = next(i for i, (a, b) in enumerate(zip(outcome.view_rows, expected)) if a != b) \
                        if len(outcome.view_rows) == len(expected) else -1
                    outcome.notes.append(f"MISMATCH: {variant} ({self.batches} batches): view rows "
                                         f"{outcome.view_rows[bad]:,} after batch {bad}, expected {expected[bad]:,}")
            elif variant in ("spark-floor", "spark-floor-packed"):
                outcome = self.floor(scratch, packed=variant == "spark-floor-packed")
            else:
                outcome = self.spark_variant(variant == "spark-join-only", scratch)
                for b, n in zip(outcome.measured, outcome.view_rows):
                    if n != self.expected[b + 1]:
                        outcome.notes.append(f"MISMATCH: {variant} ({self.batches} batches): {n:,} view rows "
                                             f"after change batch {b}, expected {self.expected[b + 1]:,}")
            outcome.jvm_cpu, outcome.worker_cpu = (after - before for after, before in zip(spark_cpu_seconds(), cpu))
            return outcome
        finally:
            shutil.rmtree(scratch, ignore_errors=True)


# -- report ------------------------------------------------------------------------------------

COLUMNS = ["batches", "variant", "changes/batch", "load s", "changes s", "s/batch", "input changes/s",
           "view changes", "view changes/s", "rows out/batch", "recompute s / s", "floor s / s", "JVM CPU s",
           "worker CPU s", "worker RSS MB", "worker anon MB"]


def summary_table(params: Params, results: dict[int, dict[str, list[Outcome]]]) -> Table:
    """One row per (batching, variant): medians over the runs."""
    table = Table(COLUMNS)
    for batches, by_variant in results.items():
        def med(variant: str, fn, by_variant=by_variant) -> float:
            return statistics.median(fn(o) for o in by_variant[variant])
        base = med("spark-recompute", lambda o: o.change_seconds) if "spark-recompute" in by_variant else None
        floor = med("spark-floor", lambda o: o.change_seconds) if "spark-floor" in by_variant else None
        for variant, outcomes in by_variant.items():
            total = med(variant, lambda o: o.change_seconds)
            per = med(variant, lambda o: statistics.median(o.batch_seconds))
            ours, timed = variant.startswith("streamjoin-"), streamed(variant)
            view = outcomes[-1].view_changes
            rows_out = sum(view) / len(view) if timed else statistics.mean(outcomes[-1].view_rows)
            estimated = not timed and len(outcomes[-1].measured) < batches
            table.add(batches, variant + (" (est.)" if estimated else ""), params.changes // batches * 2,
                      med(variant, lambda o: o.load_seconds) if timed else "-", total, per,
                      2 * params.changes / total, sum(view) if ours else "-",
                      sum(view) / total if ours else "-", round(rows_out),
                      base / total if base else "-", floor / total if floor and timed else "-",
                      med(variant, lambda o: o.jvm_cpu), med(variant, lambda o: o.worker_cpu),
                      round(max(o.rss for o in outcomes) / 2**20) if ours and any(o.rss for o in outcomes) else "-",
                      round(max(o.anon for o in outcomes) / 2**20) if ours and any(o.anon for o in outcomes) else "-")
    return table


def report(args: argparse.Namespace, params: Params, workload: Workload,
           results: dict[int, dict[str, list[Outcome]]]) -> int:
    repeat = len(next(iter(next(iter(results.values())).values())))
    print(f"\norders JOIN customers ON customer_id (inner): {params.rows:,} rows per table loaded in "
          f"{params.load_batches} micro-batch(es), then {params.changes:,} changes per side (20% updates, "
          f"{workload.moves:,} of them reassigning an order; 5% deletes; 75% inserts); {params.partitions} "
          f"partitions, medians of {repeat} run(s)")
    print(summary_table(params, results).render())
    points = {b: next((o.measured for v, outs in r.items() if not streamed(v) for o in outs), [])
              for b, r in results.items()}
    print(f"""
notes:
- changes/batch: input changes per micro-batch, both sides; changes s: all change micro-batches
  (for streamjoin, Spark's triggerExecution time of each; load s: the load micro-batches);
  s/batch: median per change micro-batch; input changes/s = both sides' changes / changes s.
- view changes: rows of the view's change stream in the change micro-batches (an update of a
  view row is a pre- and a post-image); rows out/batch: what each micro-batch writes (streamjoin:
  view changes; Spark: the whole view).
- spark-recompute rebuilds both tables from every change file so far and joins them after each
  micro-batch; measured after change micro-batches {points} (0-based), the others interpolated
  linearly ("est."). recompute s / s: its changes s over the variant's.
- spark-floor (--floor): the same query's exchanges and mapInArrow stages passing rows
  through, no join; floor s / s: its changes s over the variant's (rows out/batch: the rows
  it passes through). spark-floor-packed (--floor-packed): the same with the first stage's
  rows packed into one binary column beside their join key.
- JVM CPU s, worker CPU s: CPU seconds (user + system) of Spark's JVM and of its Python workers
  over the whole run of the variant (its query's start, load and change micro-batches): the two
  halves of Spark's work on the machine's cores.
- worker RSS MB: the largest PySpark Python worker's resident memory during streamjoin's runs
  (sampled every 0.2 s); worker anon MB: the largest one's resident memory less the pages of
  files it maps (an arranged store's bases, which the operating system can drop), the memory
  STREAMJOIN_WORKER_MEMORY bounds.""")
    lines = [n for r in results.values() for outs in r.values() for o in outs for n in o.notes]
    for line in lines:
        print(line)
    print("results:", write_results("table", summary_table(params, results), vars(args) | {"moves": workload.moves},
                                    chart=Chart(value="input changes/s", label=("variant", "changes/batch"),
                                                title="table-table view: input changes/s")))
    return 1 if any(line.startswith("MISMATCH") for line in lines) else 0


# -- running -----------------------------------------------------------------------------------

def _stores(text: str) -> list[str]:
    return parse_stores(text, STORES)


def variants(args: argparse.Namespace) -> list[str]:
    spark = [] if args.no_spark else ["spark-recompute"] + (["spark-join-only"] if args.join_only else [])
    floor = (["spark-floor"] if args.floor else []) + (["spark-floor-packed"] if args.floor_packed else [])
    return [key_stage_variant(f"streamjoin-{s}", fused) for s in _stores(args.stores)
            for fused in key_stages(args.key_stages)] + floor + spark


def _per_batch(o: Outcome) -> str:
    """The change micro-batches' seconds (Spark: the measured ones, as ``batch:seconds``)."""
    if o.measured:
        return " ".join(f"{b}:{o.batch_seconds[b]:.1f}" for b in o.measured)
    return " ".join(f"{s:.1f}" for s in o.batch_seconds[:12]) + (" ..." if len(o.batch_seconds) > 12 else "")


def run(args: argparse.Namespace) -> int:
    params = Params.from_args(args)
    chosen = variants(args)
    if not chosen:
        raise SystemExit("nothing to measure: give --stores, --floor, --floor-packed, or drop --no-spark")
    started = time.perf_counter()
    workload = generate(params.rows, params.changes)
    print(f"generated the inputs in {time.perf_counter() - started:.1f} s", flush=True)
    if args.profile:
        return profile(workload, params, _stores(args.stores) or ["memory"], key_stages(args.key_stages)[0])
    if args.in_process:
        return in_process(workload, params, _stores(args.stores) or ["memory"], key_stages(args.key_stages)[0])
    top = fresh_dir(results_dir(), "table")
    try:
        small = generate(2_000, 2_000, seed=1)
        warm_root = os.path.join(top, "warm")
        write_inputs(warm_root, small, 2, 1)
        spark = local_session(shuffle_partitions=params.partitions,
                              extra={"spark.sql.streaming.numRecentProgressUpdates": "100000"})
        memory = WorkerMemory()
        memory.start()
        try:
            warm = Bench(spark, warm_root, params, 2, expected_view_rows(small, bounds(2_000, 2)))
            warm.spark_points = 0
            for variant in chosen:  # every code path once before anything is timed
                warm.measure(variant, None)
            print(f"warmed up in {time.perf_counter() - started:.0f} s", flush=True)
            results: dict[int, dict[str, list[Outcome]]] = {}
            for batches in params.batchings:
                root = os.path.join(top, f"b{batches}")
                write_inputs(root, workload, batches, params.load_batches)
                bench = Bench(spark, root, params, batches,
                              expected_view_rows(workload, bounds(params.changes, batches)), memory)
                bench.spark_points = args.spark_points
                results[batches] = {v: [] for v in chosen}
                for i in range(args.repeat):
                    for variant in rotated(chosen, i):   # each variant in every place in turn
                        o = bench.measure(variant, warm)
                        results[batches][variant].append(o)
                        print(f"{batches} batches, run {i + 1}/{args.repeat} {variant}: changes {o.change_seconds:.1f} s"
                              f" ({'load %.1f s, ' % o.load_seconds if o.load_seconds else ''}wall {o.wall:.1f} s); "
                              f"per batch: {_per_batch(o)}" + "".join(f"\n  {n}" for n in o.notes), flush=True)
                shutil.rmtree(root, ignore_errors=True)
            return report(args, params, workload, results)
        finally:
            memory.stop()
            spark.stop()
    finally:
        shutil.rmtree(top, ignore_errors=True)


# -- in process --------------------------------------------------------------------------------

def in_process(workload: Workload, params: Params, stores: list[str], fused: bool = False) -> int:
    """The stages in this process (``PlanRunner``), timed per change batch and stage, in wall
    and CPU (``process_time``) seconds."""
    root = fresh_dir(results_dir(), "table-in-process")
    try:
        runner = _local_runner(root, params, stores[0], fused)
        o, c = workload.orders, workload.customers
        start = time.perf_counter()
        runner.run(o.load, c.load)
        print(f"load ({params.rows:,} rows per side, {stores[0]}, {params.partitions} partitions): "
              f"{time.perf_counter() - start:.1f} s", flush=True)
        ends = bounds(params.changes, params.batchings[0])
        walls, cpus = [], []
        for s, e in zip(np.r_[0, ends[:-1]], ends):
            v = runner.version
            inputs = (o.changes.slice(s, e - s), c.changes.slice(s, e - s))
            outputs: dict[str, object] = {}
            took: list[str] = []
            for stage in runner.plan.stages:
                t0, c0 = time.perf_counter(), time.process_time()
                outputs[stage.name] = runner.runners[stage.name].run(*runner.plan.feeds(stage, inputs, outputs),
                                                                     version=v)
                took.append(f"{stage.name or 'join'} {time.perf_counter() - t0:.2f} s "
                            f"({time.process_time() - c0:.2f} CPU)")
                walls.append(time.perf_counter() - t0)
                cpus.append(time.process_time() - c0)
            runner.version = v + 1
            out = outputs[runner.plan.output.name]
            assert isinstance(out, pa.Table)
            print(f"  changes {s:,}..{e:,} per side: {', '.join(took)}, {out.num_rows:,} view changes", flush=True)
        n = 2 * params.changes
        print(f"changes: {n:,} in {sum(walls):.1f} s ({n / sum(walls):,.0f}/s; "
              f"{sum(cpus):.1f} CPU s, {n / sum(cpus):,.0f}/CPU s)")
        # a results file, so that ``streamjoin bench compare REV table --in-process`` alternates these runs
        table = Table(["stage", "changes s", "CPU s", "input changes/s"])
        names = [stage.name or "join" for stage in runner.plan.stages]
        for i, name in enumerate(names):
            wall, cpu = sum(walls[i::len(names)]), sum(cpus[i::len(names)])
            table.add(name, round(wall, 3), round(cpu, 3), round(n / wall))
        table.add("all", round(sum(walls), 3), round(sum(cpus), 3), round(n / sum(walls)))
        print("results:", write_results("table-in-process", table, {**vars(params), "store": stores[0], "fused": fused}))
        return 0
    finally:
        _remove(root)


def _remove(root: str) -> None:
    """Close the stores kept open for the next micro-batch, then remove ``root``."""
    from streamjoin.statestore.warm import evict_all

    evict_all()
    shutil.rmtree(root, ignore_errors=True)


def _local_runner(root: str, params: Params, store: str, fused: bool = False):
    """The benchmark's join (orders with their customer) as in-process stages under ``root``."""
    from streamjoin.runtime.options import StateConfig
    from streamjoin.runtime.plan_runner import PlanRunner

    kind, options = store_spec(store)
    # as a streaming query's tasks: each stage's store stays open between micro-batches, as in Spark
    return PlanRunner(join_operator(fused).plan, os.path.join(root, "ckpt"), partitions=params.partitions,
                                 config=StateConfig(store=kind, store_options=options, local_dir=os.path.join(root, "state")),
                                 query_id="bench-table-in-process")


def join_operator(fused: bool = False) -> "TableTableJoin":
    """The benchmark's join as the in-process runs build it: orders with their customer, inner
    (``fused``: ``fuse_key_stages=True``)."""
    from streamjoin.table.operator import TableTableJoin

    return TableTableJoin(ORDERS, CUSTOMERS, "customer_id", left_key="order_id", right_key="customer_id",
                          how="inner", left_time="changed_at", right_time="changed_at", fuse_key_stages=fused)


# -- profiling ---------------------------------------------------------------------------------

def profile(workload: Workload, params: Params, stores: list[str], fused: bool = False) -> int:
    """The stages in this process (``PlanRunner``) under cProfile, per stage."""
    import cProfile
    import pstats

    root = fresh_dir(results_dir(), "table-profile")
    try:
        runner = _local_runner(root, params, stores[0], fused)
        start = time.perf_counter()
        o, c = workload.orders, workload.customers
        out = runner.run(o.load, c.load)
        print(f"load ({params.rows:,} rows per side, {stores[0]}): {time.perf_counter() - start:.1f} s, "
              f"{out.num_rows:,} view changes", flush=True)
        ends = bounds(params.changes, params.batchings[0])
        profiler = cProfile.Profile()
        start, view = time.perf_counter(), 0
        for s, e in zip(np.r_[0, ends[:-1]], ends):
            t0 = time.perf_counter()
            out = profiler.runcall(runner.run, o.changes.slice(s, e - s), c.changes.slice(s, e - s))
            view += out.num_rows
            print(f"  changes {s:,}..{e:,}: {time.perf_counter() - t0:.2f} s, {out.num_rows:,} view changes", flush=True)
        took = time.perf_counter() - start
        print(f"changes: {2 * params.changes:,} in {took:.1f} s ({2 * params.changes / took:,.0f}/s), "
              f"{view:,} view changes ({view / took:,.0f}/s) under cProfile")
        for stage in runner.plan.names:
            print(stage or "join", "seconds per step:", round(sum(float(m.get("seconds", 0)) for m in runner.metrics(stage)), 2))
        stats = pstats.Stats(profiler).sort_stats("cumulative")
        stats.print_stats(40)
        stats.sort_stats("tottime").print_stats(30)
        saved = os.path.join(results_dir(), "table-profile.pstats")
        profiler.dump_stats(saved)
        print(f"profile: {saved} (python -m pstats {saved})")
        return 0
    finally:
        _remove(root)
