"""``streamjoin bench NAME``: run one benchmark and print its table.

Each benchmark is a module exposing ``add_arguments(parser)`` and ``run(args) -> int``; it is
listed in :data:`BENCHMARKS` and imported only when chosen.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from streamjoin.bench import environment
from streamjoin.bench.harness import warn_if_busy

__all__ = ["register", "BENCHMARKS"]

#: name -> (module, one-line description)
BENCHMARKS: dict[str, tuple[str, str]] = {
    "stores": ("streamjoin.bench.stores", "store operations per second per backend, beside the raw library"),
    "changelog": ("streamjoin.bench.changelog", "changelog append and restore rates per backend"),
    "runtime": ("streamjoin.bench.runtime", "Spark runtime overhead beside a bare repartition + mapInArrow"),
    "interval": ("streamjoin.bench.interval", "interval join beside Spark's own stream-stream join"),
    "enrichment": ("streamjoin.bench.enrichment", "stream-table join per store beside Spark's stream-static join"),
    "table": ("streamjoin.bench.table", "table-table join (a maintained view) beside recomputing the join in Spark"),
    "view": ("streamjoin.bench.view", "a view over three tables (a chain of two joins) beside its first join alone"),
    "postgres": ("streamjoin.bench.postgres", "changes/s from a PostgreSQL slot: decoded, read by Spark, joined"),
    "latency": ("streamjoin.bench.latency", "seconds and micro-batches until a row the watermark releases is in the sink, beside Spark"),
    "restart": ("streamjoin.bench.restart", "restarting a stream-table join on a large table, with and without a column added"),
    "rescale": ("streamjoin.bench.rescale", "routing by key group, and the version that rebuilds after a partition change"),
    "nexmark": ("streamjoin.bench.nexmark", "Nexmark q3, q20 and a q8-like window join beside Spark on the same data"),
    "checkpoint-io": ("streamjoin.bench.checkpoint_io", "checkpoint file-system calls and seconds per task at 16, 64, 200 partitions"),
    "store-time": ("streamjoin.bench.store_time", "each join in process: its state-store seconds per input row, beside its task seconds"),
    "soak": ("streamjoin.bench.soak", "1,000 micro-batches: state and checkpoint size stay flat after warm-up"),
    "compare": ("streamjoin.bench.compare", "a benchmark for another git revision and this checkout, alternately"),
    "report": ("streamjoin.bench.report", "render the newest results into the documentation's benchmark pages and charts"),
}


def register(subparsers: argparse._SubParsersAction) -> None:
    listing = "\n".join(f"  {name:<13s} {summary}" for name, (_, summary) in BENCHMARKS.items())
    parser = subparsers.add_parser(
        "bench",
        help="run a benchmark and print its table",
        description="Run one benchmark. Variants are measured side by side in one run and "
        "compared as ratios of medians.\n\nbenchmarks:\n" + listing
        + "\n\n`streamjoin bench NAME --help` shows a benchmark's options.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("benchmark", choices=sorted(BENCHMARKS), metavar="NAME")
    parser.add_argument("options", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    """Import the chosen benchmark only now, and let it parse its own options."""
    module_name, summary = BENCHMARKS[args.benchmark]
    module = importlib.import_module(module_name)
    parser = argparse.ArgumentParser(prog=f"streamjoin bench {args.benchmark}", description=summary)
    module.add_arguments(parser)
    options = parser.parse_args(args.options)
    print(f"this process: {environment.apply()}", file=sys.stderr)
    warn_if_busy()                      # before the run, and after it: the figures were taken in between
    try:
        return int(module.run(options) or 0)
    finally:
        warn_if_busy()
