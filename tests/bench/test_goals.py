"""The performance goals live in ``streamjoin.bench.goals``, each reading its figure from its
benchmark's kept results: ``bench report`` renders them beside their figures (met or not, with the
profiled reason) into a page's goals section, and the committed benchmark index and README show
exactly what the kept results give."""

from __future__ import annotations

import json
import os
from pathlib import Path

from streamjoin.bench.cli import BENCHMARKS
from streamjoin.bench.goals import GOALS, Cell, Each, Goal, Ratio, goal_status, goals_markdown
from streamjoin.bench.harness import Table, write_results
from streamjoin.bench.report import SECTION, update_pages

ROOT = Path(__file__).resolve().parents[2]

SPEED = Goal("demo", "speed vs spark", 2.0, "x", Ratio("seconds", over={"variant": "spark"},
                                                       under={"variant": "ours", "batch": 200}), "streamjoin bench demo")
RATE = Goal("demo", "rows maintained", 150_000, " rows/s", Cell("rows/s", {"variant": "ours", "batch": 200}),
            "streamjoin bench demo", reason="state reads dominate")
EVERY = Goal("demo", "time vs the floor, every store", 1.10, "x", Each("time / floor", "variant", "ours, "),
             "streamjoin bench demo", at_most=True)


def _results(directory: Path, name: str = "demo") -> str:
    """Results as a benchmark writes them (``write_results``), kept as ``NAME.json`` in ``directory``."""
    table = Table(["variant", "batch", "seconds", "rows/s", "time / floor", "worker RSS MB"])
    table.add("spark", 200, 9.0, 100_000.0, "-", "-")
    table.add("ours", 100, 1.0, 900_000.0, "-", 310)
    table.add("ours", 200, 3.0, 160_000.5, "-", 420)
    table.add("ours, rocksdb", "-", 3.2, "-", 1.25, 300)
    table.add("ours, memory", "-", 2.9, "-", 1.05, 350)
    written = write_results(name, table, {"rows": 10}, directory=str(directory / "runs"))
    os.replace(written, directory / f"{name}.json")
    return str(directory / f"{name}.json")


def test_goals_read_their_figures_from_results(tmp_path):
    results = json.loads(Path(_results(tmp_path)).read_text())

    assert SPEED.read(results).value == 3.0 and SPEED.read(results).text == "3.00x"
    assert RATE.read(results).value == 160_000.5 and RATE.read(results).text == "160,000 rows/s"
    every = EVERY.read(results)
    assert every.value == 1.25                                  # the backend furthest from the goal
    assert every.text == "rocksdb 1.25x, memory 1.05x"


def test_goals_met_or_not_met_with_the_reason(tmp_path):
    _results(tmp_path)

    statuses = [goal_status(goal, str(tmp_path)) for goal in (SPEED, RATE, EVERY)]

    assert [s.met for s in statuses] == [True, True, False]
    assert [s.verdict() for s in statuses] == ["met", "met", "not met (not profiled yet)"]
    slow = Goal("demo", "rows maintained", 200_000, " rows/s", RATE.reads, "streamjoin bench demo",
                reason="state reads dominate")
    assert goal_status(slow, str(tmp_path)).verdict() == "not met: state reads dominate"
    steady = Goal("demo", "rows maintained", 100, " rows/s", RATE.reads, "streamjoin bench demo",
                  reason="state reads dominate", caveat="on a quiet machine only")
    assert goal_status(steady, str(tmp_path)).verdict() == "met: on a quiet machine only"
    assert goal_status(Goal("demo", "at most", 2.0, "x", Cell("seconds", {"variant": "ours", "batch": 200}),
                            "streamjoin bench demo", at_most=True), str(tmp_path)).met is False


def test_goals_without_results_are_not_measured_and_name_the_command(tmp_path):
    _results(tmp_path)
    no_file = Goal("other", "speed", 1.0, "x", Cell("seconds", {"variant": "ours"}), "streamjoin bench other --x")
    no_row = Goal("demo", "speed", 1.0, "x", Ratio("seconds", {"variant": "spark-rocksdb"}, {"variant": "ours"}),
                  "streamjoin bench demo --variants spark-rocksdb")
    no_number = Goal("demo", "rate", 1.0, "x", Cell("time / floor", {"variant": "spark"}), "streamjoin bench demo")
    unread = Goal("demo", "memory", 1.0, " MB", None, "streamjoin bench demo --memory")

    for goal in (no_file, no_row, no_number, unread):
        status = goal_status(goal, str(tmp_path))
        assert (status.reading, status.met, status.command) == (None, None, goal.command)
        assert status.figure() == "not measured" and status.verdict() == "-"


def test_goals_markdown_shows_each_goal_beside_its_figure_run_and_command(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "getloadavg", lambda: (1.234, 0.9, 0.8))
    _results(tmp_path)
    date = json.loads((tmp_path / "demo.json").read_text())["date"]

    every = Goal(EVERY.bench, EVERY.measure, EVERY.target, EVERY.unit, EVERY.reads, EVERY.command, at_most=True,
                 memory=Each("worker RSS MB", "variant", "ours, "))
    text = goals_markdown(str(tmp_path), (SPEED, every, Goal("other", "speed", 1, "x", None, "streamjoin bench other")))

    lines = text.splitlines()
    assert lines[0] == ("| benchmark | measure | goal | figure (peak Python worker memory; the run's date, load average) "
                        "| met | reproduce with |")
    assert lines[2] == f"| demo | speed vs spark | >= 2x | 3.00x ({date}, load 1.23) | met | `streamjoin bench demo` |"
    assert lines[3] == (f"| demo | time vs the floor, every store | <= 1.1x | rocksdb 1.25x, memory 1.05x, worker RSS "
                        f"350 MB ({date}, load 1.23) | not met (not profiled yet) | `streamjoin bench demo` |")
    assert lines[4] == "| other | speed | >= 1x | not measured | - | `streamjoin bench other` |"


def test_goals_figure_says_when_results_lack_the_load(tmp_path):
    _results(tmp_path)
    kept = json.loads((tmp_path / "demo.json").read_text())
    del kept["load"]
    (tmp_path / "demo.json").write_text(json.dumps(kept))

    assert goal_status(SPEED, str(tmp_path)).figure() == f"3.00x ({kept['date']}, load not recorded)"


def test_goals_report_renders_the_goals_section(tmp_path):
    page = tmp_path / "index.md"
    page.write_text("# Benchmarks\n\n<!-- bench:goals -->\nold\n<!-- /bench:goals -->\n")
    done = update_pages(str(tmp_path), str(tmp_path / "results"))
    assert done == {"goals": "streamjoin.bench.goals"}
    body = SECTION.search(page.read_text()).group("body")
    assert body == goals_markdown(str(tmp_path))
    assert all(goal.text() in body for goal in GOALS)


def test_goals_name_benchmarks_and_commands_that_exist():
    for goal in GOALS:
        assert goal.bench in BENCHMARKS, goal
        assert goal.command.startswith(f"streamjoin bench {goal.bench}"), goal


def test_goals_committed_pages_show_the_kept_results():
    expected = goals_markdown(str(ROOT / "docs" / "bench"))
    sections = {m.group("name"): m.group("body") for m in SECTION.finditer((ROOT / "docs/bench/index.md").read_text())}
    assert sections["goals"] == expected
    assert "| runtime | micro-batch time vs the floor's (batches / floor), every backend | <= 1.1x | arranged " in expected


def test_goals_table_lives_in_the_docs_and_the_readme_points_to_it():
    readme = (ROOT / "README.md").read_text()
    assert not list(SECTION.finditer(readme))                 # no rendered table on the package index's page
    performance = readme.split("## Performance\n")[1].split("\n## ")[0]
    assert "docs/bench/index.md" in performance and "](" not in performance
    assert len(performance.split()) < 120                     # a short summary, not the table
