"""PNG charts of benchmark results (matplotlib, the ``bench`` extra).

:func:`draw` takes a results dictionary as :func:`streamjoin.bench.harness.write_results` saves
it and draws its ``chart``: one horizontal bar a row, labelled and valued as the chart says.
"""

from __future__ import annotations

from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only: no display, no GUI toolkit

import matplotlib.pyplot as plt  # noqa: E402

from streamjoin.bench.harness import format_value  # noqa: E402

__all__ = ["draw", "bars"]


def bars(results: dict[str, Any]) -> list[tuple[str, float]]:
    """The (label, value) pairs the chart of ``results`` shows, in the table's row order."""
    chart = results["chart"]
    pairs = []
    for row in results["rows"]:
        value = row.get(chart["value"])
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            pairs.append((" / ".join(format_value(row.get(c, "")) for c in chart["label"]), float(value)))
    return pairs


def draw(results: dict[str, Any], path: str) -> str:
    """Write the chart of ``results`` to ``path`` (PNG) and return the path."""
    chart, pairs = results["chart"], bars(results)
    if not pairs:
        raise ValueError(f"no numeric {chart['value']!r} in the results of {results['benchmark']}: nothing to draw")
    labels, values = zip(*pairs)
    height = 1.2 + 0.38 * len(pairs)
    fig, ax = plt.subplots(figsize=(8, height), dpi=100)
    try:
        positions = range(len(pairs))[::-1]
        ax.barh(list(positions), values, color=[_colour(label) for label in labels])
        ax.set_yticks(list(positions), labels, fontsize=8)
        ax.set_xlabel(chart["value"])
        ax.set_title(chart["title"], fontsize=10)
        for y, v in zip(positions, values):
            ax.text(v, y, " " + format_value(v), va="center", fontsize=7)
        if chart.get("log"):
            ax.set_xscale("log")
            ax.set_xlim(min(values) / 2, max(values) * 3)
        else:
            ax.set_xlim(0, max(values) * 1.18)
        ax.spines[["top", "right"]].set_visible(False)
        fig.text(0.99, 0.01, f"{results.get('date', '')}, {results.get('cpus', '?')} CPUs: {results.get('command', '')}",
                 ha="right", va="bottom", fontsize=6, color="grey")
        fig.tight_layout(rect=(0, 0.03, 1, 1))
        fig.savefig(path)
    finally:
        plt.close(fig)
    return path


def _colour(label: str) -> str:
    """streamjoin's bars in one colour, Spark's in another, published or reference figures grey."""
    lowered = label.lower()
    if "streamjoin" in lowered:
        return "#1f77b4"
    if "spark" in lowered:
        return "#ff7f0e"
    return "#9a9a9a"
