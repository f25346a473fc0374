"""``streamjoin bench report``: the documentation's benchmark pages, from real runs' results.

Every benchmark saves its results as JSON (``write_results``). This command finds, in each page
of the output folder, every section between ``<!-- bench:NAME -->`` and ``<!-- /bench:NAME -->``,
takes the newest results of benchmark NAME in ``--results`` (by default where the benchmarks write
them), copies them to ``NAME.json`` in that folder, draws ``NAME.png`` there and rewrites the
section: the command that produced the figures, the table, the run's notes and the chart. A section
with no new results is rendered again from its kept JSON, so figures never drift from a run.

The ``goals`` sections are the goals of :mod:`streamjoin.bench.goals` beside their figures, read
from the results kept in that folder; they are rendered again on every run (after the other
sections, so from the results just kept), whatever ``--only`` says.

The output folder is ``--out DIR`` or, by default, ``docs/bench`` of the streamjoin checkout this
package was imported from (a folder with a ``pyproject.toml`` naming streamjoin beside the
package's folders). An installed streamjoin has no such checkout: the command then refuses unless
``--out`` is given. The goals table lives on the benchmarks' index page (``docs/bench/index.md``),
not in the README, which only points to it: the report writes no README. It never writes into the
directory it is run from. A folder given with ``--out`` that holds no page with sections
gets ``benchmarks.md``, one section per benchmark with results.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import shutil
from typing import Any, Callable

from streamjoin.bench.harness import format_value, results_dir
from streamjoin.errors import StreamjoinError

__all__ = ["add_arguments", "run", "markdown_table", "render_section", "update_pages",
           "checkout_root", "ReportTargetError", "SECTION", "PAGE", "GOALS_SECTION"]

#: a page section the report owns: its benchmark's name, then everything up to the closing marker
SECTION = re.compile(r"(<!-- bench:(?P<name>[a-z0-9_-]+) -->\n)(?P<body>.*?)(<!-- /bench:(?P=name) -->)", re.S)

#: the page written into an ``--out`` folder that has none with sections
PAGE = "benchmarks.md"

#: the section of the goals beside their figures (:func:`streamjoin.bench.goals.goals_markdown`)
GOALS_SECTION = "goals"

#: the folder of this package's ``bench`` subpackage (in a checkout: the repository's ``bench/``)
_PACKAGE_DIR = os.path.dirname(os.path.realpath(__file__))   # the file, not a strict editable install's link to it


class ReportTargetError(StreamjoinError):
    """There is no folder the report may write into: not a checkout, and no ``--out`` given."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Regenerate the documentation's benchmark pages (their sections between <!-- bench:NAME --> and "
        "<!-- /bench:NAME -->) from the newest results each benchmark wrote, keeping a copy of those results "
        "and their chart beside the pages: docs/bench of the streamjoin checkout this command belongs to, "
        "or --out DIR; the goals beside their figures go into the <!-- bench:goals --> section of the pages "
        "(docs/bench/index.md). It never writes into the current directory unless it is one of these.")
    parser.add_argument("--results", default=results_dir(), help="where to look for new results "
                        "(default: where the benchmarks write them)")
    parser.add_argument("--out", default=None, metavar="DIR", help="the folder of pages to update (created if "
                        "missing; without pages, benchmarks.md is written there); default: docs/bench of "
                        "the streamjoin checkout")
    parser.add_argument("--only", default="", metavar="NAMES", help="comma-separated sections to update (default "
                        "all); the goals sections are always rendered again from the kept results")


def checkout_root(package_dir: str | None = None) -> str | None:
    """The streamjoin checkout that holds ``package_dir`` (by default this package's ``bench`` folder),
    or None when the package is installed elsewhere: the folder above it with a ``pyproject.toml``
    whose project is named streamjoin and the repository's package folders (``joins``, ``bench``)."""
    root = os.path.dirname(package_dir or _PACKAGE_DIR)
    pyproject = os.path.join(root, "pyproject.toml")
    if not (os.path.isfile(pyproject) and os.path.isdir(os.path.join(root, "joins"))
            and os.path.isdir(os.path.join(root, "bench"))):
        return None
    with open(pyproject) as fh:
        named = re.search(r'^name\s*=\s*"streamjoin"\s*$', fh.read(), re.M)
    return root if named else None


def target_dir(out: str | None) -> str:
    """Where the report writes: ``out`` if given, else the checkout's ``docs/bench``; refuses otherwise."""
    if out:
        return os.path.abspath(out)
    root = checkout_root()
    if root is None:
        raise ReportTargetError(
            f"streamjoin bench report updates the benchmark pages of a streamjoin checkout, and this streamjoin "
            f"(imported from {os.path.dirname(_PACKAGE_DIR)}) is not in one; nothing was written. "
            "Pass --out DIR to render the results into a folder of your choice.")
    return os.path.join(root, "docs", "bench")


def markdown_table(results: dict[str, Any]) -> str:
    """The results' rows as a Markdown table, formatted as printed; a column of numbers (and "-") right-aligned."""
    columns = results.get("columns") or (list(results["rows"][0]) if results["rows"] else [])
    rows = [[row.get(c, "") for c in columns] for row in results["rows"]]
    numeric = [any(_number(r[i]) for r in rows) and all(_number(r[i]) or r[i] == "-" for r in rows)
               for i in range(len(columns))]
    lines = ["| " + " | ".join(columns) + " |",
             "|" + "|".join("---:" if n else "---" for n in numeric) + "|"]
    lines += ["| " + " | ".join(format_value(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def render_section(results: dict[str, Any], chart_path: str | None) -> str:
    """A section's body: how the figures were made, the table, the notes, the chart."""
    out = [f"`{results['command']}` ({results.get('date', '?')}, {results.get('cpus', '?')} CPUs, "
           f"{results.get('machine', '?')}):", "", markdown_table(results), ""]
    out += [f"- {note}" for note in results.get("notes", [])]
    if results.get("notes"):
        out.append("")
    if chart_path:
        out += [f"![{results['chart']['title']}]({chart_path})", ""]
    return "\n".join(out)


def _newest(directory: str, name: str) -> str | None:
    found = sorted(glob.glob(os.path.join(glob.escape(directory), f"{name}-[0-9]*T[0-9]*.json")))
    return found[-1] if found else None


def _benchmarks_with_results(directory: str) -> list[str]:
    names = {re.sub(r"-[0-9]+T[0-9]+\.json$", "", os.path.basename(p))
             for p in glob.glob(os.path.join(glob.escape(directory), "*-[0-9]*T[0-9]*.json"))}
    return sorted(names)


def _rewrite(page: str, render: Callable[[str], str | None]) -> None:
    """Rewrite the sections of ``page`` for which ``render(name)`` gives a body; leave the rest as it is."""
    with open(page) as fh:
        text = fh.read()

    def replace(match: re.Match[str]) -> str:
        body = render(match.group("name"))
        return match.group(0) if body is None else match.group(1) + body + match.group(4)

    new = SECTION.sub(replace, text)
    if new != text:
        with open(page, "w") as fh:
            fh.write(new)


def update_pages(out: str, results: str, only: set[str] | None = None) -> dict[str, str]:
    """Rewrite the sections of every page (``*.md``) in the folder ``out`` from the newest results under
    ``results``, results and charts kept beside the pages, then its goals sections from the results kept
    there; return, per section, where its figures came from (a path) or why it was left as it was. A
    folder with no sections gets :data:`PAGE`."""
    os.makedirs(out, exist_ok=True)
    pages = [p for p in sorted(glob.glob(os.path.join(glob.escape(out), "*.md")))
             if SECTION.search(open(p).read())]
    if not pages:
        names = [n for n in _benchmarks_with_results(results) if not only or n in only]
        if not names:
            return {}
        pages = [os.path.join(out, PAGE)]
        with open(pages[0], "w") as fh:
            fh.write("# Benchmarks\n\n" + "".join(f"<!-- bench:{n} -->\n<!-- /bench:{n} -->\n\n" for n in names))
    done: dict[str, str] = {}

    def render(name: str) -> str | None:
        if name == GOALS_SECTION or (only and name not in only):
            return None
        kept = os.path.join(out, f"{name}.json")
        newest = _newest(results, name)
        if newest:
            shutil.copyfile(newest, kept)
        if not os.path.exists(kept):
            done[name] = f"left as it was: no results of `streamjoin bench {name}` in {results} nor in {kept}"
            return None
        with open(kept) as fh:
            data = json.load(fh)
        chart = None
        if data.get("chart"):
            from streamjoin.bench.charts import draw

            chart = os.path.basename(draw(data, os.path.join(out, f"{name}.png")))
        done[name] = newest or kept
        return render_section(data, chart)

    for page in pages:
        _rewrite(page, render)
    for page in pages:
        _rewrite(page, lambda name: _goals(name, out, done))
    return done


def _goals(name: str, kept: str, done: dict[str, str]) -> str | None:
    """The goals section's body (the goals beside their figures in the results kept in ``kept``); None
    for any other section."""
    if name != GOALS_SECTION:
        return None
    from streamjoin.bench.goals import goals_markdown

    done[name] = "streamjoin.bench.goals"
    return goals_markdown(kept)


def run(args: argparse.Namespace) -> int:
    only = {n for n in args.only.split(",") if n} or None
    try:
        out = target_dir(args.out)
    except ReportTargetError as e:
        print(f"streamjoin bench report: {e}")
        return 2
    done = update_pages(out, args.results, only)
    if not done:
        print(f"no section <!-- bench:NAME --> ... <!-- /bench:NAME --> in the pages of {out}, "
              f"and no results{' of ' + ', '.join(sorted(only)) if only else ''} in {args.results} to start one")
        return 1
    for name, source in done.items():
        print(f"{name}: {source}")
    print(f"pages updated in {out}")
    return 1 if any(source.startswith("left as it was") for source in done.values()) else 0
