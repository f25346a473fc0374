"""A seeded Nexmark workload: persons, auctions and bids of an online auction site.

Events follow Nexmark's proportions: of every 50 consecutive events, the first is a person, the
next 3 are auctions and the other 46 bids (1:3:46). Event ``i`` happens at ``EPOCH_US + i *
STEP_US`` (10,000 events a second, in order). An auction's seller is one of the
``SELLER_SPAN`` persons who joined last; a bid is on one of the ``BID_SPAN`` auctions opened last,
all of them still open (an auction runs ``2-10 s`` and ``BID_SPAN`` auctions open in far less), so
every bid falls within its auction's life. Persons and auctions are written as plain change streams
(``op = "insert"``): as tables, both only grow.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

__all__ = ["generate", "Nexmark", "write", "heartbeat", "PERSONS", "AUCTIONS", "BIDS", "DDL", "STATES",
           "EPOCH_US", "STEP_US", "MAX_AUCTION_US", "GROUP"]

GROUP = (1, 3, 46)                # persons, auctions, bids in every 50 events
STEP_US = 100                     # 10,000 events a second
EPOCH_US = 1_767_225_600_000_000  # 2026-01-01T00:00:00Z
SELLER_SPAN = 1_000               # a seller is one of the last 1,000 persons (5 s of them)
BID_SPAN = 100                    # a bid is on one of the last 100 auctions (1/6 s of them)
MIN_AUCTION_US, MAX_AUCTION_US = 2_000_000, 10_000_000
STATES = ("AZ", "CA", "ID", "OR", "WA", "WY")
CITIES = ("Phoenix", "Los Angeles", "San Francisco", "Boise", "Bend", "Portland", "Seattle", "Redmond", "Kent")
CATEGORIES = 5                    # categories 10..14
TS = pa.timestamp("us", tz="UTC")
PERSONS = pa.schema([("id", pa.int64()), ("op", pa.string()), ("date_time", TS), ("name", pa.string()),
                     ("email", pa.string()), ("city", pa.string()), ("state", pa.string())])
AUCTIONS = pa.schema([("id", pa.int64()), ("op", pa.string()), ("date_time", TS), ("item_name", pa.string()),
                      ("initial_bid", pa.int64()), ("reserve", pa.int64()), ("expires", TS),
                      ("seller", pa.int64()), ("category", pa.int64())])
BIDS = pa.schema([("auction", pa.int64()), ("bidder", pa.int64()), ("price", pa.int64()),
                  ("channel", pa.string()), ("date_time", TS)])
DDL = {
    "persons": "id bigint, op string, date_time timestamp, name string, email string, city string, state string",
    "auctions": "id bigint, op string, date_time timestamp, item_name string, initial_bid bigint, reserve bigint, "
                "expires timestamp, seller bigint, category bigint",
    "bids": "auction bigint, bidder bigint, price bigint, channel string, date_time timestamp",
}


@dataclass(frozen=True)
class Nexmark:
    """The three event streams, each in event-time order, and where each micro-batch starts in them."""

    persons: pa.Table
    auctions: pa.Table
    bids: pa.Table
    bounds: dict[str, tuple[int, ...]]   # per stream: row index where micro-batch b starts, and its end

    def batch(self, name: str, b: int) -> pa.Table:
        """Micro-batch ``b`` of stream ``name``."""
        starts = self.bounds[name]
        return getattr(self, name).slice(starts[b], starts[b + 1] - starts[b])

    @property
    def batches(self) -> int:
        return len(self.bounds["persons"]) - 1


def _pick(values: tuple[str, ...], rng: np.random.Generator, n: int) -> pa.Array:
    return pa.array(values).take(pa.array(rng.integers(0, len(values), n)))


def _recent(newest: np.ndarray, span: int, rng: np.random.Generator) -> np.ndarray:
    """For each ``newest`` id, one of the ``span`` ids up to it (never below 0)."""
    return newest - rng.integers(0, np.minimum(newest + 1, span))


def generate(events: int, batches: int = 1, seed: int = 7) -> Nexmark:
    """``events`` Nexmark events (see the module) split by time into ``batches`` micro-batches."""
    if events < 1 or batches < 1:
        raise ValueError("events and batches must be positive")
    rng = np.random.default_rng(seed)
    index = np.arange(events, dtype=np.int64)
    slot = index % sum(GROUP)
    times = EPOCH_US + index * STEP_US
    p_at, a_at, b_at = index[slot == 0], index[(slot >= 1) & (slot <= 3)], index[slot >= 4]
    p, a, b = len(p_at), len(a_at), len(b_at)

    persons = pa.Table.from_arrays([
        pa.array(np.arange(p, dtype=np.int64)), pa.array(np.full(p, "insert")), pa.array(times[p_at], TS),
        pa.array(np.char.add("person-", np.arange(p).astype(str))),
        pa.array(np.char.add(np.arange(p).astype(str), "@example.com")), _pick(CITIES, rng, p), _pick(STATES, rng, p),
    ], schema=PERSONS)

    a_time = times[a_at]
    initial = rng.integers(1, 1_000, a)
    auctions = pa.Table.from_arrays([
        pa.array(np.arange(a, dtype=np.int64)), pa.array(np.full(a, "insert")), pa.array(a_time, TS),
        pa.array(np.char.add("item-", np.arange(a).astype(str))), pa.array(initial),
        pa.array(initial + rng.integers(0, 1_000, a)),
        pa.array(a_time + rng.integers(MIN_AUCTION_US, MAX_AUCTION_US + 1, a), TS),
        pa.array(_recent(a_at // sum(GROUP), SELLER_SPAN, rng)),   # persons so far, less one
        pa.array(10 + rng.integers(0, CATEGORIES, a)),
    ], schema=AUCTIONS)

    newest_auction = (b_at // sum(GROUP) + 1) * GROUP[1] - 1       # every auction of the group opened first
    bids = pa.Table.from_arrays([
        pa.array(_recent(newest_auction, BID_SPAN, rng)), pa.array(_recent(b_at // sum(GROUP), SELLER_SPAN, rng)),
        pa.array(rng.integers(1, 10_000, b)), _pick(("apple", "google", "facebook", "baidu"), rng, b),
        pa.array(times[b_at], TS),
    ], schema=BIDS)

    ends = EPOCH_US + (np.arange(1, batches + 1, dtype=np.int64) * events * STEP_US) // batches
    bounds = {name: tuple(int(i) for i in np.r_[0, np.searchsorted(at, (ends - EPOCH_US) // STEP_US)])
              for name, at in (("persons", p_at), ("auctions", a_at), ("bids", b_at))}
    return Nexmark(persons, auctions, bids, bounds)


def heartbeat(at_us: int) -> pa.Table:
    """One auctions change that only says no earlier change will come (it advances the table's watermark)."""
    columns = [pa.nulls(1, f.type) for f in AUCTIONS]
    columns[1], columns[2] = pa.array(["heartbeat"]), pa.array([at_us], TS)
    return pa.Table.from_arrays(columns, schema=AUCTIONS)


def write(root: str, data: Nexmark, flush: int = 1) -> None:
    """One Parquet file per stream and micro-batch under ``root/<stream>``, modification times
    increasing (a file source takes the oldest first); ``auctions-flush`` is ``auctions`` with
    ``flush`` more micro-batches of one heartbeat each, far in the future, to release as-of events
    (one is enough: the flush source runs the no-data micro-batch that sees its watermark)."""
    stamp = time.time() - data.batches - flush - 10
    last = int(data.bids.column("date_time").to_numpy()[-1].astype(np.int64)) if data.bids.num_rows else EPOCH_US
    extra = [heartbeat(last + 86_400_000_000 * (i + 1)) for i in range(flush)]
    for name in ("persons", "auctions", "bids", "auctions-flush"):
        tables = [data.batch(name.split("-")[0], b) for b in range(data.batches)]
        tables += extra if name == "auctions-flush" else []
        os.makedirs(os.path.join(root, name))
        for b, table in enumerate(tables):
            path = os.path.join(root, name, f"part-{b:04d}.parquet")
            pq.write_table(table, path)
            os.utime(path, (stamp + b, stamp + b))
