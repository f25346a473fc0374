"""The performance goals the benchmark pages compare against, in one place.

Each goal names the benchmark that measures it (``streamjoin bench NAME``), what is compared and
the figure to reach. ``streamjoin bench report`` renders them into the ``<!-- bench:goals -->``
section of ``docs/bench/index.md``; the pages' prose and the benches' own goal columns take their
figures from here (see ``docs/bench/index.md``, "Goals").
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Goal", "GOALS", "goals_markdown"]


@dataclass(frozen=True)
class Goal:
    """``measure`` of benchmark ``bench`` is to be at least (or, ``at_most``, at most) ``figure``
    ``unit``."""

    bench: str
    measure: str
    figure: float
    unit: str
    at_most: bool = False

    def text(self) -> str:
        """The goal as a reader sees it, e.g. ``>= 2x``."""
        figure = f"{int(self.figure):,}" if self.figure == int(self.figure) else f"{self.figure:g}"
        return f"{'<=' if self.at_most else '>='} {figure}{self.unit}"


GOALS: tuple[Goal, ...] = (
    Goal("interval", "speed, streamjoin-rocksdb vs spark-rocksdb", 2.0, "x"),
    Goal("interval", "speed, streamjoin-rocksdb vs spark-memory", 1.0, "x"),
    Goal("interval", "speed, streamjoin-rocksdb vs the floor", 0.75, "x"),
    Goal("enrichment", "speed, streamjoin-rocksdb vs Spark's stream-static join", 1.5, "x"),
    Goal("table", "speed vs recomputing the view each micro-batch", 5.0, "x"),
    Goal("table", "input changes maintained", 150_000, " changes/s"),
    Goal("changelog", "bulk load into a store", 1_000_000, " entries/s"),
    Goal("changelog", "bulk load vs the backend's raw bulk load", 50, "%"),
    Goal("runtime", "micro-batch time vs the floor, every backend", 1.10, "x", at_most=True),
    Goal("runtime", "per-query fixed cost minus the floor's", 1.0, " s", at_most=True),
)


def goals_markdown(goals: tuple[Goal, ...] = GOALS) -> str:
    """The goals as a Markdown table (one row per goal)."""
    lines = ["| benchmark | measure | goal |", "|---|---|---|"]
    lines += [f"| {g.bench} | {g.measure} | {g.text()} |" for g in goals]
    return "\n".join(lines) + "\n"
