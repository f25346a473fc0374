"""Idleness in the watermark's combination (``idle_timeout``): which inputs are idle, what they leave."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

from streamjoin.errors import JoinDefinitionError
from streamjoin.interval.operator import IntervalJoin
from streamjoin.kit.watermark import combine_watermark, idle_inputs, parse_idle_timeout

NEG_INF = -(1 << 63)
SCHEMA = pa.schema([("k", pa.int64()), ("t", pa.timestamp("us"))])


def test_idle_inputs_marks_an_input_quiet_for_at_least_the_timeout():
    assert idle_inputs((100, 40), now=100, timeout=60) == (False, True)    # exactly the timeout: idle
    assert idle_inputs((100, 41), now=100, timeout=60) == (False, False)


def test_idle_inputs_marks_none_without_a_timeout_a_processing_time_or_a_recorded_advance():
    assert idle_inputs((0, 0), now=1_000, timeout=None) == (False, False)
    assert idle_inputs((0, 0), now=None, timeout=10) == (False, False)
    assert idle_inputs((None, 0), now=1_000, timeout=10) == (False, True)   # None: an old record, never idle


def test_combine_watermark_leaves_out_idle_inputs():
    assert combine_watermark((50, 10), (5, 5), "min", NEG_INF) == 5
    assert combine_watermark((50, 10), (5, 5), "min", NEG_INF, idle=(False, True)) == 45
    assert combine_watermark((50, None), (5, 5), "min", NEG_INF, idle=(False, True)) == 45  # never seen, idle


def test_combine_watermark_stays_at_the_floor_when_every_input_is_idle():
    assert combine_watermark((50, 10), (5, 5), "min", 7, idle=(True, True)) == 7


def test_parse_idle_timeout_reads_durations_and_none():
    assert parse_idle_timeout(None) is None
    assert parse_idle_timeout("10 minutes") == 600_000_000
    assert parse_idle_timeout(dt.timedelta(seconds=1)) == 1_000_000


@pytest.mark.parametrize("value, match", [("-5 seconds", "positive"), (dt.timedelta(0), "positive"),
                                          ("5m", "idle_timeout"), (10, "idle_timeout")])
def test_interval_join_refuses_a_bad_idle_timeout_before_any_row(value, match):
    with pytest.raises(JoinDefinitionError, match=match):
        IntervalJoin(SCHEMA, SCHEMA, "k", left_time="t", right_time="t", lower="0 seconds", upper="0 seconds",
                     delay="0 seconds", idle_timeout=value)


def test_interval_join_records_idle_timeout_in_its_definition_only_when_set():
    args = dict(left_time="t", right_time="t", lower="0 seconds", upper="0 seconds", delay="0 seconds")
    assert "idle_timeout_us" not in IntervalJoin(SCHEMA, SCHEMA, "k", **args).definition()
    op = IntervalJoin(SCHEMA, SCHEMA, "k", **args, idle_timeout="1 minute")
    assert op.definition()["idle_timeout_us"] == 60_000_000 and op.uses_processing_time
