"""The Spark runtime gives exactly the output of an uninterrupted run after failures.

A per-key running count reads Parquet files as a stream (one file per micro-batch) and writes
Parquet through the file sink. Each scenario's committed output is compared with an uninterrupted
run over the same files: (a) a task that fails once before and once after committing its state,
(b) a query stopped and restarted from its checkpoint, also after dying between the changelog
write and Spark's own commit, (c) the local state directory deleted between batches, (d) one
micro-batch DataFrame evaluated by two actions.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from streamjoin.changelog import Changelog
from streamjoin.errors import CheckpointMismatchError, JoinDefinitionError
from streamjoin.runtime.checkpoint import Checkpoint
from streamjoin.runtime.options import StateConfig
from streamjoin.runtime.rescale import epochs
from streamjoin.spark import arrow_schema, run_operator
from streamjoin.spark.runtime import resolve_checkpoint
from tests.operators import RunningCount

pytestmark = pytest.mark.spark

SCHEMA = pa.schema([("k", pa.int64()), ("v", pa.string())])
N_FILES = 6


def _write_inputs(directory: Path, files: range) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for i in files:
        keys = [(i * 7 + j * 3) % 11 for j in range(20)] + [None]
        table = pa.table({"k": pa.array(keys, pa.int64()), "v": [f"f{i}r{j}" for j in range(len(keys))]})
        path = directory / f"part-{i:03d}.parquet"
        pq.write_table(table, path)
        os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))  # the file source takes files by age


def _start(spark, root: Path, *, state: StateConfig, sink: str = "parquet", foreach=None, out: str = "out"):
    src = spark.readStream.schema("k bigint, v string").option("maxFilesPerTrigger", 1).parquet(str(root / "in"))
    counts = run_operator(
        [src], RunningCount(arrow_schema(src), ["k"]), checkpoint=str(root / "join"), partitions=3, state=state
    )
    writer = counts.writeStream.option("checkpointLocation", str(root / "spark")).trigger(availableNow=True)
    if foreach is not None:
        writer = writer.foreachBatch(foreach)
    else:
        writer = writer.format(sink).option("path", str(root / out))
    query = writer.start()
    query.awaitTermination()
    return query


def _committed(spark, root: Path) -> list[tuple]:
    return sorted(tuple(r) for r in spark.read.parquet(str(root / "out")).collect())


def _state(root: Path, **kwargs) -> StateConfig:
    return StateConfig(store="rocksdb", local_dir=str(root / "local"), snapshot_every=2, **kwargs)


@pytest.fixture(scope="module")
def expected(spark, tmp_path_factory) -> list[tuple]:
    root = tmp_path_factory.mktemp("uninterrupted")
    _write_inputs(root / "in", range(N_FILES))
    _start(spark, root, state=_state(root))
    rows = _committed(spark, root)
    # the reference: running counts per key after each file, from the files themselves
    seen: dict[int, int] = {}
    reference = []
    for i in range(N_FILES):
        batch = pq.read_table(root / "in" / f"part-{i:03d}.parquet").column("k").to_pylist()
        for key in sorted({k for k in batch if k is not None}):
            seen[key] = seen.get(key, 0) + batch.count(key)
            reference.append((key, seen[key]))
    assert rows == sorted(reference)
    return rows


def test_runtime_task_failures_are_retried_exactly_once(spark, tmp_path, expected):
    _write_inputs(tmp_path / "in", range(N_FILES))
    marker = str(tmp_path / "fail")
    for point, version, partition in [("before-commit", 1, 0), ("after-commit", 2, 1), ("after-commit", 4, 2)]:
        Path(f"{marker}.{point}.v{version}.p{partition}").touch()
    _start(spark, tmp_path, state=_state(tmp_path, fail_once=marker))
    assert not list(tmp_path.glob("fail.*")), "every injected failure should have fired"
    assert _committed(spark, tmp_path) == expected


def test_runtime_restart_from_checkpoint_equals_uninterrupted(spark, tmp_path, expected):
    _write_inputs(tmp_path / "in", range(3))
    _start(spark, tmp_path, state=_state(tmp_path))
    # die between our changelog write and Spark's commit of the last batch: Spark runs it again
    commits = sorted((tmp_path / "spark" / "commits").iterdir(), key=lambda p: int(p.name) if p.name.isdigit() else -1)
    last = [p for p in commits if p.name.isdigit()][-1]
    last.unlink()
    (last.parent / f".{last.name}.crc").unlink(missing_ok=True)
    _write_inputs(tmp_path / "in", range(3, N_FILES))
    _start(spark, tmp_path, state=_state(tmp_path))
    assert _committed(spark, tmp_path) == expected


def test_runtime_lost_local_state_is_rebuilt(spark, tmp_path, expected):
    _write_inputs(tmp_path / "in", range(3))
    _start(spark, tmp_path, state=_state(tmp_path))
    shutil.rmtree(tmp_path / "local")
    _write_inputs(tmp_path / "in", range(3, N_FILES))
    _start(spark, tmp_path, state=_state(tmp_path))
    assert _committed(spark, tmp_path) == expected
    opened = {m["state_open"] for m in Checkpoint(str(tmp_path / "join")).commits.read_metrics() if m["version"] == 3}
    assert opened and all(how.startswith("rebuilt") or how == "restored" for how in opened), opened


def test_runtime_batch_evaluated_twice_gives_same_output(spark, tmp_path, expected):
    _write_inputs(tmp_path / "in", range(N_FILES))
    out_a, out_b = tmp_path / "a", tmp_path / "b"

    def twice(df, batch_id):
        df.write.mode("append").parquet(str(out_a))
        df.write.mode("append").parquet(str(out_b))

    _start(spark, tmp_path, state=_state(tmp_path), foreach=twice)
    rows_a = sorted(tuple(r) for r in spark.read.parquet(str(out_a)).collect())
    rows_b = sorted(tuple(r) for r in spark.read.parquet(str(out_b)).collect())
    assert rows_a == rows_b == expected


def test_runtime_checkpoint_of_another_definition_is_refused(spark, tmp_path):
    _write_inputs(tmp_path / "in", range(1))
    src = spark.readStream.schema("k bigint, v string").parquet(str(tmp_path / "in"))
    run_operator([src], RunningCount(arrow_schema(src), ["k"]), checkpoint=str(tmp_path / "join"), partitions=3)
    # another partition count is a new partitioning (docs/design/runtime.md "Partitions and rescaling")
    run_operator([src], RunningCount(arrow_schema(src), ["k"]), checkpoint=str(tmp_path / "join"), partitions=4)
    assert [e.partitions for e in epochs(Checkpoint(str(tmp_path / "join")))] == [3, 4]
    with pytest.raises(CheckpointMismatchError, match="another join definition"):
        run_operator([src], RunningCount(arrow_schema(src), ["v"]), checkpoint=str(tmp_path / "join"), partitions=3)
    with pytest.raises(JoinDefinitionError, match="needs checkpoint"):
        run_operator([src], RunningCount(arrow_schema(src), ["k"]), checkpoint=None)


def test_runtime_batch_dataframe_runs_one_final_version(spark, tmp_path, expected):
    _write_inputs(tmp_path / "in", range(N_FILES))
    df = spark.read.parquet(str(tmp_path / "in"))
    rows = sorted(tuple(r) for r in run_operator([df], RunningCount(arrow_schema(df), ["k"]), checkpoint=None).collect())
    final = {}
    for key, count in expected:
        final[key] = max(final.get(key, 0), count)
    assert rows == sorted(final.items())


def test_runtime_checkpoint_of_another_query_is_refused_when_the_query_starts(spark, tmp_path):
    _write_inputs(tmp_path / "in", range(2))
    _start(spark, tmp_path, state=_state(tmp_path))
    shutil.rmtree(tmp_path / "spark")  # a new Spark checkpoint: a new query, same join checkpoint
    log = Changelog(str(tmp_path / "join" / "state" / "p=0"))
    before = log.versions()
    with pytest.raises(CheckpointMismatchError, match="belongs to streaming query .* restart it from its old"):
        _start(spark, tmp_path, state=_state(tmp_path), out="out-of-another-query")   # start() refuses
    assert log.versions() == before and not spark.streams.active   # stopped before its tasks wrote anything


def test_runtime_second_query_over_one_joined_dataframe_is_refused_when_it_starts(spark, tmp_path):
    _write_inputs(tmp_path / "in", range(2))
    src = spark.readStream.schema("k bigint, v string").option("maxFilesPerTrigger", 1).parquet(str(tmp_path / "in"))
    counts = run_operator([src], RunningCount(arrow_schema(src), ["k"]), checkpoint=str(tmp_path / "join"),
                          partitions=3, state=_state(tmp_path))

    def start(i: int, df):
        return (df.writeStream.format("parquet").option("path", str(tmp_path / f"out{i}"))
                .option("checkpointLocation", str(tmp_path / f"spark{i}")).trigger(availableNow=True).start())
    first = start(0, counts)
    with pytest.raises(CheckpointMismatchError, match=f"streaming query {first.id}"):
        start(1, counts.where("k > 1"))   # refused by start(), before any task of it runs
    assert not (tmp_path / "out1").exists() or not list((tmp_path / "out1").glob("*.parquet"))
    first.awaitTermination()
    assert first.exception() is None and len(first.recentProgress) >= 2


def test_runtime_join_of_a_stream_and_a_batch_input_or_another_watermark_is_refused_at_definition(spark, tmp_path):
    from streamjoin import interval_join

    stream = spark.readStream.schema("k bigint, t timestamp").parquet(str(tmp_path))
    static = spark.createDataFrame([(1, None)], "k bigint, t timestamp")
    window = dict(left_time="t", right_time="t", lower="0 seconds", upper="1 minute", checkpoint=str(tmp_path / "j"))
    with pytest.raises(JoinDefinitionError, match=r"the right input a batch one.*stream\.join\(table, on, how\)"):
        interval_join(stream, static, "k", delay="0 seconds", **window)
    marked = stream.withWatermark("t", "10 minutes")
    with pytest.raises(JoinDefinitionError, match=r"withWatermark\('t', '10 minutes'\).*delay for it is '5 minutes'"):
        interval_join(marked, stream, "k", delay="5 minutes", **window)
    interval_join(marked, stream, "k", delay="10 minutes", **window)   # the same delay: the same meaning


def test_runtime_metrics_and_set_aside_rows_account_for_every_row(spark, tmp_path):
    from streamjoin import join_metrics, set_aside_rows

    _write_inputs(tmp_path / "in", range(N_FILES))
    _start(spark, tmp_path, state=_state(tmp_path))
    metrics = join_metrics(spark, str(tmp_path / "join")).collect()
    assert {(m["version"], m["partition"]) for m in metrics} == {(v, p) for v in range(N_FILES) for p in range(3)}
    assert sum(m["input_rows_input"] for m in metrics) == N_FILES * 21
    aside = set_aside_rows(spark, str(tmp_path / "join"), "input")
    assert sum(m["set_aside_rows_input"] for m in metrics) == aside.count() == N_FILES
    assert {r["_reason"] for r in aside.collect()} == {"null key"}


def _freeze_counts(batches):
    """(In a Python worker) how many objects the worker's collector holds frozen."""
    import gc

    for _ in batches:
        pass
    yield pa.record_batch([pa.array([gc.get_freeze_count()], pa.int64())], names=["frozen"])


def test_runtime_workers_freeze_their_imports_before_a_task(spark, tmp_path):
    _write_inputs(tmp_path / "in", range(2))
    _start(spark, tmp_path, state=_state(tmp_path))
    # the workers that ran the join's tasks keep their imports out of PySpark's collection after a task
    frozen = spark.range(0, 4, 1, 4).mapInArrow(_freeze_counts, "frozen long").collect()
    assert max(r["frozen"] for r in frozen) > 10_000, frozen


def test_runtime_batch_run_refuses_a_streaming_querys_checkpoint(spark, tmp_path):
    _write_inputs(tmp_path / "in", range(2))
    _start(spark, tmp_path, state=_state(tmp_path))
    log = Changelog(str(tmp_path / "join" / "state" / "p=0"))
    before = log.versions()
    df = spark.read.parquet(str(tmp_path / "in"))
    with pytest.raises(CheckpointMismatchError, match="holds the state of a streaming query"):
        run_operator([df], RunningCount(arrow_schema(df), ["k"]), checkpoint=str(tmp_path / "join"), partitions=3)
    assert log.versions() == before == [0, 1]


def test_resolve_checkpoint_resolves_on_the_driver(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert resolve_checkpoint("join", True, "test") == str(tmp_path / "join")
    assert resolve_checkpoint("s3a://bucket/join", True, "test") == "s3://bucket/join"
    assert resolve_checkpoint("dbfs:/checkpoints/join", True, "test") == "/dbfs/checkpoints/join"
    with pytest.raises(JoinDefinitionError, match="unknown scheme 'foo:'"):
        resolve_checkpoint("foo://bucket/join", True, "test")


def test_runtime_layout_shares_lanes_between_inputs_key_columns_first(spark):
    """Inputs' columns of one Spark type share lanes (rows as wide as the widest input); each
    input's key columns take the first lanes of their types, so equal key types share a lane."""
    from streamjoin.runtime.operator import InputSpec
    from streamjoin.spark.lanes import Layout

    left = spark.createDataFrame([], "name string, k bigint, t timestamp, x bigint")
    right = spark.createDataFrame([], "k bigint, label string, y double")
    other = spark.createDataFrame([], "k int, z string")

    class Op:
        inputs = tuple(InputSpec(n, arrow_schema(df), ("k",), None)
                       for n, df in (("left", left), ("right", right), ("other", other)))

    layout = Layout.of([left, right, other], Op())  # type: ignore[arg-type]
    k, name, t, x = layout.lanes[0][1], layout.lanes[0][0], layout.lanes[0][2], layout.lanes[0][3]
    assert layout.lanes[1] == (k, name, layout.lanes[1][2])   # bigint key, then string: shared
    assert layout.lanes[1][2] not in (k, name, t, x)          # double: a lane of its own
    assert layout.lanes[2][0] not in layout.lanes[0] + layout.lanes[1]   # an int key is not a bigint lane
    assert layout.lanes[2][1] == name
    assert len({lane for lanes in layout.lanes for lane in lanes}) == 6


def test_runtime_join_refuses_a_local_session_whose_workers_run_a_python_without_streamjoin(spark, tmp_path):
    import subprocess
    import sys

    from streamjoin import interval_join
    from streamjoin.spark import workers

    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "bare")], check=True)
    bare = str(tmp_path / "bare" / "bin" / "python")   # a Python without streamjoin, as the system's
    df = spark.createDataFrame([(1, None)], "k bigint, t timestamp")
    context, kept = spark.sparkContext, spark.sparkContext.pythonExec
    context.pythonExec = bare   # what PYSPARK_PYTHON unset (python3 on the PATH) gives without a venv
    try:
        with pytest.raises(JoinDefinitionError, match=f"workers run '{bare}'.*cannot import streamjoin.*PYSPARK_PYTHON"):
            interval_join(df, df, "k", left_time="t", right_time="t", lower="0 seconds", upper="1 minute",
                          delay="0 seconds")
    finally:
        context.pythonExec = kept
    assert workers.python_problem(kept) is None and workers.python_problem(sys.executable) is None
