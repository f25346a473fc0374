"""assert_deterministic in process: correct pipelines pass; batch- and order-dependent ones are
reported with a shrunk counterexample and the outputs' difference."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest
from hypothesis import settings
from hypothesis import strategies as st

from streamjoin.testing import NonDeterministicError, PipelineError, assert_deterministic, view_rows
from streamjoin.testing.strategies import change_streams, event_streams
from tests.joins.testing.pipelines import (
    CHANGE_ROWS,
    CLICKS,
    EVENT_ROWS,
    EVENTS,
    PROFILE,
    SEARCHES,
    UTC_US,
    at,
    clicks_with_idle_searches,
    clicks_with_searches,
    count_per_plan,
    deduplicated_per_batch,
    first_plan_per_user,
    latest_plan,
    numbered,
    purchases_per_plan,
)

INPUTS = {"events": EVENT_ROWS, "changes": CHANGE_ROWS}


def test_assert_deterministic_passes_an_as_of_enrichment_with_a_filter_and_an_aggregation():
    report = assert_deterministic(purchases_per_plan, INPUTS, finish=count_per_plan, max_examples=20)
    assert report.examples == 20 and report.notes == []


def test_assert_deterministic_reports_latest_mode_as_batch_dependent():
    with pytest.raises(NonDeterministicError) as caught:
        assert_deterministic(latest_plan, INPUTS, finish=count_per_plan, max_examples=15)
    message = str(caught.value)
    assert 'mode="latest") is documented as dependent on micro-batch boundaries' in message
    assert "Counterexample (shrunk):" in message and "batch only" in message and "stream only" in message
    failure = caught.value.failure
    assert failure.plan.count == 2  # one micro-batch cannot differ from the batch run
    assert sum(t.num_rows for t in failure.inputs) <= 3  # an event, the change it should not see (and one more)


def test_assert_deterministic_catches_a_python_counter_across_rows():
    with pytest.raises(NonDeterministicError) as caught:
        assert_deterministic(numbered, INPUTS, max_examples=10)
    assert sum(t.num_rows for t in caught.value.failure.inputs) == 1  # one purchase (joined with no profile)
    assert "n" in str(caught.value).split("Difference:")[1]


def test_assert_deterministic_catches_a_finish_taking_the_first_row_per_key():
    # user 1 buys on the free plan, then twice on pro: which plan is "first" depends on row order
    with pytest.raises(NonDeterministicError) as caught:
        assert_deterministic(purchases_per_plan, INPUTS, finish=first_plan_per_user, max_examples=20)
    failure = caught.value.failure
    assert failure.plan.shuffle is not None and "output rows given to finish in another order" in str(caught.value)
    assert failure.batch.rows != failure.stream.rows and failure.inputs[0].num_rows >= 2


def test_assert_deterministic_without_reorder_keeps_the_order_the_run_produced():
    report = assert_deterministic(purchases_per_plan, INPUTS, finish=first_plan_per_user, reorder=False,
                                  max_examples=10)
    assert report.examples == 10


EVENT_STREAMS = event_streams(EVENTS, time="ts", key="user_id", max_rows=8, disorder=dt.timedelta(0))
CHANGE_STREAMS = change_streams(PROFILE, key="user_id", heartbeats=True, stale=True, duplicates=True, max_changes=8)


def test_assert_deterministic_draws_inputs_from_strategies():
    report = assert_deterministic(purchases_per_plan, st.tuples(EVENT_STREAMS, CHANGE_STREAMS),
                                  finish=count_per_plan, max_examples=15)
    assert report.examples == 15


POSTS = pa.schema([("post_id", pa.int64()), ("author_id", pa.int64())])
FOLLOWS = pa.schema([("follow_id", pa.int64()), ("followee_id", pa.int64())])


def timeline(posts: pa.Table, follows: pa.Table, joins) -> pa.Table:
    return joins.table_table_join(posts, follows, (["author_id"], ["followee_id"]), left_key="post_id",
                                  right_key="follow_id", left_time="changed_at", right_time="changed_at")


def test_assert_deterministic_passes_a_table_table_view_compared_as_the_view():
    posts = change_streams(POSTS, key="post_id", keys=(1, 2, 3), max_changes=6)
    follows = change_streams(FOLLOWS, key="follow_id", keys=(1, 2), max_changes=6)
    assert_deterministic(timeline, st.tuples(posts, follows), max_examples=10,
                         finish=lambda t: view_rows(t, left_key="post_id", right_key="follow_id"))


CLICK_STREAMS = st.tuples(event_streams(CLICKS, time="click_time", key="session_id"),
                          event_streams(SEARCHES, time="search_time", key="session_id"))


def test_assert_deterministic_catches_a_deduplication_within_each_micro_batch():
    # the default strategies redeliver events; one redelivered in a later micro-batch escapes the dedupe
    with pytest.raises(NonDeterministicError) as caught:
        assert_deterministic(deduplicated_per_batch, CLICK_STREAMS, max_examples=settings.get_profile("ci").max_examples,
                             shrink_budget=4)
    clicks = caught.value.failure.inputs[0].to_pylist()
    assert len(clicks) > len({tuple(c.values()) for c in clicks})  # a click delivered twice
    assert "stream only" in str(caught.value).split("Difference:")[1]


def test_assert_deterministic_passes_the_join_of_redelivered_clicks():
    report = assert_deterministic(clicks_with_searches, CLICK_STREAMS, max_examples=10)
    assert report.examples == 10


def test_assert_deterministic_reports_idle_timeout_as_dependent_on_processing_time():
    # the kit's micro-batches are an hour apart in processing time: searches missing from one go idle
    times = (20, 100, 200, 300, 400, 500, 600, 700)
    clicks = pa.table({"click_id": list(range(len(times))), "session_id": [1] * len(times),
                       "click_time": pa.array([at(s) for s in times], UTC_US)})
    searches = pa.table({"search_id": [10], "session_id": [1], "search_time": pa.array([at(15)], UTC_US)})
    with pytest.raises(NonDeterministicError) as caught:
        assert_deterministic(clicks_with_idle_searches, {"clicks": clicks, "searches": searches}, max_examples=40,
                             shrink_budget=4)
    message = str(caught.value)
    assert "interval_join(idle_timeout=...) is documented as dependent on processing time" in message
    assert "batch only" in message   # the click's match, lost when the search came after the searches went idle


def _raises_on_pro(events: pa.Table, changes: pa.Table, joins, checkpoint: str) -> pa.Table:
    """A pipeline with a bug: it raises whenever it sees the plan "pro"."""
    if "pro" in changes.column("plan").to_pylist():
        raise KeyError("pro")
    return purchases_per_plan(events, changes, joins, checkpoint)


def test_assert_deterministic_reports_a_pipeline_that_raises_at_once_with_its_input():
    runs = []

    def pipeline(events, changes, joins, checkpoint):
        runs.append(1)
        return _raises_on_pro(events, changes, joins, checkpoint)
    with pytest.raises(PipelineError) as caught:
        assert_deterministic(pipeline, INPUTS, max_examples=50)
    assert len(runs) == 1   # the batch run raised: nothing more was run, nothing shrunk
    assert isinstance(caught.value.__cause__, KeyError) and caught.value.plan is None
    message = str(caught.value)
    assert "raised KeyError: 'pro'" in message and "the batch run" in message
    assert "changes:" in message and " pro" in message.split("changes:")[-1]   # the input that raised
    assert caught.value.inputs[1].num_rows == CHANGE_ROWS.num_rows


def test_assert_deterministic_reports_a_pipeline_raising_in_one_streaming_run_with_that_run():
    seen = []

    def pipeline(events, changes, joins, checkpoint):   # raises on a micro-batch of one row only
        seen.append(events.num_rows)
        if len(seen) > 1 and events.num_rows == 1:
            raise ValueError("one row")
        return purchases_per_plan(events, changes, joins, checkpoint)
    with pytest.raises(PipelineError) as caught:
        assert_deterministic(pipeline, {"events": EVENT_ROWS.slice(0, 2), "changes": CHANGE_ROWS}, max_examples=50)
    assert caught.value.plan is not None and "a streaming run" in str(caught.value)
    assert "micro-batch" in str(caught.value) and isinstance(caught.value.__cause__, ValueError)


def test_assert_deterministic_bounds_shrinking_in_time():
    runs = []

    def pipeline(events, changes, joins, checkpoint):
        runs.append(1)
        return numbered(events, changes, joins, checkpoint)
    with pytest.raises(NonDeterministicError) as caught:   # no time to shrink: the first failure is reported
        assert_deterministic(pipeline, INPUTS, max_examples=10, shrink_budget=10_000, shrink_seconds=0)
    assert len(runs) <= 1 + 10   # the batch run and the streams until the first failure, nothing more
    assert sum(t.num_rows for t in caught.value.failure.inputs) == EVENT_ROWS.num_rows + CHANGE_ROWS.num_rows
