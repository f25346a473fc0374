"""Users' pipelines for the kit's tests, in process (Arrow tables) and in Spark: correct ones, and
deliberately batch- or order-dependent ones the kit must catch."""

from __future__ import annotations

import datetime as dt
import itertools

import pyarrow as pa
import pyarrow.compute as pc

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
UTC_US = pa.timestamp("us", "UTC")
EVENTS = pa.schema([("user_id", pa.int64()), ("ts", UTC_US), ("action", pa.string())])
PROFILE = pa.schema([("user_id", pa.int64()), ("plan", pa.string())])


def at(seconds: float) -> dt.datetime:
    return T0 + dt.timedelta(seconds=seconds)


EVENT_ROWS = pa.table({
    "user_id": [1, 2, 1, 3, 2, 1, 2],
    "ts": pa.array([at(s) for s in (1, 4, 12, 14, 22, 30, 31)], UTC_US),
    "action": ["buy", "view", "buy", "buy", "buy", "buy", "buy"],
})
CHANGE_ROWS = pa.table({
    "user_id": [1, 2, 1, 2, None],
    "op": ["upsert", "upsert", "upsert", "delete", "heartbeat"],
    "changed_at": pa.array([at(0), at(3), at(10), at(20), at(100)], UTC_US),
    "plan": ["free", "pro", "pro", None, None],
})


def purchases_per_plan(events: pa.Table, changes: pa.Table, joins, checkpoint: str, mode: str = "as_of",
                       store: str = "rocksdb") -> pa.Table:
    """Purchases enriched with the buyer's plan as it was (in process; aggregated by ``finish``),
    its state in the run's ``store``."""
    bought = events.filter(pc.equal(events["action"], "buy"))
    return joins.stream_table_join(bought, changes, "user_id", stream_time="ts", table_key="user_id",
                                   table_time="changed_at", delay=dt.timedelta(0), mode=mode, store=store,
                                   checkpoint=f"{checkpoint}/enrich")


def count_per_plan(table: pa.Table) -> pa.Table:
    return table.group_by("plan", use_threads=False).aggregate([([], "count_all")])


def first_plan_per_user(table: pa.Table) -> pa.Table:
    """Order-dependent: the plan of each user's first purchase row, as the rows come."""
    return table.group_by("user_id", use_threads=False).aggregate([("plan", "first")])


def latest_plan(events: pa.Table, changes: pa.Table, joins, checkpoint: str) -> pa.Table:
    """Broken: the plan as of the end of each micro-batch's changes."""
    return purchases_per_plan(events, changes, joins, checkpoint, mode="latest")


_COUNTER = itertools.count()


def numbered(events: pa.Table, changes: pa.Table, joins, checkpoint: str) -> pa.Table:
    """Broken: numbers rows with a Python counter that runs across rows and calls."""
    out = purchases_per_plan(events, changes, joins, checkpoint)
    return out.append_column("n", pa.array([next(_COUNTER) for _ in range(out.num_rows)], pa.int64()))


SEARCHES = pa.schema([("search_id", pa.int64()), ("session_id", pa.int64()), ("search_time", UTC_US)])
CLICKS = pa.schema([("click_id", pa.int64()), ("session_id", pa.int64()), ("click_time", UTC_US)])


def clicks_with_searches(clicks: pa.Table, searches: pa.Table, joins, checkpoint: str) -> pa.Table:
    """Every click with the searches of its session in the 10 seconds before it."""
    return joins.interval_join(clicks, searches, "session_id", left_time="click_time", right_time="search_time",
                               lower=dt.timedelta(seconds=-10), upper=dt.timedelta(0), how="left",
                               delay=dt.timedelta(seconds=2), checkpoint=f"{checkpoint}/join")


def deduplicated_per_batch(clicks: pa.Table, searches: pa.Table, joins, checkpoint: str) -> pa.Table:
    """Broken: drops redelivered clicks (repeated rows) within each micro-batch only; a click
    redelivered in a later micro-batch is counted twice."""
    distinct = clicks.group_by(clicks.column_names, use_threads=False).aggregate([])
    return clicks_with_searches(distinct, searches, joins, checkpoint)


def clicks_with_idle_searches(clicks: pa.Table, searches: pa.Table, joins, checkpoint: str) -> pa.Table:
    """Batch-dependent: the searches stop holding the watermark after a minute without progress
    in processing time (``idle_timeout``), so a search that comes later may be late."""
    return joins.interval_join(clicks, searches, "session_id", left_time="click_time", right_time="search_time",
                               lower=dt.timedelta(seconds=-10), upper=dt.timedelta(0), how="left",
                               delay=dt.timedelta(seconds=2), checkpoint=f"{checkpoint}/join", idle_timeout="1 minute")
