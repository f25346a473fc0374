"""The table join's key stage fused into the join stage (``fuse_key_stages=True``,
:mod:`streamjoin.table.fused`): which sides fuse, the plan it makes, that a checkpoint keeps
the stages it was started with, and what a side declared with an immutable join key does with a
change that moves a row. That the fused join gives the three-stage join's view changes is a
property of ``test_properties`` (its cases draw ``fuse``, and variants whose join key is part of
the primary key or declared immutable)."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

from streamjoin.errors import CheckpointMismatchError, JoinDefinitionError
from streamjoin.runtime.plan_runner import PlanRunner
from streamjoin.table.operator import TableTableJoin
from streamjoin.table.rekey import MOVED_REASON

ORDERS = pa.schema([("order_id", pa.int64()), ("customer_id", pa.int64()), ("op", pa.string()),
                    ("at", pa.timestamp("us"))])
CUSTOMERS = pa.schema([("customer_id", pa.int64()), ("name", pa.string()), ("op", pa.string()),
                       ("at", pa.timestamp("us"))])


def _join(right_key="customer_id", fuse=True, left=ORDERS, left_key="order_id") -> TableTableJoin:
    return TableTableJoin(left, CUSTOMERS, "customer_id", left_key=left_key, right_key=right_key,
                          left_time="at", right_time="at", fuse_key_stages=fuse)


def test_table_join_fused_plan_leaves_out_only_the_key_stage_of_a_side_keyed_by_its_join_key():
    assert _join(fuse=False).plan.names == ("left_keys", "right_keys", "join")
    fused = _join()
    assert fused.plan.names == ("left_keys", "join")
    assert [s.name for s in fused.plan.stage("join").operator.inputs] == ["left", "right_changes"]
    assert fused.plan.stage("join").inputs == ("left_keys", 1)
    both = _join(left=CUSTOMERS, left_key="customer_id")
    assert both.plan.names == ("",)
    assert [s.name for s in both.plan.output.operator.inputs] == ["left_changes", "right_changes"]
    neither = TableTableJoin(ORDERS, CUSTOMERS, "customer_id", left_key="order_id", right_key="name",
                             left_time="at", right_time="at", fuse_key_stages=True)
    assert neither.fused is None and neither.plan.names == ("left_keys", "right_keys", "join")
    with pytest.raises(JoinDefinitionError, match="fuse_key_stages must be True or False, not 'yes'"):
        _join(fuse="yes")


def test_table_join_fuses_a_side_whose_join_key_is_part_of_its_primary_key_or_declared_immutable():
    # customers keyed by (customer_id, name) joined on customer_id: a row cannot move
    part = _join(right_key=["customer_id", "name"])
    assert part.plan.names == ("left_keys", "join")
    assert part.fused.keyed["right"].by_join_key
    assert not _join().fused.keyed["right"].by_join_key       # keyed by the join key: as before
    declared = TableTableJoin(ORDERS, CUSTOMERS, "customer_id", left_key="order_id", right_key="customer_id",
                              left_time="at", right_time="at", fuse_key_stages=True, left_immutable_join_key=True)
    assert declared.plan.names == ("",)
    assert declared.fused.keyed["left"].by_join_key
    assert declared.fused.definition()["left_keys"]["by_join_key"] is True
    three = TableTableJoin(ORDERS, CUSTOMERS, "customer_id", left_key="order_id", right_key="customer_id",
                           left_time="at", right_time="at", fuse_key_stages=False, left_immutable_join_key=True)
    assert three.plan.names == ("left_keys", "right_keys", "join")
    with pytest.raises(JoinDefinitionError, match="left_immutable_join_key must be True or False, not 1"):
        TableTableJoin(ORDERS, CUSTOMERS, "customer_id", left_key="order_id", right_key="customer_id",
                       left_time="at", right_time="at", left_immutable_join_key=1)


def test_table_join_declared_immutable_join_key_sets_a_move_aside_and_keeps_the_row(tmp_path):
    join = TableTableJoin(ORDERS, CUSTOMERS, "customer_id", left_key="order_id", right_key="customer_id",
                          left_time="at", right_time="at", fuse_key_stages=True, left_immutable_join_key=True)
    runner = PlanRunner(join.plan, str(tmp_path / "ck"), partitions=1)   # one partition: every move is seen
    at = dt.datetime(2026, 1, 1)
    orders = pa.Table.from_pylist([{"order_id": 1, "customer_id": 10, "op": "upsert", "at": at},
                                   {"order_id": 2, "customer_id": 10, "op": "upsert", "at": at}], ORDERS)
    first = runner.run(orders, _rows(CUSTOMERS, (10, "ada"), (11, "bo")))
    assert sorted(first.column("order_id").to_pylist()) == [1, 2]
    later = at + dt.timedelta(seconds=1)
    moves = pa.Table.from_pylist([{"order_id": 1, "customer_id": 11, "op": "upsert", "at": later},   # a move
                                  {"order_id": 2, "customer_id": 10, "op": "delete", "at": later},
                                  {"order_id": 3, "customer_id": 11, "op": "upsert", "at": later}], ORDERS)
    out = runner.run(moves, CUSTOMERS.empty_table())
    assert sorted(zip(out.column("order_id").to_pylist(), out.column("_change_type").to_pylist())) == [
        (2, "delete"), (3, "insert")]   # order 1 stays with customer 10
    aside = runner.set_aside("left_changes").to_pylist()
    assert [(r["order_id"], r["customer_id"], r["_reason"]) for r in aside] == [(1, 11, MOVED_REASON)]
    assert runner.metric("moved_join_keys") == 1 and runner.metric("stale_changes") == 0


def _rows(schema, *rows):
    at = dt.datetime(2026, 1, 1)
    return pa.Table.from_pylist([dict(zip(schema.names, (*r, "upsert", at))) for r in rows], schema)


@pytest.mark.parametrize("first, then", [
    (dict(fuse=False), dict(fuse=True)),
    (dict(fuse=True), dict(fuse=False)),
    (dict(fuse=False, left=CUSTOMERS, left_key="customer_id"), dict(fuse=True, left=CUSTOMERS, left_key="customer_id")),
    (dict(fuse=True, left=CUSTOMERS, left_key="customer_id"), dict(fuse=False, left=CUSTOMERS, left_key="customer_id")),
], ids=["three-then-fused", "fused-then-three", "three-then-one", "one-then-three"])
def test_table_join_checkpoint_keeps_the_stages_it_was_started_with(tmp_path, first, then):
    join = _join(**first)
    runner = PlanRunner(join.plan, str(tmp_path / "ck"), partitions=2)
    left = _rows(ORDERS, (1, 10)) if first.get("left") is None else _rows(CUSTOMERS, (10, "bo"))
    runner.run(left, _rows(CUSTOMERS, (10, "ada")))
    with pytest.raises(CheckpointMismatchError, match="keeps the stages it was started with, fuse_key_stages"):
        PlanRunner(_join(**then).plan, str(tmp_path / "ck"), partitions=2)


def test_table_join_recorded_fusion_tells_how_a_checkpoint_was_started(tmp_path):
    # table_table_join's default (fuse_key_stages=None) follows it: a checkpoint of three stages
    # keeps them, a new one is fused
    assert TableTableJoin.recorded_fusion(str(tmp_path / "new")) is None
    for name, options, fused in (("three", dict(fuse=False), False), ("fused", {}, True),
                                 ("one", dict(left=CUSTOMERS, left_key="customer_id"), True)):
        runner = PlanRunner(_join(**options).plan, str(tmp_path / name), partitions=1)
        left = _rows(CUSTOMERS, (10, "bo")) if options.get("left") else _rows(ORDERS, (1, 10))
        runner.run(left, _rows(CUSTOMERS, (10, "ada")))
        assert TableTableJoin.recorded_fusion(str(tmp_path / name)) is fused, name
    # three stages written before their names were recorded (streamjoin 0.2's): not fused
    (tmp_path / "three" / "stages.json").unlink()
    assert TableTableJoin.recorded_fusion(str(tmp_path / "three")) is False


def test_table_join_checkpoint_keeps_the_key_stage_of_a_side_that_fuses_since(tmp_path):
    # a side whose join key is part of its primary key kept its key stage before such sides fused;
    # its checkpoint runs on with it (the plan follows the recorded stages), a new one is one stage
    def join(kept=()):
        return TableTableJoin(CUSTOMERS, CUSTOMERS, "customer_id", left_key=["customer_id", "name"],
                              right_key="customer_id", left_time="at", right_time="at", fuse_key_stages=True,
                              kept_key_stages=kept)
    assert join().plan.names == ("",)
    started = join(kept={"left"})                     # the plan such a checkpoint was started with
    assert started.plan.names == ("left_keys", "join")
    ck = str(tmp_path / "ck")
    PlanRunner(started.plan, ck, partitions=2).run(_rows(CUSTOMERS, (10, "bo")), _rows(CUSTOMERS, (10, "ada")))
    assert TableTableJoin.recorded_key_stages(ck) == {"left"}
    again = PlanRunner(join(TableTableJoin.recorded_key_stages(ck)).plan, ck, partitions=2)
    out = again.run(_rows(CUSTOMERS, (10, "cy")), CUSTOMERS.empty_table(), version=1)
    assert sorted(out.column("name_left").to_pylist()) == ["cy"]
    with pytest.raises(CheckpointMismatchError, match="keeps the stages it was started with"):
        PlanRunner(join().plan, ck, partitions=2)
    assert TableTableJoin.recorded_key_stages(str(tmp_path / "new")) == frozenset()


def _entries(checkpoint: str) -> list[tuple[bytes, bytes]]:
    """The one partition's state entries of a one-stage join, restored from its changelog."""
    from tests.joins.table.test_initial_state import entries_of

    return entries_of(checkpoint, 0)


def _state(join: TableTableJoin, checkpoint: str) -> dict[str, list]:
    from tests.joins.table.test_initial_state import read_state

    return {side: sorted(map(str, table.drop_columns(["_partition", "_version"]).to_pylist()))
            for side, table in read_state(join.plan, checkpoint).items()}


def _customers_twice(runner: PlanRunner) -> None:
    at = dt.datetime(2026, 1, 1)
    runner.run(_rows(CUSTOMERS, (10, "bo"), (11, "cy")), _rows(CUSTOMERS, (10, "ada"), (11, "eve"), (12, "lu")))
    later = pa.Table.from_pylist([{"customer_id": 11, "name": None, "op": "delete", "at": at + dt.timedelta(1)},
                                  {"customer_id": 10, "name": "al", "op": "upsert", "at": at + dt.timedelta(1)}],
                                 CUSTOMERS)
    runner.run(CUSTOMERS.empty_table(), later, version=1)


def test_table_join_fused_side_keyed_by_its_join_key_holds_its_rows_in_its_key_entries(tmp_path):
    # one entry per key, the key step's head and then the row (none for a deleted key); the join
    # stage's own area holds no row of that side, and read_state shows what the layout before did
    def join(apart=()):
        return TableTableJoin(CUSTOMERS, CUSTOMERS, "customer_id", left_key="customer_id", right_key="customer_id",
                              left_time="at", right_time="at", fuse_key_stages=True, rows_apart=apart)
    held, apart = str(tmp_path / "held"), str(tmp_path / "apart")
    _customers_twice(PlanRunner(join().plan, held, partitions=1))
    _customers_twice(PlanRunner(join(("left", "right")).plan, apart, partitions=1))
    entries = dict(_entries(held))
    assert not [key for key in entries if key[:1] in (b"L", b"R")]
    assert sorted(key[:2] for key in entries if key[:1] in (b"l", b"r")) == [b"lK"] * 2 + [b"rK"] * 3
    assert len([key for key in dict(_entries(apart)) if key[:1] in (b"L", b"R")]) == 4   # 2 rows a side
    assert _state(join(), held) == _state(join(), apart)
    assert TableTableJoin.recorded_rows_apart(held) == frozenset()
    assert TableTableJoin.recorded_rows_apart(apart) == {"left", "right"}


def test_table_join_checkpoint_keeps_its_rows_apart_from_its_keys(tmp_path):
    # a checkpoint begun before key steps held their side's rows runs on in that layout: the join
    # follows what it records (recorded_rows_apart), and a join of the other layout is refused
    def join(apart=()):
        return TableTableJoin(ORDERS, CUSTOMERS, "customer_id", left_key="order_id", right_key="customer_id",
                              left_time="at", right_time="at", fuse_key_stages=True, rows_apart=apart)
    ck = str(tmp_path / "ck")
    PlanRunner(join({"right"}).plan, ck, partitions=2).run(_rows(ORDERS, (1, 10)), _rows(CUSTOMERS, (10, "ada")))
    assert TableTableJoin.recorded_rows_apart(ck) == {"right"}
    again = PlanRunner(join(TableTableJoin.recorded_rows_apart(ck)).plan, ck, partitions=2)
    later = pa.Table.from_pylist([{"customer_id": 10, "name": "bo", "op": "upsert",
                                   "at": dt.datetime(2026, 1, 2)}], CUSTOMERS)
    out = again.run(_rows(ORDERS, (2, 10)), later, version=1)
    assert sorted(zip(out.column("order_id").to_pylist(), out.column("name").to_pylist(),
                      out.column("_change_type").to_pylist())) == [
        (1, "ada", "update_preimage"), (1, "bo", "update_postimage"), (2, "bo", "insert")]
    with pytest.raises(CheckpointMismatchError, match="holds_rows"):
        PlanRunner(join().plan, ck, partitions=2)
    assert TableTableJoin.recorded_rows_apart(str(tmp_path / "new")) == frozenset()


def test_table_join_refuses_rows_apart_of_no_side():
    for bad in ("right", {"middle"}):
        with pytest.raises(JoinDefinitionError, match=r"rows_apart names sides of the join, some of \['left', 'right'\]"):
            TableTableJoin(ORDERS, CUSTOMERS, "customer_id", left_key="order_id", right_key="customer_id",
                           left_time="at", right_time="at", fuse_key_stages=True, rows_apart=bad)
