"""The engine reads a join only through its declarations: a fourth operator, registered in this
test, is run by the in-process plan runner, and read back by read_state's decoding, the progress
schema and the set-aside inputs, through its class alone."""

from __future__ import annotations

from typing import Any, Mapping

import pyarrow as pa
import pytest

from streamjoin.changelog import Changelog, restore
from streamjoin.runtime.operator import InputSpec, Operator, StepInput, StepResult, set_aside_schema
from streamjoin.runtime.options import StateConfig
from streamjoin.runtime.plan import JoinPlan, Stage
from streamjoin.runtime.plan_runner import PlanRunner
from streamjoin.runtime.registry import kinds, operator_class, register
from streamjoin.runtime.rescale import can_rescale
from streamjoin.runtime.views import StateView, table_of
from streamjoin.statestore.base import Store
from streamjoin.statestore.codecs import decode_int, encode_int
from streamjoin.statestore.registry import open_store

SCHEMA = pa.schema([("k", pa.int64())])


def _schema(definition: Mapping[str, Any]) -> list[pa.Field]:
    return [pa.field("k", pa.int64()), pa.field("seen", pa.int64())]


def _read(store: Store, definition: Mapping[str, Any], columns: pa.Schema) -> pa.Table:
    rows = [{"k": decode_int(key[1:]), "seen": decode_int(value)} for key, value in store.scan(b"S", b"T")]
    return table_of(rows, columns)


@register
class SeenCount(Operator):
    """A fourth join: per key, how many rows it has seen; outputs each row with that count."""

    kind = "test_seen_count"
    set_aside_inputs = ("rows",)
    metric_merges = {"distinct": "sum"}
    state_views = {"seen": StateView(_schema, _read)}

    @property
    def inputs(self) -> tuple[InputSpec, ...]:
        return (InputSpec("rows", SCHEMA, ("k",), None),)

    @property
    def output_schema(self) -> pa.Schema:
        return pa.schema([("k", pa.int64()), ("seen", pa.int64())])

    def definition(self) -> dict[str, Any]:
        return {"kind": self.kind}

    def step(self, state: Store, batch: StepInput) -> StepResult:
        keys = sorted(batch.rows[0].column("k").to_pylist())
        counts: dict[int, int] = {}
        for k in keys:
            counts[k] = counts.get(k, decode_int(state.get(b"S" + encode_int(k)) or encode_int(0))) + 1
        puts = [(b"S" + encode_int(k), encode_int(n)) for k, n in counts.items()]
        out = pa.table({"k": pa.array(list(counts), pa.int64()), "seen": pa.array(list(counts.values()), pa.int64())})
        return StepResult(out, (set_aside_schema(SCHEMA).empty_table(),), puts=puts, metrics={"distinct": len(counts)})


def test_registry_gives_the_class_of_a_registered_kind_and_the_bare_operator_otherwise():
    assert operator_class("test_seen_count") is SeenCount
    assert "test_seen_count" in kinds() and kinds()[:4] == [
        "interval_join", "enrichment_join", "table_join_keys", "table_join"]
    unknown = operator_class("nobody registered this")
    assert unknown is Operator and unknown.set_aside_inputs == () and not unknown.state_views
    assert not can_rescale(SeenCount)


def test_registry_fourth_join_runs_in_a_plan_and_reads_back_through_its_declarations(tmp_path):
    runner = PlanRunner(SeenCount().plan, str(tmp_path / "ck"), partitions=2,
                        config=StateConfig(store="memory", local_dir=str(tmp_path / "local")))
    runner.run(pa.table({"k": pa.array([1, 2, 2], pa.int64())}))
    out = runner.run(pa.table({"k": pa.array([2, 3], pa.int64())}))
    assert sorted(zip(out.column("k").to_pylist(), out.column("seen").to_pylist())) == [(2, 3), (3, 1)]
    assert runner.metric("distinct") == 4   # a declared metric, summed by the runner
    assert runner.runners[""].partitions == 2   # one stage, named "": the checkpoint itself
    view = operator_class(SeenCount().definition()["kind"]).state_views["seen"]
    seen = []   # each partition's changelog restored and decoded, as read_state's tasks do
    for p in range(2):
        memory = open_store("memory", f"registry-test-{p}")
        restore(Changelog(str(tmp_path / "ck" / "state" / f"p={p}")), memory)
        seen.append(view.read(memory, {}, pa.schema(view.schema({}))))
        memory.close()
    rows = pa.concat_tables(seen)
    assert sorted(zip(rows.column("k").to_pylist(), rows.column("seen").to_pylist())) == [(1, 1), (2, 3), (3, 1)]


def test_plan_refuses_a_stage_reading_a_later_one_and_counts_the_join_inputs():
    op = SeenCount()
    plan = JoinPlan((Stage("a", op, (0,)), Stage("b", op, ("a",))))
    assert plan.inputs == 1 and plan.names == ("a", "b") and plan.output.name == "b"
    assert plan.location("/ck", "b") == "/ck/b" and plan.location("s3://x/ck", "a") == "s3://x/ck/a"
    with pytest.raises(ValueError, match="does not run before it"):
        JoinPlan((Stage("a", op, ("b",)), Stage("b", op, (0,))))
    with pytest.raises(ValueError, match="inputs wired"):
        JoinPlan((Stage("a", op, (0, 1)),))


def test_plan_of_several_stages_is_found_in_its_checkpoint_by_the_names_it_recorded(tmp_path):
    """A fourth join of two stages, named as its author likes: the checkpoint records the names,
    and what reads a checkpoint (``stage_checkpoints``: ``streamjoin checkpoint``, ``read_state``)
    finds its stages without a list of names in the engine."""
    from streamjoin.errors import CheckpointMismatchError
    from streamjoin.runtime.inspect import stage_checkpoints

    op = SeenCount()
    plan = JoinPlan((Stage("count_once", op, (0,)), Stage("count_twice", op, ("count_once",))))
    checkpoint = str(tmp_path / "ck")
    runner = PlanRunner(plan, checkpoint, config=StateConfig(store="memory", local_dir=str(tmp_path / "local")))
    out = runner.run(pa.table({"k": pa.array([5, 5], pa.int64())}))
    assert out.column("k").to_pylist() == [5]
    assert [p.rsplit("/", 1)[-1] for p in stage_checkpoints(checkpoint)] == ["count_once", "count_twice"]
    PlanRunner(plan, checkpoint)   # the same plan again: the record agrees
    other = JoinPlan((Stage("a", op, (0,)), Stage("b", op, ("a",))))
    with pytest.raises(CheckpointMismatchError, match="count_once"):
        PlanRunner(other, checkpoint)
