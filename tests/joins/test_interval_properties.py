"""Properties of the interval join (docs/semantics.md "Interval join"), checked against the nested-loop reference.

Most run the operator in process (``StepDriver``: steps against open stores); the ones about
backends and recovery run it through the runtime (``LocalRunner``: changelogs, checkpoints).
"""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from streamjoin.statestore import backend_names
from tests.joins.strategies import (
    DISTURBANCES,
    JoinCase,
    Local,
    StepDriver,
    aside_of,
    disturb,
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


@pytest.mark.parametrize("store", BACKENDS)
@given(case=join_cases(nulls=False, max_rows=10))
def test_interval_join_without_late_rows_equals_reference_on_every_backend(store, case):
    case = case.without_late_rows()
    local = Local(case, store)
    try:
        output = Counter()
        for index in [*range(len(case.batches)), None]:
            output += rows_of(local.run(index))
        assert output == case.expected()
        assert local.asides() == (Counter(), Counter())
    finally:
        local.close()


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
        for version, index in enumerate(versions):
            disturb(chaos, data.draw(st.sampled_from(_ACTIONS)), data)
            got = rows_of(chaos.run(index))
            assert got == expected[version]
            if data.draw(st.booleans()):          # the task or batch is executed again
                disturb(chaos, data.draw(st.sampled_from(_ACTIONS)), data)
                assert rows_of(chaos.run(index, version=version)) == expected[version]
        assert chaos.asides() == plain.asides()
    finally:
        plain.close()
        chaos.close()


