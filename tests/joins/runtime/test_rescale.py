"""Restarting a join's checkpoint with another partition count (docs/design/runtime.md "Partitions and
rescaling"): a run cut at a version and continued with another ``partitions=`` gives the output,
the rows set aside and the (logical) state of a run that never changed it, for the interval join
and the table-table join (the enrichment join: tests/joins/runtime/test_rescale_enrichment.py); and what
cannot be rescaled is refused, saying why."""

from __future__ import annotations

import datetime as dt
from collections import Counter
from itertools import count

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamjoin.changelog import Changelog, restore
from streamjoin.changes import ChangeFormat
from streamjoin.enrichment.operator import EnrichmentJoin
from streamjoin.errors import CheckpointMismatchError, JoinDefinitionError
from streamjoin.interval.spec import ROW_ID
from streamjoin.interval.state import LAYOUT as INTERVAL
from streamjoin.runtime.areas import ARROW, Int64s
from streamjoin.runtime.checkpoint import Checkpoint
from streamjoin.runtime.local import LocalRunner
from streamjoin.runtime.operator import Operator
from streamjoin.runtime.options import StateConfig
from streamjoin.runtime.plan_runner import PlanRunner
from streamjoin.runtime.rescale import changelog_uri, current_epoch, epochs
from streamjoin.statestore import destroy_store, open_store
from streamjoin.statestore.codecs import unpack
from streamjoin.table.stage import LAYOUT as STAGE
from tests.examples import scaled
from tests.joins.interval.cases import Local, join_cases, rows_of
from tests.joins.table.cases import Run, output_rows, table_cases

_PATHS = count()
SCHEMA = pa.schema([("k", pa.int64()), ("ts", pa.timestamp("us"))])
VALUES = SCHEMA.append(pa.field("v", pa.string()))


def restored(runner: LocalRunner, version: int) -> list[list[tuple[bytes, bytes]]]:
    """Each partition's state entries as of ``version``, restored from its changelog."""
    epoch = current_epoch(runner.checkpoint)
    out = []
    for p in range(epoch.partitions):
        log = Changelog(changelog_uri(runner.checkpoint, epoch, p))
        path = f"sj-rescale-state-{next(_PATHS)}"
        store = open_store("memory", path)
        try:
            if not log.listing().empty:
                restore(log, store, version)
            out.append(list(store.scan()))
        finally:
            store.close()
            destroy_store("memory", path)
    return out


def interval_state(runner: LocalRunner, version: int) -> Counter:
    """The interval join's state as (side, bucket, row, matched) over every partition, row ids aside."""
    found: Counter = Counter()
    for entries in restored(runner, version):
        marked: dict[tuple, set] = {}
        rows = []
        for key, value in entries:
            area = INTERVAL.area_of(key)
            if area is None or area.name == "watermark":
                found[("watermark", INTERVAL["watermark"].value.decode(value))] += 0   # present, equal anyway
                continue
            bucket, kind, *_ = area.decode(key)
            if kind == b"m":
                marked.setdefault((area.name, bucket), set()).update(Int64s().decode(value).tolist())
            else:
                rows.append((area.name, bucket, ARROW.decode(value)))
        for side, bucket, table in rows:
            ids = table.column(ROW_ID).to_pylist()
            for row, row_id in zip(table.drop_columns([ROW_ID]).to_pylist(), ids):
                found[(side, bucket, tuple(row.items()), row_id in marked.get((side, bucket), set()))] += 1
    return found


# -- the interval join ---------------------------------------------------------------------------


@settings(max_examples=scaled(40), deadline=None)
@given(case=join_cases(max_partitions=4), data=st.data())
def test_interval_rescale_equals_uninterrupted_run(case, data):
    cut = data.draw(st.integers(0, len(case.batches)), label="cut")
    partitions = data.draw(st.integers(1, 6), label="new partitions")
    plain, rescaled = Local(case), Local(case)
    try:
        expected, got = Counter(), Counter()
        for index in range(len(case.batches)):
            if index == cut:
                rescaled.restart(partitions)
            expected += rows_of(plain.run(index))
            got += rows_of(rescaled.run(index))
        last = len(case.batches) - 1
        assert interval_state(rescaled.stage(), last) == interval_state(plain.stage(), last)
        if cut == len(case.batches):
            rescaled.restart(partitions)
        expected += rows_of(plain.run(None))
        got += rows_of(rescaled.run(None))
        assert got == expected == case.expected()
        assert rescaled.asides() == plain.asides()
    finally:
        plain.close()
        rescaled.close()


def test_interval_rescale_up_and_down_keeps_watermark_and_late_rows(tmp_path):
    """4 -> 6 -> 2 partitions: the watermark after each restart is the one of an uninterrupted run
    (a partition count going down drops no partition's progress), so late rows stay late."""
    op = _interval()
    config = StateConfig(store="memory", local_dir=str(tmp_path / "local"))
    watermarks, late = [], []
    for version, (second, partitions) in enumerate(zip((10, 20, 5, 30), (4, 6, 2, 2))):
        runner = LocalRunner(op, str(tmp_path / "ck"), partitions=partitions, config=config)
        table = pa.Table.from_pylist([{"k": k, "ts": dt.datetime(2024, 1, 1, 0, 0, second)} for k in range(12)],
                                     schema=SCHEMA)
        runner.run(table, table, version=version)
        watermarks.append({m["watermark"] for m in runner.metrics})
        late.append(sum(m["late_rows_left"] + m["late_rows_right"] for m in runner.metrics))
    micros = [pa.scalar(dt.datetime(2024, 1, 1, 0, 0, s), pa.timestamp("us")).value for s in (10, 20)]
    assert watermarks[1:] == [{micros[0]}, {micros[1]}, {micros[1]}]
    assert late == [0, 0, 24, 0]
    assert [e.partitions for e in epochs(Checkpoint(str(tmp_path / "ck")))] == [4, 6, 2]


def test_interval_rescale_as_the_last_version_runs_again_replaces_its_commit_records(tmp_path):
    """Every task of version 2 committed under 3 partitions but the query stopped before its own
    commit (Spark's commit log): restarted with 2 partitions, version 2 runs again as a rescale.
    Partition 2 no longer exists to replace its record of version 2, so the new records remove
    it; version 3 once refused the checkpoint as damaged (records of partition counts 2 and 3)."""
    op = _interval()
    config = StateConfig(store="memory", local_dir=str(tmp_path / "local"))

    def table(second: int) -> pa.Table:
        return pa.Table.from_pylist([{"k": k, "ts": dt.datetime(2024, 1, 1, 0, 0, second)} for k in range(12)],
                                    schema=SCHEMA)

    def rows(out: pa.Table) -> Counter:
        return Counter(tuple(r.items()) for r in out.to_pylist())

    plain = LocalRunner(op, str(tmp_path / "plain"), partitions=3, config=config)
    expected = [rows(plain.run(table(s), table(s), version=v)) for v, s in enumerate((10, 20, 30, 40))]
    runner = LocalRunner(op, str(tmp_path / "ck"), partitions=3, config=config)
    got = [rows(runner.run(table(s), table(s), version=v)) for v, s in enumerate((10, 20, 30))]
    runner = LocalRunner(op, str(tmp_path / "ck"), partitions=2, config=config)
    got[2] = rows(runner.run(table(30), table(30), version=2))
    got.append(rows(runner.run(table(40), table(40), version=3)))
    assert got == expected
    assert {(r.partition, r.partitions) for r in Checkpoint(str(tmp_path / "ck")).commits.records(2)} == {(0, 2), (1, 2)}


def test_interval_rescale_merging_partitions_keeps_which_rows_matched(tmp_path):
    """4 -> 6 -> 2 partitions over rows whose ids collide when old partitions merge (each numbers
    its own rows of a version from 0): every matched left row stays matched (a left join outputs
    no row both matched and null-padded), as in a run that never rescaled."""
    def batch(i: int, side: str) -> pa.Table:
        return pa.Table.from_pylist([{"k": (i * 5 + j * 3) % 13, "ts": dt.datetime(2024, 1, 1) + dt.timedelta(seconds=10 * i + j),
                                      "v": f"{side}{i}.{j}"} for j in range(9)], schema=VALUES)

    from streamjoin.interval.operator import IntervalJoin

    op = IntervalJoin(VALUES, VALUES, "k", left_time="ts", right_time="ts", lower=dt.timedelta(seconds=-4),
                      upper=dt.timedelta(seconds=12), delay=dt.timedelta(seconds=5), how="left")
    outputs = []
    for name, plan in (("plain", [4] * 7), ("rescaled", [4, 4, 6, 6, 2, 2, 2])):
        config = StateConfig(store="memory", local_dir=str(tmp_path / name / "local"))
        found: Counter = Counter()
        for version, partitions in enumerate(plan):
            runner = LocalRunner(op, str(tmp_path / name / "ck"), partitions=partitions, config=config)
            runner.version = version
            final = version == len(plan) - 1
            tables = (batch(version, "L"), batch(version, "R")) if not final else (VALUES.empty_table(),) * 2
            found += rows_of(runner.run(*tables, final=final))
        outputs.append(found)
    assert outputs[0] == outputs[1]
    assert sum(outputs[1].values()) == 84


# -- the table-table join ------------------------------------------------------------------------


def table_state(runner: PlanRunner, version: int) -> Counter:
    """Every stage's state entries over all partitions; the join stage's rows-held counts summed."""
    found: Counter = Counter()
    for name, stage in runner.runners.items():
        held = [0, 0]
        for entries in restored(stage, version):
            for key, value in entries:
                if key == STAGE["held"].prefix:   # (the join stage's, fused or not)
                    held = [a + b for a, b in zip(held, unpack(value))]
                else:
                    found[(name, key, value)] += 1
        found[(name, "held", tuple(held))] += 1
    return found


@settings(max_examples=scaled(25), deadline=None)
@given(case=table_cases(max_changes=8, max_batches=4, max_partitions=4), data=st.data())
def test_table_join_rescale_equals_reference_and_uninterrupted_run(case, data):
    cut = data.draw(st.integers(0, len(case.batches) - 1), label="cut")
    partitions = data.draw(st.integers(1, 6), label="new partitions")
    plain, rescaled = Run(case), Run(case)
    try:
        for index, (view, changes) in enumerate(case.expected()):
            if index == cut:
                rescaled.driver.restart(partitions)
            plain.run(index)
            out = rescaled.run(index)
            assert output_rows(out) == changes, f"batch {index}"
            assert rescaled.view_rows() == view, f"batch {index}"
        last = len(case.batches) - 1
        assert table_state(rescaled.driver.runner, last) == table_state(plain.driver.runner, last)
    finally:
        plain.close()
        rescaled.close()


# -- what is refused -----------------------------------------------------------------------------

def _interval():
    from streamjoin.interval.operator import IntervalJoin

    return IntervalJoin(SCHEMA, SCHEMA, "k", left_time="ts", right_time="ts", lower=dt.timedelta(0),
                        upper=dt.timedelta(seconds=1), delay=dt.timedelta(0))


def test_rescale_refuses_checkpoint_written_before_key_groups_naming_the_migration(tmp_path):
    """streamjoin 0.2 wrote format 1, without key groups: refused at any partition count, saying
    how to migrate it."""
    root = tmp_path / "ck"
    LocalRunner(_interval(), str(root), partitions=2)
    record = Checkpoint(str(root)).files.read_json("streamjoin.json")
    del record["key_groups"]
    record["format"] = 1
    (root / "streamjoin.json").write_text(__import__("json").dumps(record))
    for partitions in (2, 3):
        with pytest.raises(CheckpointMismatchError, match=r"streamjoin 0.2 \(format 1\).*`streamjoin checkpoint migrate .*ck`"):
            LocalRunner(_interval(), str(root), partitions=partitions)


def test_rescale_refuses_more_partitions_than_key_groups_and_another_count(tmp_path):
    LocalRunner(_interval(), str(tmp_path / "ck"), partitions=2, key_groups=8)
    with pytest.raises(JoinDefinitionError, match=r"partitions must be an int from 1 to 8 \(the join's key groups, max_partitions.*not 9"):
        LocalRunner(_interval(), str(tmp_path / "ck"), partitions=9)
    with pytest.raises(CheckpointMismatchError, match="keeps its state in 8 key groups"):
        LocalRunner(_interval(), str(tmp_path / "ck"), partitions=2, key_groups=16)


def test_rescale_refuses_a_task_of_the_old_partition_count(tmp_path):
    config = StateConfig(store="memory", local_dir=str(tmp_path / "local"))
    old = LocalRunner(_interval(), str(tmp_path / "ck"), partitions=2, config=config)
    table = pa.Table.from_pylist([{"k": 1, "ts": dt.datetime(2024, 1, 1)}], schema=SCHEMA)
    old.run(table, table)
    LocalRunner(_interval(), str(tmp_path / "ck"), partitions=3, config=config)
    with pytest.raises(CheckpointMismatchError, match="partitioned in 3 partitions now"):
        old.run(table, table)


class _Unsplittable(EnrichmentJoin):
    """An operator without a ``regroup`` hook (every join of the package has one)."""

    kind = "unsplittable_join"
    regroup = Operator.regroup


def test_rescale_refuses_an_operator_that_cannot_split_its_state(tmp_path):
    events = pa.schema([("k", pa.int64()), ("ts", pa.timestamp("us"))])
    table = pa.schema([("k", pa.int64()), ("v", pa.string()), ("op", pa.string()), ("at", pa.timestamp("us"))])
    op = _Unsplittable(events, table, "k", stream_time="ts", changes=ChangeFormat.plain("k", time="at"))
    config = StateConfig(store="memory", local_dir=str(tmp_path / "local"))
    runner = LocalRunner(op, str(tmp_path / "ck"), partitions=2, config=config)
    runner.run(pa.Table.from_pylist([{"k": 1, "ts": dt.datetime(2024, 1, 1)}], schema=events),
               pa.Table.from_pylist([{"k": 1, "v": "a", "op": "upsert", "at": dt.datetime(2024, 1, 1)}], schema=table))
    with pytest.raises(CheckpointMismatchError, match="cannot split its state by key group"):
        LocalRunner(op, str(tmp_path / "ck"), partitions=3, config=config)
    LocalRunner(op, str(tmp_path / "ck"), partitions=2, config=config)   # its own count still runs



@pytest.mark.parametrize("arguments, message", [
    ({"partitions": -1}, "partitions must be an int of at least 1, not -1"),
    ({"partitions": 0}, "partitions must be an int of at least 1, not 0"),
    ({"partitions": True}, "partitions must be an int of at least 1, not True"),
    ({"partitions": 5000}, "partitions must be an int from 1 to 4096 (the join's key groups, max_partitions"),
    ({"partitions": 5, "key_groups": 4}, "partitions must be an int from 1 to 4 (the join's key groups"),
    ({"key_groups": 0}, "key_groups must be an int of at least 1, not 0"),
    ({"key_groups": 2.5}, "key_groups must be an int of at least 1, not 2.5"),
])
def test_local_runner_refuses_a_bad_count_before_writing_the_checkpoint(tmp_path, arguments, message):
    with pytest.raises(JoinDefinitionError) as error:
        LocalRunner(_interval(), str(tmp_path / "ck"), **arguments)
    assert message in str(error.value)
    assert not (tmp_path / "ck" / "streamjoin.json").exists()


def test_checkpoint_bind_refuses_a_bad_count_before_writing(tmp_path):
    for partitions, key_groups in ((0, None), (4097, None), (3, 2), (1, 0)):
        with pytest.raises(JoinDefinitionError, match="must be an int"):
            Checkpoint(str(tmp_path / "ck")).binding.bind({"kind": "x"}, partitions, key_groups=key_groups)
    assert not (tmp_path / "ck" / "streamjoin.json").exists()


def test_rescale_refuses_a_bad_count_on_an_existing_checkpoint(tmp_path):
    LocalRunner(_interval(), str(tmp_path / "ck"), partitions=2, key_groups=8)
    for partitions in (0, -1, 9):
        with pytest.raises(JoinDefinitionError, match=f"partitions must be an int .*not {partitions}"):
            LocalRunner(_interval(), str(tmp_path / "ck"), partitions=partitions)
    assert [e.partitions for e in epochs(Checkpoint(str(tmp_path / "ck")))] == [2]
