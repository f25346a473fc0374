"""Heartbeats of the enrichment join's events (``heartbeats=True``): an event with only its event
time moves the event watermark and is never an event (docs/design/semantics.md "Time", Heartbeats)."""

from __future__ import annotations

import datetime as dt

import pytest

from streamjoin.errors import JoinDefinitionError
from tests.joins.enrichment.test_delays import join


def test_enrichment_event_heartbeat_moves_the_event_watermark_so_grace_releases_an_event(script):
    s = script(grace=dt.timedelta(seconds=5), heartbeats=True)
    assert s.run([(1, 10, "e")], [(1, "upsert", 1, "free")]) == []
    assert s.run([(None, 30, None)]) == []               # event watermark of this version: 10 s
    assert s.run() == [(1, 10, "e", "free")]             # 10 < 30 - 5: released by grace
    assert s.metric("released_by_grace") == 1 and s.metric("heartbeat_events") == 1


def test_enrichment_quiet_stream_without_a_heartbeat_keeps_the_event_waiting(script):
    s = script(grace=dt.timedelta(seconds=5), heartbeats=True)
    assert s.run([(1, 10, "e")], [(1, "upsert", 1, "free")]) == []
    assert s.run() == [] and s.run() == []


@pytest.mark.parametrize("how", ["left", "inner"])
@pytest.mark.parametrize("mode", ["as_of", "latest"])
def test_enrichment_event_heartbeats_never_appear_in_output_or_set_aside(script, how, mode):
    s = script(how=how, mode=mode, delay=dt.timedelta(seconds=1), heartbeats=True)
    assert s.run([(1, 10, "e")], [(1, "upsert", 1, "free"), (None, "heartbeat", 20, None)]) == \
        ([(1, 10, "e", "free")] if mode == "latest" else [])
    # one heartbeat older than the event watermark (9 s): not late, simply no progress
    got = s.run([(None, 3, None), (None, 40, None)], [])
    got += s.run(final=True)
    assert [r[2] for r in got] == ([] if mode == "latest" else ["e"])
    assert s.reasons() == ([], [])
    assert s.metric("heartbeat_events") == 2 and s.metric("late_events") == s.metric("null_key_events") == 0


@pytest.mark.parametrize("how, output, reasons", [("left", 1, []), ("inner", 0, ["null key"])])
def test_enrichment_without_heartbeats_an_event_with_only_a_time_is_a_null_key_event(script, how, output, reasons):
    s = script(how=how)
    assert len(s.run([(None, 10, None)])) == output
    assert s.reasons() == (reasons, [])
    assert s.metric("heartbeat_events") == 0 and s.metric("null_key_events") == 1


@pytest.mark.parametrize("value", [0, "true"])
def test_enrichment_refuses_heartbeats_that_are_not_a_bool(value):
    with pytest.raises(JoinDefinitionError, match="heartbeats must be True or False"):
        join(heartbeats=value)


def test_enrichment_definition_names_heartbeats_only_when_on():
    assert join().definition() == join(heartbeats=False).definition()
    assert "heartbeats" not in join().definition() and join(heartbeats=True).definition()["heartbeats"] is True
