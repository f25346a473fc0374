"""``streamjoin bench NAME``: run one benchmark and print its table.

Each benchmark is a module exposing ``add_arguments(parser)`` and ``run(args) -> int``; it is
listed in :data:`BENCHMARKS` and imported only when chosen.
"""

from __future__ import annotations

import argparse
import importlib

__all__ = ["register", "BENCHMARKS"]

#: name -> (module, one-line description)
BENCHMARKS: dict[str, tuple[str, str]] = {
    "stores": ("bench.stores", "store operations per second per backend, beside the raw library"),
    "changelog": ("bench.changelog", "changelog append and restore rates per backend"),
    "runtime": ("bench.runtime", "Spark runtime overhead beside a bare repartition + mapInArrow"),
    "interval": ("bench.interval", "interval join beside Spark's own stream-stream join"),
}


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "bench",
        help="run a benchmark and print its table",
        description="Run one benchmark. Compare the ratios in one table, measured side by side in "
        "one run; medians of --repeat runs are shown.",
    )
    names = parser.add_subparsers(dest="benchmark", metavar="NAME")
    for name, (module_name, summary) in BENCHMARKS.items():
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name == module_name:
                continue  # not written yet
            raise
        sub = names.add_parser(name, help=summary, description=summary)
        module.add_arguments(sub)
        sub.set_defaults(func=module.run)
