"""``streamjoin bench compare REV NAME [options]``: one benchmark, another revision beside this checkout.

The other revision (any git revision of this checkout's repository, e.g. ``f9fb3a2^``, the 0.1
release) gets its own virtual environment: its tree is checked out with ``git worktree add
--detach`` under the system's temporary directory and installed, with its own pinned dependencies,
into a new venv (not editable: the worktree is removed once installed). The venv is kept under
``<tmp>/streamjoin-compare/<commit>`` and reused by the next compare of the same commit
(``--rebuild`` makes it again).

Both sides then run ``streamjoin bench NAME [options]`` as subprocesses, alternately (other, this,
other, this, ... ``--repeat`` pairs), each with its own interpreter for Spark's Python workers and
its own temporary directory (so their results files do not become the newest that ``streamjoin
bench report`` renders). Every run's results JSON is read back; the table shows, per row of the
benchmark's table (its first column) and per compared figure, both sides' runs, their medians and
the ratio this / other. The load average (``/proc/loadavg``) is printed beside every run, and
a warning when the 1-minute load is above 1.5 times the CPU count (:func:`streamjoin.bench.harness.load_warning`,
as for every benchmark): such figures are not to be trusted.

Before running, each side's ``streamjoin bench NAME --help`` is read: a revision that lacks the
benchmark or one of the options given stops the compare, saying which.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from typing import Any, Sequence

from streamjoin.bench.harness import Table, format_value, load_warning
from streamjoin.errors import StreamjoinError
from streamjoin.jobs.common import help_text

__all__ = ["add_arguments", "run", "HEADLINES", "results_path", "figures", "headline_fields",
           "compare_table", "parse_loadavg", "missing_options", "CompareError"]

#: per benchmark, the figures compared by default (columns of its results table); others: its first numeric column
HEADLINES: dict[str, tuple[str, ...]] = {
    "runtime": ("median s", "batches s", "fixed s"),
    "interval": ("seconds", "batches s", "fixed s"),
}


class CompareError(StreamjoinError):
    """The compare cannot go on: a revision does not resolve, does not build, or lacks what is asked."""


# -- pure parts (tested without Spark) -----------------------------------------------------------

def results_path(stdout: str) -> str | None:
    """The path a benchmark printed on its ``results: PATH`` line (the last one), or None."""
    found = [line[len("results:"):].strip() for line in stdout.splitlines() if line.startswith("results:")]
    return found[-1] if found else None


def figures(results: dict[str, Any]) -> dict[tuple[str, str], float]:
    """The numeric cells of a results JSON, keyed by (row label, column). A row's label is its cells
    in the table's leading columns that hold no number in any row (e.g. nexmark's "query / join /
    variant"), joined with " / "; at least the first column."""
    columns = results.get("columns") or (list(results["rows"][0]) if results.get("rows") else [])
    rows = results.get("rows", [])
    keys = 1
    while keys < len(columns) and not any(_number(row.get(columns[keys])) for row in rows):
        keys += 1
    out: dict[tuple[str, str], float] = {}
    for row in rows:
        label = " / ".join(str(row.get(c, "")) for c in columns[:keys])
        for column in columns[keys:]:
            value = row.get(column)
            if _number(value):
                out[(label, column)] = float(value)
    return out


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def headline_fields(benchmark: str, results: dict[str, Any], chosen: str | None = None) -> list[str]:
    """The columns to compare: ``chosen`` (comma-separated, or ``all``: every numeric column), else the
    benchmark's :data:`HEADLINES`, else its first numeric column."""
    columns = results.get("columns") or (list(results["rows"][0]) if results.get("rows") else [])
    numeric = list(dict.fromkeys(c for _, c in figures(results)))
    numeric.sort(key=columns.index)
    if chosen == "all":
        return numeric
    if chosen:
        return [c for c in chosen.split(",") if c]
    return list(HEADLINES.get(benchmark, ())) or numeric[:1]


def compare_table(other: Sequence[dict[tuple[str, str], float]], this: Sequence[dict[tuple[str, str], float]],
                  fields: Sequence[str], other_name: str) -> Table:
    """One row per (row label, field) found on either side: both sides' runs, medians, and the ratio
    this / other of the medians ("-" where a side lacks the figure)."""
    labels = list(dict.fromkeys(label for runs in (other, this) for run in runs for label, _ in run))
    table = Table(["row", "figure", f"{other_name} runs", f"{other_name} median", "this runs", "this median",
                   f"this / {other_name}"])
    for label in labels:
        for field in fields:
            a = [run[(label, field)] for run in other if (label, field) in run]
            b = [run[(label, field)] for run in this if (label, field) in run]
            if not a and not b:
                continue
            ma = statistics.median(a) if a else None
            mb = statistics.median(b) if b else None
            ratio = mb / ma if ma and mb is not None else "-"
            table.add(label, field, " ".join(format_value(v) for v in a) or "-", "-" if ma is None else ma,
                      " ".join(format_value(v) for v in b) or "-", "-" if mb is None else mb, ratio)
    return table


def parse_loadavg(text: str) -> tuple[float, float, float]:
    """The 1-, 5- and 15-minute load averages of ``/proc/loadavg``'s text."""
    one, five, fifteen = (float(v) for v in text.split()[:3])
    return one, five, fifteen


def missing_options(options: Sequence[str], help_text: str) -> list[str]:
    """The ``--option`` names in ``options`` (``--x=1`` counts as ``--x``) that ``help_text`` does not list."""
    names = [o.split("=", 1)[0] for o in options if o.startswith("--")]
    listed = set(re.findall(r"--[A-Za-z0-9][-\w]*", help_text))
    return [n for n in dict.fromkeys(names) if n not in listed and n != "--help"]


# -- the two sides -------------------------------------------------------------------------------

@dataclass(frozen=True)
class Side:
    """One side of the compare: how to run its ``streamjoin`` and with which Python."""

    name: str
    command: tuple[str, ...]
    python: str

    def run(self, args: Sequence[str], tmp: str) -> subprocess.CompletedProcess[str]:
        """``streamjoin ARGS`` of this side, in ``tmp`` (its working and temporary directory)."""
        env = dict(os.environ, PYSPARK_PYTHON=self.python, PYSPARK_DRIVER_PYTHON=self.python, TMPDIR=tmp,
                   PATH=os.path.dirname(self.python) + os.pathsep + os.environ.get("PATH", ""))
        env.pop("PYTHONPATH", None)
        env.pop("VIRTUAL_ENV", None)
        return subprocess.run([*self.command, *args], cwd=tmp, env=env, capture_output=True, text=True)


def _git(root: str, *args: str) -> str:
    done = subprocess.run(["git", "-C", root, *args], capture_output=True, text=True)
    if done.returncode:
        raise CompareError(f"git {' '.join(args)} failed: {done.stderr.strip()}")
    return done.stdout.strip()


def _repository() -> str:
    from streamjoin.bench.report import checkout_root

    root = checkout_root()
    if root is None:
        raise CompareError("streamjoin bench compare needs the streamjoin git checkout this package runs from "
                           "(an editable install, as scripts/_env.sh makes); this one is installed elsewhere")
    return root


def build_side(root: str, rev: str, rebuild: bool = False) -> Side:
    """A venv with revision ``rev`` installed (its own dependencies), cached by commit under the temp dir."""
    commit = _git(root, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
    home = os.path.join(tempfile.gettempdir(), "streamjoin-compare", commit)
    venv, ready = os.path.join(home, "venv"), os.path.join(home, "venv", ".streamjoin-ready")
    python, script = os.path.join(venv, "bin", "python"), os.path.join(venv, "bin", "streamjoin")
    name = f"{rev} ({commit[:7]})"
    if os.path.exists(ready) and not rebuild:
        print(f"{name}: reusing its environment {venv}", flush=True)
        return Side(name, (script,), python)
    shutil.rmtree(venv, ignore_errors=True)
    os.makedirs(home, exist_ok=True)
    source = tempfile.mkdtemp(prefix="src-", dir=home)
    os.rmdir(source)
    print(f"{name}: checking it out in {source} and installing it into {venv} (a minute or more)", flush=True)
    _git(root, "worktree", "add", "--detach", source, commit)
    try:
        steps = [[sys.executable, "-m", "venv", venv],
                 [python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", f"{source}[spark,bench]"]]
        for step in steps:
            done = subprocess.run(step, capture_output=True, text=True)
            if done.returncode:
                raise CompareError(f"could not build {name}'s environment: {' '.join(step)} failed:\n"
                                   f"{done.stderr.strip()[-2000:]}")
    finally:
        subprocess.run(["git", "-C", root, "worktree", "remove", "--force", source], capture_output=True)
        shutil.rmtree(source, ignore_errors=True)
        subprocess.run(["git", "-C", root, "worktree", "prune"], capture_output=True)
    if not os.path.exists(script):
        raise CompareError(f"{name} installed no streamjoin command: it has no `streamjoin bench` to compare")
    open(ready, "w").close()
    return Side(name, (script,), python)


def check_side(side: Side, benchmark: str, options: Sequence[str], tmp: str) -> None:
    """Refuse, saying which, when ``side`` lacks the benchmark or one of the options."""
    done = side.run(["bench", benchmark, "--help"], tmp)
    if done.returncode:
        listing = side.run(["bench", "--help"], tmp).stdout
        said = (done.stderr.strip().splitlines() or ["no message"])[-1]
        raise CompareError(f"{side.name} has no benchmark {benchmark!r} (`streamjoin bench {benchmark} --help` "
                           f"failed: {said}); its `streamjoin bench --help`:\n{listing}")
    missing = missing_options(options, done.stdout)
    if missing:
        raise CompareError(f"{side.name}'s `streamjoin bench {benchmark}` has no option {', '.join(missing)} "
                           f"(its options are below; leave that option out to compare):\n{done.stdout}")


def read_load() -> tuple[float, float, float]:
    with open("/proc/loadavg") as fh:
        return parse_loadavg(fh.read())


def error_lines(text: str, most: int = 5) -> str:
    """The first ``most`` lines of ``text`` that name an error or exception, each cut to 500
    characters (a failed run's cause, which its output's tail, often a query plan, hides), with
    a line saying so; empty when there are none."""
    found = [line[:500] for line in text.splitlines() if "Error" in line or "Exception" in line][:most]
    return "".join(f"{line}\n" for line in ["the first lines naming an error:", *found, "the output's end:"]) if found else ""


def measure(side: Side, benchmark: str, options: Sequence[str], scratch: str, label: str) -> dict[str, Any]:
    """Run the benchmark once on ``side``, printing the load beside it; return its results JSON."""
    load = read_load()
    print(f"{label}: {side.name}, load {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}", flush=True)
    warning = load_warning(load)
    if warning:
        print(warning, flush=True)     # on stdout, beside the run it concerns
    tmp = tempfile.mkdtemp(prefix="run-", dir=scratch)
    done = side.run(["bench", benchmark, *options], tmp)
    path = results_path(done.stdout)
    if done.returncode or path is None:
        raise CompareError(f"{side.name}: `streamjoin bench {benchmark}` failed (exit {done.returncode}"
                           f"{'' if path else ', no results: line'}):\n{done.stdout[-2000:]}\n"
                           f"{error_lines(done.stderr)}{done.stderr[-3000:]}")
    with open(path) as fh:
        results = json.load(fh)
    results["_load"] = load
    return results


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.description = help_text((__doc__ or "").split("\n", 2)[2]) + (
        "\nCompare's own options come before REV; everything after NAME is the benchmark's.\n\n"
        "example (the 0.1 release is the parent of commit f9fb3a2):\n"
        "  streamjoin bench compare --repeat 3 f9fb3a2^ interval --rows 200000 --repeat 1")
    parser.add_argument("--repeat", type=int, default=3, help="pairs of runs, other then this (default 3)")
    defaults = "; ".join(f"{name}: {', '.join(columns)}" for name, columns in HEADLINES.items())
    parser.add_argument("--fields", default=None, help="comma-separated columns of the benchmark's table to "
                        f"compare, or 'all' (default: {defaults}; others: the first numeric column)")
    parser.add_argument("--rebuild", action="store_true", help="build the other revision's environment again")
    parser.add_argument("rev", metavar="REV", help="the other revision (a commit, tag or branch; e.g. f9fb3a2^)")
    parser.add_argument("benchmark", metavar="NAME", help="the benchmark (see `streamjoin bench --help`)")
    parser.add_argument("options", nargs=argparse.REMAINDER, help="the benchmark's options, for both sides")


def run(args: argparse.Namespace) -> int:
    try:
        return _compare(args)
    except CompareError as error:
        print(f"streamjoin bench compare: {error}", file=sys.stderr)
        return 2


def _compare(args: argparse.Namespace) -> int:
    root = _repository()
    other = build_side(root, args.rev, args.rebuild)
    this = Side(f"this checkout ({root})", (sys.executable, "-m", "streamjoin.jobs.cli"), sys.executable)
    scratch = tempfile.mkdtemp(prefix="streamjoin-compare-run-")
    try:
        for side in (other, this):
            check_side(side, args.benchmark, args.options, scratch)
        runs: dict[str, list[dict[str, Any]]] = {"other": [], "this": []}
        for i in range(max(1, args.repeat)):
            runs["other"].append(measure(other, args.benchmark, args.options, scratch, f"pair {i + 1}, other"))
            runs["this"].append(measure(this, args.benchmark, args.options, scratch, f"pair {i + 1}, this"))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    fields = headline_fields(args.benchmark, runs["this"][0], args.fields)
    short = args.rev
    print(f"\nstreamjoin bench {args.benchmark} {' '.join(args.options)}: {other.name} (other) vs {this.name} "
          f"(this), {len(runs['this'])} pair(s); ratio this / {short}: below 1 means this checkout's figure is smaller")
    table = compare_table([figures(r) for r in runs["other"]], [figures(r) for r in runs["this"]], fields, short)
    print(table.render())
    absent = [f for f in fields if not any(c == f for r in runs["other"] for _, c in figures(r))]
    if absent:
        print(f"{other.name} reports no {', '.join(absent)}: shown as '-'")
    loads = [r["_load"][0] for side in runs.values() for r in side]
    print(f"1-minute load during the runs: {min(loads):.2f} to {max(loads):.2f}")
    if load_warning([max(loads)]):
        print(f"WARNING: {load_warning([max(loads)])}; take these figures again on a quiet machine")
    return 0
