"""The kit's strategies: event and change streams redeliver by default; a redelivered event is
never late for a watermark delay of the stream's disorder."""

from __future__ import annotations

import datetime as dt

from hypothesis import find, given

from streamjoin.testing.strategies import change_streams, event_streams
from tests.joins.testing.pipelines import CLICKS, PROFILE

DISORDER = dt.timedelta(seconds=2)


def _repeats(table) -> bool:
    rows = [tuple(r.values()) for r in table.to_pylist()]
    return len(set(rows)) < len(rows)


def test_event_streams_redeliver_events_by_default():
    # disorder 0: no two new rows share a time, so a repeated row is a redelivery, and only the
    # row before it is recent enough to come again without being late
    streams = event_streams(CLICKS, time="click_time", key="session_id", disorder=dt.timedelta(0))
    rows = [tuple(r.values()) for r in find(streams, _repeats).to_pylist()]
    assert all(row == rows[i - 1] for i, row in enumerate(rows) if row in rows[:i])


@given(table=event_streams(CLICKS, time="click_time", key="session_id", disorder=DISORDER))
def test_event_streams_rows_are_never_older_than_the_earlier_rows_newest_minus_disorder(table):
    times = table.column("click_time").to_pylist()
    for i, at in enumerate(times[1:], 1):
        assert at >= max(times[:i]) - DISORDER


def test_event_streams_draw_heartbeats_on_request():
    def beats(table) -> int:
        return sum(all(v is None for k, v in r.items() if k != "click_time") and r["click_time"] is not None
                   for r in table.to_pylist())
    assert beats(find(event_streams(CLICKS, time="click_time", key="session_id", heartbeats=True), beats)) > 0


@given(table=event_streams(CLICKS, time="click_time", key="session_id", duplicates=False))
def test_event_streams_draw_no_heartbeats_by_default(table):
    assert all(r["session_id"] is not None for r in table.to_pylist())


def test_change_streams_redeliver_changes_by_default():
    # a change's time is its place in the stream: a repeated row is the same change again
    assert _repeats(find(change_streams(PROFILE, key="user_id"), _repeats))
