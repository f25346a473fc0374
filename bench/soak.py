"""``streamjoin bench soak``: many micro-batches over a fixed key space; nothing may grow.

Runs a join's plan in this process (``PlanRunner``: one stage, or the table-table join's
three; the same ``run_task`` a Spark task runs) for ``--batches`` micro-batches
(default 1,000) over a key space of fixed size, on RocksDB by default, and every ``--every``
versions records the state and the checkpoint (files and bytes under it: changelogs, commit
records, set-aside rows), summed over partitions (and stages). With a join whose state is bounded
every column must stay flat after warm-up: changelogs are compacted and commit records pruned
with the retention (``retain_versions``), set-aside files are written only when rows are set aside.

- ``interval``: bounded by its watermark, which evicts.
- ``enrichment`` (as_of, ``table_ttl`` 20 s of table time) and ``table`` (inner, ``retention``
  20 s with ``expire_rows``): the live keys are a window of ``--keys`` keys that slides by
  ``keys / 50`` keys a micro-batch: each micro-batch updates and deletes random live keys (a
  deleted key is inserted again by a later update), deletes half the keys leaving the window
  (the others are never changed again) and inserts those entering it. Without the TTL /
  retention the keys left behind (and the table join's tombstones) stay forever, so state grows
  with every micro-batch;
  ``--no-ttl-batches N`` runs each such join without it for ``N`` micro-batches to show that.

"state rows" are the rows the operator says it holds, where it counts them (the enrichment's
``versions_held``: table versions, deletes included; the table join stage's ``rows_held_left``
+ ``rows_held_right``); "store entries" are the store's own estimate of its entries (on RocksDB
an estimate; the interval join keeps a group of rows an entry, as an Arrow blob; the table-table
key stages one entry a primary key, tombstones included, plus their expiry index).

Joins are entries of :data:`JOINS`: a function ``(keys, rows, ttl) -> SoakJoin`` giving the
operator and the rows of micro-batch ``b``.
"""

from __future__ import annotations

import argparse
import datetime
import os
import tempfile
import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import pyarrow as pa

from streamjoin.bench.harness import Chart, Table, write_results
from streamjoin.statestore.registry import DEFAULT_KIND

__all__ = ["add_arguments", "run", "JOINS", "SoakJoin", "soak", "sliding_changes"]

#: micro-batch b's events have times in [b, b + 1) * BATCH_US: event time moves on steadily
BATCH_US = 1_000_000
#: the enrichment's table_ttl and the table-table join's retention: 20 micro-batches of event time
TTL = datetime.timedelta(seconds=20)
#: the live key window slides by keys // SLIDE keys a micro-batch
SLIDE = 50
TS = pa.timestamp("us", "UTC")


@dataclass(frozen=True)
class SoakJoin:
    """A join to soak: its operator, the input tables of micro-batch ``b`` (one per input), and
    the metrics (summed over partitions and stages) that count the rows it holds (none: not counted)."""

    operator: object
    batch: Callable[[int], tuple[pa.Table, ...]]
    held: tuple[str, ...] = ()


def interval(keys: int, rows: int, ttl: bool = True) -> SoakJoin:
    """An inner interval join, +/- 1 s, over ``keys`` keys; ``rows`` rows a side a micro-batch
    (bounded by its watermark: ``ttl`` changes nothing)."""
    from streamjoin.interval.operator import IntervalJoin

    left = pa.schema([("k", pa.int64()), ("lt", TS), ("a", pa.int64())])
    right = pa.schema([("k", pa.int64()), ("rt", TS), ("b", pa.int64())])
    window = datetime.timedelta(seconds=1)
    op = IntervalJoin(left, right, "k", left_time="lt", right_time="rt", lower=-window, upper=window,
                      delay=datetime.timedelta(seconds=2))

    def batch(b: int) -> tuple[pa.Table, ...]:
        rng = np.random.default_rng(b)
        times = b * BATCH_US + np.sort(rng.integers(0, BATCH_US, rows))
        return (
            pa.table([pa.array(rng.integers(0, keys, rows)), pa.array(times).cast(TS),
                      pa.array(np.arange(rows))], schema=left),
            pa.table([pa.array(rng.integers(0, keys, rows)), pa.array(times).cast(TS),
                      pa.array(np.arange(rows))], schema=right),
        )

    return SoakJoin(op, batch)


def sliding_changes(b: int, keys: int, rows: int, seed: int, schema: pa.Schema) -> pa.Table:
    """Plain changes (``id``, ``op``, ``at``, ``grp``, ``v``) of micro-batch ``b``: ``rows`` changes
    to random live keys (one in five a delete), changes to the keys leaving the live window
    (``[b * slide, b * slide + keys)``, ``slide = max(1, keys // SLIDE)``: the even ones deleted,
    the odd ones updated a last time) and upserts of those entering it; change times in ``[b, b + 1) * BATCH_US``; ``grp = id // 4``."""
    rng = np.random.default_rng([seed, b])
    slide = max(1, keys // SLIDE)
    start = b * slide
    ids = np.concatenate([start + rng.integers(0, keys, rows),
                          np.arange(start - slide, start) if b else np.arange(0),
                          np.arange(start + keys - slide, start + keys) if b else np.arange(start, start + keys)])
    n_random = rows
    deletes = np.zeros(ids.size, dtype=bool)
    deletes[:n_random] = rng.random(n_random) < 0.2
    if b:   # the keys leaving the window: the even ones deleted, the odd ones left as they are
        deletes[n_random:n_random + slide] = ids[n_random:n_random + slide] % 2 == 0
    times = b * BATCH_US + rng.integers(0, BATCH_US, ids.size)
    return pa.table([pa.array(ids), pa.array(np.where(deletes, "delete", "upsert")), pa.array(times).cast(TS),
                     pa.array(ids // 4), pa.array(rng.integers(0, 1_000_000, ids.size))], schema=schema)


def enrichment(keys: int, rows: int, ttl: bool = True) -> SoakJoin:
    """A left as_of enrichment (delay 1 s, ``table_ttl`` :data:`TTL` unless not ``ttl``) of
    ``rows`` events a micro-batch on live keys against :func:`sliding_changes`."""
    from streamjoin.changes import ChangeFormat
    from streamjoin.enrichment.operator import EnrichmentJoin

    events = pa.schema([("id", pa.int64()), ("ts", TS), ("e", pa.int64())])
    changes = pa.schema([("id", pa.int64()), ("op", pa.string()), ("at", TS), ("grp", pa.int64()), ("v", pa.int64())])
    op = EnrichmentJoin(events, changes, "id", stream_time="ts", changes=ChangeFormat.plain("id", time="at"),
                        mode="as_of", how="left", delay=datetime.timedelta(seconds=1), table_ttl=TTL if ttl else None)
    slide = max(1, keys // SLIDE)

    def batch(b: int) -> tuple[pa.Table, ...]:
        rng = np.random.default_rng([1, b])
        times = b * BATCH_US + rng.integers(0, BATCH_US, rows)
        stream = pa.table([pa.array(b * slide + rng.integers(0, keys, rows)), pa.array(times).cast(TS),
                           pa.array(np.arange(rows))], schema=events)
        return stream, sliding_changes(b, keys, rows, 2, changes)

    return SoakJoin(op, batch, held=("versions_held",))


def table(keys: int, rows: int, ttl: bool = True) -> SoakJoin:
    """An inner table-table join on ``grp`` of two :func:`sliding_changes` tables (``rows``
    changes a side a micro-batch), ``retention`` :data:`TTL` with ``expire_rows`` unless not ``ttl``."""
    from streamjoin.table.operator import TableTableJoin

    left = pa.schema([("id", pa.int64()), ("op", pa.string()), ("at", TS), ("grp", pa.int64()), ("a", pa.int64())])
    right = pa.schema([("id", pa.int64()), ("op", pa.string()), ("at", TS), ("grp", pa.int64()), ("b", pa.int64())])
    op = TableTableJoin(left, right, "grp", left_key="id", right_key="id", left_time="at", right_time="at",
                        how="inner", retention=TTL if ttl else None, expire_rows=ttl)

    def batch(b: int) -> tuple[pa.Table, ...]:
        return sliding_changes(b, keys, rows, 3, left), sliding_changes(b, keys, rows, 4, right)

    return SoakJoin(op, batch, held=("rows_held_left", "rows_held_right"))


#: name -> how to build it from (keys, rows a micro-batch, TTL on). Add a join here to soak it too.
JOINS: dict[str, Callable[[int, int, bool], SoakJoin]] = {
    "interval": interval,
    "enrichment": enrichment,
    "table": table,
}
#: the joins whose state is bounded by a TTL / retention (``--no-ttl-batches`` runs them without)
WITH_TTL = ("enrichment", "table")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--joins", default=",".join(JOINS), help=f"joins to soak (default and choices: {','.join(JOINS)})")
    parser.add_argument("--batches", type=int, default=1_000, help="micro-batches (default 1,000)")
    parser.add_argument("--every", type=int, default=100, help="record sizes every N versions (default 100)")
    parser.add_argument("--keys", type=int, default=1_000, help="key space (default 1,000)")
    parser.add_argument("--rows", type=int, default=200, help="rows an input a micro-batch (default 200)")
    parser.add_argument("--partitions", type=int, default=2, help="partitions (default 2)")
    parser.add_argument("--store", default=DEFAULT_KIND, help=f"store backend (default {DEFAULT_KIND}, the joins' default)")
    parser.add_argument("--retain", type=int, default=10, help="retain_versions (default 10)")
    parser.add_argument("--no-ttl-batches", type=int, default=0, metavar="N",
                        help=f"also run {', '.join(WITH_TTL)} without their TTL / retention for N micro-batches "
                             "(default 0: not), to show the growth the TTL prevents")


def _tree(path: str) -> tuple[int, int]:
    """Files and bytes under ``path``."""
    files = size = 0
    for directory, _, names in os.walk(path):
        for name in names:
            files += 1
            size += os.path.getsize(os.path.join(directory, name))
    return files, size


class _Runner:
    """One join's plan run in this process (every stage's runner, for their metrics)."""

    def __init__(self, operator: Any, checkpoint: str, partitions: int, config: Any) -> None:
        from streamjoin.runtime.plan_runner import PlanRunner

        runner = PlanRunner(operator.plan, checkpoint, partitions=partitions, config=config)
        self.run: Callable[..., pa.Table] = runner.run
        self.runners = list(runner.runners.values())
        self.partitions = partitions

    def last(self) -> list[dict[str, Any]]:
        """The last version's metrics of every stage and partition; older ones are dropped (memory stays flat)."""
        found = []
        for runner in self.runners:
            found += runner.metrics[-self.partitions:]
            del runner.metrics[:-self.partitions]
        return found


def soak(name: str, join: SoakJoin, args: argparse.Namespace, scratch: str,
         batches: int | None = None) -> list[dict[str, object]]:
    """Run ``join`` for ``batches`` (default ``args.batches``) versions; one row of sizes every
    ``args.every`` versions (and after the last)."""
    from streamjoin.runtime.options import StateConfig

    batches = args.batches if batches is None else batches
    checkpoint = os.path.join(scratch, name, "ck")
    config = StateConfig(store=args.store, local_dir=os.path.join(scratch, name, "local"),
                         retain_versions=args.retain)
    runner = _Runner(join.operator, checkpoint, args.partitions, config)
    rows: list[dict[str, object]] = []
    started, output = time.perf_counter(), 0
    for b in range(batches):
        output += runner.run(*join.batch(b)).num_rows
        last = runner.last()
        if (b + 1) % args.every == 0 or b + 1 == batches:
            files, size = _tree(checkpoint)
            rows.append({"join": name, "version": b,
                         "state rows": sum(int(m.get(k, 0)) for m in last for k in join.held) if join.held else "-",
                         "store entries": sum(m["state_entries_estimate"] for m in last),
                         "state bytes": sum(m["state_bytes"] for m in last), "checkpoint files": files,
                         "checkpoint bytes": size, "output rows": output,
                         "s / batch": (time.perf_counter() - started) / (b + 1)})
            print(f"{name} v{b}: {rows[-1]}", flush=True)
    return rows


def _growth(name: str, found: list[dict[str, object]]) -> list[str]:
    """A line per column: its range over the second half (after warm-up; a run of fewer than 4
    records: over all of them), and its growth a version."""
    after, part = (found[len(found) // 2:], "the second half") if len(found) >= 4 else (found, "the run")
    lines = []
    for column in ("state rows", "store entries", "state bytes", "checkpoint files", "checkpoint bytes"):
        if after[0][column] == "-":
            continue
        values = [int(r[column]) for r in after]  # type: ignore[call-overload]
        versions = int(after[-1]["version"]) - int(after[0]["version"])  # type: ignore[call-overload]
        slope = f", {(values[-1] - values[0]) / versions:+,.1f} a version" if versions else ""
        lines.append(f"{name}: {column} over {part} from {min(values):,} to {max(values):,}{slope}")
    return lines


def run(args: argparse.Namespace) -> int:
    names = [n for n in args.joins.split(",") if n]
    unknown = sorted(set(names) - set(JOINS))
    if unknown:
        raise SystemExit(f"unknown joins {unknown}; choose from {','.join(JOINS)}")
    table = Table(["join", "version", "state rows", "store entries", "state bytes", "checkpoint files",
                   "checkpoint bytes", "s / batch"])
    flat: list[str] = []
    with tempfile.TemporaryDirectory(prefix="streamjoin-soak-") as scratch:
        runs = [(name, name, True, args.batches) for name in names]
        if args.no_ttl_batches:
            runs += [(name, f"{name} no TTL", False, args.no_ttl_batches) for name in names if name in WITH_TTL]
        for name, label, ttl, batches in runs:
            found = soak(label, JOINS[name](args.keys, args.rows, ttl), args, scratch, batches)
            for row in found:
                table.add(*(row[c] for c in table.columns))
            flat += _growth(label, found)
    print(f"{args.batches:,} micro-batches, {args.keys:,} keys, {args.rows:,} rows an input a batch, "
          f"{args.partitions} partitions, {args.store}, retain_versions={args.retain}")
    print(table.render())
    for line in flat:
        print(line)
    notes = ["in-process (LocalRunner; the table-table join's three stages summed); state rows: the rows the "
             "operator holds by its own metrics (enrichment: versions_held, table versions and deletes; table: "
             "the join stage's rows_held_left + rows_held_right; interval: not counted, -); store entries and "
             "state bytes: the store's own figures summed over partitions (on RocksDB estimates; an interval "
             "entry is a group of rows as an Arrow blob, a table key stage's one primary key or tombstone); "
             "checkpoint files and bytes: everything under the join's checkpoint",
             f"enrichment (as_of, table_ttl {TTL.seconds} s) and table (inner, retention {TTL.seconds} s, "
             f"expire_rows): a live window of {args.keys:,} keys sliding by {max(1, args.keys // SLIDE):,} "
             "keys a micro-batch; random updates and deletes (one in five) of live keys; of the keys leaving "
             "the window, half deleted, half never changed again; \"no TTL\": the same without table_ttl / retention"] + flat
    print("results:", write_results("soak", table, vars(args) | {"func": None}, notes=notes,
                                    chart=Chart(value="store entries", label=("join",), kind="line", x="version",
                                                also=("checkpoint bytes",), log=True,
                                                title="soak: store entries and checkpoint bytes by version (flat after warm-up with TTL)")))
    return 0
