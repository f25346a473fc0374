"""A seeded generator of the demo jobs' event files: the same seed gives the same files.

Events are written as Parquet files, one file per micro-batch, under ``<root>/<stream>/``.
Within a file event times are out of order by up to ``disorder``; a few events are held back and
written ``late_batches`` files later than their time says, so that a streaming join sees them late.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

__all__ = ["SearchClickConfig", "write_search_clicks"]

_US = 1_000_000
_QUERIES = [
    "running shoes", "rain jacket", "espresso machine", "standing desk", "noise cancelling headphones",
    "trail map", "tent", "yoga mat", "sourdough starter", "bike lights", "desk lamp", "hiking boots",
]


@dataclass(frozen=True)
class SearchClickConfig:
    """Sizes and shapes of the search/click event files."""

    searches: int = 20_000
    batches: int = 8
    sessions: int = 2_000
    click_rate: float = 0.45       # share of searches followed by a click
    slow_click_rate: float = 0.1   # share of clicks that come after the 30-minute window
    disorder_s: int = 120          # events within a file are out of order by up to this much
    late_rate: float = 0.002       # share of events held back to arrive late
    seed: int = 7
    start_us: int = 1_767_225_600 * _US   # 2026-01-01T00:00:00Z


def write_search_clicks(root: str, config: SearchClickConfig = SearchClickConfig()) -> dict[str, int]:
    """Write ``searches/`` and ``clicks/`` Parquet files under ``root``; return event counts."""
    rng = np.random.default_rng(config.seed)
    n = config.searches
    span_us = config.batches * 3600 * _US // 2   # half an hour of event time per micro-batch
    search_time = config.start_us + np.sort(rng.integers(0, span_us, n))
    searches = pa.table({
        "search_id": pa.array(np.arange(n, dtype=np.int64)),
        "session_id": pa.array(rng.integers(0, config.sessions, n).astype(np.int64)),
        "query": pa.array(np.array(_QUERIES)[rng.integers(0, len(_QUERIES), n)].tolist()),
        "search_time": pa.array(search_time, pa.timestamp("us", tz="UTC")),
    })
    clicked = rng.random(n) < config.click_rate
    slow = rng.random(n) < config.slow_click_rate
    delay = np.where(slow, rng.integers(31 * 60, 90 * 60, n), rng.integers(2, 29 * 60, n)) * _US
    idx = np.nonzero(clicked)[0]
    clicks = pa.table({
        "click_id": pa.array(np.arange(len(idx), dtype=np.int64)),
        "session_id": searches.column("session_id").take(pa.array(idx)),
        "result_rank": pa.array(rng.integers(1, 11, len(idx)).astype(np.int32)),
        "click_time": pa.array(search_time[idx] + delay[idx], pa.timestamp("us", tz="UTC")),
    })
    counts = {}
    for name, table, column in (("searches", searches, "search_time"), ("clicks", clicks, "click_time")):
        counts[name] = table.num_rows
        counts[f"{name}_held_back"] = _write_batches(os.path.join(root, name), table, column, config, rng)
    return counts


def _write_batches(directory: str, table: pa.Table, column: str, config: SearchClickConfig,
                   rng: np.random.Generator) -> int:
    """Split by event time into files; jitter the order; hold a few events back. Return held-back count."""
    os.makedirs(directory, exist_ok=True)
    times = table.column(column).cast(pa.int64()).to_numpy()
    jitter = rng.integers(0, config.disorder_s * _US + 1, len(times))
    span = (times.max() - times.min() + 1) if len(times) else 1
    batch = np.minimum(((times + jitter - times.min()) * config.batches) // (span + config.disorder_s * _US), config.batches - 1)
    held = rng.random(len(times)) < config.late_rate
    batch = np.where(held, np.minimum(batch + 3, config.batches - 1), batch)
    for b in range(config.batches):
        rows = np.nonzero(batch == b)[0]
        rows = rows[rng.permutation(len(rows))]
        path = os.path.join(directory, f"part-{b:04d}.parquet")
        pq.write_table(table.take(pa.array(rows, pa.int64())), path)
        # Spark's file source takes files oldest first: give them distinct, increasing ages
        os.utime(path, (config.start_us // _US + b, config.start_us // _US + b))
    return int(held.sum())
