"""The enrichment join's ``runs`` layout (:mod:`streamjoin.enrichment.runs`) against the references
and against the ``buckets`` layout, with folds at every size (``MIN_FOLD_ROWS`` drawn) and a base
held whole or read by chunks of two rows (a memory budget drawn), through crashes, lost stores and
every backend."""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
import re
from collections import Counter, OrderedDict
from contextlib import ExitStack, contextmanager
from typing import Iterator
from unittest import mock

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from streamjoin.changes import DELETE, OP, SEQ, TIME, ChangeFormat
from streamjoin.enrichment import runs
from streamjoin.enrichment.operator import EnrichmentJoin, layout_for
from streamjoin.enrichment.runs_base import chunk_bounds
from streamjoin.enrichment.sorted_versions import Order, SortedVersions, key_codes
from streamjoin.enrichment.step import needed_versions
from streamjoin.errors import CheckpointMismatchError, JoinDefinitionError
from streamjoin.kit.order import ascending
from streamjoin.runtime import local
from streamjoin.runtime.bind import bind_query
from streamjoin.runtime.initial_state import state_progress
from streamjoin.runtime.state_rows import state_rows
from streamjoin.statestore import warm
from tests.examples import scaled
from tests.joins.drivers import InProcess, replay_disturbed
from tests.joins.enrichment.test_examples import check_row_order_free
from tests.joins.enrichment.test_properties import BACKENDS, Run, cases, drive_with_metrics, rows_of, run_all
from tests.joins.runtime.test_rescale_enrichment import _bounds

RUNS = {"layout": "runs"}
BUCKETS = {"layout": "buckets"}
#: (``MIN_FOLD_ROWS``: a fold whenever the rows beside the base pass half of it, or only at 4096
#: rows, never here but for the budget; the memory budget: None, the base held whole, else bases
#: and deltas of more bytes read by chunks of two rows and folded)
FOLDS = st.tuples(st.sampled_from([0, 1, 3, runs.MIN_FOLD_ROWS]), st.sampled_from([None, 0, 3000]))
CHUNKED = (1, 3000)


@contextmanager
def tuned(tuning: tuple[int, int | None]) -> Iterator[None]:
    """The runs layout with ``MIN_FOLD_ROWS`` and, unless None, a memory budget of that many
    bytes and chunks of two rows (see :data:`FOLDS`)."""
    fold, budget = tuning
    with ExitStack() as stack:
        stack.enter_context(mock.patch.object(runs, "MIN_FOLD_ROWS", fold))
        if budget is not None:
            stack.enter_context(mock.patch.object(runs, "CHUNK_ROWS", 2))
            stack.enter_context(mock.patch.object(runs, "memory_budget", lambda: budget))
        yield


@given(case=cases(), mode=st.sampled_from(["as_of", "latest"]), fold=FOLDS)
def test_runs_layout_equals_reference_and_the_buckets_layout(case, mode, fold):
    with tuned(fold):
        output, reasons, metrics = drive_with_metrics(case, mode, **RUNS)
    assert output == case.expected(mode)
    assert (reasons["late"], reasons["late change"]) == case.late_counts()
    base_output, base_reasons, base_metrics = drive_with_metrics(case, mode, **BUCKETS)
    assert (output, reasons) == (base_output, base_reasons)
    for name in ("stale_changes", "matched", "late_changes", "released_by_grace", "expired_lookups", "expired_changes"):
        assert metrics[name] == base_metrics[name], name


@given(case=cases(), grace=st.sampled_from([0, 1, 4]), fold=FOLDS)
def test_runs_layout_with_grace_equals_the_buckets_layout(case, grace, fold):
    options = {"grace": dt.timedelta(seconds=grace)}
    with tuned(fold):
        output, _, metrics = drive_with_metrics(case, "as_of", **options, **RUNS)
    base_output, _, base_metrics = drive_with_metrics(case, "as_of", **options, **BUCKETS)
    assert output == base_output
    assert metrics["stale_changes"] == base_metrics["stale_changes"]


@pytest.mark.parametrize("store", BACKENDS)
@settings(max_examples=scaled(10))
@given(case=cases(max_rows=8), mode=st.sampled_from(["as_of", "latest"]))
def test_runs_layout_equals_reference_on_every_backend(store, case, mode):
    with tuned(CHUNKED):
        output, _ = run_all(case, mode, store, **RUNS)
    assert output == case.expected(mode)


@settings(max_examples=scaled(25))
@given(case=cases(max_rows=8), mode=st.sampled_from(["as_of", "latest"]), fold=FOLDS, data=st.data())
def test_runs_layout_crash_and_restore_equals_uninterrupted_run(case, mode, fold, data):
    versions = [*range(len(case.batches)), None]
    with tuned(fold):
        plain, chaos = Run(case, mode, **RUNS), Run(case, mode, data.draw(st.sampled_from(BACKENDS)), **RUNS)
        try:
            expected = [rows_of(plain.run(index)) for index in versions]
            replay_disturbed(chaos, lambda index, version: rows_of(chaos.run(index, version=version)), versions,
                             expected, data)
        finally:
            plain.close()
            chaos.close()


def test_runs_layout_refuses_an_unknown_layout_naming_the_known_ones():
    stream = pa.schema([("k", pa.int64()), ("ts", pa.timestamp("us"))])
    table = pa.schema([("k", pa.int64()), ("op", pa.string()), ("at", pa.timestamp("us")), ("v", pa.string())])
    with pytest.raises(JoinDefinitionError, match=r"unknown layout='rows'; use one of \['buckets', 'runs'\]"):
        EnrichmentJoin(stream, table, "k", stream_time="ts", changes=ChangeFormat.plain("k", time="at"),
                       layout="rows")  # type: ignore[arg-type]


def test_runs_layout_is_part_of_the_definition():
    stream = pa.schema([("k", pa.int64()), ("ts", pa.timestamp("us"))])
    table = pa.schema([("k", pa.int64()), ("op", pa.string()), ("at", pa.timestamp("us")), ("v", pa.string())])
    fmt = ChangeFormat.plain("k", time="at")
    buckets = EnrichmentJoin(stream, table, "k", stream_time="ts", changes=fmt, layout="buckets").definition()
    runs_ = EnrichmentJoin(stream, table, "k", stream_time="ts", changes=fmt).definition()   # (the default)
    assert (buckets["layout"], runs_["layout"]) == (2, 3)
    assert "buckets" in buckets and "buckets" not in runs_


def test_runs_layout_is_the_default_but_a_checkpoint_keeps_its_layout(tmp_path):
    stream = pa.schema([("k", pa.int64()), ("ts", pa.timestamp("us"))])
    table = pa.schema([("k", pa.int64()), ("op", pa.string()), ("at", pa.timestamp("us")), ("v", pa.string())])
    fmt = ChangeFormat.plain("k", time="at")
    old, new = str(tmp_path / "old"), str(tmp_path / "new")
    bind_query(old, EnrichmentJoin(stream, table, "k", stream_time="ts", changes=fmt, layout="buckets"), 2)
    assert layout_for(old, None) == "buckets"   # a checkpoint started in the buckets layout keeps it
    assert layout_for(new, None) == "runs" and layout_for(None, None) == "runs"   # a new one: the default
    assert layout_for(old, "runs") == "runs"    # (asked for: the definition check refuses it)
    with pytest.raises(CheckpointMismatchError, match="layout: 2 -> 3"):
        bind_query(old, EnrichmentJoin(stream, table, "k", stream_time="ts", changes=fmt, layout="runs"), 2)


@given(keys=st.lists(st.tuples(st.sampled_from(["a", "b", "ab", ""]), st.integers(-2, 2)), max_size=12),
       times=st.lists(st.one_of(st.none(), st.integers(-3, 3)), min_size=12, max_size=12),
       probe=st.tuples(st.sampled_from(["a", "b", "ab", "", "c"]), st.integers(-2, 2), st.integers(-4, 4)))
def test_sorted_versions_floor_finds_the_last_version_of_the_key_at_or_before(keys, times, probe):
    table = pa.table({"s": pa.array([k for k, _ in keys], pa.string()), "i": pa.array([i for _, i in keys], pa.int64()),
                      "_t": pa.array(times[:len(keys)], pa.int64()), "_s": pa.array([None] * len(keys), pa.int64())})
    table = table.rename_columns(["s", "i", TIME, SEQ])
    held = SortedVersions.sorted(table, key_codes([table.column("s").combine_chunks(), table.column("i").combine_chunks()]))
    code = key_codes([pa.array([probe[0]]), pa.array([probe[1]], pa.int64())])
    found = held.floor(Order(code, np.ones(1, bool), np.array([probe[2]]), np.ones(1, bool), np.array([2**63 - 1])))[0]
    rows = held.table.to_pylist()
    candidates = [i for i, r in enumerate(rows) if (r["s"], r["i"]) == probe[:2]
                  and (r[TIME] is None or r[TIME] <= probe[2])]
    assert found == (max(candidates) if candidates else -1)
    mine = [i for i, r in enumerate(rows) if (r["s"], r["i"]) == probe[:2]]
    assert mine == sorted(mine) and (not mine or mine == list(range(mine[0], mine[-1] + 1)))
    assert [rows[i][TIME] is not None for i in mine] == sorted(rows[i][TIME] is not None for i in mine)


@pytest.mark.parametrize("fold", [(0, None), (runs.MIN_FOLD_ROWS, None), CHUNKED])
def test_runs_layout_duplicates_and_older_changes_are_stale(script, fold):
    with tuned(fold):
        s = script(mode="latest", delay=dt.timedelta(seconds=5), **RUNS)
        s.run([], [(1, "upsert", 5, "second"), (1, "upsert", 5, "first")])   # canonical order: "first" wins
        assert s.run([(1, 9, "e")], [(1, "upsert", 5, "again"), (1, "upsert", 4, "older")]) == [(1, 9, "e", "first")]
        assert s.metric("stale_changes") == 3 and s.reasons() == ([], [])
        s.run([], [(1, "upsert", 7, "newer"), (2, "upsert", 5, "two")])
        assert s.run([(1, 10, "f"), (2, 10, "g")], [(1, "upsert", 7, "again")]) == [(1, 10, "f", "newer"),
                                                                                   (2, 10, "g", "two")]
        assert s.metric("stale_changes") == 4


@given(case=cases(max_partitions=2), fold=FOLDS, data=st.data())
def test_runs_layout_output_and_state_do_not_depend_on_row_order(case, fold, data):
    with tuned(fold):
        check_row_order_free(case, data, **RUNS)


@pytest.mark.parametrize("fold", [(0, None), (runs.MIN_FOLD_ROWS, None), CHUNKED])
def test_runs_layout_holds_a_duplicate_of_a_version_held_once(script, fold):
    with tuned(fold):
        s = script(delay=dt.timedelta(seconds=5), **RUNS)
        s.run([], [(1, "upsert", 5, "first")])
        s.run([], [(1, "upsert", 5, "again")])         # not late (the table watermark is 0), a duplicate
        assert s.last("versions_held") == 1 and s.metric("stale_changes") == 1
        s.run([(1, 6, "e")], [(None, "heartbeat", 20, None)])
        assert s.run(final=True) == [(1, 6, "e", "first")]


# -- tasks that move between workers ------------------------------------------------------------


class TwoWorkers:
    """Two Python workers of one machine, simulated in this process: each task of the patched
    in-process runner lands in the worker ``pick(task)`` names, which takes its partition's store
    over from the other worker when that one parked it (a hand-over, leaving that worker's memo
    with it: :mod:`streamjoin.statestore.warm`); ``full_reads`` counts the tasks that read the
    versions held whole (:meth:`streamjoin.enrichment.runs.Held.read`)."""

    def __init__(self, pick) -> None:
        self.pick, self.memos = pick, [OrderedDict(), OrderedDict()]
        self.parked_by: dict[str, int] = {}
        self.full_reads = self.caught_up = 0

    @contextmanager
    def running(self) -> Iterator[TwoWorkers]:
        real_run, real_read, real_catch_up = local.run_task, runs.Held.read.__func__, runs.Held.caught_up

        def run_task(operator, checkpoint, config, task, rows, **kwargs):
            worker = self.pick(task)
            for path in warm.parked_paths():
                if _partition_of(path) == task.partition and self.parked_by.get(path, worker) != worker:
                    warm._MEMOS = self.memos[self.parked_by[path]]
                    warm.evict(path, hand_over=True)
            warm._MEMOS = self.memos[worker]
            try:
                return real_run(operator, checkpoint, config, task, rows, **kwargs)
            finally:
                self.parked_by.update({path: worker for path in warm.parked_paths()
                                       if _partition_of(path) == task.partition})

        def read(cls, *args):
            self.full_reads += 1
            return real_read(cls, *args)

        def caught_up(held, store, schema, keys, version):
            found = real_catch_up(held, store, schema, keys, version)
            if found is not None:   # what the worker caught up with is what reading the store gives
                self.caught_up += 1
                fresh = real_read(runs.Held, store, schema, keys)
                assert _versions_held(found) == _versions_held(fresh)
                assert sorted(found.stored) == sorted(fresh.stored)
            return found

        saved = warm._MEMOS
        try:
            with mock.patch.object(local, "run_task", run_task), \
                    mock.patch.object(runs.Held, "read", classmethod(read)), \
                    mock.patch.object(runs.Held, "caught_up", caught_up):
                yield self
        finally:
            warm.evict_all()
            warm._MEMOS = saved


def _versions_held(held: runs.Held) -> Counter:
    assert held.base.whole is not None
    return sum((rows_of(part.table) for part in (held.base.whole, *held.delta)), Counter())


def _partition_of(path: str) -> int:
    return int(re.search(r"p=(\d+)$", os.path.basename(path)).group(1))   # (local_store_path's name)


@settings(max_examples=scaled(25), deadline=None)
@given(case=cases(max_rows=8), mode=st.sampled_from(["as_of", "latest"]),
       fold=st.sampled_from([(0, None), (1, None), (0, 3000), (runs.MIN_FOLD_ROWS, None)]),
       fraction=st.sampled_from([1000.0, 0.5]), data=st.data())
def test_runs_layout_tasks_moving_between_two_workers_equal_the_reference(case, mode, fold, fraction, data):
    # (a base formed at the first fold that stays, fold fraction 1000, held whole: a worker given
    # its store back then catches up with the runs beside it)
    workers = TwoWorkers(lambda task: data.draw(st.integers(0, 1), label=f"worker of {task.version}/{task.partition}"))
    join = case.operator(mode, **RUNS)
    join.spec = dataclasses.replace(join.spec, fold_fraction=fraction)
    with tuned(fold), workers.running():
        run = InProcess(join, case.tables, partitions=case.partitions, store="arranged", query_id="two workers")
        try:
            output = sum((rows_of(run.run(index)) for index in [*range(len(case.batches)), None]), Counter())
        finally:
            run.close()
    event(f"versions held caught up: {workers.caught_up > 0}")
    assert output == case.expected(mode)


def test_runs_layout_a_worker_given_its_store_back_reads_only_the_runs_written_since():
    # one partition whose versions alternate between the workers: the first version's twenty keys
    # fold into a base, and each worker reads the versions held whole once, then takes what the
    # other wrote from the runs beside that base
    from tests.joins.enrichment.test_examples import EVENTS, PLAIN_FORMAT, TABLE
    from tests.joins.enrichment.test_properties import SECOND, when

    def batch(version: int) -> tuple[pa.Table, pa.Table]:
        events = [{"user": user, "ts": when((10 * version + 1) * SECOND), "what": f"e{version}"}
                  for user in (1, version + 1)]   # (user version + 1: changed by the version before)
        changes = [{"user": user, "op": "upsert", "at": when(10 * version * SECOND), "plan": f"v{version}"}
                   for user in ((1, version + 2) if version else range(1, 21))]
        return pa.Table.from_pylist(events, schema=EVENTS), pa.Table.from_pylist(changes, schema=TABLE)

    join = EnrichmentJoin(EVENTS, TABLE, "user", stream_time="ts", changes=PLAIN_FORMAT, mode="latest", **RUNS)
    workers = TwoWorkers(lambda task: task.version % 2)
    with tuned((0, None)), workers.running():
        run = InProcess(join, batch, store="arranged", query_id="two workers")
        try:
            plans = [sorted(run.run(version).select(["user", "plan"]).to_pylist(), key=lambda r: r["user"])
                     for version in range(6)]
        finally:
            run.close()
    assert plans[0] == [{"user": 1, "plan": "v0"}] * 2
    assert plans[1:] == [[{"user": 1, "plan": f"v{v}"}, {"user": v + 1, "plan": f"v{max(v - 1, 0)}"}] for v in range(1, 6)]
    assert workers.full_reads == 2


# -- read_state, rescaling and starting from state rows ------------------------------------------


def _needed_rows(run: Run, version: int) -> tuple[Counter, Counter]:
    """read_state's table and events of ``run`` after ``version``: the versions each key still
    needs (pruned as a fold after that version would prune them, expired ones too, without the
    deletes before a key's first upsert), and the events waiting; whatever was folded when, and in either layout."""
    uri = run.stage().checkpoint.uri
    spec = run.stage().operator.spec
    table = state_rows(uri, "table")
    events = Counter(tuple(sorted(r.items())) for r in state_rows(uri, "events")
                     .drop_columns(["_partition", "_version"]).to_pylist())
    if not table.num_rows:
        return Counter(), events
    progress = run.stage().metrics[-1]
    ew, tw = progress["event_watermark"], progress["table_watermark"]
    keep_to, gone_before, expire_before = _bounds(spec, ew, tw)
    key = list(spec.changes.key)
    rows = table.drop_columns(["_partition", "_version"])
    rows = rows.take(pc.sort_indices(rows, sort_keys=ascending(*key, "_change_time", "_sequence")))
    named = rows.rename_columns([{"_op": OP, "_change_time": TIME}.get(n, n) for n in rows.column_names])
    ops = pc.if_else(pc.equal(named.column(OP), "delete"), DELETE, 0)
    named = named.set_column(named.column_names.index(OP), OP, ops).set_column(
        named.column_names.index(TIME), TIME, named.column(TIME).cast(pa.int64()))
    needed = needed_versions(named, key, keep_to, gone_before, expire_before)[1]
    kept = rows.filter(pa.array(needed))
    keys = list(zip(*(kept.column(k).to_pylist() for k in key)))
    ops = kept.column("_op").to_pylist()
    leading_delete, row = [], False   # a key's deletes before its first upsert find no row, as none does
    for i, op in enumerate(ops):
        row = (i > 0 and keys[i] == keys[i - 1] and row) or op != "delete"
        leading_delete.append(not row)
    return Counter(tuple(sorted(r.items())) for r in kept.filter(pa.array(np.logical_not(leading_delete))).to_pylist()), events


@settings(max_examples=scaled(25), deadline=None)
@given(case=cases(max_partitions=4), mode=st.sampled_from(["as_of", "latest"]), fold=FOLDS, data=st.data())
def test_runs_layout_read_state_and_rescale_equal_the_buckets_layout(case, mode, fold, data):
    versions = [*range(len(case.batches)), None]
    cut = data.draw(st.integers(0, len(versions) - 1), label="cut")
    partitions = data.draw(st.integers(1, 6), label="new partitions")
    with tuned(fold):
        buckets, rescaled = Run(case, mode, **BUCKETS), Run(case, mode, **RUNS)
        try:
            for version, index in enumerate(versions):
                if version == cut:
                    rescaled.restart(partitions)
                assert rows_of(rescaled.run(index)) == rows_of(buckets.run(index)), f"version {version}"
                assert _needed_rows(rescaled, version) == _needed_rows(buckets, version), f"version {version}"
        finally:
            buckets.close()
            rescaled.close()


@settings(max_examples=scaled(25), deadline=None)
@given(case=cases(max_partitions=4), mode=st.sampled_from(["as_of", "latest"]),
       source=st.sampled_from(["buckets", "runs"]), data=st.data())
def test_runs_layout_starts_from_the_state_rows_of_either_layout(case, mode, source, data):
    cut = data.draw(st.integers(1, len(case.batches)), label="cut")
    partitions = data.draw(st.integers(1, 5), label="partitions of the new checkpoint")
    plain, first = Run(case, mode, **RUNS), Run(case, mode, layout=source)
    started = InProcess(case.operator(mode, **RUNS), case.tables, partitions=partitions)
    try:
        for index in range(cut):
            plain.run(index)
            first.run(index)
        uri = first.stage().checkpoint.uri
        started.runner.set_initial_state({side: state_rows(uri, side) for side in ("table", "events")},
                                         state_progress(uri))
        expected, got = Counter(), Counter()
        for index in [*range(cut, len(case.batches)), None]:
            expected += rows_of(plain.run(index))
            got += rows_of(started.run(index))
        assert got == expected
    finally:
        for run in (plain, first, started):
            run.close()


def test_runs_layout_read_state_shows_only_the_events_still_waiting():
    from tests.joins.enrichment.test_properties import PLAIN, SECOND, Case

    events = [(1, 0, "x"), (1, 5 * SECOND, "y"), (1, 9 * SECOND, "z")]
    case = Case(PLAIN, 2 * SECOND, [(events, [(1, "upsert", 0, 0, "free", False)]),
                                    ([], [(1, "upsert", 6 * SECOND, 0, "pro", False)]), ([], [])], 1)
    runs_, buckets = Run(case, "as_of", **RUNS), Run(case, "as_of", **BUCKETS)
    try:
        waiting = []
        for index in range(3):
            assert rows_of(runs_.run(index)) == rows_of(buckets.run(index))
            shown = [state_rows(r.stage().checkpoint.uri, "events").drop_columns(["_version"]).to_pylist()
                     for r in (runs_, buckets)]
            assert shown[0] == shown[1]
            waiting.append([row["what"] for row in shown[0]])
        assert waiting == [["x", "y", "z"], ["x", "y", "z"], ["y", "z"]]   # x left in the last version
    finally:
        runs_.close()
        buckets.close()


def test_runs_layout_expired_keys_leave_the_state_within_a_slot(script):
    s = script(table_ttl=dt.timedelta(seconds=4), **RUNS)
    s.run([(99, 10, "tick")], [(u, "upsert", 1, "free") for u in range(20)] + [(None, "heartbeat", 10, None)])
    assert s.last("versions_held") == 20
    s.run()            # keep_to = 10: expired before 6, so the slot of 1 s is due: a fold drops them
    assert s.last("versions_held") == 0
    assert [k for k, _ in s.driver.state()[0] if k[:1] == b"R"] == []
    s.run([(3, 31, "young"), (1, 31, "gone")], [(3, "upsert", 30, "max"), (None, "heartbeat", 40, None)])
    assert s.run() == [(1, 31, "gone", None), (3, 31, "young", "max"), (99, 10, "tick", None)]


@given(keys=st.lists(st.integers(0, 6), max_size=40), target=st.integers(1, 5))
def test_runs_base_chunk_bounds_never_cut_a_key(keys, target):
    codes = np.sort(np.array(keys, np.int64))
    order = Order(codes, np.ones(codes.size, bool), np.zeros(codes.size, np.int64), np.ones(codes.size, bool),
                  np.zeros(codes.size, np.int64))
    bounds = chunk_bounds(order, target).tolist()
    starts = [i for i in range(codes.size) if i == 0 or codes[i] != codes[i - 1]]
    expected = {0, codes.size}   # the first key start at or after each multiple of `target`
    for multiple in range(target, codes.size, target):
        expected |= {min((i for i in starts if i >= multiple), default=codes.size)}
    assert bounds == sorted(expected)
    assert set(bounds[:-1]) <= set(starts) | {0}   # no key is cut


def test_runs_layout_base_beyond_the_budget_reads_only_the_chunks_of_the_keys_it_touches(script):
    with tuned(CHUNKED):
        s = script(**RUNS)
        s.run([], [(u, "upsert", 1, f"plan{u}") for u in range(40)] + [(None, "heartbeat", 2, None)])
        held = runs.RunsCache.of(s.driver.stores[0], s.driver.operator.spec.versions_schema).held
        assert held is not None and held.base.whole is None and len(held.base.index) == 20
        with mock.patch.object(runs.st, "unblob", wraps=runs.st.unblob) as decoded:
            assert s.run([(7, 5, "e")], [(None, "heartbeat", 6, None)]) == []
            assert s.run() == [(7, 5, "e", "plan7")]
        assert decoded.call_count == 1   # one chunk of twenty read, in the version that released the event


def test_runs_layout_state_many_times_the_memory_budget_gives_the_buckets_layouts_output(script):
    """A partition whose versions and waiting events take many times its memory budget (the base
    read by chunks, the delta folded, the waiting files read by chunks) joins as the buckets layout."""
    outputs = []
    for options in (RUNS, BUCKETS):
        with tuned((runs.MIN_FOLD_ROWS, 4000)):
            s = script(delay=dt.timedelta(seconds=3), **options)
            got = []
            for second in range(12):
                changes = [(u, "upsert", second, f"plan{u}.{second}") for u in range(second * 37 % 50, 600, 7)]
                events = [(u, second - 2, f"e{second}.{u}") for u in range(second % 5, 600, 11)]
                got += s.run(events, changes)
                if options is RUNS and second:
                    cache = runs.RunsCache.of(s.driver.stores[0], s.driver.operator.spec.versions_schema)
                    assert cache.held is not None and cache.held.base.whole is None and cache.held.base.nbytes > 10 * 4000
                    assert cache.waiting and any(f.events is None for f in cache.waiting)
            got += s.run(final=True)
            outputs.append(sorted(got))
    assert outputs[0] == outputs[1] and len(outputs[0]) > 500


@given(sizes=st.lists(st.integers(0, 40), max_size=30))
def test_runs_stacked_keeps_every_version_in_few_sorted_stacks(sizes):
    delta: tuple[SortedVersions, ...] = ()
    added = []
    for version, size in enumerate(sizes):
        codes = np.arange(size, dtype=np.int64) * 7 % 23
        table = pa.table({OP: pa.array(["upsert"] * size), TIME: pa.array([version] * size, pa.int64()),
                          SEQ: pa.array([None] * size, pa.int64())})
        delta = runs.stacked(delta, SortedVersions.sorted(table, codes))
        added += [(int(c), version) for c in codes]
        assert all(len(d) for d in delta) and len(delta) <= max(1, int(np.log2(max(1, len(added)))) + 2)
        for d in delta:   # each stack in version order
            assert (np.diff(d.order.code) >= 0).all()
    held = sorted((int(c), int(t)) for d in delta for c, t in zip(d.order.code, d.order.time))
    assert held == sorted(added)


def test_runs_layout_finds_a_version_in_an_older_stack_of_the_delta(script):
    s = script(**RUNS)
    s.run([], [(u, "upsert", 1, f"old{u}") for u in range(12)])   # (too few rows to fold: no base)
    s.run([], [(u, "upsert", 2, f"mid{u}") for u in range(10)])   # 12 <= 2 x 10: one stack of 22
    s.run([], [(99, "upsert", 3, "new")])                          # 22 > 2 x 1: a second stack
    held = runs.RunsCache.of(s.driver.stores[0], s.driver.operator.spec.versions_schema).held
    assert held is not None and [len(d) for d in held.delta] == [22, 1]
    assert s.run([(4, 2, "e"), (4, 1, "f")]) == [(4, 1, "f", "old4"), (4, 2, "e", "mid4")]   # (table watermark 3)
