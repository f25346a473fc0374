"""PNG charts of benchmark results (matplotlib, the ``bench`` extra).

:func:`draw` takes a results dictionary as :func:`streamjoin.bench.harness.write_results` saves
it and draws its ``chart`` (a :class:`streamjoin.bench.harness.Chart`): comparisons as horizontal
bars, one a row; series over time or size (``kind="line"``) as lines, one panel a measured column.
Every chart is titled with what was measured, where (CPUs, machine) and when (the run's date).
"""

from __future__ import annotations

from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only: no display, no GUI toolkit

import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FuncFormatter, NullFormatter  # noqa: E402

from streamjoin.bench.harness import format_value  # noqa: E402

__all__ = ["draw", "bars", "lines", "title"]


def title(results: dict[str, Any]) -> str:
    """The chart's title: what (the chart's own title), then where and when it was measured."""
    return (f"{results['chart']['title']}\n"
            f"measured on {results.get('cpus', '?')} CPUs, {results.get('machine', 'unknown machine')}, "
            f"{results.get('date', 'date unknown')}")


def bars(results: dict[str, Any]) -> list[tuple[str, float]]:
    """The (label, value) pairs the chart of ``results`` shows, in the table's row order."""
    chart = results["chart"]
    pairs = []
    for row in results["rows"]:
        value = row.get(chart["value"])
        if _number(value):
            pairs.append((" / ".join(format_value(row.get(c, "")) for c in chart["label"]), float(value)))
    return pairs


def lines(results: dict[str, Any], column: str) -> dict[str, list[tuple[float, float]]]:
    """A line chart's series for ``column``: per label (rows' ``label`` columns joined with " / "),
    the (x, value) points in the table's row order; rows without a number in ``x`` or ``column`` are left out."""
    chart = results["chart"]
    series: dict[str, list[tuple[float, float]]] = {}
    for row in results["rows"]:
        x, value = row.get(chart["x"]), row.get(column)
        if _number(x) and _number(value):
            label = " / ".join(format_value(row.get(c, "")) for c in chart.get("label") or ())
            series.setdefault(label, []).append((float(x), float(value)))
    return series


def draw(results: dict[str, Any], path: str) -> str:
    """Write the chart of ``results`` to ``path`` (PNG) and return the path."""
    if results["chart"].get("kind", "bars") == "line":
        return _draw_lines(results, path)
    return _draw_bars(results, path)


def _draw_bars(results: dict[str, Any], path: str) -> str:
    chart, pairs = results["chart"], bars(results)
    if not pairs:
        raise ValueError(f"no numeric {chart['value']!r} in the results of {results['benchmark']}: nothing to draw")
    labels, values = zip(*pairs)
    height = 1.5 + 0.38 * len(pairs)
    fig, ax = plt.subplots(figsize=(8, height), dpi=100)
    try:
        positions = range(len(pairs))[::-1]
        ax.barh(list(positions), values, color=[_colour(label) for label in labels])
        ax.set_yticks(list(positions), labels, fontsize=8)
        ax.set_xlabel(chart["value"])
        ax.set_title(title(results), fontsize=9)
        for y, v in zip(positions, values):
            ax.text(v, y, " " + format_value(v), va="center", fontsize=7)
        if chart.get("log"):
            ax.set_xscale("log")
            ax.set_xlim(min(values) / 2, max(values) * 3)
        else:
            ax.set_xlim(0, max(values) * 1.18)
        ax.spines[["top", "right"]].set_visible(False)
        _footer(fig, results)
        fig.savefig(path)
    finally:
        plt.close(fig)
    return path


def _draw_lines(results: dict[str, Any], path: str) -> str:
    chart = results["chart"]
    columns = [chart["value"], *chart.get("also", ())]
    panels = [(column, lines(results, column)) for column in columns]
    if not any(series for _, series in panels):
        raise ValueError(f"no numeric {chart['x']!r} and {chart['value']!r} in the results of "
                         f"{results['benchmark']}: nothing to draw")
    fig, axes = plt.subplots(1, len(panels), figsize=(4.6 * len(panels), 3.8), dpi=100, squeeze=False)
    try:
        for ax, (column, series) in zip(axes[0], panels):
            for label, points in series.items():
                xs, ys = zip(*points)
                ax.plot(xs, ys, marker="o", markersize=3, label=label or column)
            ax.set_xlabel(chart["x"])
            ax.set_ylabel(column)
            if chart.get("log"):
                ax.set_yscale("log")
                ax.yaxis.set_minor_formatter(NullFormatter())
            else:
                ax.set_ylim(bottom=0)
            ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: format_value(int(v) if v == int(v) else v)))
            ax.spines[["top", "right"]].set_visible(False)
            if len(series) > 1:
                ax.legend(fontsize=7)
        fig.suptitle(title(results), fontsize=9)
        _footer(fig, results)
        fig.savefig(path)
    finally:
        plt.close(fig)
    return path


def _footer(fig: Any, results: dict[str, Any]) -> None:
    fig.text(0.99, 0.01, results.get("command", ""), ha="right", va="bottom", fontsize=6, color="grey")
    fig.tight_layout(rect=(0, 0.03, 1, 1))


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _colour(label: str) -> str:
    """streamjoin's bars in one colour, Spark's in another, published or reference figures grey."""
    lowered = label.lower()
    if "streamjoin" in lowered:
        return "#1f77b4"
    if "spark" in lowered:
        return "#ff7f0e"
    return "#9a9a9a"
