"""``streamjoin bench rescale``: what routing by key group and a change of partition count cost.

In process, no Spark (the Spark side of routing is one JVM expression and a shuffle by an int
column; compare it with ``repartition`` by the keys in a Spark session if needed):

* ``route``: rows of one int64 or string key to ``--partitions`` partitions, by the old CRC-32 of
  packed values (kept for checkpoints written before key groups) and by key group (Spark's hash
  in numpy), alternating, medians of ``--repeat`` runs;
* ``rebuild``: an interval join whose state holds ``--rows`` rows per side, run at 4 partitions,
  then the next version run at 4 (no change), at 6 and at 3 partitions: the version after a change
  rebuilds every new partition from the old changelogs; each from a fresh checkpoint, medians of
  ``--repeat`` runs.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import shutil
from functools import partial

import numpy as np
import pyarrow as pa

from streamjoin.bench.harness import Table, median_seconds, results_dir, write_results
from streamjoin.statestore.registry import DEFAULT_KIND

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rows", type=int, default=200_000, help="rows routed; state rows per side (default 200000)")
    parser.add_argument("--partitions", type=int, default=8, help="partitions routed to (default 8)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per measurement (median)")
    parser.add_argument("--store", default=DEFAULT_KIND, help=f"store of the rebuild (default {DEFAULT_KIND}, the joins' default)")


def run(args: argparse.Namespace) -> int:
    table = Table(["what", "variant", "rows", "seconds", "ratio"])
    _route(table, args)
    _rebuild(table, args)
    print(table.render())
    print("results:", write_results("rescale", table, vars(args)))
    return 0


def _route(table: Table, args: argparse.Namespace) -> None:
    from streamjoin.runtime.local import route

    rng = np.random.default_rng(1)
    keys = {"int64": pa.array(rng.integers(0, 1 << 40, args.rows)),
            "string": pa.array([f"user-{x}" for x in rng.integers(0, 1 << 30, args.rows)])}
    for name, values in keys.items():
        rows = pa.table({"k": values})
        old, new = [], []
        for _ in range(args.repeat):   # alternate, so both see the same machine
            old.append(median_seconds(partial(route, rows, ["k"], args.partitions), 1))
            new.append(median_seconds(partial(route, rows, ["k"], args.partitions, groups=4096), 1))
        base = float(np.median(old))
        table.add(f"route {name}", "crc32 of packed values", args.rows, round(base, 4), 1.0)
        table.add(f"route {name}", "key group", args.rows, round(float(np.median(new)), 4),
                  round(float(np.median(new)) / base, 3))


def _rebuild(table: Table, args: argparse.Namespace) -> None:
    from streamjoin.interval.operator import IntervalJoin
    from streamjoin.runtime.local import LocalRunner
    from streamjoin.runtime.options import StateConfig

    schema = pa.schema([("k", pa.int64()), ("ts", pa.timestamp("us")), ("v", pa.string())])
    rng = np.random.default_rng(0)
    per = max(args.rows // 4, 1)

    def batch(i: int) -> pa.Table:
        ts = (np.int64(1_700_000_000_000_000) + i * 60_000_000 + rng.integers(0, 60_000_000, per)).astype("datetime64[us]")
        return pa.table({"k": pa.array(rng.integers(0, 100_000, per)), "ts": pa.array(ts),
                         "v": pa.array(np.char.add("x", np.arange(per).astype(str)))}, schema=schema)

    op = IntervalJoin(schema, schema, "k", left_time="ts", right_time="ts", lower=dt.timedelta(hours=-1),
                      upper=dt.timedelta(hours=1), delay=dt.timedelta(minutes=1), how="left")
    batches = [(batch(i), batch(i)) for i in range(5)]
    scratch = os.path.join(results_dir(), "rescale")
    times: dict[int, list[float]] = {4: [], 6: [], 3: []}
    for _ in range(args.repeat):
        for new in times:
            shutil.rmtree(scratch, ignore_errors=True)
            config = StateConfig(store=args.store, local_dir=os.path.join(scratch, "local"))
            runner = LocalRunner(op, os.path.join(scratch, "ck"), partitions=4, config=config)
            for rows in batches[:4]:
                runner.run(*rows)
            after = LocalRunner(op, os.path.join(scratch, "ck"), partitions=new, config=config)
            after.version = 4
            times[new].append(median_seconds(partial(after.run, *batches[4]), 1))
    shutil.rmtree(scratch, ignore_errors=True)
    base = float(np.median(times[4]))
    for new, found in times.items():
        table.add("next version", f"4 -> {new} partitions", 4 * per * 2, round(float(np.median(found)), 4),
                  round(float(np.median(found)) / base, 3))
