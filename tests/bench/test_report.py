"""``streamjoin bench report``: from a results file a benchmark wrote, a benchmark page's section gets
the command, the table and the chart, a copy of the results is kept beside the page, and a section
without results is left as it was; the goals sections of the pages show the goals beside the figures
just kept (the README is never written: it only points to them); it writes only into the checkout
it belongs to or ``--out``, never into the directory it runs in (no Spark, no timing)."""

from __future__ import annotations

import argparse
import json
import os

from streamjoin.bench import goals, report
from streamjoin.bench.cli import BENCHMARKS
from streamjoin.bench.goals import Cell, Goal
from streamjoin.bench.harness import Chart, Table, write_results
from streamjoin.bench.report import SECTION
from streamjoin.jobs.cli import main

PAGE = """# project

intro

<!-- bench:demo -->
old figures
<!-- /bench:demo -->

between

<!-- bench:missing -->
kept as it is
<!-- /bench:missing -->
"""


def _fixture(directory: str) -> str:
    table = Table(["variant", "seconds", "rows/s"])
    table.add("spark", 4.0, 250_000.0)
    table.add("streamjoin-rocksdb", 2.0, 500_000.0)
    table.add("flink (published)", "-", "-")
    return write_results("demo", table, {"rows": 1_000_000, "func": print}, directory=directory,
                         chart=Chart(value="rows/s", label=("variant",), title="demo rows/s"),
                         notes=["every variant's output checked"])


def test_report_renders_tables_and_charts_from_results(tmp_path):
    results, pages = tmp_path / "results", tmp_path / "docs" / "bench"
    pages.mkdir(parents=True)
    page = pages / "index.md"
    page.write_text(PAGE)
    written = _fixture(str(results))
    assert os.path.exists(written.removesuffix(".json") + ".png")
    assert json.loads(open(written).read())["params"] == {"rows": 1_000_000}

    done = report.update_pages(str(pages), str(results))

    text = page.read_text()
    assert done["demo"] == written and done["missing"].startswith("left as it was")
    assert "old figures" not in text and "kept as it is" in text
    assert "| variant | seconds | rows/s |\n|---|---:|---:|\n| spark | 4.00 | 250,000 |" in text
    assert "| streamjoin-rocksdb | 2.00 | 500,000 |" in text
    assert "- every variant's output checked" in text
    assert "![demo rows/s](demo.png)" in text
    assert (pages / "demo.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert json.loads((pages / "demo.json").read_text())["rows"][1]["rows/s"] == 500_000.0
    assert text.startswith("# project\n\nintro\n\n<!-- bench:demo -->\n`streamjoin bench demo` (")


def test_report_renders_again_from_the_kept_copy(tmp_path):
    pages = tmp_path / "pages"
    pages.mkdir()
    (pages / "index.md").write_text(PAGE)
    _fixture(str(tmp_path / "results"))
    report.update_pages(str(pages), str(tmp_path / "results"))
    first = (pages / "index.md").read_text()
    (tmp_path / "empty").mkdir()

    done = report.update_pages(str(pages), str(tmp_path / "empty"))

    assert done["demo"] == str(pages / "demo.json")
    assert (pages / "index.md").read_text() == first


def test_report_run_fails_when_a_section_has_no_results(tmp_path):
    (tmp_path / "index.md").write_text(PAGE)
    args = argparse.Namespace(out=str(tmp_path), results=str(tmp_path), only="missing")
    assert report.run(args) == 1
    assert (tmp_path / "index.md").read_text() == PAGE


def _project(path, name):
    """A folder laid out like a checkout: pyproject.toml naming ``name``, the package folders."""
    for folder in ("joins", "bench", "docs/bench"):
        (path / folder).mkdir(parents=True)
    (path / "pyproject.toml").write_text(f'[project]\nname = "{name}"\n')
    return path


def test_report_never_rewrites_the_readme_of_the_directory_it_runs_in(tmp_path, monkeypatch, capsys):
    # a user's own project with a README that happens to hold a section, and streamjoin installed
    # (its package folder is not in a streamjoin checkout): the report refuses and writes nothing.
    user = tmp_path / "my-project"
    user.mkdir()
    (user / "README.md").write_text(PAGE)
    _fixture(str(tmp_path / "results"))
    monkeypatch.chdir(user)
    monkeypatch.setattr(report, "_PACKAGE_DIR", str(tmp_path / "site-packages" / "streamjoin" / "bench"), raising=False)

    code = main(["bench", "report", "--results", str(tmp_path / "results")])

    assert (user / "README.md").read_text() == PAGE
    assert sorted(p.name for p in user.iterdir()) == ["README.md"]
    assert code == 2
    assert "not in one; nothing was written. Pass --out DIR" in capsys.readouterr().out


def test_report_writes_into_the_checkout_it_belongs_to(tmp_path, monkeypatch):
    checkout = _project(tmp_path / "checkout", "streamjoin")
    (checkout / "docs" / "bench" / "index.md").write_text(PAGE)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "README.md").write_text(PAGE)
    _fixture(str(tmp_path / "results"))
    monkeypatch.chdir(elsewhere)
    monkeypatch.setattr(report, "_PACKAGE_DIR", str(checkout / "bench"))

    assert report.run(argparse.Namespace(out=None, results=str(tmp_path / "results"), only="demo")) == 0

    assert "| streamjoin-rocksdb | 2.00 | 500,000 |" in (checkout / "docs" / "bench" / "index.md").read_text()
    assert (elsewhere / "README.md").read_text() == PAGE


def test_report_checkout_root_needs_a_pyproject_naming_streamjoin(tmp_path):
    assert report.checkout_root(str(_project(tmp_path / "ours", "streamjoin") / "bench")) == str(tmp_path / "ours")
    assert report.checkout_root(str(_project(tmp_path / "theirs", "my-pipelines") / "bench")) is None
    assert report.checkout_root(str(tmp_path / "site-packages" / "streamjoin" / "bench")) is None


def test_report_out_folder_without_pages_gets_one_section_per_benchmark(tmp_path):
    _fixture(str(tmp_path / "results"))
    out = tmp_path / "out"

    assert report.run(argparse.Namespace(out=str(out), results=str(tmp_path / "results"), only="")) == 0

    text = (out / report.PAGE).read_text()
    assert text.startswith("# Benchmarks\n\n<!-- bench:demo -->\n`streamjoin bench demo` (")
    assert (out / "demo.png").exists() and (out / "demo.json").exists()


def test_bench_cli_lists_nexmark_and_report():
    assert BENCHMARKS["nexmark"][0] == "streamjoin.bench.nexmark"
    assert BENCHMARKS["report"][0] == "streamjoin.bench.report"


README = """# streamjoin

## Performance

The goals beside their figures: docs/bench/index.md.
"""

DEMO_GOAL = Goal("demo", "rows/s of streamjoin-rocksdb", 400_000, " rows/s",
                 Cell("rows/s", {"variant": "streamjoin-rocksdb"}), "streamjoin bench demo")


def test_report_renders_the_goals_into_the_checkout_docs_and_leaves_the_readme(tmp_path, monkeypatch):
    checkout = _project(tmp_path / "checkout", "streamjoin")
    (checkout / "docs" / "bench" / "index.md").write_text(PAGE + "\n<!-- bench:goals -->\n<!-- /bench:goals -->\n")
    (checkout / "README.md").write_text(README + "\n<!-- bench:goals -->\nold goals\n<!-- /bench:goals -->\n")
    _fixture(str(tmp_path / "results"))
    monkeypatch.setattr(report, "_PACKAGE_DIR", str(checkout / "bench"))
    monkeypatch.setattr(goals, "GOALS", (DEMO_GOAL,))

    assert report.run(argparse.Namespace(out=None, results=str(tmp_path / "results"), only="demo")) == 0

    goals_table = goals.goals_markdown(str(checkout / "docs" / "bench"))
    assert "| demo | rows/s of streamjoin-rocksdb | >= 400,000 rows/s | 500,000 rows/s (" in goals_table
    assert "old goals" in (checkout / "README.md").read_text()          # the README is never written
    assert SECTION.search((checkout / "docs" / "bench" / "index.md").read_text().split("<!-- /bench:missing -->")[1]
                          ).group("body") == goals_table


def test_report_goals_read_the_results_just_kept(tmp_path, monkeypatch):
    # the goals section comes first on the page, the benchmark's section after it: the goals still
    # show the figure of the results this run keeps, not the kept copy it replaces
    pages = tmp_path / "pages"
    pages.mkdir()
    (pages / "index.md").write_text("<!-- bench:goals -->\n<!-- /bench:goals -->\n\n<!-- bench:demo -->\n<!-- /bench:demo -->\n")
    (pages / "demo.json").write_text(json.dumps({"command": "old", "rows": [{"variant": "streamjoin-rocksdb", "rows/s": 1.0}]}))
    _fixture(str(tmp_path / "results"))
    monkeypatch.setattr(goals, "GOALS", (DEMO_GOAL,))

    report.update_pages(str(pages), str(tmp_path / "results"))

    assert "| 500,000 rows/s (" in SECTION.search((pages / "index.md").read_text()).group("body")


def test_report_with_out_writes_no_readme(tmp_path, monkeypatch):
    checkout = _project(tmp_path / "checkout", "streamjoin")
    (checkout / "README.md").write_text(README)
    out = tmp_path / "out"
    out.mkdir()
    (out / "index.md").write_text("<!-- bench:goals -->\n<!-- /bench:goals -->\n")
    _fixture(str(tmp_path / "results"))
    monkeypatch.setattr(report, "_PACKAGE_DIR", str(checkout / "bench"))
    monkeypatch.setattr(goals, "GOALS", (DEMO_GOAL,))

    assert report.run(argparse.Namespace(out=str(out), results=str(tmp_path / "results"), only="")) == 0

    assert (checkout / "README.md").read_text() == README
    assert "rows/s of streamjoin-rocksdb" in (out / "index.md").read_text()
    assert sorted(p.name for p in out.iterdir()) == ["index.md"]


def test_report_prose_after_a_results_section_restates_none_of_its_ratios():
    # the paragraph after a rendered section talks about its table; a ratio or percentage typed
    # there (57% beside a table's 0.74) goes stale with the next run kept, so it names the column
    import re
    from pathlib import Path

    bench = Path(__file__).resolve().parents[2] / "docs" / "bench"
    pages = [bench / "index.md", bench / "joins.md"]           # the pages of Spark beside the joins
    typed = {}
    for page in pages:
        for match in SECTION.finditer(page.read_text()):
            after = page.read_text()[match.end():].lstrip("\n").split("\n\n", 1)[0]
            found = re.findall(r"\b\d+(?:\.\d+)?(?:x\b|%)", after)
            if found:
                typed[f"{page.name} after {match.group('name')}"] = found
    assert typed == {}
