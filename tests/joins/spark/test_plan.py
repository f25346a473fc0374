"""A join's plan in Spark (``streamjoin.spark.plan``): ``run_plan`` tells each stage what it knows,
the partition count and where the stage stands (whether it reads the query's sources, the task id
of its partition 0 in a later stage's union), instead of each stage guessing it from a marker on
its input DataFrames or from its task id modulo the partition count (only the join's last stage,
read by the user's query, still takes its id modulo the partition count). The Spark half of the
runtime is split by role: the driver sequence (``streamjoin.spark.runtime``), the lanes
(``streamjoin.spark.lanes``), the routing (``streamjoin.spark.routing``) and the task
(``streamjoin.spark.task``)."""

from __future__ import annotations

import importlib
from types import SimpleNamespace
from unittest import mock

import pyarrow as pa
import pytest
from pyspark.sql import DataFrame

from streamjoin.changes import ChangeFormat
from streamjoin.interval.operator import IntervalJoin
from streamjoin.runtime.options import StateConfig
from streamjoin.runtime.plan import JoinPlan
from streamjoin.spark import plan as spark_plan
from streamjoin.spark.plan import Placement, placements, run_plan
from streamjoin.spark.task import task_partition
from streamjoin.table.operator import TableTableJoin

UTC = pa.timestamp("us", "UTC")
POSTS = pa.schema([("post_id", pa.int64()), ("op", pa.string()), ("at", UTC), ("author_id", pa.int64())])
AUTHORS = pa.schema([("author_id", pa.int64()), ("op", pa.string()), ("at", UTC), ("name", pa.string())])


def _table_join() -> TableTableJoin:
    return TableTableJoin(POSTS, AUTHORS, (["author_id"], ["author_id"]), left_key="post_id", right_key="author_id",
                          how="inner", left_changes=ChangeFormat.plain("post_id", time="at"),
                          right_changes=ChangeFormat.plain("author_id", time="at"))


def _frames(shuffle_partitions: str = "200") -> list[SimpleNamespace]:
    """Stand-ins for the join's input DataFrames: run_plan reads their kind and their session's
    shuffle partitions; the stages' run_operator is recorded, not run."""
    session = SimpleNamespace(conf=SimpleNamespace(get=lambda name: shuffle_partitions))
    return [SimpleNamespace(isStreaming=True, sparkSession=session) for _ in range(2)]


@pytest.mark.parametrize("partitions, session, expected", [(3, "200", 3), (None, "5", 5)],
                         ids=["given", "session's"])
def test_run_plan_gives_each_stage_its_partition_count_and_place(tmp_path, monkeypatch, partitions, session,
                                                                 expected):
    calls: dict[str, dict] = {}

    def recorded(frames, operator, **kwargs):
        name = next(s.name for s in join.plan.stages if s.operator is operator)
        calls[name] = kwargs
        return mock.create_autospec(DataFrame, instance=True)

    join = _table_join()
    monkeypatch.setattr(spark_plan, "run_operator", recorded)
    run_plan(join.plan, _frames(session), checkpoint=str(tmp_path / "ck"), partitions=partitions,  # type: ignore[arg-type]
             state=StateConfig(store="memory"), key_groups=None)
    assert {name: call["partitions"] for name, call in calls.items()} == dict.fromkeys(join.plan.names, expected)
    # the key stages read the query's sources; the join stage reads their outputs, unioned in
    # one map stage where the right key stage's tasks follow the left one's
    assert {name: (call["reads_sources"], call["first_task"]) for name, call in calls.items()} == {
        "left_keys": (True, 0), "right_keys": (True, expected), "join": (False, None)}


def test_run_plan_places_a_one_stage_join_as_reading_its_sources_and_numbered_by_the_user():
    join = IntervalJoin(POSTS, AUTHORS, "author_id", left_time="at", right_time="at", lower="0 seconds",
                        upper="10 seconds", delay="0 seconds")
    assert placements(join.plan, 4) == {"": Placement(reads_sources=True, first_task=None)}


def test_run_plan_refuses_a_union_whose_task_ids_it_cannot_know():
    join = _table_join()
    left, right, last = join.plan.stages
    # a join input (of the user's partitions) before a stage's output in the union
    odd = JoinPlan((left, type(last)(last.name, last.operator, (0, left.name))))
    with pytest.raises(ValueError, match="reads a join input before stage 'left_keys'"):
        placements(odd, 4)


def test_task_partition_is_the_task_id_less_the_first_task_of_the_stage_and_checked():
    assert [task_partition(t, 3, 3) for t in (3, 4, 5)] == [0, 1, 2]
    # a union Spark runs partition by partition (parts of one partition each): task p runs them all
    assert [task_partition(t, 3, 3) for t in (0, 1, 2)] == [0, 1, 2]
    assert [task_partition(t, 3, None) for t in (0, 4, 8)] == [0, 1, 2]   # the join's output: modulo
    with pytest.raises(RuntimeError, match="numbered the union"):
        task_partition(6, 3, 3)   # where the modulo would have computed on as partition 0
    with pytest.raises(RuntimeError, match="numbered the union"):
        task_partition(9, 3, 6)


def test_runtime_module_is_the_driver_sequence_and_each_role_has_its_module():
    runtime = importlib.import_module("streamjoin.spark.runtime")
    assert not [name for name in ("_Layout", "_shuffle", "_routing_keys", "_PartitionTask", "_Arriving",
                                  "_InitialWriter", "_split_inputs", "_batch_time", "spark_local_state_dir")
                if hasattr(runtime, name)]
    roles = {"lanes": ["Layout", "union_inputs", "split_inputs", "arrow_schema", "INPUT_TAG"],
             "routing": ["shuffle", "routing_keys", "common_key_types"],
             "task": ["PartitionTask", "InitialWriter", "task_context", "task_partition", "spark_local_state_dir"],
             "runtime": ["run_operator", "resolve_checkpoint", "arrow_schema", "task_context", "INPUT_TAG"]}
    for module, names in roles.items():
        loaded = importlib.import_module(f"streamjoin.spark.{module}")
        assert loaded.__doc__ and set(names) <= set(loaded.__all__), module


@pytest.mark.spark
def test_run_plan_gives_a_join_over_another_joins_output_its_own_flush(spark, tmp_path, monkeypatch):
    """A join's output fed straight into another join (no marker decides): the second join reads
    the query's sources through it, so it unions its own flush source as every streaming join does."""
    from streamjoin import interval_join
    from streamjoin.spark import runtime

    flushed: list[str] = []
    real = runtime.flush_stream

    def counted(spark_, checkpoint, *args, **kwargs):
        flushed.append(checkpoint)
        return real(spark_, checkpoint, *args, **kwargs)

    monkeypatch.setattr(runtime, "flush_stream", counted)

    def read(name: str, value: str):
        (tmp_path / name).mkdir()
        return spark.readStream.schema(f"k bigint, t timestamp, {value} string").parquet(str(tmp_path / name))

    # outer joins: some of their output waits for the watermark (an inner join's gets no flush at all)
    window = {"lower": "0 seconds", "upper": "10 seconds", "delay": "10 seconds", "partitions": 2, "how": "left_outer"}
    first = interval_join(read("a", "x"), read("b", "y"), "k", left_time="t", right_time="t",
                          checkpoint=str(tmp_path / "ck1"), **window)
    interval_join(first, read("c", "z"), "k", left_time="t_left", right_time="t",
                  checkpoint=str(tmp_path / "ck2"), **window)
    assert flushed == [str(tmp_path / "ck1"), str(tmp_path / "ck2")]
