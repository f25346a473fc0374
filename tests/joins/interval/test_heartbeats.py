"""Heartbeats of the interval join's inputs (``heartbeats=True``): a row with only an event time is
progress of its input, never a row (docs/design/semantics.md "Time", Heartbeats)."""

from __future__ import annotations

import pytest

from streamjoin.errors import JoinDefinitionError
from streamjoin.interval.operator import IntervalJoin
from streamjoin.runtime.operator import REASON_COLUMN
from tests.joins.interval.test_examples import LEFT, RIGHT, at, join, out, rows


def test_interval_join_right_heartbeat_moves_the_watermark_so_a_left_outer_row_is_released():
    driver = join("left", lower=-2, upper=3, heartbeats=True)
    assert out(driver, [(1, at(10), "s")], [(1, at(0), "old")]) == []
    # the right input goes quiet; only its heartbeat says time has passed
    table, asides = driver.run(rows(LEFT, (2, at(20), "later")), rows(RIGHT, (None, at(20), None)))
    assert table.num_rows == 0 and all(a.num_rows == 0 for a in asides)
    # watermark min(20, 20) s > 10 + 3 s: the left rows' windows have closed
    assert out(driver) == [(1, at(10), "s", None, None)]
    assert driver.metric("heartbeat_rows_right") == 1


def test_interval_join_without_the_right_heartbeat_keeps_holding_the_left_outer_row():
    driver = join("left", lower=-2, upper=3, heartbeats=True)
    assert out(driver, [(1, at(10), "s")], [(1, at(0), "old")]) == []
    assert out(driver, [(2, at(20), "later")]) == []
    assert out(driver) == []                       # right progress still 0 s: watermark 0 s


@pytest.mark.parametrize("how", ["inner", "left", "right", "full", "left_semi", "left_anti"])
def test_interval_join_heartbeats_never_appear_in_output_state_or_set_aside(how):
    driver = join(how, delay=1, heartbeats=True)
    out(driver, [(1, at(10), "s")], [(1, at(10), "t")])
    # heartbeats now, one of them older than the watermark (9 s): not late, just no progress
    table, asides = driver.run(rows(LEFT, (None, at(30), None), (None, at(2), None)),
                               rows(RIGHT, (None, at(1), None), (None, at(31), None)))
    assert all(a.num_rows == 0 for a in asides)
    assert None not in [r.get("k") for r in table.to_pylist()]
    assert driver.recorded[1].get("rows_stored", 0) == 0         # the heartbeats' version stores nothing
    final = out(driver, final=True)
    assert all(r[0] == 1 for r in final)           # only the real rows' key
    assert driver.metric("heartbeat_rows_left") == 2 and driver.metric("heartbeat_rows_right") == 2
    assert driver.metric("null_key_rows_left") == driver.metric("late_rows_right") == 0


def test_interval_join_without_heartbeats_a_row_with_only_a_time_is_a_null_key_row():
    full = join("full")
    table, asides = full.run(rows(LEFT, (None, at(10), None)), rows(RIGHT, (None, at(10), None)))
    assert table.num_rows == 2 and all(a.num_rows == 0 for a in asides)     # output unmatched at once
    inner = join("inner")
    table, asides = inner.run(rows(LEFT, (None, at(10), None)), rows(RIGHT, (None, at(10), None)))
    assert table.num_rows == 0
    assert [a.column(REASON_COLUMN).to_pylist() for a in asides] == [["null key"], ["null key"]]
    assert inner.metric("heartbeat_rows_left") == inner.metric("heartbeat_rows_right") == 0


def test_interval_join_row_with_a_value_or_without_a_time_is_no_heartbeat():
    driver = join("full", heartbeats=True)
    table, (left_aside, right_aside) = driver.run(rows(LEFT, (None, at(10), "q"), (None, None, None)),
                                                  rows(RIGHT, (None, at(10), "c")))
    assert table.num_rows == 2                      # null-key rows of a full join, output at once
    assert left_aside.column(REASON_COLUMN).to_pylist() == ["null event time"]
    assert right_aside.num_rows == 0 and driver.metric("heartbeat_rows_left") == 0


@pytest.mark.parametrize("value", [1, "yes", None])
def test_interval_join_refuses_heartbeats_that_are_not_a_bool(value):
    with pytest.raises(JoinDefinitionError, match="heartbeats must be True or False"):
        join(heartbeats=value)


def test_interval_join_definition_names_heartbeats_only_when_on():
    def definition(**kw):
        return IntervalJoin(LEFT, RIGHT, "k", left_time="ts", right_time="ts", lower="0 seconds",
                            upper="1 second", delay="0 seconds", **kw).definition()
    assert definition() == definition(heartbeats=False) and "heartbeats" not in definition()
    assert definition(heartbeats=True)["heartbeats"] is True
