"""The three shipped jobs' join pipelines (their join call with the job's arguments, the store
among them, and the aggregation the job reports) pass assert_deterministic in process on small
generated inputs."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import strategies as st

from streamjoin.jobs.activity_generator import DELAY as ACTIVITY_DELAY
from streamjoin.jobs.search_clicks import WINDOW
from streamjoin.jobs.timeline import ON as TIMELINE_ON
from streamjoin.testing import assert_deterministic, view_rows
from streamjoin.testing.strategies import change_streams, event_streams

UTC_US = pa.timestamp("us", "UTC")
MINUTE = dt.timedelta(minutes=1)
SEARCH_DELAY = dt.timedelta(minutes=10)  # the job's default --delay-minutes

SEARCHES = pa.schema([("search_id", pa.int64()), ("session_id", pa.int64()), ("query", pa.string()),
                      ("search_time", UTC_US)])
CLICKS = pa.schema([("click_id", pa.int64()), ("session_id", pa.int64()), ("result_rank", pa.int32()),
                    ("click_time", UTC_US)])


def search_clicks(searches: pa.Table, clicks: pa.Table, joins, checkpoint: str, store: str) -> pa.Table:
    """The search-clicks job's join: every search with its clicks within 30 minutes after it."""
    return joins.interval_join(searches, clicks, "session_id", left_time="search_time", right_time="click_time",
                               lower=dt.timedelta(0), upper=WINDOW, how="left", delay=SEARCH_DELAY,
                               store=store, checkpoint=f"{checkpoint}/join")


def click_through(joined: pa.Table) -> pa.Table:
    """The job's summary: per query, searches and those with a click."""
    per_search = joined.group_by(["search_id", "query"], use_threads=False).aggregate([("click_id", "count")])
    clicked = per_search.append_column("clicked", pc.cast(pc.greater(per_search["click_id_count"], 0), pa.int64()))
    return clicked.group_by("query", use_threads=False).aggregate([([], "count_all"), ("clicked", "sum")])


def test_assert_deterministic_passes_the_search_clicks_job_pipeline():
    # five minutes between events, two of disorder: within the job's ten-minute delay, no row late
    searches = event_streams(SEARCHES, time="search_time", key="session_id", step=5 * MINUTE, disorder=2 * MINUTE)
    clicks = event_streams(CLICKS, time="click_time", key="session_id", step=5 * MINUTE, disorder=2 * MINUTE)
    report = assert_deterministic(search_clicks, st.tuples(searches, clicks), finish=click_through, max_examples=25)
    assert report.examples == 25 and report.notes == []


EVENTS = pa.schema([("event_id", pa.int64()), ("user_id", pa.int64()), ("ts", UTC_US), ("action", pa.string())])
PROFILES = pa.schema([("user_id", pa.int64()), ("plan", pa.string()), ("country", pa.string())])


def enrich_activity(events: pa.Table, changes: pa.Table, joins, checkpoint: str, store: str) -> pa.Table:
    """The enrich-activity job's as-of join (without its snapshot bootstrap, which LocalJoins lacks)."""
    return joins.stream_table_join(events, changes, "user_id", stream_time="ts", table_key="user_id",
                                   table_time="changed_at", mode="as_of", how="left", delay=ACTIVITY_DELAY,
                                   store=store, checkpoint=f"{checkpoint}/as_of")


def enriched_per_plan(enriched: pa.Table) -> pa.Table:
    """The job's summary: events per plan (null: without a profile) and action."""
    return enriched.group_by(["plan", "action"], use_threads=False).aggregate([([], "count_all")])


def test_assert_deterministic_passes_the_enrich_activity_job_pipeline():
    events = event_streams(EVENTS, time="ts", key="user_id", disorder=dt.timedelta(0))
    changes = change_streams(PROFILES, key="user_id", heartbeats=True, stale=True, duplicates=True)
    report = assert_deterministic(enrich_activity, st.tuples(events, changes), finish=enriched_per_plan,
                                  max_examples=25)
    assert report.examples == 25 and report.notes == []


POSTS = pa.schema([("post_id", pa.int64()), ("author_id", pa.int64()), ("text", pa.string())])
FOLLOWS = pa.schema([("follow_id", pa.int64()), ("follower_id", pa.int64()), ("followee_id", pa.int64())])


def timeline(posts: pa.Table, follows: pa.Table, joins, checkpoint: str, store: str) -> pa.Table:
    """The timeline job's join: posts of the users followed, as view changes."""
    return joins.table_table_join(posts, follows, TIMELINE_ON, left_key="post_id", right_key="follow_id",
                                  how="inner", left_time="changed_at", right_time="changed_at",
                                  store=store, checkpoint=f"{checkpoint}/join")


def test_assert_deterministic_passes_the_timeline_job_pipeline():
    posts = change_streams(POSTS, key="post_id", keys=(1, 2, 3), stale=True, max_changes=8)
    follows = change_streams(FOLLOWS, key="follow_id", keys=(1, 2), stale=True, max_changes=8)
    report = assert_deterministic(timeline, st.tuples(posts, follows), max_examples=10,
                                  finish=lambda t: view_rows(t, left_key="post_id", right_key="follow_id"))
    assert report.examples == 10
