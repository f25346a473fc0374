"""A state machine that drives partitions as the runtime does, beside a dict model.

Rules: run the next batch (sometimes writing a snapshot from the store after it, as the runtime
does every few versions), execute the last batch again with other output, lose the local store,
crash after the changelog append (with or without the undo record) and before the local write,
and compact with some retention. After every step, opening the store at the newest version gives the
model's state; executing the last batch again on a store that holds it is a rollback by undo
records, never a rebuild.
"""

from __future__ import annotations

import shutil
import tempfile

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from streamjoin.changelog import OpenHow, compact, snapshot_from_store
from tests.changelog.model import BACKENDS
from tests.changelog.strategies import writes
from tests.changelog.test_logging_store import Runner


class RecoveryMachine(RuleBasedStateMachine):
    kind = "memory"

    def __init__(self) -> None:
        super().__init__()
        self.root = tempfile.mkdtemp(prefix="changelog-machine-")
        self.runner = Runner(self.kind, self.root)
        self.local: int | None = None  # the local store's version, as far as we know
        self.undo: int | None = None  # the version whose undo record is beside it

    def teardown(self) -> None:
        self.runner.lose_local()
        shutil.rmtree(self.root, ignore_errors=True)

    @property
    def newest(self) -> int | None:
        return self.runner.model.newest

    @rule(write=writes, snapshot=st.booleans())
    def run_next_batch(self, write, snapshot) -> None:
        version = 0 if self.newest is None else self.newest + 1
        store, report = self.runner.open(self.newest)
        try:
            store.write(write.puts, write.deletes, write.delete_ranges, version=version)
            if snapshot:
                snapshot_from_store(self.runner.log, store, version)
        finally:
            store.close()
        self.runner.model.apply(version, write)
        self.local, self.undo = version, version

    @precondition(lambda self: self.newest is not None)
    @rule(write=writes)
    def execute_last_batch_again(self, write) -> None:
        version = self.newest
        could_undo = self.local == version and self.undo == version and version > 0
        report = self.runner.batch(version, write)
        if could_undo:
            assert report.how is OpenHow.ROLLED_BACK and report.versions == 1, report
        self.local, self.undo = version, version

    @rule()
    def lose_local_store(self) -> None:
        self.runner.lose_local()
        self.local = self.undo = None

    @precondition(lambda self: self.newest is not None)
    @rule(write=writes)
    def crash_after_changelog_append(self, write) -> None:
        version = self.newest + 1
        self.runner.log.append(version, write.puts, write.deletes, write.delete_ranges)
        self.runner.model.apply(version, write)  # committed in the log; the local store missed it

    @rule(write=writes)
    def crash_before_local_write(self, write) -> None:
        """The delta and the undo record are written, then the task dies."""
        version = 0 if self.newest is None else self.newest + 1
        store, _ = self.runner.open(self.newest)
        try:
            delta = self.runner.log.append(version, write.puts, write.deletes, write.delete_ranges)
            store.undo.record(store.inner, version, write.puts, write.deletes, write.delete_ranges,
                              delta.crc)
        finally:
            store.close()
        self.runner.model.apply(version, write)
        # the newest batch's undo record made way for this one (depth 1)
        self.local, self.undo = self.newest - 1 if self.newest else None, None

    @precondition(lambda self: self.newest is not None)
    @rule(retain=st.integers(2, 4))
    def compact_log(self, retain) -> None:
        compact(self.runner.log, retain_versions=retain)

    @invariant()
    def newest_version_restores_to_model(self) -> None:
        if self.newest is None:
            return
        state, version, report = self.runner.state_at(self.newest)
        assert (state, version) == (self.runner.model.states[self.newest], self.newest), report
        if report.how is not OpenHow.REUSED:
            self.undo = None
        self.local = self.newest


@pytest.mark.parametrize("backend", BACKENDS)
def test_recovery_machine_matches_model(backend):
    machine = type(f"RecoveryMachine_{backend}", (RecoveryMachine,), {"kind": backend})
    case = machine.TestCase
    examples = case.settings.max_examples
    if backend == "rocksdb-kv":  # each step opens RocksDB (~15 ms): a third of the examples
        examples = max(20, examples // 3)
    case.settings = settings(case.settings, stateful_step_count=12, max_examples=examples)
    case().runTest()
