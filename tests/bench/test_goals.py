"""The performance goals live in ``streamjoin.bench.goals``: ``bench report`` renders them into a
page's goals section, and the committed benchmark index shows exactly them."""

from __future__ import annotations

from pathlib import Path

from streamjoin.bench.goals import GOALS, goals_markdown
from streamjoin.bench.report import SECTION, update_pages

ROOT = Path(__file__).resolve().parents[2]


def test_goals_report_renders_the_goals_section(tmp_path):
    page = tmp_path / "index.md"
    page.write_text("# Benchmarks\n\n<!-- bench:goals -->\nold\n<!-- /bench:goals -->\n")
    done = update_pages(str(tmp_path), str(tmp_path / "results"))
    assert done == {"goals": "streamjoin.bench.goals"}
    body = SECTION.search(page.read_text()).group("body")
    assert body == goals_markdown()
    assert all(goal.text() in body for goal in GOALS)


def test_goals_index_page_shows_the_defined_goals():
    sections = {m.group("name"): m.group("body") for m in SECTION.finditer((ROOT / "docs/bench/index.md").read_text())}
    assert sections["goals"] == goals_markdown()
