"""bind_query: the one bind every engine calls (definition, key groups, epoch, set-aside
schemas, initial rows through the engine's callback)."""

from __future__ import annotations

import collections

import pyarrow as pa
import pytest

from streamjoin.errors import CheckpointMismatchError
from streamjoin.runtime.bind import BoundQuery, bind_query
from streamjoin.runtime.checkpoint import Checkpoint, RunMode
from streamjoin.runtime.checkpoint.files import CheckpointFiles
from streamjoin.runtime.local import LocalRunner
from streamjoin.runtime.options import StateConfig
from tests.operators import RunningCount

SCHEMA = pa.schema([("k", pa.int64()), ("v", pa.string())])


def _op() -> RunningCount:
    return RunningCount(SCHEMA, ["k"])


def _rows(keys) -> pa.Table:
    return pa.table({"k": pa.array(keys, pa.int64()), "v": [f"r{k}" for k in keys]}, schema=SCHEMA)


def _counting_reads(monkeypatch) -> collections.Counter:
    reads: collections.Counter = collections.Counter()
    original = CheckpointFiles.read_json

    def counted(self, rel):
        reads[rel] += 1
        return original(self, rel)

    monkeypatch.setattr(CheckpointFiles, "read_json", counted)
    return reads


@pytest.mark.parametrize("existing", [False, True])
def test_bind_query_reads_each_checkpoint_record_once(tmp_path, monkeypatch, existing):
    uri = str(tmp_path / "ck")
    if existing:
        bind_query(uri, _op(), 2)
    reads = _counting_reads(monkeypatch)
    bind_query(uri, _op(), 2)
    assert reads["streamjoin.json"] == 1
    assert max(reads.values()) == 1


def test_bind_query_returns_the_binding(tmp_path):
    bound = bind_query(str(tmp_path / "ck"), _op(), 3, key_groups=16, state=StateConfig(store="memory"))
    assert (bound.partitions, bound.key_groups, bound.epoch.number, bound.state.store) == (3, 16, 0, "memory")
    assert bound.uri == Checkpoint(str(tmp_path / "ck")).uri and not bound.state.initial
    assert (tmp_path / "ck" / "set_aside" / "input" / "schema.parquet").exists()


def test_bind_query_starts_a_new_epoch_for_another_partition_count(tmp_path):
    bind_query(str(tmp_path / "ck"), _op(), 2)   # (no state yet: any operator may change its count)
    bound = bind_query(str(tmp_path / "ck"), _op(), 3)
    assert (bound.epoch.number, bound.epoch.partitions) == (1, 3)


def test_bind_query_writes_initial_rows_once_and_marks_them_complete(tmp_path):
    calls: list[BoundQuery] = []

    def write_initial(bound: BoundQuery) -> dict[str, int]:
        calls.append(bound)
        bound.checkpoint.initial.write("input", 0, _rows([1, 1]))
        return {"input": 2}

    first = bind_query(str(tmp_path / "ck"), _op(), 1, write_initial=write_initial)
    again = bind_query(str(tmp_path / "ck"), _op(), 1, write_initial=write_initial)
    assert len(calls) == 1 and first.state.initial and again.state.initial
    assert Checkpoint(str(tmp_path / "ck")).initial.done() == {"input": 2}


def test_bind_query_writes_no_initial_rows_once_the_join_has_run(tmp_path):
    LocalRunner(_op(), str(tmp_path / "ck")).run(_rows([1]))
    calls = []
    bound = bind_query(str(tmp_path / "ck"), _op(), 1, write_initial=lambda b: calls.append(b) or {})
    assert calls == [] and not bound.state.initial


def test_bind_query_refuses_another_definition_before_writing_initial_rows(tmp_path):
    bind_query(str(tmp_path / "ck"), _op(), 1)
    calls = []
    with pytest.raises(CheckpointMismatchError, match="another join definition"):
        bind_query(str(tmp_path / "ck"), RunningCount(SCHEMA, ["v"]), 1, write_initial=lambda b: calls.append(b) or {})
    with pytest.raises(CheckpointMismatchError, match="streaming query"):
        bind_query(str(tmp_path / "ck"), _op(), 1, mode=RunMode.BATCH, write_initial=lambda b: calls.append(b) or {})
    assert calls == []


def test_bind_query_names_only_the_options_that_differ_in_a_changed_definition(tmp_path):
    from streamjoin.interval.operator import IntervalJoin

    schema = pa.schema([("k", pa.int64()), ("t", pa.timestamp("us", "UTC"))])

    def join(upper: str, how: str = "inner") -> IntervalJoin:
        return IntervalJoin(schema, schema, (["k"], ["k"]), left_time="t", right_time="t", lower="0 seconds",
                            upper=upper, delay="5 minutes", how=how)
    bind_query(str(tmp_path / "ck"), join("30 minutes"), 1)
    with pytest.raises(CheckpointMismatchError) as caught:
        bind_query(str(tmp_path / "ck"), join("20 minutes", how="left"), 1)
    message = str(caught.value)
    assert "upper: 30 minutes -> 20 minutes" in message and 'how: "inner" -> "left"' in message
    assert "delay" not in message and "{" not in message   # only what differs, no JSON documents
