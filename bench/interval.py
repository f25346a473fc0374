"""``streamjoin bench interval``: the interval join beside Spark's own stream-stream join.

Two event streams (``--rows`` in all, half a side, 1,000 rows a second a side, each row up to 5 s
earlier than its place in arrival order, keys drawn so that a row has about one match) are joined
on ``k`` with ``lt - W <= rt <= lt + W`` (W = ``--window`` seconds) in ``--batches`` micro-batches
(one Parquet file a side each), with a watermark delay of 10 s so that no row is late, by:

* ``spark-memory`` / ``spark-rocksdb``: Spark's stream-stream join (``withWatermark`` on both
  sides) with its in-memory (HDFS-backed) and its RocksDB state store provider, set per query and
  checked after it (the provider's own state files, and ``rocksdb*`` metrics in the progress);
  optionally ``spark-rocksdb-changelog``, RocksDB with changelog checkpointing (off by default);
* ``streamjoin-<store>``: :func:`streamjoin.interval_join` with each store;
* ``floor``: ``repartition(N, k)`` and a pass-through ``mapInArrow`` over the union of both inputs,
  what any Python operator pays (it outputs its input, not the join).

Every query writes to the ``noop`` sink, so all output rows are produced; the output rows are
counted from the sink's progress and must equal, for every join, the count of matching pairs
computed here with numpy. A background thread samples the resident memory (RSS) of the Python
workers of this process's Spark session (descendants whose command line runs ``pyspark.daemon``
or ``pyspark.worker``): ``RSS max`` is the largest single process, ``RSS sum`` all of them
(including the daemon; pages shared after fork are counted in each). Each query's fixed cost is
shown beside its micro-batches' seconds: ``start s`` from ``start()`` to the first micro-batch's
start, ``stop s`` from the last micro-batch's end to the query's end (from its progress events),
their sum ``fixed s``, and ``fixed - floor's s``. ``JVM CPU s`` and ``worker CPU s`` are the CPU
seconds Spark's JVM and its Python workers used from the query's start to its end
(:func:`spark_cpu_seconds`). ``--large-state`` joins with
a +/- 45 min window and prints, per micro-batch, the rows the join must hold and the workers' RSS.
Every variant first runs untimed over the first 3 micro-batches (the JVM compiles its code paths),
and before each run one batch of Spark's join and of streamjoin runs untimed (idle Python workers
exit after a minute; a run should not pay for starting them). ``--profile`` runs streamjoin's
partition tasks in this process under cProfile instead, to see where the time goes.
"""

from __future__ import annotations

import argparse
import datetime
import os
import shutil
import statistics
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from streamjoin.bench.harness import Chart, Table, resident_pages, results_dir, rotated, write_results
from streamjoin.bench.sparkutil import fixed_costs, fresh_dir, local_session, run_to_noop
from streamjoin.statestore.registry import DEFAULT_KIND

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from streamjoin.interval.operator import IntervalJoin
    from streamjoin.kit.how import IntervalHow

__all__ = ["add_arguments", "run"]

RATE = 1000                     # rows a second, a side
DISORDER_US = 5_000_000         # a row is up to this much earlier than its arrival order
DELAY_S = 10                    # watermark delay: more than the disorder, so nothing is late
EPOCH_US = 1_704_067_200_000_000  # 2024-01-01T00:00:00Z
_STATE = "org.apache.spark.sql.execution.streaming.state."
#: Spark variant -> (state store provider, RocksDB changelog checkpointing, a file it must write)
SPARK = {
    "spark-memory": (_STATE + "HDFSBackedStateStoreProvider", "false", ".delta"),
    "spark-rocksdb": (_STATE + "RocksDBStateStoreProvider", "false", ".zip"),
    "spark-rocksdb-changelog": (_STATE + "RocksDBStateStoreProvider", "true", ".changelog"),
}
#: the variant the goals read: the joins' default store
OURS = "streamjoin-arranged"
VARIANTS = ("spark-memory", "spark-rocksdb", OURS, "streamjoin-rocksdb", "streamjoin-lmdb", "streamjoin-memory", "floor")
OPTIONAL = ("spark-rocksdb-changelog",)
LARGE_VARIANTS = (OURS, "streamjoin-rocksdb", "spark-rocksdb")
LEFT, RIGHT = ("k", "lt", "lid", "lpay"), ("k", "rt", "rid", "rpay")
SCHEMAS = {"left": "k bigint, lt timestamp, lid bigint, lpay string",
           "right": "k bigint, rt timestamp, rid bigint, rpay string"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rows", type=int, help="input rows in all, half a side (default 2,000,000; "
                        "8,000,000 with --large-state)")
    parser.add_argument("--batches", type=int, help="micro-batches (default 10; 20 with --large-state)")
    parser.add_argument("--partitions", type=int, default=4, help="shuffle and state partitions (default 4)")
    parser.add_argument("--repeat", type=int, help="runs of each variant, interleaved (default 2; 1 with "
                        "--large-state)")
    parser.add_argument("--variants", help=f"comma-separated, from {','.join(VARIANTS + OPTIONAL)} "
                        f"(default {','.join(VARIANTS)}; {','.join(LARGE_VARIANTS)} with --large-state)")
    parser.add_argument("--window", type=float, help="W in seconds: rt within lt +/- W (default 5; 2700 "
                        "with --large-state)")
    parser.add_argument("--keys", type=int, help="distinct keys (default 1,000/s x 2W: about one match a row)")
    parser.add_argument("--large-state", action="store_true", help="a +/- 45 min window: millions of rows "
                        "held in state; prints worker memory per micro-batch")
    parser.add_argument("--profile", action="store_true", help="run streamjoin's tasks in this process "
                        "under cProfile (no Spark) and print where the time goes")


@dataclass(frozen=True)
class Params:
    """One benchmark's workload."""

    rows: int
    batches: int
    partitions: int
    window_us: int
    keys: int

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> "Params":
        rows = args.rows or (8_000_000 if args.large_state else 2_000_000)
        window = args.window if args.window is not None else (2700.0 if args.large_state else 5.0)
        keys = args.keys or max(1, round(RATE * 2 * window))
        batches = args.batches or (20 if args.large_state else 10)
        return cls(rows, batches, args.partitions, round(window * 1_000_000), keys)

    @property
    def per_side(self) -> int:
        return self.rows // 2


# -- inputs ------------------------------------------------------------------------------------

def side_table(params: Params, side: str) -> pa.Table:
    """One side's rows in arrival order: row i arrives at i ms, its event time up to 5 s earlier."""
    rng = np.random.default_rng(1 if side == "left" else 2)
    n = params.per_side
    ids = np.arange(n, dtype=np.int64)
    times = EPOCH_US + ids * (1_000_000 // RATE) - rng.integers(0, DISORDER_US + 1, n)
    names = LEFT if side == "left" else RIGHT
    return pa.table({
        names[0]: pa.array(rng.integers(0, params.keys, n), pa.int64()),
        names[1]: pa.array(times, pa.timestamp("us", tz="UTC")),
        names[2]: pa.array(ids + (0 if side == "left" else 1 << 40)),
        names[3]: pa.array(np.char.add(side[0], rng.integers(0, 1 << 40, n).astype(str)).tolist()),
    })


def write_inputs(root: str, tables: dict[str, pa.Table], batches: int) -> None:
    """One Parquet file a side per micro-batch, with increasing modification times (the file
    source takes the oldest files first)."""
    for side, table in tables.items():
        os.makedirs(os.path.join(root, side))
        per = table.num_rows // batches
        stamp = time.time() - batches
        for b in range(batches):
            path = os.path.join(root, side, f"part-{b:04d}.parquet")
            pq.write_table(table.slice(b * per, per), path)
            os.utime(path, (stamp + b, stamp + b))


def link_inputs(root: str, into: str, batches: int) -> None:
    """The first ``batches`` input files of each side, hard-linked (same times) under ``into``."""
    for side in ("left", "right"):
        os.makedirs(os.path.join(into, side))
        for name in sorted(os.listdir(os.path.join(root, side)))[:batches]:
            os.link(os.path.join(root, side, name), os.path.join(into, side, name))


def expected_pairs(tables: dict[str, pa.Table], params: Params) -> int:
    """Pairs with equal keys and ``lt - W <= rt <= lt + W``, counted on sorted ``(k, time)`` codes."""
    n, w = params.per_side // params.batches * params.batches, params.window_us
    times = {s: tables[s].column(1).cast(pa.int64()).to_numpy()[:n] for s in tables}
    base = min(t.min() for t in times.values()) - w
    span = max(t.max() for t in times.values()) + w + 1 - base
    if params.keys * span >= 1 << 62:
        raise ValueError("too many keys or too long a stream to count the pairs with int64 codes")
    def code(side: str, shift: int = 0) -> np.ndarray:
        return tables[side].column("k").to_numpy()[:n] * span + (times[side] - base + shift)
    right = np.sort(code("right"))
    hi = np.searchsorted(right, code("left", w), side="right")
    return int((hi - np.searchsorted(right, code("left", -w), side="left")).sum())


def rows_held(tables: dict[str, pa.Table], params: Params) -> list[int]:
    """Per micro-batch, the rows a join must hold after it: left rows with ``lt + W`` and right
    rows with ``rt + W`` at or above the watermark (largest time before the batch, less the delay)."""
    per = params.per_side // params.batches
    times = {s: tables[s].column(1).cast(pa.int64()).to_numpy()[: per * params.batches] for s in tables}
    held, watermark = [], None
    for b in range(params.batches):
        if b:
            w = min(times[s][: b * per].max() for s in times) - DELAY_S * 1_000_000
            watermark = w if watermark is None else max(watermark, w)
        seen = [times[s][: (b + 1) * per] + params.window_us for s in times]
        held.append(sum(int((t >= watermark).sum()) if watermark is not None else t.size for t in seen))
    return held


# -- worker memory -----------------------------------------------------------------------------

class WorkerMemory(threading.Thread):
    """Samples the RSS of this process's PySpark workers every ``interval`` seconds."""

    def __init__(self, interval: float = 0.2) -> None:
        super().__init__(daemon=True)
        self.interval = interval
        self.samples: list[tuple[float, int, int]] = []  # (wall time, max bytes, sum bytes)
        self.anon: list[tuple[float, int]] = []           # (wall time, the largest worker's anonymous bytes)
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.wait(self.interval):
            pages = [resident_pages(pid) for pid in _workers(os.getpid())]
            sizes = [resident for resident, _ in pages]
            now = time.time()
            self.samples.append((now, max(sizes, default=0), sum(sizes)))
            self.anon.append((now, max((resident - shared for resident, shared in pages), default=0)))

    def stop(self) -> "WorkerMemory":
        self._stop_event.set()
        self.join()
        return self

    def peak(self, start: float = 0.0, end: float = float("inf")) -> tuple[int, int]:
        """Largest (max, sum) RSS in bytes among the samples taken in ``[start, end]``."""
        inside = [(m, s) for t, m, s in self.samples if start <= t <= end]
        return max((m for m, _ in inside), default=0), max((s for _, s in inside), default=0)

    def peak_anon(self, start: float = 0.0, end: float = float("inf")) -> int:
        """The largest worker's largest anonymous resident memory (resident less the pages of
        mapped files, which the operating system can drop) in ``[start, end]``, in bytes."""
        return max((a for t, a in self.anon if start <= t <= end), default=0)


class SparkCpu(threading.Thread):
    """Samples :func:`spark_cpu_seconds` every ``interval`` seconds, so that the CPU Spark's JVM
    and its Python workers used within a span of wall-clock time (a query's micro-batches, from
    its progress events) can be read after the query: :meth:`between`."""

    def __init__(self, interval: float = 0.25) -> None:
        super().__init__(daemon=True)
        self.interval = interval
        self.samples: list[tuple[float, float, float]] = []   # (wall time, JVM s, workers' s)
        self._stop_event = threading.Event()
        self.sample()

    def sample(self) -> None:
        jvm, python = spark_cpu_seconds()
        self.samples.append((time.time(), jvm, python))

    def run(self) -> None:
        while not self._stop_event.wait(self.interval):
            self.sample()

    def stop(self) -> "SparkCpu":
        self._stop_event.set()
        self.join()
        return self

    def between(self, start: float, end: float) -> tuple[float, float]:
        """(JVM, workers') CPU seconds used from ``start`` to ``end`` (wall-clock seconds), each
        reading interpolated between the samples around it. A process that ended in between (a
        query's JVM stopped) is not seen: read the span while the processes run."""
        def at(when: float) -> tuple[float, float]:
            before = max((s for s in self.samples if s[0] <= when), default=self.samples[0])
            after = min((s for s in self.samples if s[0] >= when), default=self.samples[-1])
            share = 0.0 if after[0] == before[0] else (when - before[0]) / (after[0] - before[0])
            return (before[1] + share * (after[1] - before[1]), before[2] + share * (after[2] - before[2]))
        (j0, p0), (j1, p1) = at(start), at(end)
        return j1 - j0, p1 - p0


def spark_cpu_seconds(root: int | None = None) -> tuple[float, float]:
    """CPU seconds (user + system) used so far by the local Spark started from process ``root``
    (default: this one): its JVM (a ``java`` descendant), and its PySpark Python workers (each
    daemon's own time and that of the workers it has reaped, plus every live worker's). The
    difference of two readings is what Spark's two halves used in between: a worker that ended in
    between is counted in its daemon's reaped time."""
    tick = os.sysconf("SC_CLK_TCK")
    found = _descendants(os.getpid() if root is None else root)
    cmdlines = {pid: _cmdline(pid) for pid in found}
    pythons = {pid for pid, cmdline in cmdlines.items() if _is_pyspark(cmdline)}
    jvm = python = 0.0
    for pid, fields in found.items():
        own = (int(fields[11]) + int(fields[12])) / tick        # utime, stime
        reaped = (int(fields[13]) + int(fields[14])) / tick     # cutime, cstime
        if pid in pythons:
            python += own + (reaped if int(fields[1]) not in pythons else 0.0)   # a daemon reaps its workers
        elif cmdlines[pid].split(b"\0", 1)[0].endswith(b"java"):
            jvm += own
    return jvm, python


def _stat(pid: int) -> list[str] | None:
    """``/proc/<pid>/stat``'s fields after the command name (index 1: the parent's pid)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].decode().split()
    except (OSError, IndexError):
        return None


def _cmdline(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read()
    except OSError:
        return b""


def _is_pyspark(cmdline: bytes) -> bool:
    return b"pyspark.daemon" in cmdline or b"pyspark.worker" in cmdline


def _descendants(root: int) -> dict[int, list[str]]:
    """``root``'s descendants, each pid with its ``/proc/<pid>/stat`` fields (one scan of ``/proc``)."""
    read = {int(name): _stat(int(name)) for name in os.listdir("/proc") if name.isdigit()}
    stats = {pid: fields for pid, fields in read.items() if fields is not None}   # (gone since listed: none)
    children: dict[int, list[int]] = {}
    for pid, fields in stats.items():
        children.setdefault(int(fields[1]), []).append(pid)
    found: dict[int, list[str]] = {}
    stack = list(children.get(root, []))
    while stack:
        pid = stack.pop()
        found[pid] = stats[pid]
        stack.extend(children.get(pid, []))
    return found


def _workers(root: int) -> list[int]:
    """Descendants of ``root`` running a PySpark daemon or worker."""
    return [pid for pid in _descendants(root) if _is_pyspark(_cmdline(pid))]


def executor_jvms(root: int) -> list[int]:
    """Descendants of ``root`` (a standalone cluster's worker) that are Spark executor JVMs, ascending."""
    return sorted(pid for pid in _descendants(root) if b"CoarseGrainedExecutorBackend" in _cmdline(pid))


def task_workers(root: int) -> list[int]:
    """Descendants of ``root`` that are PySpark Python workers running tasks: the processes a
    worker daemon forked (the same command line as their parent), not the daemons themselves."""
    found = _descendants(root)
    cmdlines = {pid: _cmdline(pid) for pid in found}
    return [pid for pid, fields in found.items()
            if b"pyspark.worker" in cmdlines[pid] and cmdlines.get(int(fields[1])) == cmdlines[pid]]


# -- variants ----------------------------------------------------------------------------------

@dataclass
class Outcome:
    """What one run of one variant measured."""

    seconds: float
    output_rows: int
    rss: tuple[int, int]
    start_seconds: float = 0.0  # fixed cost: from start() to the first micro-batch's start
    stop_seconds: float = 0.0   # fixed cost: from the last micro-batch's end to the query's end
    jvm_cpu: float = 0.0        # CPU seconds of Spark's JVM during the run (its start and stop too)
    worker_cpu: float = 0.0     # and of its Python workers
    batches: list[dict[str, Any]] = field(default_factory=list)
    join_metrics: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def batch_seconds(self) -> float:
        """Seconds in the query's micro-batches (Spark's ``triggerExecution``), without its start."""
        return sum(b["seconds"] for b in self.batches)


class Bench:
    """Builds and times each variant's streaming query over the inputs under ``root``; ``how``,
    ``delay_s`` and ``files_per_trigger`` (None: all new files) are the joins' (the latency
    benchmark sets its own)."""

    how: IntervalHow = "inner"
    delay_s = DELAY_S
    files_per_trigger: int | None = 1

    def __init__(self, spark: SparkSession, root: str, params: Params) -> None:
        self.spark, self.root, self.params = spark, root, params

    def source(self, side: str, watermark: bool = False) -> DataFrame:
        reader = self.spark.readStream.schema(SCHEMAS[side])
        if self.files_per_trigger is not None:
            reader = reader.option("maxFilesPerTrigger", self.files_per_trigger)
        df = reader.parquet(os.path.join(self.root, side))
        return df.withWatermark(df.columns[1], f"{self.delay_s} seconds") if watermark else df

    def spark_join(self, variant: str, scratch: str) -> DataFrame:
        from pyspark.sql import functions as F

        provider, changelog, _ = SPARK[variant]
        self.spark.conf.set("spark.sql.streaming.stateStore.providerClass", provider)
        self.spark.conf.set("spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled", changelog)
        left, right = self.source("left", watermark=True), self.source("right", watermark=True)
        w = F.expr(f"INTERVAL {self.params.window_us} MICROSECONDS")
        condition = (left.k == right.k) & (right.rt >= left.lt - w) & (right.rt <= left.lt + w)
        return left.join(right, condition, self.how).select(left.k, *LEFT[1:], *RIGHT[1:])

    def streamjoin(self, variant: str, scratch: str) -> DataFrame:
        from streamjoin import interval_join

        window = datetime.timedelta(microseconds=self.params.window_us)
        return interval_join(
            self.source("left"), self.source("right"), "k", left_time="lt", right_time="rt",
            lower=-window, upper=window, delay=datetime.timedelta(seconds=self.delay_s), how=self.how,
            store=variant.split("-", 1)[1], checkpoint=os.path.join(scratch, "join"),
            partitions=self.params.partitions, state_dir=os.path.join(scratch, "state"),
        )

    def floor(self, variant: str, scratch: str) -> DataFrame:
        def rename(df: DataFrame) -> DataFrame:
            return df.toDF("k", "t", "id", "payload")
        both = rename(self.source("left")).unionByName(rename(self.source("right")))
        return both.repartition(self.params.partitions, "k").mapInArrow(_pass_through, both.schema)

    def warm_up(self) -> None:
        """Run the JVM's join and streamjoin in the Python workers (imports loaded) on one batch:
        idle workers exit after a minute, and a variant should not pay for starting them."""
        from streamjoin import interval_join

        def read(side: str) -> DataFrame:
            return self.spark.read.parquet(os.path.join(self.root, side, "part-0000.parquet"))
        left, right = read("left"), read("right")
        left.join(right, "k").write.format("noop").mode("overwrite").save()
        scratch = fresh_dir(self.root, "warm")
        second = datetime.timedelta(seconds=1)
        interval_join(left, right, "k", left_time="lt", right_time="rt", lower=-second, upper=second,
                      delay=second, checkpoint=os.path.join(scratch, "join"),
                      state_dir=os.path.join(scratch, "state")).write.format("noop").mode("overwrite").save()
        shutil.rmtree(scratch, ignore_errors=True)

    def measure(self, variant: str) -> Outcome:
        """Run ``variant`` once from a new checkpoint; remove its checkpoint and state after."""
        build = self.spark_join if variant in SPARK else self.floor if variant == "floor" else self.streamjoin
        self.warm_up()
        os.sync()  # the previous run's writes are not flushed on this run's time
        scratch = fresh_dir(self.root, "run")
        memory = WorkerMemory()
        memory.start()
        try:
            cpu = spark_cpu_seconds()
            wall, start = time.time(), time.perf_counter()
            query = run_to_noop(build(variant, scratch), scratch, variant)
            seconds = time.perf_counter() - start
            used = tuple(after - before for after, before in zip(spark_cpu_seconds(), cpu))
            memory.stop()
            outcome = self._outcome(variant, query.recentProgress, seconds, memory.peak(wall), scratch, memory)
            outcome.start_seconds, outcome.stop_seconds = fixed_costs(wall, wall + seconds, query.recentProgress)
            outcome.jvm_cpu, outcome.worker_cpu = used
            return outcome
        finally:
            if memory.is_alive():
                memory.stop()
            shutil.rmtree(scratch, ignore_errors=True)

    def _outcome(self, variant: str, progress: list[Any], seconds: float, rss: tuple[int, int],
                 scratch: str, memory: WorkerMemory) -> Outcome:
        outcome = Outcome(seconds, sum(_sink_rows(p) for p in progress), rss)
        for p in progress:
            start = datetime.datetime.fromisoformat(p["timestamp"].replace("Z", "+00:00")).timestamp()
            end = start + p["durationMs"].get("triggerExecution", 0) / 1000
            outcome.batches.append({"batch": p["batchId"], "input_rows": p["numInputRows"],
                                    "seconds": end - start, "rss": memory.peak(start, end)})
        if variant in SPARK:
            outcome.notes += _check_spark(variant, progress, os.path.join(scratch, "spark", "state"))
        elif variant != "floor":
            from streamjoin.runtime.checkpoint import Checkpoint

            outcome.join_metrics = Checkpoint(os.path.join(scratch, "join")).commits.read_metrics()
            outcome.notes += _check_streamjoin(variant, outcome)
        return outcome


def _pass_through(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    yield from batches


def _sink_rows(progress: Any) -> int:
    rows = progress["sink"].get("numOutputRows", -1)
    if rows is None or rows < 0:
        raise RuntimeError("the noop sink reported no output row count; cannot check the joins")
    return int(rows)


def _check_spark(variant: str, progress: list[Any], state_dir: str) -> list[str]:
    """Refuse a run whose state files or metrics show another provider; note dropped rows."""
    operators = [op for p in progress for op in p["stateOperators"]]
    rocksdb = any(key.startswith("rocksdb") for op in operators for key in op.get("customMetrics", {}))
    suffix = SPARK[variant][2]
    written = any(f.endswith(suffix) for _, _, files in os.walk(state_dir) for f in files)
    if not written or rocksdb != ("rocksdb" in variant):
        raise RuntimeError(f"{variant} did not run with the state store asked for: no {suffix} state "
                           f"files, or RocksDB metrics {'present' if rocksdb else 'absent'}")
    dropped = sum(op.get("numRowsDroppedByWatermark", 0) for op in operators)
    return [f"{variant}: {dropped:,} input rows dropped by the watermark"] if dropped else []


def _check_streamjoin(variant: str, outcome: Outcome) -> list[str]:
    """Cross-check the sink's count with the join's own metrics; note rows set aside."""
    records = outcome.join_metrics
    notes = []
    out = sum(r.get("output_rows", 0) for r in records)
    if out != outcome.output_rows:
        notes.append(f"{variant}: the join's metrics count {out:,} output rows, the sink {outcome.output_rows:,}")
    aside = sum(v for r in records for k, v in r.items() if k.startswith("set_aside_rows_"))
    if aside:
        notes.append(f"{variant}: {aside:,} rows set aside (late)")
    return notes


# -- report ------------------------------------------------------------------------------------

def _mb(value: int) -> float:
    return value / (1 << 20)


def summary_table(params: Params, results: dict[str, list[Outcome]], expected: int) -> Table:
    """One row a variant: median seconds, rows/s, output rows, floor ratio, worker memory, the
    query's fixed cost (start: before its first micro-batch; stop: after its last) beside the
    floor's, and the CPU seconds Spark's JVM and its Python workers used in the run."""
    def median(outcomes: list[Outcome], field: str) -> float:
        return statistics.median(getattr(o, field) for o in outcomes)
    floor = median(results["floor"], "seconds") if "floor" in results else None
    floor_batches = median(results["floor"], "batch_seconds") if "floor" in results else None
    floor_fixed = (median(results["floor"], "start_seconds") + median(results["floor"], "stop_seconds")
                   if "floor" in results else None)
    table = Table(["variant", "seconds", "rows/s", "output rows", "floor s / s", "batches s", "floor batches / batches",
                   "RSS max MB", "RSS sum MB", "start s", "stop s", "fixed s", "fixed - floor's s",
                   "JVM CPU s", "worker CPU s"])
    for variant, outcomes in results.items():
        seconds = median(outcomes, "seconds")
        batches = median(outcomes, "batch_seconds")
        start, stop = median(outcomes, "start_seconds"), median(outcomes, "stop_seconds")
        python = not variant.startswith("spark-")
        rss = tuple(max(o.rss[i] for o in outcomes) for i in (0, 1))
        table.add(variant, seconds, params.rows / seconds, outcomes[-1].output_rows,
                  floor / seconds if floor else "-", batches, floor_batches / batches if floor_batches else "-",
                  _mb(rss[0]) if python else "-", _mb(rss[1]) if python else "-",
                  start, stop, start + stop, start + stop - floor_fixed if floor_fixed is not None else "-",
                  median(outcomes, "jvm_cpu"), median(outcomes, "worker_cpu"))
    table.add("(expected pairs)", "-", "-", expected, *["-"] * 11)
    return table


#: The comparisons printed after a run: (ours, theirs); ratio = their seconds / our seconds.
COMPARISONS = (
    (OURS, "spark-rocksdb"),
    (OURS, "spark-memory"),
    (OURS, "floor"),
    ("streamjoin-rocksdb", "spark-rocksdb"),
    ("streamjoin-rocksdb", "floor"),
    ("streamjoin-memory", "spark-memory"),
    (OURS, "spark-rocksdb-changelog"),
)


def _targets() -> dict[str, float]:
    """The goal of ``OURS`` against each variant, from the one place goals are kept
    (:mod:`streamjoin.bench.goals`): by the variant whose seconds a ratio goal divides, and the
    floor's by its ``floor s / s`` cell."""
    from streamjoin.bench.goals import GOALS, Cell, Ratio

    found: dict[str, float] = {}
    for goal in GOALS:
        if goal.bench != "interval":
            continue
        if isinstance(goal.reads, Ratio) and goal.reads.under.get("variant") == OURS:
            found[str(goal.reads.over["variant"])] = goal.target
        elif isinstance(goal.reads, Cell) and goal.reads.column == "floor s / s":
            found["floor"] = goal.target
    return found


def goals_table(results: dict[str, list[Outcome]]) -> Table:
    """Speed ratios (their seconds / our seconds) where both ran, beside ``OURS``'s goals."""
    targets = _targets()
    table = Table(["comparison", "speed ratio", "goal", "met"])
    for ours, theirs in COMPARISONS:
        if ours in results and theirs in results:
            ratio = statistics.median(o.seconds for o in results[theirs]) / statistics.median(
                o.seconds for o in results[ours])
            goal = targets.get(theirs) if ours == OURS else None
            met = "-" if goal is None else "yes" if ratio >= goal else "NO"
            table.add(f"{ours} vs {theirs}", ratio, "-" if goal is None else f">= {goal:g}", met)
    return table


def batches_table(outcome: Outcome, held: list[int]) -> Table:
    """Per micro-batch of one streamjoin run: rows held, store size, worker RSS."""
    by_version: dict[int, int] = {}
    for record in outcome.join_metrics:
        by_version[record["version"]] = by_version.get(record["version"], 0) + record.get("state_bytes", 0)
    table = Table(["batch", "input rows", "rows held", "store MB (est.)", "seconds", "RSS max MB", "RSS sum MB"])
    for b in outcome.batches:
        if b["input_rows"]:
            i = b["batch"]
            table.add(i, b["input_rows"], held[i] if i < len(held) else "-", _mb(by_version.get(i, 0)),
                      b["seconds"], _mb(b["rss"][0]), _mb(b["rss"][1]))
    return table


def counts_agree(results: dict[str, list[Outcome]], expected: int) -> list[str]:
    """A line per join run whose output row count differs from the expected pairs."""
    return [f"MISMATCH: {variant} output {o.output_rows:,} rows, expected {expected:,} pairs"
            for variant, outcomes in results.items() if variant != "floor"
            for o in outcomes if o.output_rows != expected]


# -- running -----------------------------------------------------------------------------------

def _variants(args: argparse.Namespace) -> list[str]:
    chosen = args.variants.split(",") if args.variants else list(LARGE_VARIANTS if args.large_state else VARIANTS)
    unknown = sorted(set(chosen) - set(VARIANTS) - set(OPTIONAL))
    if unknown:
        raise SystemExit(f"unknown variants {unknown}; choose from {','.join(VARIANTS + OPTIONAL)}")
    return chosen


def run(args: argparse.Namespace) -> int:
    params = Params.from_args(args)
    variants = _variants(args)
    repeat = args.repeat or (1 if args.large_state else 2)
    root = fresh_dir(results_dir(), "interval")
    try:
        tables = {side: side_table(params, side) for side in ("left", "right")}
        expected = expected_pairs(tables, params)
        if args.profile:
            stores = [v.split("-", 1)[1] for v in variants if v.startswith("streamjoin-")]
            return profile(tables, params, root, stores[0] if stores else DEFAULT_KIND, expected)
        write_inputs(root, tables, params.batches)
        held = rows_held(tables, params)
        del tables
        spark = local_session(shuffle_partitions=params.partitions,
                              extra={"spark.sql.streaming.numRecentProgressUpdates": "1000"})
        try:
            link_inputs(root, os.path.join(root, "warm"), 3)
            for variant in variants:  # every code path once, JIT-compiled before anything is timed
                Bench(spark, os.path.join(root, "warm"), params).measure(variant)
            bench = Bench(spark, root, params)
            results: dict[str, list[Outcome]] = {v: [] for v in variants}
            for i in range(repeat):
                for variant in rotated(variants, i):   # each variant in every place in turn
                    results[variant].append(bench.measure(variant))
            return report(args, params, results, expected, held)
        finally:
            spark.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)


def report(args: argparse.Namespace, params: Params, results: dict[str, list[Outcome]], expected: int, held: list[int]) -> int:
    """Print the tables and notes; return 1 when a join's output count is wrong."""
    print(f"{params.rows:,} rows ({params.per_side:,} a side, {RATE:,}/s a side, up to "
          f"{DISORDER_US // 1_000_000} s out of order), {params.keys:,} keys, window +/- "
          f"{params.window_us / 1e6:g} s, delay {DELAY_S} s, {params.batches} micro-batches, "
          f"{params.partitions} partitions, medians of {len(next(iter(results.values())))} run(s)")
    summary = summary_table(params, results, expected)
    print(summary.render())
    goals = goals_table(results)
    if goals.rows:
        print()
        print(goals.render())
    for variant in ("streamjoin-rocksdb", "streamjoin-arranged", "streamjoin-lmdb", "streamjoin-memory"):
        if args.large_state and variant in results:
            print(f"\n{variant}, per micro-batch (rows held: what the join's definition keeps; store MB: "
                  "the store's own estimate, summed over partitions; RSS: peak during the batch)")
            print(batches_table(results[variant][-1], held).render())
    problems = counts_agree(results, expected)
    for line in [n for outcomes in results.values() for o in outcomes for n in o.notes] + problems:
        print(line)
    name = "interval-large" if args.large_state else "interval"
    print("results:", write_results(name, summary, vars(args) | {"func": None, "expected": expected},
                                    chart=Chart(value="rows/s", label=("variant",), title=f"{name} join rows/s")))
    return 1 if problems else 0


# -- profiling ---------------------------------------------------------------------------------

def profile(tables: dict[str, pa.Table], params: Params, root: str, store: str, expected: int) -> int:
    """Run streamjoin's tasks for every batch and partition in this process under cProfile."""
    import cProfile
    import pstats

    from streamjoin.runtime.bind import bind_query
    from streamjoin.runtime.options import StateConfig
    from streamjoin.runtime.task import TaskInfo, run_task

    op = join_operator(tables, params)
    bound = bind_query(os.path.join(root, "join"), op, params.partitions,
                       state=StateConfig(store=store, local_dir=os.path.join(root, "state")))
    checkpoint, config = bound.checkpoint, bound.state
    per = params.per_side // params.batches
    profiler, output = cProfile.Profile(), 0
    start = time.perf_counter()
    for version in range(params.batches):
        parts = [_route(t.slice(version * per, per), params.partitions) for t in tables.values()]
        for p in range(params.partitions):
            task = TaskInfo(version, p, params.partitions, query_id="profile")   # as a streaming query's
            result, _ = profiler.runcall(run_task, op, checkpoint, config, task, (parts[0][p], parts[1][p]))
            output += result.num_rows
    print(f"streamjoin-{store} in process: {time.perf_counter() - start:.2f} s, {output:,} output rows "
          f"({expected:,} expected)")
    stats = pstats.Stats(profiler).sort_stats("cumulative")
    stats.print_stats(30)
    stats.sort_stats("tottime").print_stats(20)
    return 0 if output == expected else 1


def join_operator(tables: dict[str, pa.Table], params: Params) -> "IntervalJoin":
    """The benchmark's join as the in-process runs build it: ``tables``' sides on ``k``, rt within
    lt +/- the window, a watermark delay of ``DELAY_S``."""
    from streamjoin.interval.operator import IntervalJoin

    window = datetime.timedelta(microseconds=params.window_us)
    return IntervalJoin(tables["left"].schema, tables["right"].schema, "k", left_time="lt", right_time="rt",
                        lower=-window, upper=window, delay=datetime.timedelta(seconds=DELAY_S))


def _route(table: pa.Table, partitions: int) -> list[pa.Table]:
    target = table.column("k").to_numpy() % partitions
    return [table.filter(pa.array(target == p)) for p in range(partitions)]
