"""``streamjoin bench restart``: restarting a stream-table join that holds a large table, with and
without a column added to the table (schema evolution: docs/operations/upgrades.md).

In process, no Spark (Spark's own restart costs are the same whatever the columns). Setup: an
as-of enrichment in ``--partitions`` partitions loads ``--rows`` table rows in version 0, then
takes one small version; its checkpoint and local stores are kept as they are. Each run copies
them and restarts the join in a new Python process, as a restarted query's workers do (nothing
warm): it binds the checkpoint, with the table's columns as they were (``same columns``) or with
one more (``column added``: the bind records the evolution), and runs the next version of
``--touch`` table changes and events (the first micro-batch after the restart: each partition
opens its store, reads the buckets the changes touch, and reads their versions stored under the
old columns in the new ones). The time is from the bind to the version's commit; the variants
alternate, medians of ``--repeat`` runs; ``peak RSS MB`` is the restarting process's largest
resident memory, the largest of a variant's runs. The goal is the column-added restart within
1.2x of the other.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import pyarrow as pa

from streamjoin.bench.harness import Table, results_dir, write_results
from streamjoin.statestore.registry import DEFAULT_KIND

__all__ = ["add_arguments", "run"]

VARIANTS = ("same columns", "column added")
T0 = dt.datetime(2026, 1, 1)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rows", type=int, default=1_000_000, help="table rows held (default 1,000,000)")
    parser.add_argument("--partitions", type=int, default=4, help="partitions (default 4)")
    parser.add_argument("--touch", type=int, default=10_000,
                        help="table changes and events of the version after the restart (default 10,000)")
    parser.add_argument("--repeat", type=int, default=3, help="restarts of each variant, alternated (default 3)")
    parser.add_argument("--store", default=DEFAULT_KIND, help=f"store (default {DEFAULT_KIND})")


def _schemas(added: bool) -> tuple[pa.Schema, pa.Schema]:
    events = pa.schema([("user", pa.int64()), ("ts", pa.timestamp("us")), ("what", pa.string())])
    table = [("user", pa.int64()), ("op", pa.string()), ("at", pa.timestamp("us")), ("plan", pa.string()),
             ("score", pa.int32())]
    return events, pa.schema(table + ([("region", pa.string())] if added else []))


def _join(added: bool):
    from streamjoin.changes import ChangeFormat
    from streamjoin.enrichment.operator import EnrichmentJoin

    events, table = _schemas(added)
    return EnrichmentJoin(events, table, "user", stream_time="ts", changes=ChangeFormat.plain("user", time="at"),
                          delay=dt.timedelta(0))


def _runner(root: str, added: bool, store: str, partitions: int):
    from streamjoin.runtime.options import StateConfig
    from streamjoin.runtime.plan_runner import PlanRunner

    config = StateConfig(store=store, local_dir=os.path.join(root, "local"))
    return PlanRunner(_join(added).plan, os.path.join(root, "ck"), partitions=partitions, config=config,
                      query_id="bench-restart")


def _inputs(n: int, users: int, second: int, added: bool, seed: int) -> tuple[pa.Table, pa.Table]:
    rng = np.random.default_rng(seed)
    events, table = _schemas(added)
    keys = rng.integers(0, users, n)
    at = pa.array(np.full(n, (second * 1_000_000) + int(T0.timestamp() * 1e6), np.int64)).cast(pa.timestamp("us"))
    columns = {"user": pa.array(keys, pa.int64()), "op": pa.array(["upsert"] * n), "at": at,
               "plan": pa.array([f"plan-{k % 7}" for k in keys.tolist()]),
               "score": pa.array(rng.integers(0, 100, n).astype(np.int32))}
    if added:
        columns["region"] = pa.array(["eu"] * n)
    changes = pa.table(columns, schema=table)
    stream = pa.table({"user": pa.array(rng.integers(0, users, n), pa.int64()), "ts": at,
                       "what": pa.array(["view"] * n)}, schema=events)
    return stream, changes


def _prepare(root: str, args: argparse.Namespace) -> None:
    runner = _runner(root, False, args.store, args.partitions)
    events, changes = _inputs(args.rows, args.rows, 1, False, 1)
    runner.run(events.slice(0, 0), changes)
    runner.run(*_inputs(args.touch, args.rows, 2, False, 2))


def _child(root: str, variant: str, store: str, partitions: int, touch: int, rows: int) -> float:
    added = variant == VARIANTS[1]
    inputs = _inputs(touch, rows, 3, added, 3)
    started = time.perf_counter()
    runner = _runner(root, added, store, partitions)
    runner.version = 2
    runner.run(*inputs)
    return time.perf_counter() - started


#: the restart, in a new Python process (argv: root, variant, store, partitions, touch, rows)
_CHILD = ("import json, sys; from streamjoin.bench.restart import _child; "
          "from streamjoin.bench.harness import peak_resident; "
          "seconds = _child(*sys.argv[1:4], *map(int, sys.argv[4:])); "
          "print(json.dumps({'seconds': seconds, 'peak': peak_resident()}))")


def run(args: argparse.Namespace) -> int:
    base = tempfile.mkdtemp(prefix="restart-", dir=results_dir())
    prepared = os.path.join(base, "prepared")
    print(f"loading {args.rows:,} table rows into {args.partitions} partitions ({args.store}) ...", flush=True)
    _prepare(prepared, args)
    seconds: dict[str, list[float]] = {v: [] for v in VARIANTS}
    peaks: dict[str, int] = {v: 0 for v in VARIANTS}   # the restarting process's largest resident bytes
    for i in range(args.repeat):
        for variant in (VARIANTS if i % 2 == 0 else VARIANTS[::-1]):
            copy = os.path.join(base, f"run-{i}-{variant.replace(' ', '-')}")
            shutil.copytree(prepared, copy)
            command = [sys.executable, "-c", _CHILD, copy, variant, args.store, str(args.partitions), str(args.touch),
                       str(args.rows)]
            found = subprocess.run(command, check=True, capture_output=True, text=True)
            measured = json.loads(found.stdout.strip().splitlines()[-1])
            seconds[variant].append(measured["seconds"])
            peaks[variant] = max(peaks[variant], measured["peak"])
            shutil.rmtree(copy)
            print(f"  run {i + 1}/{args.repeat}, {variant}: {seconds[variant][-1]:.2f} s", flush=True)
    table = Table(["variant", "rows", "seconds", "ratio", "peak RSS MB"])
    same = float(np.median(seconds[VARIANTS[0]]))
    for variant in VARIANTS:
        median = float(np.median(seconds[variant]))
        table.add(variant, args.rows, median, median / same, round(peaks[variant] / 2**20))
    shutil.rmtree(base, ignore_errors=True)
    print(f"restart and first version of a {args.rows:,}-row enrichment table, medians of {args.repeat} "
          f"alternated runs, load average {os.getloadavg()[0]:.2f} as they ended")
    print(table.render())
    print("results:", write_results("restart", table, vars(args)))
    return 0
