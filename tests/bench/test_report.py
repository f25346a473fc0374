"""``streamjoin bench report``: from a results file a benchmark wrote, the README's section gets the
command, the table and the chart, a copy of the results is kept under docs/bench, and a section
without results is left as it was (no Spark, no timing)."""

from __future__ import annotations

import argparse
import json
import os

from streamjoin.bench import report
from streamjoin.bench.cli import BENCHMARKS
from streamjoin.bench.harness import Chart, Table, write_results

README = """# project

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
    results, repo = tmp_path / "results", tmp_path / "repo"
    repo.mkdir()
    readme = repo / "README.md"
    readme.write_text(README)
    written = _fixture(str(results))
    assert os.path.exists(written.removesuffix(".json") + ".png")
    assert json.loads(open(written).read())["params"] == {"rows": 1_000_000}

    done = report.update_readme(str(readme), str(results))

    text = readme.read_text()
    assert done["demo"] == written and done["missing"].startswith("left as it was")
    assert "old figures" not in text and "kept as it is" in text
    assert "| variant | seconds | rows/s |\n|---|---:|---:|\n| spark | 4.00 | 250,000 |" in text
    assert "| streamjoin-rocksdb | 2.00 | 500,000 |" in text
    assert "- every variant's output checked" in text
    assert "![demo rows/s](docs/bench/demo.png)" in text
    assert (repo / "docs" / "bench" / "demo.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert json.loads((repo / "docs" / "bench" / "demo.json").read_text())["rows"][1]["rows/s"] == 500_000.0
    assert text.startswith("# project\n\nintro\n\n<!-- bench:demo -->\n`streamjoin bench demo` (")


def test_report_renders_again_from_the_kept_copy(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "README.md").write_text(README)
    _fixture(str(tmp_path / "results"))
    report.update_readme(str(repo / "README.md"), str(tmp_path / "results"))
    first = (repo / "README.md").read_text()
    (tmp_path / "empty").mkdir()

    done = report.update_readme(str(repo / "README.md"), str(tmp_path / "empty"))

    assert done["demo"].endswith(os.path.join("docs", "bench", "demo.json"))
    assert (repo / "README.md").read_text() == first


def test_report_run_fails_when_a_section_has_no_results(tmp_path):
    (tmp_path / "README.md").write_text(README)
    args = argparse.Namespace(readme=str(tmp_path / "README.md"), results=str(tmp_path), only="missing")
    assert report.run(args) == 1
    assert (tmp_path / "README.md").read_text() == README


def test_bench_cli_lists_nexmark_and_report():
    assert BENCHMARKS["nexmark"][0] == "streamjoin.bench.nexmark"
    assert BENCHMARKS["report"][0] == "streamjoin.bench.report"
