"""What the jobs share: their run options, a fresh output root, stage lines, and path helpers."""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Any

from streamjoin.jobs.session import add_session_options
from streamjoin.statestore.registry import DEFAULT_KIND

__all__ = ["add_run_options", "prepare_root", "stage", "follow", "JobPaths", "help_text"]


_ROLE = re.compile(r":[a-z]+:`~?([^`]+)`")


def help_text(doc: str) -> str:
    """A docstring as ``--help`` shows it: literals (double backquotes) and cross-references
    (``:func:`name```, ``:mod:`~a.b```) as their plain text, the last part of a ``~`` one."""
    plain = _ROLE.sub(lambda m: m.group(1).rsplit(".", 1)[-1] if m.group(0).count("~") else m.group(1), doc)
    return plain.replace("``", "")


def add_run_options(parser: argparse.ArgumentParser, *, seed: int, store_help: str, partitions_help: str) -> None:
    """``--store``, ``--partitions``, ``--seed`` and ``--out``, as every job takes them."""
    parser.add_argument("--store", default=DEFAULT_KIND, help=store_help)
    parser.add_argument("--partitions", type=int, default=4, help=partitions_help)
    parser.add_argument("--seed", type=int, default=seed, help=f"generator seed (default {seed})")
    parser.add_argument("--out", default=None,
                        help="directory for inputs, outputs and checkpoints (default: a new directory under the "
                             "system's temporary directory); an existing one must be empty or from an earlier run")
    add_session_options(parser)


def prepare_root(out: str | None, job: str) -> str:
    """A fresh output root for ``job``: ``out`` (emptied if an earlier run of the job made it,
    refused if it holds anything else) or a new directory under the temporary directory."""
    marker = f".streamjoin-{job}"
    if out is None:
        root = tempfile.mkdtemp(prefix=f"streamjoin-{job}-", dir=tempfile.gettempdir())
    else:
        root = os.path.abspath(out)
        if os.path.isdir(root) and os.listdir(root):
            if not os.path.exists(os.path.join(root, marker)):
                raise SystemExit(f"streamjoin {job}: {root} is not empty and not from an earlier run of this job; "
                                 "pass an empty or new directory to --out")
            shutil.rmtree(root)
        os.makedirs(root, exist_ok=True)
    open(os.path.join(root, marker), "w").close()
    return root


def stage(n: int, total: int, text: str, started: float) -> None:
    """Print stage ``n`` of ``total`` with the seconds since ``started`` (a ``time.perf_counter()``)."""
    print(f"[{n}/{total} at {time.perf_counter() - started:3.0f} s] {text}", flush=True)


def follow(query: Any, *, poll_seconds: float = 0.5) -> None:
    """Wait for ``query`` to end, printing one line to stderr per micro-batch it completes (by
    Spark's batch id): its input rows, and the join's rows out and watermark
    (:func:`streamjoin.progress_metrics`). A failed query raises its error."""
    from streamjoin import progress_metrics

    shown = -1
    while True:
        finished = query.awaitTermination(poll_seconds)
        for progress in query.recentProgress:
            if progress["batchId"] <= shown:
                continue
            shown = progress["batchId"]
            metrics = progress_metrics(progress) or {}
            watermark = metrics.get("watermark")
            mark = "no join watermark yet" if watermark is None else f"join watermark {watermark:%Y-%m-%d %H:%M:%S}"
            print(f"      micro-batch {shown}: {progress['numInputRows']:,} rows in, "
                  f"{metrics.get('output_rows', 0):,} joined rows out, {mark}", file=sys.stderr, flush=True)
        if finished:
            return


@dataclass(frozen=True)
class JobPaths:
    """Where a job's inputs, outputs and checkpoints go, under one root."""

    root: str

    def _under(self, *parts: str) -> str:
        return os.path.join(self.root, *parts)

    @property
    def inputs(self) -> str:
        return self._under("inputs")
