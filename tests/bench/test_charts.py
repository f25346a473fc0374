"""Benchmark charts: comparisons as bars, series over time or size as lines, every chart titled with
what, where and when it was measured."""

from __future__ import annotations

from streamjoin.bench import charts

RESULTS = {
    "benchmark": "soak", "command": "streamjoin bench soak", "date": "2026-11-26", "cpus": 2,
    "machine": "Linux-x86_64", "columns": ["join", "version", "store entries", "checkpoint bytes"],
    "rows": [{"join": "interval", "version": 99, "store entries": 38, "checkpoint bytes": 100},
             {"join": "interval", "version": 199, "store entries": 40, "checkpoint bytes": "-"},
             {"join": "table", "version": 99, "store entries": 8700, "checkpoint bytes": 300}],
    "chart": {"value": "store entries", "label": ["join"], "title": "soak", "log": True, "kind": "line",
              "x": "version", "also": ["checkpoint bytes"]},
}


def test_charts_lines_one_series_per_label_in_row_order():
    assert charts.lines(RESULTS, "store entries") == {"interval": [(99.0, 38.0), (199.0, 40.0)],
                                                      "table": [(99.0, 8700.0)]}
    assert charts.lines(RESULTS, "checkpoint bytes") == {"interval": [(99.0, 100.0)], "table": [(99.0, 300.0)]}


def test_charts_title_says_what_where_and_when():
    assert charts.title(RESULTS) == "soak\nmeasured on 2 CPUs, Linux-x86_64, 2026-11-26"


def test_charts_draw_writes_a_line_chart_and_a_bar_chart(tmp_path):
    assert open(charts.draw(RESULTS, str(tmp_path / "l.png")), "rb").read(4) == b"\x89PNG"
    bars = RESULTS | {"chart": {"value": "store entries", "label": ["join", "version"], "title": "t"}}
    assert charts.bars(bars)[0] == ("interval / 99", 38.0)
    assert open(charts.draw(bars, str(tmp_path / "b.png")), "rb").read(4) == b"\x89PNG"
