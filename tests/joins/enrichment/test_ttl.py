"""The enrichment join's table TTL (docs/design/semantics.md "Enrichment", Table TTL), worked examples: an
expired version gives no row and is counted, its key leaves the state, a version younger than the
TTL at the lookup time still joins, bootstrap rows age like changes, latest mode ages by the table
watermark; and the count of expired lookups does not depend on how the state folds."""

from __future__ import annotations

import dataclasses
import datetime as dt

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamjoin.enrichment.operator import EnrichmentJoin
from streamjoin.errors import JoinDefinitionError
from tests.examples import scaled
from tests.joins.drivers import StepDriver
from tests.joins.enrichment.test_examples import EVENTS, PLAIN_FORMAT, TABLE
from tests.joins.enrichment.test_properties import SECOND, cases, when

TTL = dt.timedelta(seconds=5)


def test_enrichment_ttl_expired_version_gives_no_row_and_is_counted(script):
    s = script(table_ttl=TTL)
    assert s.run([(1, 4, "a"), (1, 6, "b"), (1, 7, "c")], [(1, "upsert", 1, "free")]) == []
    assert s.run([], [(None, "heartbeat", 20, None)]) == []
    # 1 >= 4 - 5 and 1 >= 6 - 5 (the bound is inclusive); 1 < 7 - 5: expired
    assert s.run() == [(1, 4, "a", "free"), (1, 6, "b", "free"), (1, 7, "c", None)]
    assert s.metric("expired_lookups") == 1
    assert s.metric("matched") == 2


def test_enrichment_ttl_inner_join_drops_events_of_expired_keys(script):
    s = script(table_ttl="5 seconds", how="inner")
    s.run([(1, 4, "a"), (1, 9, "b")], [(1, "upsert", 1, "free"), (None, "heartbeat", 20, None)])
    assert s.run() == [(1, 4, "a", "free")]
    assert s.metric("expired_lookups") == 1


def test_enrichment_ttl_expired_keys_leave_the_state_and_younger_ones_stay(script):
    s = script(table_ttl=TTL, buckets=1, layout="buckets")   # one bucket: swept, so pruned, in every version
    s.run([], [(1, "upsert", 1, "free"), (2, "upsert", 2, "pro"), (3, "upsert", 27, "max")])
    s.run([(9, 30, "tick")], [(None, "heartbeat", 30, None)])
    assert s.last("versions_held") == 3
    s.run()            # keep_to = min(event wm 30, table wm 30): versions older than 25 expire
    assert s.last("versions_held") == 1
    assert len([k for k, _ in s.driver.state()[0] if k[:1] == b"T"]) == 1
    # key 3 changed at 27 >= 31 - 5: still joins; key 1 is gone: no row, like a key never seen
    s.run([(3, 31, "young"), (1, 31, "gone")], [(None, "heartbeat", 40, None)])
    assert s.run() == [(1, 31, "gone", None), (3, 31, "young", "max"), (9, 30, "tick", None)]
    assert s.metric("expired_lookups") == 0


def test_enrichment_ttl_expiry_index_drops_keys_in_any_bucket_at_once(script):
    s = script(table_ttl=dt.timedelta(seconds=4), layout="buckets")   # 64 buckets: a sweep alone takes 64 versions
    s.run([(99, 10, "tick")], [(u, "upsert", 1, "free") for u in range(20)] + [(None, "heartbeat", 10, None)])
    assert s.last("versions_held") == 20
    assert any(k[:1] == b"X" for k, _ in s.driver.state()[0])
    s.run()            # keep_to = 10: expired before 6, so the slot of 1 s is due
    assert s.last("versions_held") == 0
    assert [k for k, _ in s.driver.state()[0] if k[:1] in (b"T", b"X")] == []


def test_enrichment_ttl_event_after_expiry_is_counted_while_its_key_is_held(script):
    s = script(table_ttl=TTL, buckets=1)
    s.run([], [(1, "upsert", 1, "free")])
    s.run([(1, 3, "a")], [(None, "heartbeat", 4, None)])         # table watermark 1: a waits
    assert s.run([(1, 8, "b")], [(None, "heartbeat", 12, None)]) == [(1, 3, "a", "free")]
    assert s.last("versions_held") == 1                          # keep_to = min(3, 4): 1 >= 3 - 5
    assert s.run() == [(1, 8, "b", None)]                        # 1 < 8 - 5
    assert s.metric("expired_lookups") == 1
    assert s.last("versions_held") == 0                          # keep_to = 8: 1 < 3


def test_enrichment_ttl_latest_ages_by_the_table_watermark(script):
    s = script(table_ttl=TTL, mode="latest")
    assert s.run([(1, 0, "a")], [(1, "upsert", 1, "free"), (2, "upsert", 8, "pro")]) == [(1, 0, "a", "free")]
    # table watermark 8: key 1 (changed at 1 < 8 - 5) expired, key 2 (8) not, whatever the event times
    assert s.run([(1, 50, "b"), (2, 0, "c")]) == [(1, 50, "b", None), (2, 0, "c", "pro")]
    assert s.metric("expired_lookups") == 1
    assert s.last("versions_held") == 1


def test_enrichment_ttl_bootstrap_rows_expire_too():
    op = EnrichmentJoin(EVENTS, TABLE, "user", stream_time="ts", changes=PLAIN_FORMAT,
                        delay=dt.timedelta(0), table_ttl=TTL, buckets=1)
    snapshot = pa.Table.from_pylist([{"user": 1, "at": when(2 * SECOND), "plan": "free"},
                                     {"user": 2, "at": None, "plan": "pro"}],
                                    schema=pa.schema([("user", pa.int64()), ("at", pa.timestamp("us")),
                                                      ("plan", pa.string())]))
    driver = StepDriver(op)
    try:
        events = pa.Table.from_pylist([{"user": u, "ts": when(t * SECOND), "what": w}
                                       for u, t, w in [(1, 6, "young"), (1, 8, "old"), (2, 3, "timeless")]],
                                      schema=EVENTS)
        driver.run(events, op.bootstrap_changes(snapshot))
        heartbeat = pa.Table.from_pylist([{"user": None, "op": "heartbeat", "at": when(30 * SECOND)}], schema=TABLE)
        driver.run(EVENTS.empty_table(), heartbeat)
        out, _ = driver.run(EVENTS.empty_table(), TABLE.empty_table())
        got = sorted((r["what"], r["plan"]) for r in out.to_pylist())
        # a snapshot row ages from its change time; one without counts as changed at minus infinity
        assert got == [("old", None), ("timeless", None), ("young", "free")]
        assert driver.recorded[-1]["versions_held"] == 0                     # keep_to = 8: both gone
        # the timeless row left the state in version 1 (keep_to = 2 > minus infinity + 5): the
        # event that finds no version then is not counted as an expired lookup
        assert driver.metric("expired_lookups") == 1
    finally:
        driver.close()


def test_enrichment_ttl_is_part_of_the_definition_and_must_be_positive():
    def join(ttl):
        return EnrichmentJoin(EVENTS, TABLE, "user", stream_time="ts", changes=PLAIN_FORMAT, table_ttl=ttl)

    assert join("1 minute").definition()["table_ttl_us"] == 60 * SECOND
    assert "table_ttl_us" not in join(None).definition()
    for bad in ("0 seconds", dt.timedelta(seconds=-1), "1 month", 5):
        with pytest.raises(JoinDefinitionError, match="table_ttl"):
            join(bad)


@settings(max_examples=scaled(40))
@given(case=cases(), mode=st.sampled_from(["as_of", "latest"]), ttl=st.sampled_from([1, 2 * SECOND, 5 * SECOND]))
def test_enrichment_ttl_expired_lookups_do_not_depend_on_folding(case, mode, ttl):
    case = dataclasses.replace(case, ttl=ttl)
    counts = []
    for fraction, deltas, buckets in [(0.0, 0, 3), (1e9, 1000, 64)]:
        operator = case.operator(mode, buckets=buckets)
        operator.spec = dataclasses.replace(operator.spec, fold_fraction=fraction, fold_deltas=deltas)
        driver = StepDriver(operator, case.partitions)
        v = case.variant
        try:
            for index in [*range(len(case.batches)), None]:
                tables = (v.stream.empty_table(), v.table.empty_table()) if index is None else case.tables(index)
                driver.run(*tables, final=index is None)
        finally:
            driver.close()
        counts.append(driver.metric("expired_lookups"))
    assert counts[0] == counts[1]
