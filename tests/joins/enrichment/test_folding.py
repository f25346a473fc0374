"""The versions' state of the enrichment join (streamjoin.enrichment.state): per key bucket a base blob
plus one small delta per version that changed the bucket, folded into a new base now and then.

Whatever the fold tuning (fold every version, fold rarely, one bucket or many), the output equals
the reference, also across crashes and re-executions that cut through folds; ``versions_held``
stays the exact count of versions in state; a version with a few changes writes a few small
deltas, not the buckets they fall in.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections import Counter

import pyarrow as pa
from hypothesis import event, example, given, settings
from hypothesis import strategies as st

from streamjoin.changes import ChangeFormat
from streamjoin.enrichment import state as state
from streamjoin.enrichment.operator import EnrichmentJoin
from streamjoin.runtime.operator import StepInput
from streamjoin.statestore import destroy_store, open_store
from tests.examples import scaled
from tests.joins.drivers import InProcess, StepDriver, replay_disturbed
from tests.joins.enrichment.test_properties import BACKENDS, PLAIN, SECOND, Case, cases, rows_of, when

#: (fold_fraction, fold_deltas, buckets): fold every time; fold on the delta count alone; fold on
#: the row fraction alone (and on the sweep); almost never fold but on the sweep.
TUNINGS = [(0.0, 0, 3), (1e9, 1, 2), (0.5, 1000, 1), (1e9, 1000, 64), (0.5, 16, 64)]


def tuned(operator: EnrichmentJoin, fraction: float, deltas: int) -> EnrichmentJoin:
    operator.spec = dataclasses.replace(operator.spec, fold_fraction=fraction, fold_deltas=deltas)
    return operator


def held_in_state(entries: list[tuple[bytes, bytes]]) -> tuple[int, int]:
    """(versions in the state's version blobs, how many of those blobs are deltas)."""
    rows = deltas = 0
    for key, value in entries:
        if key[:1] == b"T":
            rows += state.unblob(value).num_rows
            deltas += len(key) > 9
    return rows, deltas


@settings(max_examples=scaled(60))
@given(case=cases(), mode=st.sampled_from(["as_of", "latest"]), tuning=st.sampled_from(TUNINGS))
def test_enrichment_folding_never_changes_the_output_and_versions_held_is_exact(case, mode, tuning):
    fraction, deltas, buckets = tuning
    driver = StepDriver(tuned(case.operator(mode, buckets=buckets, layout="buckets"), fraction, deltas), case.partitions)
    v = case.variant
    try:
        output, most_deltas = Counter(), 0
        for index in [*range(len(case.batches)), None]:
            tables = (v.stream.empty_table(), v.table.empty_table()) if index is None else case.tables(index)
            out, _ = driver.run(*tables, final=index is None)
            output += Counter(tuple(r.values()) for r in out.to_pylist())
            steps = driver.recorded[-case.partitions:]
            for entries, metrics in zip(driver.state(), steps):
                rows, n_deltas = held_in_state(entries)
                assert metrics["versions_held"] == rows
                most_deltas = max(most_deltas, n_deltas)
                if deltas == 0:
                    assert n_deltas == 0            # every bucket a version changes folds at once
        event(f"deltas in state at some point: {most_deltas > 0}")
    finally:
        driver.close()
    assert output == case.expected(mode)


def tuned_run(case: Case, mode: str, tuning: tuple, store: str = "memory") -> InProcess:
    """The case run by the in-process runner, with folding tuned (as ``Run`` of the properties)."""
    fraction, deltas, buckets = tuning
    return InProcess(tuned(case.operator(mode, buckets=buckets, layout="buckets"), fraction, deltas), case.tables,
                     partitions=case.partitions, store=store)


_ACTIONS = ("none", "lose_all", "lose_one", "switch_store")


@settings(max_examples=scaled(25))
@given(case=cases(max_rows=10), mode=st.sampled_from(["as_of", "latest"]),
       tuning=st.sampled_from(TUNINGS[:3]), data=st.data())
def test_enrichment_crash_and_restore_across_folds_equals_uninterrupted_run(case, mode, tuning, data):
    versions = [*range(len(case.batches)), None]
    plain = tuned_run(case, mode, tuning)
    chaos = tuned_run(case, mode, tuning, data.draw(st.sampled_from(BACKENDS)))
    try:
        expected = [rows_of(plain.run(index)) for index in versions]
        replay_disturbed(chaos, lambda index, version: rows_of(chaos.run(index, version=version)), versions,
                         expected, data, _ACTIONS)
        assert sum(expected, Counter()) == case.expected(mode)
    finally:
        plain.close()
        chaos.close()


EVENTS = pa.schema([("user", pa.int64()), ("ts", pa.timestamp("us")), ("what", pa.string())])
TABLE = pa.schema([("user", pa.int64()), ("op", pa.string()), ("at", pa.timestamp("us")), ("plan", pa.string()),
                   ("country", pa.string()), ("score", pa.int64())])


def _bytes_of_a_small_version(table_rows: int) -> tuple[int, int, int, int]:
    """Bootstrap ``table_rows`` rows (version 0), let events wait (1), then run a version with 8
    changes and the release of those events; return (bytes it puts, blob size of its changes,
    number of its version puts, size of one bucket's base)."""
    operator = EnrichmentJoin(EVENTS, TABLE, "user", stream_time="ts", changes=ChangeFormat.plain("user", time="at"),
                              delay=dt.timedelta(0), buckets=64, layout="buckets")
    store = open_store("memory", f"fold-bytes-{table_rows}")
    try:
        def step(version: int, events: list[dict], changes: pa.Table, max_times) -> list:
            e = pa.Table.from_pylist(events, schema=EVENTS)
            result = operator.step(store, StepInput(version, 0, (e, changes), max_times))
            store.write(result.puts, result.deletes, result.delete_ranges, version=version)
            return list(result.puts)

        snapshot = pa.table({"user": list(range(table_rows)), "plan": ["free"] * table_rows,
                             "country": ["DE"] * table_rows, "score": list(range(table_rows))})
        step(0, [], operator.bootstrap_changes(snapshot), (None, None))
        waiting = [{"user": u, "ts": when(5 * SECOND), "what": "e"} for u in range(0, table_rows, max(table_rows // 50, 1))]
        step(1, waiting, TABLE.empty_table(), (None, 0))
        bucket_size = len(store.get(state.version_key(0)))
        sweep = 2 % 64
        keys = [u for u in range(1, table_rows) if state.bucket_ids([pa.array([u])], 64)[0] != sweep][:8]
        changes = pa.Table.from_pylist([{"user": u, "op": "upsert", "at": when(10 * SECOND), "plan": "pro",
                                         "country": "FR", "score": -u} for u in keys], schema=TABLE)
        puts = step(2, [], changes, (5 * SECOND, 10 * SECOND))
        versions = [(k, v) for k, v in puts if k[:1] == b"T"]
        assert versions and all(len(k) > 9 for k, _ in versions)       # deltas only, no base rewritten
        return sum(len(k) + len(v) for k, v in puts), len(state.blob(changes)), len(versions), bucket_size
    finally:
        store.close()
        destroy_store("memory", f"fold-bytes-{table_rows}")


def test_enrichment_a_version_with_few_changes_writes_few_bytes_whatever_the_table_size():
    small, changes_size, deltas, _ = _bytes_of_a_small_version(1_000)
    big, _, _, bucket_size = _bytes_of_a_small_version(100_000)
    assert big == small                                  # nothing follows the table's size
    assert big <= 2 * deltas * changes_size              # each delta: one bucket's changes, one blob
    assert big < bucket_size / 4                         # less than one bucket of the big table


def _run_tuned(case: Case, mode: str, tuning: tuple, **options) -> tuple[list[Counter], list[dict], int]:
    """Every version's output, every step's metrics but versions_held, and the sum of that."""
    fraction, deltas, buckets = tuning
    driver = StepDriver(tuned(case.operator(mode, buckets=buckets, layout="buckets", **options), fraction, deltas), case.partitions)
    v = case.variant
    try:
        outputs = []
        for index in [*range(len(case.batches)), None]:
            tables = (v.stream.empty_table(), v.table.empty_table()) if index is None else case.tables(index)
            outputs.append(Counter(tuple(r.values()) for r in driver.run(*tables, final=index is None)[0].to_pylist()))
        return (outputs, [{k: n for k, n in m.items() if k != "versions_held"} for m in driver.recorded],
                sum(m["versions_held"] for m in driver.recorded))
    finally:
        driver.close()


@settings(max_examples=scaled(60))
@given(case=cases(), mode=st.sampled_from(["as_of", "latest"]), grace=st.sampled_from([None, 0, 1, 4]),
       buckets=st.sampled_from([1, 2, 64]))
# the lazy state still holds an expired version an event finds, the eager one no longer: both report
# expired_lookups (0), not only the lazy one
@example(case=Case(PLAIN, 3 * SECOND, [
    ([(1, 0, "x")], [(0, "upsert", 0, 1, "free", False), (0, "upsert", 1, None, "free", False),
                     (0, "upsert", 0, 0, "free", False), (0, "upsert", 0, None, "free", False)]),
    ([(1, 16 * SECOND + 1, "x")], [(0, "upsert", SECOND, None, "free", False),
                                   (1, "upsert", 7 * SECOND - 1, None, "free", False)]),
    ([], [])], 1, "inner", ttl=5 * SECOND + 1), mode="as_of", grace=1, buckets=64)
# the eager state dropped key 0's version of 5.1 s, expired (older than 7.2 s - 2 s) once its bucket
# was touched; the lazy one still holds it when a change of 4.5 s (not late: the table watermark is
# 4 s) arrives: both count that change as expired_changes, not only the lazy one as stale
@example(case=Case(PLAIN, (0, 10 * SECOND), [
    ([(2, 7_200_000, "x"), (0, 7_100_000, "x")], [(0, "upsert", 5_100_000, 0, "free", False),
                                                   (1, "upsert", 14 * SECOND, 0, "free", False)]),
    ([], []),
    ([], [(0, "upsert", 4_500_000, 0, "pro", False)])], 1, "inner", ttl=2 * SECOND),
    mode="as_of", grace=0, buckets=64)
def test_enrichment_lazy_pruning_equals_pruning_every_touched_bucket_every_version(case, mode, grace, buckets):
    """Folding every touched bucket in every version (fraction -1, no deltas kept) prunes as eagerly
    as possible; folding almost never keeps versions no longer needed for long (with grace, some
    of them newer than the table watermark). Every version's output and every metric but
    ``versions_held`` are the same."""
    options = {} if grace is None else {"grace": dt.timedelta(seconds=grace)}
    eager = _run_tuned(case, mode, (-1.0, 0, buckets), **options)
    lazy = _run_tuned(case, mode, (1e9, 1000, buckets), **options)
    event(f"lazy held more versions: {lazy[2] > eager[2]}")
    assert lazy[2] >= eager[2]
    assert eager[:2] == lazy[:2]
