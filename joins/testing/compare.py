"""Outputs as multisets of rows, and their difference as a readable table.

Two outputs are equal when they hold the same rows the same number of times, in any order, with
the same column names. Floating-point values are compared to 12 significant digits (a sum over
rows in another order may differ in its last bits); ``-0.0`` is ``0.0`` and every NaN is one value.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any, Sequence

import pyarrow as pa

__all__ = ["Rows", "rows_of", "difference", "format_table"]


def _value(value: Any) -> Any:
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        return float(f"{value:.12g}") + 0.0
    if isinstance(value, dict):
        return tuple((k, _value(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)):   # (a map's entries are tuples, a list may be inside one)
        return tuple(_value(v) for v in value)
    return value


class Rows:
    """An output as column names and a multiset of row tuples."""

    def __init__(self, names: Sequence[str], counts: Counter) -> None:
        self.names, self.counts = tuple(names), counts

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Rows) and self.names == other.names and self.counts == other.counts

    def __len__(self) -> int:
        return sum(self.counts.values())

    def __repr__(self) -> str:
        return f"Rows({list(self.names)!r}, {len(self)} rows)"


def rows_of(table: Any) -> Rows:
    """``table`` (an Arrow table or a pandas DataFrame) as ``Rows``."""
    if not isinstance(table, pa.Table):
        table = pa.Table.from_pandas(table, preserve_index=False)
    names = table.column_names
    columns = [table.column(n).to_pylist() for n in names]
    return Rows(names, Counter(tuple(_value(v) for v in row) for row in zip(*columns)))


def _cell(value: Any) -> str:
    text = "null" if value is None else str(value)
    return text if len(text) <= 32 else text[:29] + "..."


def format_table(names: Sequence[str], rows: Sequence[Sequence[Any]], limit: int = 20) -> str:
    """``rows`` under ``names`` as an aligned text table (at most ``limit`` rows, then a count)."""
    shown = [[_cell(v) for v in row] for row in rows[:limit]]
    widths = [max([len(n)] + [len(r[i]) for r in shown]) for i, n in enumerate(names)]
    lines = ["  ".join(n.ljust(w) for n, w in zip(names, widths)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in shown]
    if len(rows) > limit:
        lines.append(f"... and {len(rows) - limit} more rows")
    return "\n".join(lines)


def difference(expected: Rows, got: Rows, *, expected_name: str = "batch", got_name: str = "stream") -> str:
    """The rows one output has more often than the other, as a table with a ``_in`` column naming
    the output that has them (one line per extra copy); or the two column lists if they differ."""
    if expected.names != got.names:
        return f"columns differ:\n  {expected_name}: {list(expected.names)}\n  {got_name}: {list(got.names)}"
    extra: list[tuple] = []
    for name, more in ((f"{expected_name} only", expected.counts - got.counts),
                       (f"{got_name} only", got.counts - expected.counts)):
        for row in sorted(more, key=repr):
            extra += [(name, *row)] * more[row]
    return format_table(["_in", *expected.names], extra)
