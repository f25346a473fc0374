"""``streamjoin bench store-time``: the time each join spends in its state store, per input row.

Each join runs in this process (:class:`streamjoin.runtime.plan_runner.PlanRunner`, the same task
code a Spark task runs; no Spark, no profiler) as a streaming query's tasks (each partition's
store stays open between versions, as in a Spark query's Python workers), over the workloads of
its own benchmark, at a moderate size (``--rows``):

* ``interval``: :mod:`streamjoin.bench.interval`'s two streams, ``--rows`` rows in all, window
  +/- 5 s (about one match a row);
* ``enrichment``: :mod:`streamjoin.bench.enrichment`'s as-of join, a ``--rows``-row table loaded
  as initial rows, ``--rows`` / 10 updates and ``--rows`` events, then the heartbeats that
  release the last events;
* ``table``: :mod:`streamjoin.bench.table`'s view (three stages), ``--rows`` rows per table
  loaded in one version, then ``--rows`` changes per side.

Every task's store is wrapped (``wrap_store`` of :func:`streamjoin.runtime.task.run_task`) in a
:class:`streamjoin.statestore.timed.TimedStore`, which adds the ``perf_counter`` seconds spent
inside every store call the operator's step makes (point reads, batched reads, scans and every
step through them) and inside the commit's write of the step's changes, through the changelogging
store (the changelog delta, the undo record, the local store's atomic write). Opening the store,
snapshots and the store's size estimate are not counted (they are the task's, not the operator's).

One row per join: the input rows it consumed (every row of its inputs, initial rows included;
for the table join, the rows given to its key stages), the store calls, the store seconds, those
in µs per input row (the goal in :data:`streamjoin.bench.goals.GOALS`: at most 1 µs, amortised
over the run), the task seconds (the versions' wall seconds: routing and every partition's task,
read, open, step and commit), the share of them in the store, and this process's peak resident
memory while the join ran (``peak RSS MB``: the tasks run here, as they would in one Python
worker; :class:`streamjoin.bench.harness.ResidentPeak`). The interval and enrichment joins'
output row counts are checked (``MISMATCH`` otherwise).
"""

from __future__ import annotations

import argparse
import os
import shutil
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pyarrow as pa

from streamjoin.bench.harness import (
    HOSTED_HELP,
    ResidentPeak,
    Table,
    parse_stores,
    results_dir,
    store_spec,
    write_results,
)
from streamjoin.bench.sparkutil import fresh_dir
from streamjoin.statestore.registry import DEFAULT_KIND

__all__ = ["add_arguments", "run", "JOINS", "Measured", "measure", "consumed_rows"]

JOINS = ("interval", "enrichment", "table")
STORES = ("arranged", "rocksdb", "lmdb", "memory")
COLUMNS = ["variant", "input rows", "store calls", "store s", "store us/row", "task s", "store share", "peak RSS MB"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Run each join in this process (no Spark) on its benchmark's workload and measure the time its "
        "operators spend in their state store (reads, scans, and the changelogged write of each version's "
        "changes), per input row, beside the tasks' seconds. One row per join and store; the goal is at "
        "most 1 us per input row, amortised. The default size takes about a minute per store on 2 cores.")
    parser.add_argument("--rows", type=int, default=200_000,
                        help="workload size (default 200,000): interval rows in all; enrichment events and table "
                        "rows (10%% of them updates); table rows per table and changes per side")
    parser.add_argument("--batches", type=int, default=10, help="micro-batches of the streamed rows (default 10)")
    parser.add_argument("--partitions", type=int, default=4, help="state partitions (default 4)")
    parser.add_argument("--stores", default=DEFAULT_KIND,
                        help=f"comma-separated, from {','.join(STORES)} or {HOSTED_HELP} "
                             f"(default {DEFAULT_KIND}, the joins' default)")
    parser.add_argument("--joins", default=",".join(JOINS), help=f"comma-separated, from {','.join(JOINS)} (default all)")


@dataclass(frozen=True)
class Measured:
    """One join's run: input rows consumed, store calls and seconds, the versions' wall seconds, and
    whatever looked wrong (``notes``)."""

    input_rows: int
    store_calls: int
    store_seconds: float
    task_seconds: float
    notes: tuple[str, ...] = ()

    @property
    def us_per_row(self) -> float:
        return self.store_seconds * 1e6 / self.input_rows if self.input_rows else 0.0

    @property
    def share(self) -> float:
        return self.store_seconds / self.task_seconds if self.task_seconds else 0.0


def consumed_rows(runner) -> int:
    """The rows the join's inputs gave its stages so far (initial rows included): the
    ``input_rows_<input>`` metrics of every stage input fed by one of the join's inputs."""
    total = 0
    for stage in runner.plan.stages:
        names = [spec.name for spec, source in zip(stage.operator.inputs, stage.inputs) if isinstance(source, int)]
        total += sum(int(m.get(f"input_rows_{name}", 0)) for m in runner.metrics(stage.name) for name in names)
    return total


def measure(plan, root: str, store: str, partitions: int, versions: list[tuple[pa.Table, ...]],
            initial: dict[int, pa.Table] | None = None) -> tuple[Measured, int]:
    """Run ``plan`` in process over ``versions`` (one tuple of the join's inputs each) with every
    task's store timed; returns the measurement and the output rows. ``initial``: the join's
    input index -> its initial rows (a bootstrap)."""
    from streamjoin.runtime.options import StateConfig
    from streamjoin.runtime.plan_runner import PlanRunner
    from streamjoin.statestore.timed import StoreTimer
    from streamjoin.statestore.warm import evict_all

    timer = StoreTimer()
    kind, options = store_spec(store)
    try:
        runner = PlanRunner(plan, os.path.join(root, "ckpt"), partitions=partitions,
                            config=StateConfig(store=kind, store_options=options, local_dir=os.path.join(root, "state")),
                            query_id="bench-store-time", wrap_store=timer.wrap)
        for index, rows in (initial or {}).items():
            runner.set_initial(index, rows)
        seconds, output = 0.0, 0
        for tables in versions:
            began = time.perf_counter()
            output += runner.run(*tables).num_rows
            seconds += time.perf_counter() - began
        return Measured(consumed_rows(runner), timer.calls, timer.seconds, seconds), output
    finally:
        evict_all()   # the stores kept open for a next version
        shutil.rmtree(root, ignore_errors=True)


def _interval(args: argparse.Namespace, store: str, root: str) -> Measured:
    from streamjoin.bench import interval

    params = interval.Params(args.rows, args.batches, args.partitions, 5_000_000, 2 * interval.RATE * 5)
    tables = {side: interval.side_table(params, side) for side in ("left", "right")}
    per = params.per_side // params.batches
    versions = [tuple(t.slice(b * per, per) for t in tables.values()) for b in range(params.batches)]
    got, output = measure(interval.join_operator(tables, params).plan, root, store, args.partitions, versions)
    expected = interval.expected_pairs(tables, params)
    return _checked(got, output, expected, "output rows")


def _enrichment(args: argparse.Namespace, store: str, root: str) -> Measured:
    from streamjoin.bench import enrichment

    params = enrichment.Params(args.rows, args.rows, round(args.rows * 0.1), args.batches, args.partitions)
    inputs = enrichment.generate(params)
    op = enrichment.join_operator("as_of")
    versions = enrichment.in_process_versions(inputs)   # the data, the heartbeat and the no-data micro-batch
    got, output = measure(op.plan, root, store, args.partitions, versions,
                          initial={1: op.bootstrap_changes(inputs.snapshot)})
    return _checked(got, output, params.events, "output rows (one per event)")


def _table(args: argparse.Namespace, store: str, root: str) -> Measured:
    from streamjoin.bench import table

    workload = table.generate(args.rows, args.rows)
    o, c = workload.orders, workload.customers
    ends = table.bounds(args.rows, args.batches)
    versions = [(o.load, c.load)] + [(o.changes.slice(s, e - s), c.changes.slice(s, e - s))
                                     for s, e in zip(np.r_[0, ends[:-1]], ends)]
    got, _ = measure(table.join_operator().plan, root, store, args.partitions, versions)
    return got


def _checked(got: Measured, output: int, expected: int, what: str) -> Measured:
    if output == expected:
        return got
    return Measured(got.input_rows, got.store_calls, got.store_seconds, got.task_seconds,
                    (f"MISMATCH: {output:,} {what}, {expected:,} expected",))


RUNS: dict[str, Callable[[argparse.Namespace, str, str], Measured]] = {
    "interval": _interval, "enrichment": _enrichment, "table": _table}


def row(table: Table, store: str, join: str, got: Measured, peak: int | None = None) -> None:
    """``got`` as a row of the results table (label ``streamjoin-<store>, <join>``); ``peak``: this
    process's largest resident bytes while it ran (None: not sampled)."""
    table.add(f"streamjoin-{store}, {join}", got.input_rows, got.store_calls, round(got.store_seconds, 6),
              round(got.us_per_row, 3), round(got.task_seconds, 6), round(got.share, 3),
              round(peak / 2**20) if peak else "-")


def run(args: argparse.Namespace) -> int:
    stores = parse_stores(args.stores, STORES)
    joins = [j for j in args.joins.split(",") if j]
    unknown = sorted(set(joins) - set(JOINS))
    if unknown:
        raise SystemExit(f"unknown joins {unknown}; choose from {','.join(JOINS)}")
    if not stores or not joins:
        raise SystemExit("nothing to measure: give --stores and --joins")
    if min(args.rows, args.batches, args.partitions) < 1 or args.batches > args.rows // 2:
        raise SystemExit("--rows, --batches and --partitions must be positive, and --batches at most --rows / 2")
    results = Table(COLUMNS)
    notes: list[str] = []
    for store in stores:
        for join in joins:
            started = time.perf_counter()
            with ResidentPeak() as memory:
                got = RUNS[join](args, store, fresh_dir(results_dir(), f"store-time-{join}"))
            row(results, store, join, got, memory.peak_bytes)
            notes += [f"streamjoin-{store}, {join}: {n}" for n in got.notes]
            print(f"streamjoin-{store}, {join}: {got.store_seconds:.2f} s in the store of {got.task_seconds:.2f} s "
                  f"({got.us_per_row:.2f} us per input row; {time.perf_counter() - started:.0f} s with the inputs)",
                  flush=True)
    print(f"\n{args.rows:,} rows, {args.batches} micro-batches, {args.partitions} partitions, in process")
    print(results.render())
    for line in notes:
        print(line)
    print("results:", write_results("store-time", results, vars(args) | {"func": None}, notes=notes))
    return 1 if notes else 0

