"""``streamjoin bench report``: the README's benchmark tables and charts, from real runs' results.

Every benchmark saves its results as JSON (``write_results``). This command finds, for each
section of the README between ``<!-- bench:NAME -->`` and ``<!-- /bench:NAME -->``, the newest
results of benchmark NAME in ``--results`` (by default where the benchmarks write them), copies
them to ``docs/bench/NAME.json`` beside the README, draws ``docs/bench/NAME.png``, and rewrites the
section: the command that produced the figures, the table, the run's notes and the chart. A section
with no new results is rendered again from its committed JSON, so figures never drift from a run.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import shutil
from typing import Any

from streamjoin.bench.harness import format_value, results_dir

__all__ = ["add_arguments", "run", "markdown_table", "render_section", "update_readme", "SECTION"]

#: a README section the report owns: its benchmark's name, then everything up to the closing marker
SECTION = re.compile(r"(<!-- bench:(?P<name>[a-z0-9_-]+) -->\n)(?P<body>.*?)(<!-- /bench:(?P=name) -->)", re.S)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Regenerate the README's benchmark sections (between <!-- bench:NAME --> and <!-- /bench:NAME -->) "
        "from the newest results each benchmark wrote, keeping a copy of those results and their chart "
        "under docs/bench/.")
    parser.add_argument("--results", default=results_dir(), help="where to look for new results "
                        "(default: where the benchmarks write them)")
    parser.add_argument("--readme", default="README.md", help="the README to update (default README.md)")
    parser.add_argument("--only", default="", metavar="NAMES", help="comma-separated sections to update (default all)")


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


def update_readme(readme: str, results: str, only: set[str] | None = None) -> dict[str, str]:
    """Rewrite ``readme``'s sections from the newest results under ``results``; return, per section,
    where its figures came from (a path) or why it was left as it was."""
    root = os.path.dirname(os.path.abspath(readme))
    docs = os.path.join(root, "docs", "bench")
    with open(readme) as fh:
        text = fh.read()
    done: dict[str, str] = {}

    def replace(match: re.Match[str]) -> str:
        name = match.group("name")
        if only and name not in only:
            return match.group(0)
        kept = os.path.join(docs, f"{name}.json")
        newest = _newest(results, name)
        if newest:
            os.makedirs(docs, exist_ok=True)
            shutil.copyfile(newest, kept)
        if not os.path.exists(kept):
            done[name] = f"left as it was: no results of `streamjoin bench {name}` in {results} nor in {kept}"
            return match.group(0)
        with open(kept) as fh:
            data = json.load(fh)
        chart = None
        if data.get("chart"):
            from streamjoin.bench.charts import draw

            chart = os.path.relpath(draw(data, os.path.join(docs, f"{name}.png")), root)
        done[name] = newest or kept
        return match.group(1) + render_section(data, chart) + match.group(4)

    text = SECTION.sub(replace, text)
    with open(readme, "w") as fh:
        fh.write(text)
    return done


def run(args: argparse.Namespace) -> int:
    only = {n for n in args.only.split(",") if n} or None
    done = update_readme(args.readme, args.results, only)
    if not done:
        print(f"no section <!-- bench:NAME --> ... <!-- /bench:NAME --> in {args.readme}")
        return 1
    for name, source in done.items():
        print(f"{name}: {source}")
    return 1 if any(source.startswith("left as it was") for source in done.values()) else 0
