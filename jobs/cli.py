"""The ``streamjoin`` command: one entry point for the jobs, the benchmarks and the changelogs.

Each subcommand lives in its own module, which exposes ``register(subparsers)``: it adds its parser
and sets ``func`` to a callable taking the parsed arguments and returning an exit code. Modules are
imported here only to build the parser, so they must not import pyspark at module level.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Sequence

__all__ = ["main", "build_parser"]

#: (module, one-line help) of every subcommand, in the order ``--help`` lists them.
SUBCOMMANDS: tuple[str, ...] = (
    "streamjoin.jobs.demo",
    "streamjoin.jobs.enrich_activity",
    "streamjoin.jobs.timeline",
    "streamjoin.jobs.postgres_cdc",
    "streamjoin.changelog.cli",
    "streamjoin.jobs.checkpoint",
    "streamjoin.bench.cli",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="streamjoin",
        description="Stateful stream joins for PySpark: run the jobs, the benchmarks, and inspect, "
        "verify, compact or restore changelogs.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module_name in SUBCOMMANDS:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name == module_name:
                continue  # a subcommand not built yet
            raise
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("streamjoin: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
