"""Properties of the interval join (docs/design/semantics.md "Interval join"), checked against the nested-loop reference.

Most run the operator in process (``StepDriver``: steps against open stores); recovery runs it
through the runtime (``LocalRunner``: changelogs, checkpoints). The backend property is written on
the public test kit (:mod:`streamjoin.testing`): its event streams, its reference and
``assert_deterministic`` over micro-batch splits, partitions, restarts and retries on each backend.
"""

from __future__ import annotations

import datetime as dt
import tempfile

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from streamjoin.statestore import backend_names
from streamjoin.testing import LocalJoins, assert_deterministic, interval_join_reference
from streamjoin.testing import rows_of as kit_rows
from streamjoin.testing.interval import is_heartbeat
from streamjoin.testing.strategies import event_streams
from tests.examples import scaled
from tests.joins.drivers import DISTURBANCES, StepDriver, replay_disturbed
from tests.joins.interval.cases import (
    COMPOSITE,
    HOWS,
    SIMPLE,
    JoinCase,
    Local,
    Variant,
    aside_of,
    drive,
    join_cases,
    rows_of,
)

BACKENDS = backend_names()
TUNINGS = ({}, {}, {"group_rows": 1, "blob_rows": 1}, {"compression": "lz4", "group_rows": 3})


@given(case=join_cases(), options=st.sampled_from(TUNINGS))
def test_interval_join_equals_reference_over_rows_not_late(case, options):
    event(f"late rows: {any(any(l) or any(r) for l, r in case.late())}")
    output, asides = drive(case, **options)
    assert output == case.expected()
    assert asides == case.expected_aside()


@given(case=join_cases(times=True))
def test_interval_join_with_per_input_delays_and_policy_equals_reference_over_rows_not_late(case):
    event(f"policy {case.watermark_policy}, late rows: {any(any(l) or any(r) for l, r in case.late())}")
    output, asides = drive(case)
    assert output == case.expected()
    assert asides == case.expected_aside()


@given(case=join_cases(heartbeats=True, times=True))
def test_interval_join_with_rows_of_only_a_time_equals_reference_with_and_without_heartbeats(case):
    beats = sum(case.heartbeats and is_heartbeat(r, t) for left, right in case.batches
                for rows, t in ((left, case.variant.left_time), (right, case.variant.right_time)) for r in rows)
    event(f"heartbeats={case.heartbeats}, heartbeat rows: {beats > 0}")
    driver_metrics: dict = {}
    output, asides = drive(case, metrics=driver_metrics)
    assert output == case.expected()
    assert asides == case.expected_aside()
    assert driver_metrics["heartbeat_rows_left"] + driver_metrics["heartbeat_rows_right"] == beats


#: Inputs for the kit (streamjoin.testing): each variant's schemas with keys that match across sides.
KIT_VARIANTS = [(SIMPLE, (0, 1, 2), (0, 1, 2)),
                (COMPOSITE, {"a": (0, 1), "b": ("x", "y")}, {"c": (0, 1), "d": ("x", "y")})]
DISORDER = dt.timedelta(seconds=2)


def kit_inputs(variant: Variant, lkeys: object, rkeys: object, heartbeats: bool = False) -> st.SearchStrategy:
    """Left and right event streams of ``variant``: rows a second apart, up to DISORDER out of
    order, so that a watermark delay of DISORDER makes no row late under any micro-batch split
    (with ``heartbeats``, some rows are heartbeats)."""
    v = variant
    return st.tuples(event_streams(v.left, time=v.left_time, key=v.left_key, keys=lkeys, max_rows=8, disorder=DISORDER,
                                   heartbeats=heartbeats),
                     event_streams(v.right, time=v.right_time, key=v.right_key, keys=rkeys, max_rows=8,
                                   disorder=DISORDER, heartbeats=heartbeats))


@pytest.mark.parametrize("store", BACKENDS)
@settings(max_examples=scaled(6), suppress_health_check=list(HealthCheck))
@given(variant=st.sampled_from(KIT_VARIANTS), how=st.sampled_from(HOWS), data=st.data(),
       bounds=st.sampled_from([(-2, 3), (0, 0), (-5, -1), (1, 6)]), heartbeats=st.booleans())
def test_interval_join_without_late_rows_equals_reference_on_every_backend(store, variant, how, bounds, heartbeats,
                                                                            data):
    v = variant[0]
    left, right = data.draw(kit_inputs(*variant, heartbeats=heartbeats))
    args = dict(left_time=v.left_time, right_time=v.right_time, how=how, lower=dt.timedelta(seconds=bounds[0]),
                upper=dt.timedelta(seconds=bounds[1]), heartbeats=heartbeats)

    def pipeline(lt, rt, joins, store):
        return joins.interval_join(lt, rt, v.on, delay=DISORDER, store=store, **args)

    with tempfile.TemporaryDirectory() as root:
        joins = LocalJoins(root, store=store)
        joins.begin(0, final=True)
        batch = pipeline(left, right, joins, store)
    assert kit_rows(batch) == kit_rows(interval_join_reference(left, right, v.on, **args))
    # every micro-batch split, partition count, restart and retried micro-batch on this backend
    assert_deterministic(pipeline, [left, right], stores=[store], max_examples=4, shrink_budget=0)


@given(case=join_cases(), data=st.data())
def test_interval_join_output_and_state_do_not_depend_on_row_order(case, data):
    shuffled = JoinCase(
        case.variant, case.how, case.lower, case.upper, case.delay,
        [(data.draw(st.permutations(left)), data.draw(st.permutations(right))) for left, right in case.batches],
        case.partitions, case.bucket,
    )
    drivers = [StepDriver(c.operator(), c.partitions) for c in (case, shuffled)]
    try:
        for index in range(len(case.batches)):
            (a, a_aside), (b, b_aside) = (d.run(*c.tables(index)) for d, c in zip(drivers, (case, shuffled)))
            assert a.equals(b) and all(x.equals(y) for x, y in zip(a_aside, b_aside))
            assert drivers[0].state() == drivers[1].state()
    finally:
        for driver in drivers:
            driver.close()


@given(case=join_cases())
def test_interval_join_batch_run_equals_reference(case):
    everything = [
        ([r for left, _ in case.batches for r in left], [r for _, right in case.batches for r in right])
    ]
    batch = JoinCase(case.variant, case.how, case.lower, case.upper, case.delay, everything, case.partitions)
    driver = StepDriver(batch.operator(), batch.partitions)
    try:
        output, (left_aside, right_aside) = driver.run(*batch.tables(0), final=True)
        assert rows_of(output) == batch.expected()
        assert (aside_of(left_aside), aside_of(right_aside)) == batch.expected_aside()
        assert all(key == b"\x00watermark" for part in driver.state() for key, _ in part)
    finally:
        driver.close()


_ACTIONS = DISTURBANCES


@given(case=join_cases(max_rows=10), data=st.data())
def test_interval_join_crash_and_restore_equals_uninterrupted_run(case, data):
    versions = [*range(len(case.batches)), None]
    plain, chaos = Local(case), Local(case, data.draw(st.sampled_from(BACKENDS)))
    try:
        expected = [rows_of(plain.run(index)) for index in versions]
        replay_disturbed(chaos, lambda index, version: rows_of(chaos.run(index, version=version)), versions,
                         expected, data, _ACTIONS)
        assert chaos.asides() == plain.asides()
    finally:
        plain.close()
        chaos.close()


