"""The flush: a join's is the flush source (``end_of_run`` "flush", the default, and
"release": the JVM source where the session loads it, else the Python source), or with "hold" Spark's file source over its tick folder (no Python process a query)
where Spark reads the checkpoint without a connector, as with "flush" for a join none of whose
output waits for the watermark; a checkpoint keeps the kind of source its
query ran with (its offsets are in the query's Spark offset log). The Python source registers
once a session, refuses on the driver a second streaming query over one join's checkpoint, and
lets a restarted query continue."""

from __future__ import annotations

import logging

import pytest

from streamjoin import interval_join
from streamjoin.errors import CheckpointMismatchError, JoinDefinitionError
from streamjoin.runtime.checkpoint import Checkpoint
from streamjoin.spark import flush_jvm
from streamjoin.spark.flush import Flush, closing_version, flush_stream, plan_flush, spark_location, write_tick
from streamjoin.spark.flush_jvm import PROVIDER
from streamjoin.spark.flush_source import _FlushReader

pytestmark = pytest.mark.spark

_MANAGER = "org.apache.spark.sql.execution.datasources.DataSourceManager"


@pytest.fixture
def warnings_logged(spark):
    """The text of what Spark's data source registry logs at WARN during the test."""
    jvm = spark._jvm
    log4j = jvm.org.apache.logging.log4j
    writer = jvm.java.io.StringWriter()
    layout = log4j.core.layout.PatternLayout.newBuilder().withPattern("%p %m%n").build()
    appender = log4j.core.appender.WriterAppender.newBuilder().setName("streamjoin-test").setTarget(writer) \
        .setLayout(layout).build()
    appender.start()
    logger = log4j.LogManager.getLogger(_MANAGER)
    level = logger.getLevel()
    logger.addAppender(appender)
    log4j.core.config.Configurator.setLevel(_MANAGER, log4j.Level.WARN)
    try:
        yield writer.toString
    finally:
        logger.removeAppender(appender)
        log4j.core.config.Configurator.setLevel(_MANAGER, level)
        appender.stop()


def _plan(df) -> str:
    return df._jdf.queryExecution().analyzed().toString()


def test_flush_of_a_new_hold_join_is_a_file_source_over_its_ticks(spark, tmp_path):
    flush = plan_flush(str(tmp_path / "join"), "hold")
    assert flush == Flush("hold", ticks=True)
    stream = flush_stream(spark, str(tmp_path / "join"), 2, 2, flush)
    assert "FileSource[" in _plan(stream)
    assert "streamjoin_flush" not in _plan(stream)
    assert (tmp_path / "join" / "flush").is_dir()   # Spark's file source needs the folder to exist


def test_flush_of_a_checkpoint_claimed_by_the_python_source_stays_that_source(spark, tmp_path):
    (tmp_path / "join").mkdir()
    (tmp_path / "join" / "flush.json").write_text('{"owner": "abc"}')
    flush = plan_flush(str(tmp_path / "join"), "hold")
    assert flush == Flush("hold", ticks=False)
    # (the JVM flush source here: the Python source's offsets, computed in this process)
    assert PROVIDER in _plan(flush_stream(spark, str(tmp_path / "join"), 2, 2, flush))


def test_flush_where_the_jvm_source_cannot_load_is_the_python_source(spark, tmp_path, monkeypatch):
    monkeypatch.setattr(flush_jvm, "_loaded", lambda session: False)   # as on Spark Connect
    flush = plan_flush(str(tmp_path / "join"), None)
    assert "streamjoin_flush" in _plan(flush_stream(spark, str(tmp_path / "join"), 2, 2, flush))


def test_flush_plan_defaults_to_the_python_source_and_a_checkpoint_that_ran_with_ticks_keeps_them(tmp_path, caplog):
    ck = str(tmp_path / "join")
    assert plan_flush(ck, None) == Flush("flush", ticks=False)
    assert plan_flush(ck, "release") == Flush("release", ticks=False)
    # a join reading processing time (idle_timeout) keeps "hold": see docs/design/end-of-input.md
    assert plan_flush(ck, None, processing_time=True) == Flush("hold", ticks=True)
    with pytest.raises(JoinDefinitionError, match="with idle_timeout"):
        plan_flush(ck, "flush", processing_time=True)
    Checkpoint(ck).commits.write(0, 0, 1, (None, None), {})   # a version run with ticks:
    (tmp_path / "join" / "flush").mkdir()
    with caplog.at_level(logging.WARNING, logger="streamjoin"):
        assert plan_flush(ck, None) == Flush("hold", ticks=True)
    assert "keeps it" in caplog.text and "end_of_run='hold'" in caplog.text
    assert plan_flush(ck, "hold") == Flush("hold", ticks=True)
    with pytest.raises(JoinDefinitionError, match="Pass end_of_run='hold'"):
        plan_flush(ck, "flush")


def test_flush_plan_of_a_join_whose_output_never_waits_is_none_unless_its_checkpoint_ran_with_one(tmp_path, caplog):
    # nothing of an inner interval join's (or a latest enrichment's, ...) waits for the watermark, so
    # a no-data batch would release nothing: no flush source at all, whatever the mode but "release"
    ck = str(tmp_path / "join")
    for asked in (None, "flush", "hold"):
        assert plan_flush(ck, asked, waits=False) is None
    assert plan_flush(ck, None, processing_time=True, waits=False) is None   # (idle_timeout: "hold" too)
    assert plan_flush(ck, "release", waits=False) == Flush("release", ticks=False)   # it closes the inputs
    Checkpoint(ck).commits.write(0, 0, 1, (None, None), {})   # a version run without a flush: still none
    assert plan_flush(ck, None, waits=False) is None
    (tmp_path / "join" / "flush").mkdir()   # a version run with ticks (before 0.3): kept, no warning
    with caplog.at_level(logging.WARNING, logger="streamjoin"):
        assert plan_flush(ck, None, waits=False) == Flush("flush", ticks=True)
        assert plan_flush(ck, "flush", waits=False) == Flush("flush", ticks=True)
    assert caplog.text == ""
    claimed = tmp_path / "claimed"   # a checkpoint whose query ran the Python source keeps it
    claimed.mkdir()
    (claimed / "flush.json").write_text('{"owner": "abc"}')
    assert plan_flush(str(claimed), None, waits=False) == Flush("flush", ticks=False)


def test_flush_plan_of_a_join_without_event_times_is_none_unless_its_checkpoint_ran_with_one(tmp_path):
    # a table-table join without a retention: no input has an event time, so no watermark moves
    ck = str(tmp_path / "join")
    for asked in (None, "flush", "hold"):
        assert plan_flush(ck, asked, waits=False, timed=False) is None
    assert plan_flush(ck, "release", waits=False, timed=False) == Flush("release", ticks=False)
    Checkpoint(ck).commits.write(0, 0, 1, (None, None), {})   # a version run with ticks keeps them
    (tmp_path / "join" / "flush").mkdir()
    assert plan_flush(ck, None, waits=False, timed=False) == Flush("flush", ticks=True)
    claimed = tmp_path / "claimed"   # as does one that ran the Python source
    claimed.mkdir()
    (claimed / "flush.json").write_text('{"owner": "abc"}')
    assert plan_flush(str(claimed), None, waits=False, timed=False) == Flush("flush", ticks=False)


def test_flush_plan_refuses_all_but_release_on_a_checkpoint_whose_inputs_were_closed(tmp_path):
    ck = str(tmp_path / "join")
    Checkpoint(ck).files.create_json("closed/v=2.json", {"version": 2})
    for asked in (None, "flush", "hold"):
        with pytest.raises(CheckpointMismatchError, match="closed its inputs in version 2"):
            plan_flush(ck, asked)
    assert plan_flush(ck, "release") == Flush("release", ticks=False)


def test_flush_plan_of_hold_on_an_object_store_is_the_python_source(moto_s3):
    # Spark reads s3:// only with a Hadoop connector (S3A) on its classpath: the checkpoint is
    # read with pyarrow instead (docs/operations/object-stores.md)
    assert plan_flush(f"{moto_s3}/join", "hold") == Flush("hold", ticks=False)
    assert plan_flush(f"{moto_s3}/join", None, waits=False) is None   # nothing to flush: no Python process either


def test_flush_tick_is_written_once_a_version_however_many_partitions_ask(tmp_path):
    for _ in range(3):
        write_tick(str(tmp_path / "join"), 7)
    write_tick(str(tmp_path / "join"), 8)
    assert sorted(p.name for p in (tmp_path / "join" / "flush").iterdir()) == [
        f"tick-{7:020d}", f"tick-{8:020d}"]
    assert all(p.stat().st_size == 0 for p in (tmp_path / "join" / "flush").iterdir())   # no rows


def test_flush_spark_location_names_locations_as_hadoop_does():
    assert spark_location("/data/join/flush") == "file:///data/join/flush"
    assert spark_location("/dbfs/x/flush") == "dbfs:/x/flush"
    assert spark_location("s3://bucket/join/flush") == "s3a://bucket/join/flush"
    assert spark_location("gs://bucket/join/flush") == "gs://bucket/join/flush"


def test_flush_source_is_registered_once_for_several_joins(spark, tmp_path, warnings_logged, monkeypatch):
    monkeypatch.setattr(flush_jvm, "_loaded", lambda session: False)   # the Python source's registration
    read = spark.readStream.schema("k bigint, t timestamp")
    for i in range(3):
        (tmp_path / f"join{i}").mkdir()
        (tmp_path / f"join{i}" / "flush.json").write_text('{"owner": "abc"}')   # the Python source's
        (tmp_path / f"in{i}").mkdir()
        stream = read.parquet(str(tmp_path / f"in{i}"))
        interval_join(stream, stream, "k", left_time="t", right_time="t", lower="0 seconds", upper="1 second",
                      delay="0 seconds", checkpoint=str(tmp_path / f"join{i}"))
    assert "streamjoin_flush" not in warnings_logged()


def test_flush_reader_refuses_a_second_query_and_lets_a_restarted_one_continue(tmp_path):
    ck = str(tmp_path / "join")
    first = _FlushReader(ck, 2, 2)
    start = first.initialOffset()
    offset = first.latestOffset(start, None)   # a new query: it claims the checkpoint
    assert offset["owner"] and offset != start   # so Spark runs (and logs) the first micro-batch
    with pytest.raises(CheckpointMismatchError, match="already feeds another streaming query"):
        second = _FlushReader(ck, 2, 2)
        second.latestOffset(second.initialOffset(), None)
    rerun = _FlushReader(ck, 2, 2)   # restarted before its first micro-batch completed: no new offset asked
    assert rerun.partitions(rerun.initialOffset(), offset) == []
    assert rerun.latestOffset(offset, None)["owner"] == offset["owner"]
    restarted = _FlushReader(ck, 2, 2)
    assert restarted.latestOffset(offset, None) == offset


def test_flush_reader_claims_nothing_where_spark_gives_no_start_offset(tmp_path):
    ck = str(tmp_path / "join")   # PySpark 4.0 and 4.1: latestOffset() without the start offset
    assert _FlushReader(ck, 2, 1).latestOffset() == {"max_times": [None]}
    assert _FlushReader(ck, 2, 1).latestOffset() == {"max_times": [None]}
    assert not (tmp_path / "join" / "flush.json").exists()


def _commit(ck: str, version: int, rows: int) -> None:
    for p in range(2):
        Checkpoint(ck).commits.write(version, p, 2, (10, 10), {"input_rows_left": rows if p == 0 else 0,
                                                             "input_rows_right": 0})


def test_flush_reader_closes_an_available_now_run_after_a_version_that_read_no_rows(tmp_path):
    ck = str(tmp_path / "join")
    reader = _FlushReader(ck, 2, 2, release=True)
    reader.prepareForTriggerAvailableNow()
    start = reader.latestOffset(reader.initialOffset(), None)
    _commit(ck, 0, rows=5)
    after = reader.latestOffset(start, None)
    assert "final" not in after and after["read"] == 0 != start.get("read")   # one more batch, rows or not
    _commit(ck, 1, rows=0)
    closing = reader.latestOffset(start, None)
    assert closing["final"] == 2 and closing_version(Checkpoint(ck)) == 2
    assert reader.latestOffset(closing, None) == closing   # closed: no more batches
    flushing = _FlushReader(ck, 2, 2, release=True)   # the same query restarted with another trigger
    assert "final" not in flushing.latestOffset(start | {"owner": closing["owner"]}, None)
    assert closing_version(Checkpoint(ck)) is None   # the closing offset never reached Spark's log


def test_flush_reader_never_closes_without_release(tmp_path):
    ck = str(tmp_path / "join")
    reader = _FlushReader(ck, 2, 2)
    reader.prepareForTriggerAvailableNow()
    start = reader.latestOffset(reader.initialOffset(), None)
    _commit(ck, 0, rows=0)
    assert "final" not in reader.latestOffset(start, None)
    assert closing_version(Checkpoint(ck)) is None


def test_flush_source_module_imports_without_pandas():
    """Spark starts a Python process for the flush source at every query's start and waits for it;
    the module it unpickles must not pull in pandas (about 0.2 s here), which pyarrow imports on
    the first conversion of Python values, such as one made at an import."""
    import subprocess
    import sys

    code = "import sys; import streamjoin.spark.flush_source; print('pandas' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
