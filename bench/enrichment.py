"""``streamjoin bench enrichment``: the stream-table join beside Spark's stream-static join.

A table of ``--table-rows`` profiles (``user_id``, ``plan``, ``country``, ``score``,
``changed_at``) is loaded as the join's ``bootstrap`` snapshot; its change stream carries
``--update-fraction`` x table rows upserts of random existing keys (10% by default), spread over
``--batches`` micro-batches in change-time order (up to 5 s out of order), each micro-batch's file
ending with a heartbeat at the batch's end time, as a CDC source emits them. ``--events`` activity
events (``user_id`` of an existing profile, ``ts``, ``event_id``, ``action``) arrive over the same
span of time (1,000 events a second by default, each up to 5 s earlier than its arrival order),
one Parquet file per micro-batch beside the changes of that time. The watermark delay is 10 s,
so no event and no change is late.

Variants, every one writing to the ``noop`` sink with ``trigger(availableNow=True)``:

* ``spark-stream-static``: Spark's stream-static join, ``events.join(static, "user_id", "left")``,
  where ``static`` is the table *after all updates*, read from Parquet. Spark joins each
  micro-batch against that table as it is when the batch runs (re-read every batch): there is no
  event-time versioning, so an event gets the newest row, not the row as of the event's time;
* ``streamjoin-<store>``: :func:`streamjoin.stream_table_join` in ``mode="as_of"`` (an event gets the
  row as it was at its time; it waits until the table's watermark passes it) with each store;
  the table's 1M rows are loaded from the snapshot (a Spark job run when the join is built; timed);
  the change stream then has one more micro-batch with one heartbeat, far in the future, so that
  the events of the last micro-batch are released (an as-of join must learn that no earlier
  change can still come: the heartbeat's watermark releases them in the no-data micro-batch the
  join's flush source runs after it); the rows still waiting at the end are reported;
* ``streamjoin-<store>-latest``: ``mode="latest"`` (an event gets the row as of the end of its
  micro-batch's changes, at once): the same meaning as Spark's, without re-reading the table.

``--user-typed`` (user-typed inputs, a Parquet snapshot read as it comes): the inputs as a user's
pipeline often has them, not typed for the join. The event and change files carry timestamps
without a zone, read as ``TIMESTAMP_NTZ``; the snapshot (and Spark's static copy) is written as
Parquet with a zone-less INT96 timestamp (as Spark, Hive and Impala write one) and read with
``spark.read.parquet`` as it comes, which gives a ``TIMESTAMP``: the snapshot's change-time column
has another type than the join's change stream, and ``stream_table_join`` converts it (in the JVM).

Each variant first runs untimed over 2 micro-batches with a small snapshot (the JVM compiles its
code paths); before each timed run a tiny stream-static join and a tiny streamjoin run untimed
(idle Python workers exit after a minute; a run should not pay for starting them). The output rows
are counted from the sink's progress; for streamjoin they are also checked against the join's own
metrics. A background thread samples the resident memory of the PySpark workers
(:class:`streamjoin.bench.interval.WorkerMemory`): "worker RSS MB" is the largest worker during the
run. The goal (:data:`streamjoin.bench.goals.GOALS`) is printed beside the measured ratio.
``--profile`` runs streamjoin's partition tasks in this process under cProfile instead.
"""

from __future__ import annotations

import argparse
import datetime
import os
import shutil
import statistics
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from streamjoin.bench.goals import GOALS
from streamjoin.bench.harness import Chart, Table, parse_stores, results_dir, rotated, write_results
from streamjoin.bench.interval import WorkerMemory
from streamjoin.bench.sparkutil import fresh_dir, local_session, run_to_noop
from streamjoin.enrichment.spec import DEFAULT_LAYOUT, LAYOUTS
from streamjoin.statestore.registry import DEFAULT_KIND

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from streamjoin.enrichment.operator import EnrichmentJoin
    from streamjoin.enrichment.spec import LayoutName, ModeName

__all__ = ["add_arguments", "run", "Params", "generate", "Inputs"]

RATE = 1000                       # events a second
DISORDER_US = 5_000_000           # an event or change is up to this much earlier than its arrival
DELAY_S = 10                      # watermark delay: more than the disorder, so nothing is late
EPOCH_US = 1_767_225_600_000_000  # 2026-01-01T00:00:00Z
FLUSH_US = 86_400_000_000         # the flush heartbeats: a day after the last event
FLUSH_BATCHES = 1                 # its watermark releases the last events in the no-data micro-batch after it
STORES = ("arranged", "rocksdb", "lmdb", "memory")
PLANS = ("free", "plus", "pro", "team", "enterprise")
COUNTRIES = ("DE", "FR", "US", "GB", "IN", "BR", "JP", "NG", "CA", "ES", "IT", "MX")
ACTIONS = ("view", "click", "search", "purchase", "share", "logout")
TS = pa.timestamp("us", tz="UTC")
SNAPSHOT = pa.schema([("user_id", pa.int64()), ("plan", pa.string()), ("country", pa.string()),
                      ("score", pa.int64()), ("changed_at", TS)])
CHANGES = pa.schema([("user_id", pa.int64()), ("op", pa.string()), ("changed_at", TS), ("plan", pa.string()),
                     ("country", pa.string()), ("score", pa.int64())])
EVENTS = pa.schema([("user_id", pa.int64()), ("ts", TS), ("event_id", pa.int64()), ("action", pa.string())])
DDL = {"events": "user_id bigint, ts timestamp, event_id bigint, action string",
       "changes": "user_id bigint, op string, changed_at timestamp, plan string, country string, score bigint"}
#: the variant the goal compares with Spark's stream-static join
GOAL_VARIANT = "streamjoin-arranged"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Enrich --events events with a --table-rows table that receives --update-fraction updates, "
        "with streamjoin's stream_table_join (as-of mode per store, latest mode) beside Spark's "
        "stream-static join against the final table; one table of medians from one run. "
        "The full default size takes about 10-20 minutes on 2 cores.")
    parser.add_argument("--events", type=int, default=1_000_000, help="events in all (default 1,000,000)")
    parser.add_argument("--table-rows", type=int, default=1_000_000,
                        help="rows of the table's bootstrap snapshot (default 1,000,000)")
    parser.add_argument("--update-fraction", type=float, default=0.1,
                        help="updates in the change stream, as a fraction of --table-rows (default 0.1)")
    parser.add_argument("--batches", type=int, default=10, help="micro-batches of events and changes (default 10)")
    parser.add_argument("--partitions", type=int, default=4, help="shuffle and state partitions (default 4)")
    parser.add_argument("--repeat", type=int, default=2, help="timed runs of each variant, interleaved (default 2)")
    parser.add_argument("--stores", default=",".join(STORES),
                        help=f"comma-separated stores measured in as-of mode (default {','.join(STORES)})")
    parser.add_argument("--latest", default=DEFAULT_KIND, metavar="STORES",
                        help=f"comma-separated stores also measured in latest mode (default {DEFAULT_KIND}; '' for none)")
    parser.add_argument("--layouts", default="runs", metavar="LAYOUTS",
                        help="comma-separated state layouts of the as-of variants (stream_table_join's layout=; "
                        "default runs, the join's default): each store is measured with each, a variant of a "
                        "layout other than the default named streamjoin-STORE-LAYOUT (streamjoin-arranged-buckets)")
    parser.add_argument("--no-spark", action="store_true", help="skip Spark's stream-static join")
    parser.add_argument("--user-typed", action="store_true",
                        help="user-typed inputs, a Parquet snapshot read as it comes: event and change files with "
                        "zone-less timestamps (TIMESTAMP_NTZ), the snapshot with a zone-less INT96 timestamp read by "
                        "spark.read.parquet as TIMESTAMP (see the module's description)")
    parser.add_argument("--profile", action="store_true", help="run streamjoin's tasks for the first store in "
                        "this process under cProfile (no Spark) and print where the time goes")
    parser.add_argument("--buckets", type=int, default=64, help="with --profile: the operator's key buckets of "
                        "table versions per partition (default 64, what stream_table_join uses)")


@dataclass(frozen=True)
class Params:
    """One benchmark's workload."""

    events: int
    table_rows: int
    updates: int
    batches: int
    partitions: int
    user_typed: bool = False

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> "Params":
        if min(args.events, args.table_rows, args.batches, args.partitions) < 1 or args.update_fraction < 0:
            raise SystemExit("--events, --table-rows, --batches and --partitions must be positive, "
                             "--update-fraction not negative")
        return cls(args.events, args.table_rows, round(args.table_rows * args.update_fraction),
                   args.batches, args.partitions, bool(getattr(args, "user_typed", False)))

    @property
    def span_us(self) -> int:
        """The events' (and changes') arrival span."""
        return self.events * 1_000_000 // RATE


# -- inputs ------------------------------------------------------------------------------------

@dataclass
class Inputs:
    """The generated workload: per micro-batch event and change tables, the snapshot, the final table."""

    snapshot: pa.Table
    events: list[pa.Table]
    changes: list[pa.Table]           # the real micro-batches, each ending with a heartbeat
    flush: list[pa.Table]             # heartbeat-only micro-batches that release the last events
    final: pa.Table                   # the table after every update (Spark's static copy)
    stale_events: int                 # events whose as-of row differs from the final row


def _pick(values: tuple[str, ...], rng: np.random.Generator, n: int) -> pa.Array:
    return pa.array(values).take(pa.array(rng.integers(0, len(values), n)))


def _arrivals(n: int, span_us: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``n`` arrival times spread evenly over ``span_us``, and event times up to the disorder earlier."""
    arrival = EPOCH_US + (np.arange(n, dtype=np.int64) * span_us) // max(n, 1)
    return arrival, arrival - rng.integers(0, DISORDER_US + 1, n)


def _split(arrival: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    """Row index where each micro-batch starts, for rows in arrival order (``bounds``: batch ends)."""
    return np.concatenate([[0], np.searchsorted(arrival, bounds, side="left")])


def generate(params: Params, seed: int = 7) -> Inputs:
    """The workload, vectorised: keys ``0..table_rows-1``; updates and events of random keys."""
    rng = np.random.default_rng(seed)
    n, u, e = params.table_rows, params.updates, params.events
    keys = np.arange(n, dtype=np.int64)
    snapshot = pa.Table.from_arrays([
        pa.array(keys), _pick(PLANS, rng, n), _pick(COUNTRIES, rng, n), pa.array(rng.integers(0, 1000, n)),
        pa.array(np.full(n, EPOCH_US - 86_400_000_000), TS),
    ], schema=SNAPSHOT)

    bounds = EPOCH_US + (np.arange(1, params.batches + 1, dtype=np.int64) * params.span_us) // params.batches
    c_arrival, c_time = _arrivals(u, params.span_us, rng)
    c_keys = rng.integers(0, n, u)
    updates = pa.Table.from_arrays([
        pa.array(c_keys), pa.array(np.full(u, "update")), pa.array(c_time, TS), _pick(PLANS, rng, u),
        _pick(COUNTRIES, rng, u), pa.array(rng.integers(0, 1000, u)),
    ], schema=CHANGES)
    c_at = _split(c_arrival, bounds)
    changes = [pa.concat_tables([updates.slice(c_at[b], c_at[b + 1] - c_at[b]), heartbeat(int(bounds[b]))])
               for b in range(params.batches)]
    flush = [heartbeat(int(bounds[-1]) + FLUSH_US * (i + 1)) for i in range(FLUSH_BATCHES)]

    e_arrival, e_time = _arrivals(e, params.span_us, rng)
    e_keys = rng.integers(0, n, e)
    events = pa.Table.from_arrays([
        pa.array(e_keys), pa.array(e_time, TS), pa.array(np.arange(e, dtype=np.int64)), _pick(ACTIONS, rng, e),
    ], schema=EVENTS)
    e_at = _split(e_arrival, bounds)
    event_batches = [events.slice(e_at[b], e_at[b + 1] - e_at[b]) for b in range(params.batches)]

    # the final table: each key's last update (change-time order; the snapshot is older than any)
    order = np.lexsort((c_time, c_keys))
    last = order[np.r_[c_keys[order][1:] != c_keys[order][:-1], True]] if u else order
    row_of = np.arange(n, dtype=np.int64)
    columns = {}
    for name in ("plan", "country", "score", "changed_at"):
        merged = pa.concat_arrays([snapshot.column(name).combine_chunks(), updates.column(name).combine_chunks()])
        index = row_of.copy()
        index[c_keys[last]] = n + last
        columns[name] = merged.take(pa.array(index))
    final = pa.table({"user_id": keys, **columns}, schema=SNAPSHOT)
    # an event at t gets a version older than the final row if its key changes after t
    newest = np.full(n, np.iinfo(np.int64).min)
    np.maximum.at(newest, c_keys, c_time)
    stale = int((e_time < newest[e_keys]).sum())
    return Inputs(snapshot, event_batches, changes, flush, final, stale)


def heartbeat(at_us: int) -> pa.Table:
    """One heartbeat row at ``at_us``: it advances the table's watermark and nothing else."""
    return pa.Table.from_arrays([pa.nulls(1, pa.int64()), pa.array(["heartbeat"]), pa.array([at_us], TS),
                                 pa.nulls(1, pa.string()), pa.nulls(1, pa.string()), pa.nulls(1, pa.int64())],
                                schema=CHANGES)


def write_inputs(root: str, inputs: Inputs, user_typed: bool = False) -> None:
    """One Parquet file per micro-batch with increasing modification times (the file source
    takes the oldest first); ``changes`` has the flush batches, ``changes-latest`` not.
    ``user_typed``: timestamps without a zone, the tables' as INT96 (see the module)."""
    def files(name: str, tables: list[pa.Table], stamp: float) -> None:
        os.makedirs(os.path.join(root, name))
        for b, table in enumerate(tables):
            path = os.path.join(root, name, f"part-{b:04d}.parquet")
            pq.write_table(zoneless(table) if user_typed else table, path)
            os.utime(path, (stamp + b, stamp + b))
    stamp = time.time() - len(inputs.changes) - len(inputs.flush) - 10
    files("events", inputs.events, stamp)
    files("changes", inputs.changes + inputs.flush, stamp)
    files("changes-latest", inputs.changes, stamp)
    for name, table in (("snapshot", inputs.snapshot), ("static", inputs.final)):
        path = os.path.join(root, f"{name}.parquet")
        if user_typed:
            pq.write_table(zoneless(table), path, use_deprecated_int96_timestamps=True)
        else:
            pq.write_table(table, path)


def in_process_versions(inputs: Inputs, mode: str = "as_of") -> list[tuple[pa.Table, pa.Table]]:
    """The micro-batches a query of ``inputs`` runs, as (events, changes) per version, for a run
    in process: the data micro-batches, then (as-of) the heartbeat's and the no-data one Spark
    runs after it, when its watermark lets the join release the last events."""
    versions = list(zip(inputs.events, inputs.changes))
    if mode == "as_of":
        versions += [(EVENTS.empty_table(), f) for f in inputs.flush]
        versions.append((EVENTS.empty_table(), CHANGES.empty_table()))
    return versions


def zoneless(table: pa.Table) -> pa.Table:
    """``table`` with its timestamps without a time zone (the same UTC wall-clock times)."""
    schema = pa.schema([pa.field(f.name, pa.timestamp("us")) if pa.types.is_timestamp(f.type) else f for f in table.schema])
    return table.cast(schema)


def write_warm_inputs(root: str, inputs: Inputs, batches: int = 2, rows: int = 10_000, user_typed: bool = False) -> None:
    """A small copy: the first ``batches`` micro-batches, ``rows`` rows of the tables."""
    small = Inputs(inputs.snapshot.slice(0, rows), [t.slice(0, rows) for t in inputs.events[:batches]],
                   [pa.concat_tables([t.slice(0, rows), t.slice(t.num_rows - 1)]) for t in inputs.changes[:batches]],
                   inputs.flush, inputs.final.slice(0, rows), 0)
    write_inputs(root, small, user_typed)


# -- variants ----------------------------------------------------------------------------------

@dataclass
class Outcome:
    """What one run of one variant measured."""

    seconds: float
    build_seconds: float              # stream_table_join (the bootstrap job) or the plan
    output_rows: int
    batches: int
    batch_seconds: list[float] = field(default_factory=list)   # each micro-batch's trigger time
    worker_rss: int = 0               # the largest PySpark worker's resident memory during the run (bytes)
    #: how long the first micro-batch waited for its offsets (Spark's ``latestOffset``): for
    #: streamjoin, the bootstrap's job, which the flush source's first offset waits for
    first_offsets: float = 0.0
    join: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


class Bench:
    """Builds and times each variant's streaming query over the inputs under ``root``."""

    def __init__(self, spark: SparkSession, root: str, params: Params, memory: WorkerMemory | None = None) -> None:
        self.spark, self.root, self.params, self.memory = spark, root, params, memory

    def source(self, name: str) -> DataFrame:
        kind = "events" if name == "events" else "changes"
        ddl = DDL[kind].replace(" timestamp,", " timestamp_ntz,") if self.params.user_typed else DDL[kind]
        return (self.spark.readStream.schema(ddl).option("maxFilesPerTrigger", 1)
                .parquet(os.path.join(self.root, name)))

    def spark_join(self, scratch: str) -> DataFrame:
        static = self.spark.read.parquet(os.path.join(self.root, "static.parquet"))
        return self.source("events").join(static, "user_id", "left")

    def streamjoin(self, store: str, mode: ModeName, scratch: str, layout: LayoutName = DEFAULT_LAYOUT) -> DataFrame:
        from streamjoin import stream_table_join

        return stream_table_join(
            self.source("events"), self.source("changes" if mode == "as_of" else "changes-latest"), "user_id",
            stream_time="ts", table_key="user_id", table_time="changed_at", how="left", mode=mode,
            delay=datetime.timedelta(seconds=DELAY_S),
            bootstrap=self.spark.read.parquet(os.path.join(self.root, "snapshot.parquet")),
            store=store, checkpoint=os.path.join(scratch, "join"), partitions=self.params.partitions,
            state_dir=os.path.join(scratch, "state"), layout=layout,
        )

    def warm_up(self) -> None:
        """Run a small stream-static join and a small streamjoin (batch mode) in the Python workers."""
        from streamjoin import stream_table_join

        events = self.spark.read.parquet(os.path.join(self.root, "events", "part-0000.parquet")).limit(1000)
        static = self.spark.read.parquet(os.path.join(self.root, "static.parquet")).limit(1000)
        events.join(static, "user_id", "left").write.format("noop").mode("overwrite").save()
        changes = self.spark.read.parquet(os.path.join(self.root, "changes", "part-0000.parquet")).limit(1000)
        scratch = fresh_dir(self.root, "warm")
        stream_table_join(events, changes, "user_id", stream_time="ts", table_key="user_id",
                          table_time="changed_at", delay=datetime.timedelta(seconds=DELAY_S),
                          checkpoint=os.path.join(scratch, "join"), partitions=self.params.partitions,
                          state_dir=os.path.join(scratch, "state")).write.format("noop").mode("overwrite").save()
        shutil.rmtree(scratch, ignore_errors=True)

    def measure(self, variant: str) -> Outcome:
        """Run ``variant`` once from a new checkpoint; remove its checkpoint and state after."""
        self.warm_up()
        os.sync()  # the previous run's writes are not flushed on this run's time
        scratch = fresh_dir(self.root, "run")
        try:
            began = time.time()
            start = time.perf_counter()
            if variant == "spark-stream-static":
                df = self.spark_join(scratch)
            else:
                parts = variant.split("-")
                df = self.streamjoin(parts[1], "latest" if parts[-1] == "latest" else "as_of", scratch,
                                     parts[-1] if parts[-1] in LAYOUTS else DEFAULT_LAYOUT)
            built = time.perf_counter() - start
            query = run_to_noop(df, scratch, variant)
            seconds = time.perf_counter() - start
            progress = query.recentProgress
            outcome = Outcome(seconds, built, sum(_sink_rows(p) for p in progress), len({p["batchId"] for p in progress}),
                              [p["durationMs"].get("triggerExecution", 0) / 1000 for p in progress],
                              self.memory.peak(began, time.time())[0] if self.memory else 0,
                              first_offsets=(progress[0]["durationMs"].get("latestOffset", 0) / 1000) if progress else 0.0)
            if variant != "spark-stream-static":
                from streamjoin.runtime.checkpoint import Checkpoint

                outcome.join = observed_totals(progress)
                outcome.join["initial_rows_table"] = bootstrap_loaded(Checkpoint(os.path.join(scratch, "join")),
                                                                      self.params.partitions)
                if outcome.join["output_rows"] != outcome.output_rows:
                    outcome.notes.append(f"{variant}: the join's metrics count {outcome.join['output_rows']:,} "
                                         f"output rows, the sink {outcome.output_rows:,}")
            return outcome
        finally:
            shutil.rmtree(scratch, ignore_errors=True)


def _sink_rows(progress: Any) -> int:
    rows = progress["sink"].get("numOutputRows", -1)
    if rows is None or rows < 0:
        raise RuntimeError("the noop sink reported no output row count; cannot check the joins")
    return int(rows)


#: the join's totals the checks compare (summed over every micro-batch)
_TOTALS = ("output_rows", "matched", "input_rows_stream", "input_rows_table", "set_aside_rows_stream",
           "set_aside_rows_table", "released_by_grace", "late_rows_stream", "late_rows_table")


def _field(metrics: Any, name: str) -> int:
    """``metrics[name]`` as an int (a dict or a Row of observed metrics); 0 if absent or null."""
    try:
        value = metrics[name]
    except (KeyError, ValueError, IndexError):
        return 0
    return int(value or 0)


def observed_totals(progress: list[Any]) -> dict[str, int]:
    """The enrichment join's totals over every micro-batch of a query, from each batch's observed
    metrics (``streamjoin enrichment_join ...``; once a batch id); ``events_waiting`` from the last
    batch. Not from the commit records: those of all but the last ``retain_versions`` versions
    are pruned, the first version's (which loads the bootstrap) among them."""
    per_batch: dict[int, Any] = {}
    for p in progress:
        found = [m["metrics"] for name, m in (p["observedMetrics"] or {}).items()
                 if name.startswith("streamjoin enrichment_join ")]
        if found:
            per_batch.setdefault(int(p["batchId"]), found[0])
    total = {name: sum(_field(m, name) for m in per_batch.values()) for name in _TOTALS}
    total["events_waiting"] = _field(per_batch[max(per_batch)], "events_waiting") if per_batch else 0
    total["versions"] = len(per_batch)
    return total


def bootstrap_loaded(checkpoint: Any, partitions: int) -> int:
    """Rows of the bootstrap snapshot that the join's partitions loaded: the initial rows of input
    ``table`` of every partition whose first version took them (``cp.initial.used``)."""
    loaded = 0
    for p in range(partitions):
        if checkpoint.initial.used(p) is not None:
            rows = checkpoint.initial.read("table", p)
            loaded += 0 if rows is None else rows.num_rows
    return loaded


def join_summary(records: list[dict[str, Any]]) -> dict[str, int]:
    """Totals over the (version, partition) records given (all of them: records kept by the caller,
    not ``cp.commits.read_metrics``, which has only the retained versions); ``events_waiting`` and
    ``versions_held`` from each partition's last record."""
    total: dict[str, int] = {}
    for name in ("output_rows", "matched", "initial_rows_table", "input_rows_stream", "input_rows_table",
                 "set_aside_rows_stream", "set_aside_rows_table", "stale_changes", "released_by_grace",
                 "late_events", "late_changes"):
        total[name] = sum(int(r.get(name) or 0) for r in records)
    last: dict[int, dict[str, Any]] = {}
    for r in records:
        last[r["partition"]] = r
    for name in ("events_waiting", "versions_held"):
        total[name] = sum(int(r.get(name) or 0) for r in last.values())
    total["versions"] = len({r["version"] for r in records})
    return total


# -- report ------------------------------------------------------------------------------------

def summary_table(params: Params, results: dict[str, list[Outcome]]) -> Table:
    """One row a variant: median seconds, events/s, ratio to Spark's, output and waiting rows."""
    spark = statistics.median(o.seconds for o in results["spark-stream-static"]) \
        if "spark-stream-static" in results else None
    table = Table(["variant", "seconds", "of which build", "first batch s", "of which offsets", "events/s",
                   "spark s / s", "micro-batches", "output rows", "matched", "still waiting", "worker RSS MB"])
    for variant, outcomes in results.items():
        seconds = statistics.median(o.seconds for o in outcomes)
        build = statistics.median(o.build_seconds for o in outcomes)
        first = statistics.median(o.batch_seconds[0] if o.batch_seconds else 0.0 for o in outcomes)
        offsets = statistics.median(o.first_offsets for o in outcomes)
        last = outcomes[-1]
        ours = variant != "spark-stream-static"
        table.add(variant, seconds, build, first, offsets, params.events / seconds, spark / seconds if spark else "-",
                  last.batches, last.output_rows, last.join["matched"] if ours else "-",
                  last.join["events_waiting"] if ours else "-",
                  round(max(o.worker_rss for o in outcomes) / 2**20) if ours else "-")
    return table


def goal_table(results: dict[str, list[Outcome]]) -> Table:
    """The enrichment goal (:data:`streamjoin.bench.goals.GOALS`) beside the measured speed ratio
    (Spark's median seconds over :data:`GOAL_VARIANT`'s, bootstrap included), where both ran."""
    table = Table(["comparison", "speed ratio", "goal", "met"])
    if GOAL_VARIANT in results and "spark-stream-static" in results:
        ratio = statistics.median(o.seconds for o in results["spark-stream-static"]) / statistics.median(
            o.seconds for o in results[GOAL_VARIANT])
        for goal in (g for g in GOALS if g.bench == "enrichment"):
            table.add(f"{GOAL_VARIANT} vs spark-stream-static", ratio, goal.text(),
                      "yes" if goal.met_by(ratio) else "NO")
    return table


def problems(params: Params, results: dict[str, list[Outcome]]) -> list[str]:
    """A line per run whose output is not every event exactly once (a left join of existing keys)."""
    lines = []
    for variant, outcomes in results.items():
        for o in outcomes:
            if o.output_rows != params.events:
                lines.append(f"MISMATCH: {variant} output {o.output_rows:,} rows, expected {params.events:,}")
            j = o.join
            if j and (j["matched"] != o.output_rows or j["set_aside_rows_stream"] or j["set_aside_rows_table"]
                      or j["initial_rows_table"] != params.table_rows):
                lines.append(f"MISMATCH: {variant}: {j['matched']:,} matched, {j['set_aside_rows_stream']:,} "
                             f"events and {j['set_aside_rows_table']:,} changes set aside, "
                             f"{j['initial_rows_table']:,} snapshot rows loaded")
    return lines


def report(args: argparse.Namespace, params: Params, inputs: Inputs, results: dict[str, list[Outcome]]) -> int:
    repeat = len(next(iter(results.values())))
    print(f"{params.events:,} events ({RATE:,}/s, up to {DISORDER_US // 1_000_000} s out of order) against a "
          f"{params.table_rows:,}-row table (bootstrap snapshot) receiving {params.updates:,} updates, "
          f"{params.batches} micro-batches, delay {DELAY_S} s, left join, {params.partitions} partitions, "
          f"{'user-typed inputs (a Parquet snapshot read as it comes), ' if params.user_typed else ''}"
          f"medians of {repeat} run(s); load average {os.getloadavg()[0]:.2f}")
    print(summary_table(params, results).render())
    goals = goal_table(results)
    if goals.rows:
        print("\ngoal (the streamjoin run's seconds include building the join and writing the bootstrap):")
        print(goals.render())
    print(f"""
notes:
- spark-stream-static joins each micro-batch with a static copy of the table after all updates,
  re-read every batch: no event-time versioning, so every event gets the newest row. Here
  {inputs.stale_events:,} events ({100 * inputs.stale_events / max(params.events, 1):.1f}%) had their row updated after their time:
  the as-of join gives them the row as it was at their time, Spark the later one.
- streamjoin-<store> (as_of) writes the snapshot to its checkpoint while the query starts (a
  Spark job in a driver thread, which the first micro-batch waits for; "of which build" is the
  join's definition alone, "first batch s" the first micro-batch and "of which offsets" its wait
  for its offsets, the job's end), loads it in the first micro-batch, then applies the
  updates as they arrive; an event waits until the table's watermark (its newest change or
  heartbeat, less the delay) passes its time, so as-of runs {FLUSH_BATCHES} more micro-batch of one
  heartbeat, and the no-data micro-batch it lets the join run, to release the last batch's events
  ("still waiting": events left in state at the end).
- streamjoin-<store>-latest joins each event with the row as of its micro-batch's changes, at
  once (Spark's meaning, with the table kept in state instead of re-read).""")
    lines = [n for outcomes in results.values() for o in outcomes for n in o.notes] + problems(params, results)
    for line in lines:
        print(line)
    print("results:", write_results("enrichment", summary_table(params, results),
                                    vars(args) | {"stale_events": inputs.stale_events},
                                    chart=Chart(value="events/s", label=("variant",), title="enrichment events/s")))
    return 1 if any(line.startswith("MISMATCH") for line in lines) else 0


# -- running -----------------------------------------------------------------------------------

def _stores(text: str) -> list[str]:
    return parse_stores(text, STORES)


def _layouts(text: str) -> list[LayoutName]:
    chosen = [name.strip() for name in text.split(",") if name.strip()]
    if not chosen or any(name not in LAYOUTS for name in chosen):
        raise SystemExit(f"--layouts takes a comma-separated list of {', '.join(LAYOUTS)}, not {text!r}")
    return [layout for layout in LAYOUTS if layout in chosen]


def variants(args: argparse.Namespace) -> list[str]:
    layouts = _layouts(getattr(args, "layouts", DEFAULT_LAYOUT))
    return ([] if args.no_spark else ["spark-stream-static"]) \
        + [f"streamjoin-{s}" + ("" if layout == DEFAULT_LAYOUT else f"-{layout}") for s in _stores(args.stores)
           for layout in layouts] \
        + [f"streamjoin-{s}-latest" for s in _stores(args.latest)]


def run(args: argparse.Namespace) -> int:
    params = Params.from_args(args)
    chosen = variants(args)
    if not chosen:
        raise SystemExit("nothing to measure: give --stores or --latest, or drop --no-spark")
    started = time.perf_counter()
    inputs = generate(params)
    print(f"generated the inputs in {time.perf_counter() - started:.1f} s", flush=True)
    root = fresh_dir(results_dir(), "enrichment")
    try:
        if args.profile:
            stores = _stores(args.stores) or _stores(args.latest) or [DEFAULT_KIND]
            return profile(inputs, params, root, stores[0], "as_of" if _stores(args.stores) else "latest",
                           args.buckets, _layouts(args.layouts)[0])
        write_inputs(root, inputs, params.user_typed)
        write_warm_inputs(os.path.join(root, "warm"), inputs, user_typed=params.user_typed)
        spark = local_session(shuffle_partitions=params.partitions,
                              extra={"spark.sql.streaming.numRecentProgressUpdates": "1000"})
        memory = WorkerMemory()
        memory.start()
        try:
            for variant in chosen:  # every code path once, JIT-compiled before anything is timed
                Bench(spark, os.path.join(root, "warm"), params).measure(variant)
            bench = Bench(spark, root, params, memory)
            results: dict[str, list[Outcome]] = {v: [] for v in chosen}
            for i in range(args.repeat):
                for variant in rotated(chosen, i):   # each variant in every place in turn
                    outcome = bench.measure(variant)
                    results[variant].append(outcome)
                    print(f"run {i + 1}/{args.repeat} {variant}: {outcome.seconds:.2f} s (build "
                          f"{outcome.build_seconds:.2f} s; micro-batches "
                          f"{' '.join(f'{s:.1f}' for s in outcome.batch_seconds)}), {outcome.output_rows:,} rows",
                          flush=True)
            return report(args, params, inputs, results)
        finally:
            memory.stop()
            spark.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)


# -- profiling ---------------------------------------------------------------------------------

def profile(inputs: Inputs, params: Params, root: str, store: str, mode: str, buckets: int = 64,
            layout: LayoutName = DEFAULT_LAYOUT) -> int:
    """Run streamjoin's tasks for every version and partition in this process under cProfile
    (the first of ``--layouts``)."""
    import cProfile
    import pstats

    from streamjoin.runtime.bind import BoundQuery, bind_query
    from streamjoin.runtime.options import StateConfig
    from streamjoin.runtime.task import TaskInfo, run_task
    from streamjoin.statestore.warm import evict_all

    op = join_operator(mode, buckets, layout)
    checkpoint_dir = os.path.join(root, "join")

    def write_initial(bound: BoundQuery) -> dict[str, int]:
        for p, part in enumerate(_route(op.bootstrap_changes(inputs.snapshot), params.partitions)):
            bound.checkpoint.initial.write("table", p, part)
        return {"table": inputs.snapshot.num_rows}

    started = time.perf_counter()
    bound = bind_query(checkpoint_dir, op, params.partitions, write_initial=write_initial,
                       state=StateConfig(store=store, local_dir=os.path.join(root, "state")))
    checkpoint, config = bound.checkpoint, bound.state
    print(f"bound, bootstrap routed and written in {time.perf_counter() - started:.2f} s")
    versions = in_process_versions(inputs, mode)
    profiler, records = cProfile.Profile(time.process_time), []   # CPU seconds
    start, cpu = time.perf_counter(), time.process_time()
    for version, (events, changes) in enumerate(versions):
        t0 = time.perf_counter()
        parts = [_route(events, params.partitions), _route(changes, params.partitions)]
        for p in range(params.partitions):
            task = TaskInfo(version, p, params.partitions, query_id="profile")   # warm stores, as in a query
            result, metrics = profiler.runcall(run_task, op, checkpoint, config, task, (parts[0][p], parts[1][p]))
            records.append(metrics)
        print(f"version {version}: {time.perf_counter() - t0:.2f} s", flush=True)
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    evict_all()
    summary = join_summary(records)
    written = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(checkpoint_dir) for f in fs)
    last = {r["partition"]: r for r in records}
    print(f"checkpoint (changelogs, snapshots, initial rows): {written / 2**20:,.0f} MB written; store "
          f"(estimate) at the end: {sum(r.get('state_bytes', 0) for r in last.values()) / 2**20:,.0f} MB")
    print(f"streamjoin-{store} ({mode}) in process: {seconds:.2f} s ({cpu:.2f} s CPU), "
          f"{summary['output_rows']:,} output rows ({params.events:,} events), {summary['events_waiting']:,} "
          f"still waiting, {summary['matched']:,} matched")
    stats = pstats.Stats(profiler).sort_stats("cumulative")
    stats.print_stats(35)
    stats.sort_stats("tottime").print_stats(25)
    stats.print_callers("compute.py")
    return 0 if summary["output_rows"] == params.events else 1


def join_operator(mode: str, buckets: int = 64, layout: LayoutName = DEFAULT_LAYOUT) -> "EnrichmentJoin":
    """The benchmark's join as the in-process runs build it: events left-joined on ``user_id`` with
    the table's plain change stream in ``mode``, a watermark delay of ``DELAY_S``, in ``layout``."""
    from streamjoin.changes import ChangeFormat
    from streamjoin.enrichment.operator import EnrichmentJoin

    return EnrichmentJoin(EVENTS, CHANGES, "user_id", stream_time="ts",
                          changes=ChangeFormat.plain("user_id", time="changed_at"), mode=mode, how="left",
                          delay=datetime.timedelta(seconds=DELAY_S), buckets=buckets, layout=layout)


def _route(table: pa.Table, partitions: int) -> list[pa.Table]:
    """By ``user_id % partitions`` (a null key, a heartbeat, to partition 0): the runtime only
    needs equal keys together."""
    target = np.nan_to_num(table.column("user_id").to_numpy(zero_copy_only=False), nan=0).astype(np.int64) % partitions
    return [table.filter(pa.array(target == p)) for p in range(partitions)]
