"""``streamjoin bench latency``: how long a row the watermark releases takes to reach the sink.

A left outer interval join (``lt - W <= rt <= lt + W``, W = 1 s, watermark delay 2 s) emits an
unmatched left row, null-padded, once the watermark passes ``lt + W``; the watermark of a
micro-batch is ``min(largest left time, largest right time) - delay`` over the micro-batches
before it (streamjoin's and Spark's rule), so the release comes in a micro-batch after the one
that read the input that moved the watermark. The benchmark measures, per released row, the delay
from "the input that moves the watermark past the row's window is available" to "the row is in
the sink", in wall-clock seconds and in micro-batches.

The inputs are ``--steps`` steps of ``--rows / 2 / steps`` rows a side (one Parquet file a side
a step; step ``s`` holds the event times ``s * 10 s`` to ``(s + 1) * 10 s``; keys drawn so that
about a third of the left rows have no match). A step is made available by moving its two files
into the file sources' directories; the time of that move is recorded. The queries run with
``trigger(processingTime=--interval)`` and write through ``foreachBatch``, which records the time
it has each batch's null-padded rows on the driver. Which step's watermark releases a row is
computed from the inputs (:func:`step_watermarks`, :func:`release_step`); which micro-batch read a
step, from the query's progress (the file sources' input rows, :func:`read_batches`). Then, per
row, ``seconds = written - available`` and ``batches = writing batch - reading batch`` (1: the
micro-batch right after the one that read the step), as :func:`latencies`.

Two ways of feeding the same steps, each a run of each variant:

* ``traffic``: a step every ``--interval`` seconds, on both inputs; a row released by a step that
  another step follows comes out in a micro-batch with data (the last step's rows are not counted);
* ``quiet``: after each step, no input gets data until the rows that step releases are in the sink
  (the right input, whose watermark is the join's, is quiet after its last rows, and so is the
  left): the release needs a micro-batch without data, which streamjoin's flush ticks start
  (docs/design/runtime.md, "No-data flush") and Spark starts for its own join.

Variants (``--variants``): ``streamjoin-<store>`` (:func:`streamjoin.interval_join`, ``how="left"``)
and ``spark-memory`` / ``spark-rocksdb`` (Spark's stream-stream left outer join with
``withWatermark`` on both inputs and the same time bounds: the query of ``streamjoin bench
interval``). Step 0 starts each query and is not counted (it pays the query's start). The table
shows, per variant and feeding, the rows measured, the median and 95th percentile (nearest rank)
of the seconds, the median and largest number of micro-batches, the share of rows released in a micro-batch
that read input rows (``with data``: near 1 with traffic, 0 when quiet), Spark's median over ours
for the same feeding (``spark s / s``: 1 or more means no slower), the 1-minute load average
as the run ended (latency on a busy machine says little), and for a streamjoin variant the
largest PySpark Python worker's peak resident memory over its runs (``worker RSS MB``).
"""

from __future__ import annotations

import argparse
import bisect
import math
import os
import shutil
import statistics
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from streamjoin.bench.harness import Chart, Table, results_dir, rotated, write_results
from streamjoin.bench.interval import LEFT, RIGHT, SPARK, Bench, Params, WorkerMemory
from streamjoin.bench.sparkutil import fresh_dir, local_session
from streamjoin.jobs.common import help_text

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from streamjoin.kit.how import IntervalHow

__all__ = ["add_arguments", "run", "step_watermarks", "release_step", "read_batches", "latencies", "Latency",
           "Written", "summary", "latency_table", "FEEDINGS"]

EPOCH_US = 1_704_067_200_000_000  # 2024-01-01T00:00:00Z
STEP_US = 10_000_000              # event time a step covers
WINDOW_US = 1_000_000             # W: rt within lt +/- W
DELAY_S = 2                       # watermark delay
FEEDINGS = ("traffic", "quiet")
VARIANTS = ("streamjoin-arranged", "spark-rocksdb")
#: The variants ``--variants`` may name.
CHOICES = ("streamjoin-rocksdb", "streamjoin-arranged", "streamjoin-lmdb", "streamjoin-memory", "spark-rocksdb", "spark-memory")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = help_text(__doc__ or "")
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("--rows", type=int, default=4000, help="input rows in all, half a side (default 4,000)")
    parser.add_argument("--steps", type=int, default=8, help="steps, one file a side each (default 8; step 0 "
                        "starts the query and is not counted)")
    parser.add_argument("--interval", type=float, default=1.0, help="seconds: the trigger interval, and between "
                        "two steps with traffic (default 1)")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each variant and feeding; the rows of all "
                        "runs are pooled (default 1)")
    parser.add_argument("--partitions", type=int, default=2, help="shuffle and state partitions (default 2)")
    parser.add_argument("--variants", default=",".join(VARIANTS), help=f"comma-separated, from {', '.join(CHOICES)} "
                        f"(default {','.join(VARIANTS)})")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for a step's rows before "
                        "giving up on the run (default 120)")


# -- what is measured (pure functions over the inputs and the recorded times) ------------------

def step_watermarks(left_max: Sequence[int], right_max: Sequence[int], delay_us: int) -> list[int]:
    """The join's watermark once steps ``0..s`` are read, for each ``s``: ``min(largest left time,
    largest right time) - delay`` (``left_max[s]``: the largest left time in step ``s``)."""
    out, left, right = [], -math.inf, -math.inf
    for lm, rm in zip(left_max, right_max):
        left, right = max(left, lm), max(right, rm)
        out.append(int(min(left, right) - delay_us))
    return out


def release_step(time_us: int, upper_us: int, watermarks: Sequence[int]) -> int | None:
    """The first step whose watermark passes an unmatched left row's window (``watermark > t +
    upper``), or None when no step's does (``watermarks`` never decrease)."""
    s = bisect.bisect_right(watermarks, time_us + upper_us)
    return s if s < len(watermarks) else None


def read_batches(progress: Sequence[tuple[int, int, int]], per_step: int, steps: int) -> dict[int, int]:
    """Which micro-batch read each step: ``progress`` is ``(batch id, left input rows, right input
    rows)`` per micro-batch; a step is read by the first micro-batch after which both inputs' rows so
    far reach the end of that step (``per_step`` rows a side a step)."""
    read, left, right, step = {}, 0, 0, 0
    for batch, left_rows, right_rows in sorted(progress):
        left, right = left + left_rows, right + right_rows
        while step < steps and min(left, right) >= (step + 1) * per_step:
            read[step] = batch
            step += 1
    return read


@dataclass(frozen=True)
class Written:
    """A released row as the sink saw it: its id, the micro-batch that wrote it, when (epoch s)."""

    row: int
    batch: int
    at: float


@dataclass(frozen=True)
class Latency:
    """One row's delay: wall-clock seconds, and micro-batches after the one that read its step;
    ``with_data``: the micro-batch that wrote it read input rows."""

    seconds: float
    batches: int
    with_data: bool = True


def latencies(written: Sequence[Written], release: Mapping[int, int], available: Mapping[int, float],
              read: Mapping[int, int], counted: set[int], data_batches: set[int]) -> list[Latency]:
    """The delay of each written row whose release step (``release``: row -> step) is in ``counted``:
    from the step's ``available`` time to the row's, and from the micro-batch that ``read`` the step
    to the row's; whether the row's micro-batch is one of ``data_batches`` (those that read rows)."""
    out = []
    for w in written:
        step = release.get(w.row)
        if step in counted:
            out.append(Latency(w.at - available[step], w.batch - read[step], w.batch in data_batches))
    return out


def _p95(values: Sequence[float]) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]


def summary(measured: Sequence[Latency]) -> tuple[int, float, float, float, int, float]:
    """(rows, median seconds, 95th percentile seconds (nearest rank), median micro-batches, largest
    micro-batches, the share released in a micro-batch with data); raises ValueError when nothing
    was measured."""
    if not measured:
        raise ValueError("no released row was measured: raise --rows or --steps")
    seconds, batches = [m.seconds for m in measured], [m.batches for m in measured]
    share = sum(m.with_data for m in measured) / len(measured)
    return len(measured), statistics.median(seconds), _p95(seconds), statistics.median(batches), max(batches), share


def latency_table(results: Mapping[tuple[str, str], Sequence[Latency]], loads: Mapping[tuple[str, str], float],
                  rss: Mapping[tuple[str, str], int] | None = None) -> Table:
    """One row per (variant, feeding): :func:`summary`, Spark's median over this one's for a
    streamjoin variant (the first Spark variant run), the load average as the run ended, and
    (``rss``: bytes) the largest Python worker's peak memory over its runs."""
    rss = rss or {}
    table = Table(["run", "rows", "median s", "p95 s", "median batches", "max batches", "with data",
                   "spark s / s", "load", "worker RSS MB"])
    spark = next((v for v, _ in results if v.startswith("spark-")), None)
    for (variant, feeding), measured in results.items():
        rows, median, p95, batches, most, share = summary(measured)
        theirs = results.get((spark, feeding)) if spark and not variant.startswith("spark-") else None
        ratio = summary(theirs)[1] / median if theirs and median > 0 else "-"
        peak = rss.get((variant, feeding))
        table.add(f"{variant}, {feeding}", rows, median, p95, batches, most, share, ratio, loads[(variant, feeding)],
                  round(peak / 2**20) if peak else "-")
    return table


# -- inputs ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Workload:
    """The steps' rows, and what the join must release: unmatched left row id -> release step."""

    steps: list[dict[str, pa.Table]]
    release: dict[int, int]
    per_step: int


def workload(rows: int, steps: int) -> Workload:
    """``steps`` steps of ``rows // 2 // steps`` rows a side, times on whole milliseconds (Spark's
    watermark is in milliseconds), about a third of the left rows without a match."""
    per = max(1, rows // 2 // steps)
    keys = max(1, per // 5)   # per rows in 10 s a side: about one right row within +/- 1 s of a left row's key
    rng = np.random.default_rng(11)
    made: list[dict[str, pa.Table]] = []
    for s in range(steps):
        tables = {}
        for side, names in (("left", LEFT), ("right", RIGHT)):
            times = EPOCH_US + s * STEP_US + np.sort(rng.integers(0, STEP_US // 1000, per)) * 1000
            ids = s * per + np.arange(per, dtype=np.int64) + (0 if side == "left" else 1 << 40)
            tables[side] = pa.table({
                names[0]: pa.array(rng.integers(0, keys, per), pa.int64()),
                names[1]: pa.array(times, pa.timestamp("us", tz="UTC")),
                names[2]: pa.array(ids),
                names[3]: pa.array([f"{side[0]}{i}" for i in ids]),
            })
        made.append(tables)
    return Workload(made, _releases(made), per)


def _releases(steps: list[dict[str, pa.Table]]) -> dict[int, int]:
    """Unmatched left row id -> the step whose watermark releases it (rows never released left out)."""
    def column(side: str, i: int) -> np.ndarray:
        return np.concatenate([t[side].column(i).cast(pa.int64()).to_numpy() for t in steps])
    watermarks = step_watermarks([int(t["left"].column(1).cast(pa.int64()).to_numpy().max()) for t in steps],
                                 [int(t["right"].column(1).cast(pa.int64()).to_numpy().max()) for t in steps],
                                 DELAY_S * 1_000_000)
    lk, lt, lid = column("left", 0), column("left", 1), column("left", 2)
    rk, rt = column("right", 0), column("right", 1)
    span = int(max(lt.max(), rt.max()) - min(lt.min(), rt.min())) + 4 * WINDOW_US
    base = int(min(lt.min(), rt.min())) - 2 * WINDOW_US
    right = np.sort(rk * span + (rt - base))
    left = lk * span + (lt - base)
    matches = np.searchsorted(right, left + WINDOW_US, "right") - np.searchsorted(right, left - WINDOW_US, "left")
    release = {}
    for row, t, n in zip(lid.tolist(), lt.tolist(), matches.tolist()):
        step = release_step(t, WINDOW_US, watermarks) if n == 0 else None
        if step is not None:
            release[row] = step
    return release


# -- running -----------------------------------------------------------------------------------

class _Join(Bench):
    """The interval benchmark's queries, as a left outer join with this benchmark's delay, reading
    every new file at each trigger."""

    how: IntervalHow = "left"
    delay_s = DELAY_S
    files_per_trigger = None


class _Sink:
    """``foreachBatch``: records each null-padded row with its micro-batch and the time it is on the driver."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.written: list[Written] = []

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        rows = [r[0] for r in df.where("rid IS NULL").select("lid").collect()]
        at = time.time()
        with self.lock:
            self.written.extend(Written(row, batch_id, at) for row in rows)

    def rows(self) -> set[int]:
        with self.lock:
            return {w.row for w in self.written}


@dataclass
class Run:
    """One run of one variant and feeding: the rows written, the steps' times and reading batches,
    the micro-batches that read input rows."""

    written: list[Written]
    available: dict[int, float]
    read: dict[int, int]
    data_batches: set[int]
    problems: list[str]


def _run_once(spark: SparkSession, root: str, data: Workload, variant: str, feeding: str,
              args: argparse.Namespace) -> Run:
    scratch = fresh_dir(root, f"{variant}-{feeding}")
    staged, source = os.path.join(scratch, "staged"), os.path.join(scratch, "in")
    for side in ("left", "right"):
        os.makedirs(os.path.join(source, side))
        os.makedirs(os.path.join(staged, side))
        for s, tables in enumerate(data.steps):
            pq.write_table(tables[side], os.path.join(staged, side, f"step-{s:04d}.parquet"))
    params = Params(args.rows, args.steps, args.partitions, WINDOW_US, 1)
    join = _Join(spark, source, params)
    df = join.spark_join(variant, scratch) if variant in SPARK else join.streamjoin(variant, scratch)
    sink, available = _Sink(), {}
    query = (df.writeStream.foreachBatch(sink).trigger(processingTime=f"{args.interval} seconds")
             .option("checkpointLocation", os.path.join(scratch, "spark")).start())
    by_step: dict[int, set[int]] = {}
    for row, step in data.release.items():
        by_step.setdefault(step, set()).add(row)

    def feed(step: int) -> None:
        for side in ("left", "right"):
            name = f"step-{step:04d}.parquet"
            target = os.path.join(source, side, name)
            os.rename(os.path.join(staged, side, name), target)
            os.utime(target)
        available[step] = time.time()

    def wait_for(steps: range) -> None:
        wanted = set().union(*(by_step.get(s, set()) for s in steps))
        deadline = time.monotonic() + args.timeout
        while not wanted <= sink.rows():
            if query.exception() is not None:
                raise RuntimeError(f"{variant} failed: {query.exception()}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"{variant}, {feeding}: {len(wanted - sink.rows())} released rows not in the "
                                   f"sink after {args.timeout:.0f} s")
            time.sleep(0.05)

    try:
        feed(0)
        wait_for(range(0, 1))
        time.sleep(2 * args.interval)  # step 0's no-data micro-batches are done: the query idles
        steps = range(1, args.steps)
        if feeding == "traffic":
            start = time.monotonic()
            for k, s in enumerate(steps):
                time.sleep(max(0.0, start + k * args.interval - time.monotonic()))
                feed(s)
        else:
            for s in steps:
                feed(s)
                wait_for(range(s, s + 1))
        wait_for(range(0, args.steps))
        time.sleep(args.interval)  # a row written twice would come now
    finally:
        query.stop()
    progress = [(p["batchId"], *_side_rows(p, source)) for p in query.recentProgress]
    run = Run(list(sink.written), available, read_batches(progress, data.per_step, args.steps),
              {batch for batch, left, right in progress if left + right}, [])
    rows = [w.row for w in run.written]
    if len(rows) != len(set(rows)):
        run.problems.append(f"{variant}, {feeding}: {len(rows) - len(set(rows))} null-padded rows written twice")
    if set(rows) != set(data.release):
        run.problems.append(f"{variant}, {feeding}: null-padded rows differ from the expected "
                            f"({len(set(rows) - set(data.release))} unexpected, "
                            f"{len(set(data.release) - set(rows))} missing)")
    shutil.rmtree(scratch, ignore_errors=True)
    return run


def _side_rows(progress: Any, source: str) -> tuple[int, int]:
    """The input rows a micro-batch read from the left and the right file source (by their directories)."""
    counts = {"left": 0, "right": 0}
    for s in progress["sources"]:
        for side in counts:
            if s["description"].rstrip("]").endswith(os.path.join(source, side)):
                counts[side] += int(s["numInputRows"])
    return counts["left"], counts["right"]


def _variants(text: str) -> list[str]:
    chosen = [v for v in text.split(",") if v]
    unknown = sorted(set(chosen) - set(CHOICES))
    if unknown or not chosen:
        raise SystemExit(f"unknown variants {unknown or chosen}; choose from {','.join(CHOICES)}")
    return chosen


def run(args: argparse.Namespace) -> int:
    if args.steps < 3:
        raise SystemExit("--steps must be at least 3 (step 0 starts the query; traffic needs a step after another)")
    variants = _variants(args.variants)
    data = workload(args.rows, args.steps)
    root = fresh_dir(results_dir(), "latency")
    spark = local_session(shuffle_partitions=args.partitions,
                          extra={"spark.sql.streaming.numRecentProgressUpdates": "1000"})
    results: dict[tuple[str, str], list[Latency]] = {}
    loads: dict[tuple[str, str], float] = {}
    rss: dict[tuple[str, str], int] = {}
    problems: list[str] = []
    memory = WorkerMemory()
    memory.start()
    try:
        for i in range(args.repeat):
            for variant in rotated(variants, i):   # each variant in every place in turn
                for feeding in FEEDINGS:
                    began = time.time()
                    done = _run_once(spark, root, data, variant, feeding, args)
                    if not variant.startswith("spark-"):   # (Spark's own join runs no Python worker)
                        rss[(variant, feeding)] = max(rss.get((variant, feeding), 0), memory.peak(began, time.time())[0])
                    last = args.steps - 1
                    counted = set(range(1, last)) if feeding == "traffic" else set(range(1, last + 1))
                    results.setdefault((variant, feeding), []).extend(
                        latencies(done.written, data.release, done.available, done.read, counted,
                                  done.data_batches))
                    loads[(variant, feeding)] = max(loads.get((variant, feeding), 0.0), os.getloadavg()[0])
                    problems += done.problems
    finally:
        memory.stop()
        spark.stop()
        shutil.rmtree(root, ignore_errors=True)
    table = latency_table(results, loads, rss)
    print(f"{data.per_step * args.steps * 2:,} rows ({data.per_step:,} a side a step, {args.steps} steps), "
          f"{len(data.release):,} left rows released null-padded, left outer join within +/- "
          f"{WINDOW_US / 1e6:g} s, delay {DELAY_S} s, trigger every {args.interval:g} s, {args.partitions} "
          f"partitions, {args.repeat} run(s) each; load: 1-minute load average as each run ended")
    print(table.render())
    for line in problems:
        print(line)
    print("results:", write_results("latency", table, vars(args) | {"func": None},
                                    chart=Chart(value="median s", label=("run",),
                                                title="release latency, median seconds"), notes=problems))
    return 1 if problems else 0
