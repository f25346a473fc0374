"""Properties of the table-table join (docs/design/semantics.md "Table-table join"), checked against :mod:`streamjoin.testing.table`, for
random change histories of two tables (inserts, updates that move rows between join keys, deletes
of known and unknown keys, stale and duplicate changes, heartbeats), micro-batch splits, partition
counts, backends and ``how``. The bulk runs the stages' steps in process (:class:`StepChain`, no
changelog fsyncs); the backend and recovery properties run the runtime (three ``LocalRunner``s)."""

from __future__ import annotations

import os
from unittest import mock

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from streamjoin.statestore import arranged, backend_names
from streamjoin.statestore.arranged import BUDGET_VARIABLE
from tests.examples import scaled
from tests.joins.drivers import DISTURBANCES, replay_disturbed
from tests.joins.table.cases import Run, TableCase, output_rows, table_cases

BACKENDS = backend_names()


def check_against_reference(case: TableCase, store: str = "memory", runtime: bool = True) -> Run:
    """Run every batch; after each, the view equals the reference join of the tables as they stand
    (docs/design/semantics.md "Table-table join") and the batch's output equals the reference's minimal diff."""
    expected = case.expected()
    kinds = {c[-3] for _, changes in expected for c in changes}
    event(f"view changes: {sorted(kinds)}")
    run = Run(case, store, runtime)
    event(f"stages: {list(run.join.plan.names)}")
    try:
        for index, (view, changes) in enumerate(expected):
            out = run.run(index)
            assert output_rows(out) == changes, f"batch {index}"
            assert run.view_rows() == view, f"batch {index}"
        return run
    finally:
        run.close()


@given(case=table_cases())
def test_table_join_view_and_changes_equal_reference_after_every_batch(case):
    run = check_against_reference(case, runtime=False)
    left, right = case.reference
    event(f"stale: {left.stale + right.stale > 0}, unknown deletes: {left.unknown_deletes + right.unknown_deletes > 0}")
    assert run.driver.metric("stale_changes") == left.stale + right.stale
    assert run.driver.metric("unknown_deletes") == left.unknown_deletes + right.unknown_deletes
    assert run.driver.metric("inconsistent_deletes") == 0
    event(f"retention: {case.retention is not None}, late: {left.late + right.late > 0}, "
          f"expired: {left.tombstones_expired + left.rows_expired + right.tombstones_expired + right.rows_expired > 0}")
    assert run.driver.metric("late_changes") == left.late + right.late
    assert run.driver.metric("tombstones_expired") == left.tombstones_expired + right.tombstones_expired
    assert run.driver.metric("rows_expired") == left.rows_expired + right.rows_expired


@pytest.mark.parametrize("store", BACKENDS)
@settings(max_examples=scaled(6))
@given(case=table_cases(max_changes=8, max_batches=3, max_partitions=2))
def test_table_join_equals_reference_on_every_backend(store, case):
    check_against_reference(case, store)


_ACTIONS = DISTURBANCES


def check_disturbed(case: TableCase, store: str, data: st.DataObject) -> None:
    """The case run on ``store`` through the runtime's crashes, lost stores and re-executed
    versions (drawn from ``data``) gives the batches' outputs of an uninterrupted run."""
    plain, chaos = Run(case, runtime=False), Run(case, store)
    try:
        expected = [output_rows(plain.run(index, apply=False)) for index in range(len(case.batches))]
        replay_disturbed(chaos.driver, lambda index, version: output_rows(chaos.run(index, version, apply=False)),
                         range(len(case.batches)), expected, data, _ACTIONS)
    finally:
        plain.close()
        chaos.close()


@settings(max_examples=scaled(10))
@given(case=table_cases(max_changes=8, max_batches=3, max_partitions=2), data=st.data())
def test_table_join_crash_and_restore_equals_uninterrupted_run(case, data):
    check_disturbed(case, data.draw(st.sampled_from(BACKENDS)), data)




@settings(max_examples=scaled(6))
@given(case=table_cases(max_changes=12, max_batches=3, max_partitions=2))
def test_table_join_equals_reference_with_arranged_state_over_its_memory_budget(case):
    # a worker budget of 9 bytes leaves each arranged store 1: every write merges its changes into a
    # new memory-mapped base, the state many times what the workers keep in memory
    with mock.patch.dict(os.environ, {BUDGET_VARIABLE: "9"}):
        check_against_reference(case, "arranged")


@settings(max_examples=scaled(10))
@given(case=table_cases(max_changes=12, max_batches=5, max_partitions=2), data=st.data())
def test_table_join_with_snapshots_rebasing_the_store_equals_uninterrupted_run(case, data):
    # every snapshot becomes its arranged store's base (``REBASE_SHARE`` 0: however few its runs),
    # through the runtime's crashes, lost stores and re-executed versions
    rebased: list[bool] = []
    rebase = arranged.ArrangedStore._rebase

    def counted(store, items):
        rebased.append(rebase(store, items))
        return rebased[-1]

    with mock.patch.object(arranged, "REBASE_SHARE", 0.0), mock.patch.object(arranged.ArrangedStore, "_rebase", counted):
        check_disturbed(case, "arranged", data)
    event(f"stores rebased: {sum(rebased) > 0}")
    assert all(rebased)   # a local changelog's snapshot is always taken at a share of 0


@pytest.mark.parametrize("kind", ["lmdb", "rocksdb"])
@settings(max_examples=scaled(6))
@given(case=table_cases(max_changes=12, max_batches=3, max_partitions=2))
def test_table_join_equals_reference_with_arranged_state_on_another_host(kind, case):
    # store="lmdb" and store="rocksdb": the arranged store's manifest and runs held in LMDB or
    # RocksDB, every write merging a new base
    with mock.patch.dict(os.environ, {BUDGET_VARIABLE: "9"}):
        check_against_reference(case, kind)
