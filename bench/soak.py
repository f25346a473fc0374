"""``streamjoin bench soak``: many micro-batches over a fixed key space; nothing may grow.

Runs a join in this process (``LocalRunner``: the same ``run_partition`` a Spark task runs) for
``--batches`` micro-batches (default 1,000) over a fixed key space, on RocksDB by default, and
every ``--every`` versions records the state (rows and bytes, summed over partitions, from the
tasks' metrics) and the checkpoint (files and bytes under it: changelogs, commit records,
set-aside rows). With a join whose state is bounded (the interval join: its watermark evicts),
every column must stay flat after warm-up: changelogs are compacted and commit records pruned
with the retention (``retain_versions``), set-aside files are written only when rows are set aside.

Joins are entries of :data:`JOINS`: a function ``(keys, rows) -> SoakJoin`` giving the
operator and the rows of micro-batch ``b``. Adding a join is one such function (e.g. the
enrichment with ``table_ttl=``, the table-table join with ``retention=``).
"""

from __future__ import annotations

import argparse
import datetime
import os
import tempfile
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pyarrow as pa

from streamjoin.bench.harness import Chart, Table, write_results

__all__ = ["add_arguments", "run", "JOINS", "SoakJoin", "soak"]

#: micro-batch b's events have times in [b, b + 1) * BATCH_US: event time moves on steadily
BATCH_US = 1_000_000


@dataclass(frozen=True)
class SoakJoin:
    """A join to soak: its operator and the input tables of micro-batch ``b`` (one per input)."""

    operator: object
    batch: Callable[[int], tuple[pa.Table, ...]]


def interval(keys: int, rows: int) -> SoakJoin:
    """An inner interval join, +/- 1 s, over ``keys`` keys; ``rows`` rows a side a micro-batch."""
    from streamjoin.interval.operator import IntervalJoin

    left = pa.schema([("k", pa.int64()), ("lt", pa.timestamp("us", "UTC")), ("a", pa.int64())])
    right = pa.schema([("k", pa.int64()), ("rt", pa.timestamp("us", "UTC")), ("b", pa.int64())])
    window = datetime.timedelta(seconds=1)
    op = IntervalJoin(left, right, "k", left_time="lt", right_time="rt", lower=-window, upper=window,
                      delay=datetime.timedelta(seconds=2))

    def batch(b: int) -> tuple[pa.Table, ...]:
        rng = np.random.default_rng(b)
        times = b * BATCH_US + np.sort(rng.integers(0, BATCH_US, rows))
        return (
            pa.table([pa.array(rng.integers(0, keys, rows)), pa.array(times).cast(pa.timestamp("us", "UTC")),
                      pa.array(np.arange(rows))], schema=left),
            pa.table([pa.array(rng.integers(0, keys, rows)), pa.array(times).cast(pa.timestamp("us", "UTC")),
                      pa.array(np.arange(rows))], schema=right),
        )

    return SoakJoin(op, batch)


#: name -> how to build it from (keys, rows a micro-batch). Add a join here to soak it too.
JOINS: dict[str, Callable[[int, int], SoakJoin]] = {
    "interval": interval,
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--joins", default="interval", help=f"joins to soak (default interval; from {','.join(JOINS)})")
    parser.add_argument("--batches", type=int, default=1_000, help="micro-batches (default 1,000)")
    parser.add_argument("--every", type=int, default=100, help="record sizes every N versions (default 100)")
    parser.add_argument("--keys", type=int, default=1_000, help="key space (default 1,000)")
    parser.add_argument("--rows", type=int, default=200, help="rows an input a micro-batch (default 200)")
    parser.add_argument("--partitions", type=int, default=2, help="partitions (default 2)")
    parser.add_argument("--store", default="rocksdb", help="store backend (default rocksdb)")
    parser.add_argument("--retain", type=int, default=10, help="retain_versions (default 10)")


def _tree(path: str) -> tuple[int, int]:
    """Files and bytes under ``path``."""
    files = size = 0
    for directory, _, names in os.walk(path):
        for name in names:
            files += 1
            size += os.path.getsize(os.path.join(directory, name))
    return files, size


def soak(name: str, join: SoakJoin, args: argparse.Namespace, scratch: str) -> list[dict[str, object]]:
    """Run ``join`` for ``args.batches`` versions; one row of sizes every ``args.every`` versions."""
    from streamjoin.runtime.local import LocalRunner
    from streamjoin.runtime.partition import StateConfig

    checkpoint = os.path.join(scratch, name, "ck")
    config = StateConfig(store=args.store, local_dir=os.path.join(scratch, name, "local"),
                         retain_versions=args.retain)
    runner = LocalRunner(join.operator, checkpoint, partitions=args.partitions, config=config)  # type: ignore[arg-type]
    rows: list[dict[str, object]] = []
    started, output = time.perf_counter(), 0
    for b in range(args.batches):
        output += runner.run(*join.batch(b)).num_rows
        if (b + 1) % args.every == 0 or b + 1 == args.batches:
            last = runner.metrics[-args.partitions:]
            files, size = _tree(checkpoint)
            rows.append({"join": name, "version": b, "state rows": sum(m["state_rows"] for m in last),
                         "state bytes": sum(m["state_bytes"] for m in last), "checkpoint files": files,
                         "checkpoint bytes": size, "output rows": output,
                         "s / batch": (time.perf_counter() - started) / (b + 1)})
            print(f"{name} v{b}: {rows[-1]}", flush=True)
        del runner.metrics[:-args.partitions]   # keep memory flat: only the last version's are read
    return rows


def run(args: argparse.Namespace) -> int:
    names = [n for n in args.joins.split(",") if n]
    unknown = sorted(set(names) - set(JOINS))
    if unknown:
        raise SystemExit(f"unknown joins {unknown}; choose from {','.join(JOINS)}")
    table = Table(["join", "version", "state rows", "state bytes", "checkpoint files", "checkpoint bytes"])
    flat: list[str] = []
    with tempfile.TemporaryDirectory(prefix="streamjoin-soak-") as scratch:
        for name in names:
            found = soak(name, JOINS[name](args.keys, args.rows), args, scratch)
            for row in found:
                table.add(*(row[c] for c in table.columns))
            after = found[len(found) // 2:]   # the second half: after warm-up
            for column in ("checkpoint files", "checkpoint bytes", "state rows"):
                values = [int(r[column]) for r in after]  # type: ignore[call-overload]
                flat.append(f"{name}: {column} over the second half from {min(values):,} to {max(values):,}")
    print(f"{args.batches:,} micro-batches, {args.keys:,} keys, {args.rows:,} rows an input a batch, "
          f"{args.partitions} partitions, {args.store}, retain_versions={args.retain}")
    print(table.render())
    for line in flat:
        print(line)
    notes = ["in-process (LocalRunner); state rows and bytes summed over partitions from the tasks' metrics "
             "(the store's own figures: on RocksDB an estimate of its entries, each a group of rows as an "
             "Arrow blob, and of its bytes); checkpoint files and bytes: everything under the join's checkpoint"] + flat
    print("results:", write_results("soak", table, vars(args) | {"func": None}, notes=notes,
                                    chart=Chart(value="checkpoint files", label=("join", "version"),
                                                title="checkpoint files every N versions (flat after warm-up)")))
    return 0
