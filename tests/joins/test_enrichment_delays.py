"""Per-input lateness of the enrichment join: ``stream_delay`` / ``table_delay``."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from streamjoin.enrichment.operator import EnrichmentJoin
from streamjoin.errors import JoinDefinitionError
from tests.joins.test_enrichment import EVENTS, PLAIN_FORMAT, TABLE

SECOND = 1_000_000


def join(**kw):
    return EnrichmentJoin(EVENTS, TABLE, "user", stream_time="ts", changes=PLAIN_FORMAT,
                          delay=dt.timedelta(seconds=1), **kw)


def test_enrichment_delays_leave_the_definition_unchanged_when_equal_to_delay():
    before = json.dumps(join().definition(), sort_keys=True)
    assert json.dumps(join(stream_delay="1 second", table_delay=dt.timedelta(seconds=1)).definition(),
                      sort_keys=True) == before
    assert "delays_us" not in before


def test_enrichment_delays_are_recorded_and_used_per_input():
    op = join(stream_delay="10 seconds", table_delay="2 hours")
    assert op.definition()["delays_us"] == [10 * SECOND, 7200 * SECOND]
    assert (op.spec.stream_delay, op.spec.table_delay) == (10 * SECOND, 7200 * SECOND)
    assert join(table_delay="3 seconds").definition()["delays_us"] == [SECOND, 3 * SECOND]


@pytest.mark.parametrize("kw, name", [(dict(stream_delay=dt.timedelta(seconds=-1)), "stream_delay"),
                                      (dict(table_delay="5 mins"), "table_delay")])
def test_enrichment_delays_refuse_bad_values_naming_the_argument(kw, name):
    with pytest.raises(JoinDefinitionError, match=name):
        join(**kw)
