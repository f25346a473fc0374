"""The ``streamjoin`` command: one entry point for the jobs, the benchmarks and the changelogs.

Each subcommand lives in its own module, which exposes ``register(subparsers)``: it adds its parser
and sets ``func`` to a callable taking the parsed arguments and returning an exit code. Modules are
imported here only to build the parser, so they must not import pyspark at module level.

``streamjoin --version`` prints the installed version. Output into a pipe whose reader has gone
(``streamjoin changelog inspect --json LOG | head``) ends any subcommand quietly with exit status
:data:`PIPE_CLOSED`, as a command killed by SIGPIPE, instead of a traceback: the way Python's
documentation of :mod:`signal` recommends (stdout pointed at ``os.devnull``, so that the
interpreter's last flush does not fail again).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import Sequence

__all__ = ["main", "build_parser", "PIPE_CLOSED"]

#: The exit status when stdout's reader has gone (128 + SIGPIPE, as a shell reports a command
#: killed by SIGPIPE).
PIPE_CLOSED = 141

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
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
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


def _version() -> str:
    from streamjoin import __version__

    return __version__


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command ``argv`` (default: the process's arguments); return its exit status.
    argparse's usage errors, ``--help`` and ``--version`` raise SystemExit as usual; a closed
    stdout ends the command with :data:`PIPE_CLOSED` (see module)."""
    try:
        try:
            return _run(argv)
        finally:
            sys.stdout.flush()
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return PIPE_CLOSED


def _run(argv: Sequence[str] | None) -> int:
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
