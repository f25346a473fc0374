"""Starting a join from state rows (:mod:`streamjoin.runtime.initial_state`): a join started on a
new checkpoint from the state rows (and progress) of a run cut at a version gives, from then on,
the output of the run that was not cut, whatever the partition counts; bad rows are refused before
anything is written. (The table-table join: tests/joins/table/test_initial_state.py.)"""

from __future__ import annotations

import contextlib
import datetime as dt
import io
from collections import Counter
from typing import Callable, Iterator

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamjoin.changes import ChangeFormat
from streamjoin.enrichment.operator import EnrichmentJoin
from streamjoin.errors import JoinDefinitionError
from streamjoin.jobs.cli import main
from streamjoin.runtime.initial_state import state_progress
from streamjoin.runtime.operator import Operator
from streamjoin.runtime.state_rows import state_rows
from tests.examples import scaled
from tests.joins.drivers import InProcess
from tests.joins.enrichment.test_properties import Run as EnrichmentRun
from tests.joins.enrichment.test_properties import cases as enrichment_cases
from tests.joins.enrichment.test_properties import rows_of as enrichment_rows
from tests.joins.interval.cases import SIMPLE, JoinCase, Local, join_cases, rows_of
from tests.joins.runtime.test_rescale_enrichment import EVENTS, TABLE, _batch, logical_state


def _state_of(run: InProcess, sides: tuple[str, ...]) -> tuple[dict[str, pa.Table], dict[str, int]]:
    uri = run.stage().checkpoint.uri
    return {side: state_rows(uri, side) for side in sides}, state_progress(uri)


@contextlib.contextmanager
def _cut(case, cut: int, partitions: int, sides: tuple[str, ...], run: Callable[[], InProcess],
         operator: Operator) -> Iterator[tuple[InProcess, InProcess]]:
    """``(plain, started)``: ``plain`` has run batches ``0..cut-1``; ``started`` is a new
    checkpoint of ``partitions`` partitions started from the state rows and progress of another
    run cut there. Both are closed after."""
    plain, first = run(), run()
    started = InProcess(operator, case.tables, partitions=partitions)
    try:
        for index in range(cut):
            plain.run(index)
            first.run(index)
        started.runner.set_initial_state(*_state_of(first, sides))
        yield plain, started
    finally:
        plain.close()
        first.close()
        started.close()


def _without_place(table: pa.Table) -> Counter:
    return Counter(tuple(sorted(r.items())) for r in table.drop_columns(["_partition", "_version"]).to_pylist())


# -- the interval join ---------------------------------------------------------------------------


@settings(max_examples=scaled(40), deadline=None)
@given(case=join_cases(max_partitions=4), data=st.data())
def test_interval_initial_state_continues_the_cut_run(case, data):
    cut = data.draw(st.integers(1, len(case.batches)), label="cut")
    partitions = data.draw(st.integers(1, 5), label="partitions of the new checkpoint")
    with _cut(case, cut, partitions, ("left", "right"), lambda: Local(case), case.operator()) as (plain, started):
        assert started.stage().checkpoint.initial.done() is not None
        expected, got = Counter(), Counter()
        for index in [*range(cut, len(case.batches)), None]:
            expected += rows_of(plain.run(index))
            got += rows_of(started.run(index))
            if index == cut:
                assert {s: _without_place(state_rows(started.stage().checkpoint.uri, s)) for s in ("left", "right")} \
                    == {s: _without_place(state_rows(plain.stage().checkpoint.uri, s)) for s in ("left", "right")}
        assert got == expected


def test_interval_initial_state_keeps_a_loaded_row_apart_from_the_first_versions_twin():
    """A loaded row is filed as arriving before the first version, so a row of that version equal
    to it (same key, time and value) is a second row, not the same entry: a left outer join with
    a zero window and no right rows emits both, padded, once the watermark passes them (their row
    ids must not meet)."""
    at = dt.datetime(1970, 1, 1)
    row = {"k": 0, "ts": at, "v": "p"}
    case = JoinCase(SIMPLE, "left", dt.timedelta(0), dt.timedelta(0), dt.timedelta(0),
                    [([row], []), ([row], []), ([{"k": 1, "ts": at + dt.timedelta(seconds=5), "v": "q"}], [])])
    with _cut(case, 1, 1, ("left", "right"), lambda: Local(case), case.operator()) as (plain, started):
        expected, got = Counter(), Counter()
        for index in (1, 2, None):
            expected += rows_of(plain.run(index))
            got += rows_of(started.run(index))
    padded = (0, at, "p", None, None, None)
    assert expected[padded] == 2 and got == expected


@settings(max_examples=scaled(10), deadline=None)
@given(case=join_cases(max_partitions=4, hows=("left", "full", "left_anti")))
def test_interval_initial_state_survives_lost_local_state_and_a_retry(case):
    """The first version loads the rows again when it is executed again, and a partition whose
    local store is lost is restored from the first version's delta (the whole state)."""
    cut = len(case.batches) // 2
    with _cut(case, cut, 3, ("left", "right"), lambda: Local(case), case.operator()) as (plain, started):
        expected = rows_of(plain.run(cut))
        assert rows_of(started.run(cut)) == expected
        started.runner.lose_local_state()
        assert rows_of(started.run(cut, version=0)) == expected   # the first version executed again
        started.runner.lose_local_state(1)
        got, want = Counter(), Counter()
        for index in [*range(cut + 1, len(case.batches)), None]:
            want += rows_of(plain.run(index))
            got += rows_of(started.run(index))
        assert got == want


@settings(max_examples=scaled(3), deadline=None)
@given(case=join_cases(max_partitions=2, hows=("left",), nulls=False))
def test_interval_initial_state_refuses_bad_rows_before_writing(case):
    first, started = Local(case), InProcess(case.operator(), case.tables, partitions=2)
    try:
        first.run(0)
        rows, _ = _state_of(first, ("left", "right"))
        with pytest.raises(JoinDefinitionError, match="no state side 'middle'.*'left', 'right'"):
            started.runner.set_initial_state({"middle": rows["left"]})
        with pytest.raises(JoinDefinitionError, match=r"initial_state\['left'\] has no column '_matched'"):
            started.runner.set_initial_state({"left": rows["left"].drop_columns(["_matched"])})
        bad = rows["left"].set_column(rows["left"].schema.get_field_index("_matched"), "_matched",
                                      pa.array([[1]] * rows["left"].num_rows, pa.list_(pa.int64())))
        with pytest.raises(JoinDefinitionError, match="'_matched' is array<bigint>, which does not cast"):
            started.runner.set_initial_state({"left": bad})
        with pytest.raises(JoinDefinitionError, match="initial_progress: this join has no input .middle."):
            started.runner.set_initial_state(rows, {"middle": 1})
        assert started.stage().checkpoint.initial.done() is None
    finally:
        first.close()
        started.close()


# -- the enrichment join -------------------------------------------------------------------------


@settings(max_examples=scaled(40), deadline=None)
@given(case=enrichment_cases(max_partitions=4), mode=st.sampled_from(["as_of", "latest"]),
       grace=st.sampled_from([None, 0, 4]), data=st.data())
def test_enrichment_initial_state_continues_the_cut_run(case, mode, grace, data):
    cut = data.draw(st.integers(1, len(case.batches)), label="cut")
    partitions = data.draw(st.integers(1, 5), label="partitions of the new checkpoint")
    options = {} if grace is None or mode == "latest" else {"grace": dt.timedelta(seconds=grace)}
    options["layout"] = "buckets"   # (its logical state; the runs layout's: tests/joins/enrichment/test_runs.py)
    with _cut(case, cut, partitions, ("table", "events"), lambda: EnrichmentRun(case, mode, **options),
              case.operator(mode, **options)) as (plain, started):
        expected, got = Counter(), Counter()
        for index in [*range(cut, len(case.batches)), None]:
            expected += enrichment_rows(plain.run(index))
            got += enrichment_rows(started.run(index))
        assert got == expected
        last = len(case.batches)
        assert logical_state(started, last - cut) == logical_state(plain, last)


def test_enrichment_initial_state_refuses_an_unknown_op(tmp_path):
    join = EnrichmentJoin(EVENTS, TABLE, "k", stream_time="ts", changes=ChangeFormat.plain("k", time="at"))
    first = InProcess(join, lambda i: _batch(i), partitions=2)
    started = InProcess(join, lambda i: _batch(i), partitions=2)
    try:
        first.run(0)
        rows, _ = _state_of(first, ("table", "events"))
        assert rows["table"].num_rows
        table = rows["table"].set_column(rows["table"].schema.get_field_index("_op"), "_op",
                                         pa.array(["upsert"] * (rows["table"].num_rows - 1) + ["merge"]))
        started.runner.set_initial_state({"table": table})
        with pytest.raises(JoinDefinitionError, match="_op must be 'upsert' or 'delete', not 'merge'"):
            started.run(1)
    finally:
        first.close()
        started.close()


@settings(max_examples=scaled(2), deadline=None)
@given(case=join_cases(max_partitions=2, hows=("full",), nulls=False))
def test_checkpoint_describe_names_the_state_rows_a_join_started_from(case):
    first = Local(case)
    started = InProcess(case.operator(), case.tables, partitions=2)
    try:
        first.run(0)
        rows, progress = _state_of(first, ("left", "right"))
        started.runner.set_initial_state(rows, progress)
        started.run(None)
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            assert main(["checkpoint", "describe", started.stage().checkpoint.uri]) == 0
        out = printed.getvalue()
        assert (f"started with initial rows: state side left {rows['left'].num_rows:,}, "
                f"state side right {rows['right'].num_rows:,}") in out
        with contextlib.redirect_stdout(io.StringIO()):
            assert main(["checkpoint", "verify", started.stage().checkpoint.uri]) == 0
    finally:
        first.close()
        started.close()


def test_state_tools_refuse_a_location_that_is_not_a_join_checkpoint(tmp_path):
    # a typo in state_progress's location once gave {}: the new join started with no progress,
    # joining rows the old one's next version would have set aside as late; a file given as a
    # checkpoint (its streamjoin.json, say) failed with NotADirectoryError in the tools
    typo, file = str(tmp_path / "no-such-checkpoint"), tmp_path / "streamjoin.json"
    file.write_text("{}")
    for location in (typo, str(file)):
        with pytest.raises(JoinDefinitionError, match="is not a join checkpoint"):
            state_progress(location)
        with pytest.raises(JoinDefinitionError, match="is not a join checkpoint"):
            state_rows(location, "left")
        for action in (["describe"], ["verify"], ["migrate", "--dry-run"], ["repartition", "--partitions", "2",
                                                                            "--force"]):
            printed = io.StringIO()
            with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
                assert main(["checkpoint", *action, location]) == 1
            assert "is not a join checkpoint" in printed.getvalue()


def test_state_rows_of_a_table_join_checkpoint_names_its_stages(tmp_path):
    from streamjoin.testing import LocalJoins

    changes = pa.table({"id": [1], "k": [1], "op": ["upsert"], "at": pa.array([0], pa.timestamp("us", "UTC"))})
    joins = LocalJoins(str(tmp_path), partitions=2)
    joins.begin(0, final=True)
    joins.table_table_join(changes, changes.rename_columns(["cid", "k", "op", "at"]), "k", left_key="id",
                           right_key="cid", left_time="at", right_time="at", checkpoint="view")
    root = str(tmp_path / "checkpoints" / "view")
    with pytest.raises(JoinDefinitionError, match=r"several stages, each with its own state: read one stage's, "
                                                  r"one of .*/view/join'"):
        state_rows(root, "left")
    state_progress(root)   # (a checkpoint of stages: read together, no error)
