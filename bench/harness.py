"""Shared benchmark harness: timing with medians, tables, and a results file.

Benchmarks measure the thing and its comparison side by side in one run (this machine is shared
and noisy), repeat each measurement, and report medians and ratios.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

__all__ = ["median_seconds", "Table", "results_dir", "write_results", "parse_stores"]


def median_seconds(fn: Callable[[], object], repeat: int, setup: Callable[[], object] | None = None) -> float:
    """Median wall time of ``fn()`` over ``repeat`` runs; ``setup()`` runs untimed before each."""
    times = []
    for _ in range(max(1, repeat)):
        if setup is not None:
            setup()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


@dataclass
class Table:
    """A plain-text table: ``add(row)`` then ``render()``; numbers are right-aligned."""

    columns: Sequence[str]
    rows: list[list[object]] = field(default_factory=list)

    def add(self, *row: object) -> None:
        self.rows.append(list(row))

    def render(self) -> str:
        cells = [[_fmt(v) for v in row] for row in self.rows]
        widths = [max(len(c), *(len(r[i]) for r in cells)) if cells else len(c) for i, c in enumerate(self.columns)]
        numeric = [all(isinstance(r[i], (int, float)) for r in self.rows) if self.rows else False for i in range(len(self.columns))]
        def line(values: Sequence[str]) -> str:
            return "  ".join(v.rjust(w) if n else v.ljust(w) for v, w, n in zip(values, widths, numeric))
        out = [line(list(self.columns)), "  ".join("-" * w for w in widths)]
        out += [line(r) for r in cells]
        return "\n".join(out)

    def as_records(self) -> list[dict[str, object]]:
        return [dict(zip(self.columns, row)) for row in self.rows]


def _fmt(value: object) -> str:
    if isinstance(value, float):
        if abs(value) >= 1000:
            return f"{value:,.0f}"
        if abs(value) >= 10:
            return f"{value:.1f}"
        return f"{value:.2f}"
    if isinstance(value, int):
        return f"{value:,d}"
    return str(value)


def results_dir() -> str:
    """Where benchmarks write scratch data: under the system's temporary directory."""
    path = os.path.join(tempfile.gettempdir(), "streamjoin-bench")
    os.makedirs(path, exist_ok=True)
    return path


def write_results(name: str, table: Table, params: dict[str, object]) -> str:
    """Save a run's table and parameters as JSON beside the scratch data; return the path."""
    path = os.path.join(results_dir(), f"{name}-{time.strftime('%Y%m%dT%H%M%S')}.json")
    with open(path, "w") as fh:
        json.dump(
            {"benchmark": name, "params": params, "machine": platform.platform(),
             "cpus": os.cpu_count(), "rows": table.as_records()},
            fh, indent=2, default=str,
        )
    return path


def parse_stores(text: str, known: Sequence[str]) -> list[str]:
    """The comma-separated store names of a ``--stores`` option; exits naming any unknown one."""
    chosen = [s for s in text.split(",") if s]
    unknown = sorted(set(chosen) - set(known))
    if unknown:
        raise SystemExit(f"unknown stores {unknown}; choose from {','.join(known)}")
    return chosen
