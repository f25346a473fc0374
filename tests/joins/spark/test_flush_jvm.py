"""The JVM flush source: its committed jar is built from the Java sources as they are (the
manifest's digest), Spark runs an ``availableNow`` query's trailing no-data micro-batch with it
(the offsets follow the join's progress during the run), a query's start waits for no Python
process, and a stop while it waits for initial rows returns at once."""

from __future__ import annotations

import threading
import time
import zipfile
from pathlib import Path

import pytest

from streamjoin.runtime.checkpoint import Checkpoint
from streamjoin.spark import flush_jvm
from streamjoin.spark.flush import Flush, flush_stream

ROOT = Path(__file__).resolve().parents[3]


def _manifest(jar: str) -> dict[str, str]:
    with zipfile.ZipFile(jar) as z:
        text = z.read("META-INF/MANIFEST.MF").decode()
    lines: list[str] = []
    for line in text.splitlines():
        if line.startswith(" ") and lines:   # a continuation of the line before
            lines[-1] += line[1:]
        elif line:
            lines.append(line)
    return dict(line.split(": ", 1) for line in lines)


def test_flush_jvm_jar_is_built_from_the_sources_as_they_are():
    found = _manifest(flush_jvm.jar_path()).get(flush_jvm.DIGEST_ATTRIBUTE)
    assert found == flush_jvm.sources_digest(str(ROOT / "joins" / "spark" / "jvm")), \
        "the jar is older than joins/spark/jvm/*.java: run scripts/build-jar and commit the jar"


@pytest.mark.spark
def test_flush_jvm_source_runs_the_trailing_no_data_batch_of_an_available_now_run(spark, tmp_path):
    ck = str(tmp_path / "join")
    stream = flush_stream(spark, ck, 2, 1, Flush("flush", ticks=False))
    progress = {"n": 0}
    moved = threading.Event()

    def batch(df, batch_id):
        progress["n"] += 1
        if batch_id == 0:   # the progress moved, as a join's version 0 records it
            for partition in range(2):
                Checkpoint(ck).commits.write(0, partition, 2, (1000,), {})
            moved.set()

    query = stream.writeStream.foreachBatch(batch).option("checkpointLocation", str(tmp_path / "q")) \
        .trigger(availableNow=True).start()
    query.awaitTermination(60)
    assert moved.is_set()
    assert progress["n"] == 2, "a batch for the first offset, then one for the progress the run made"


@pytest.mark.spark
def test_flush_jvm_stop_while_waiting_for_initial_rows_returns_at_once(spark, tmp_path):
    ck = str(tmp_path / "join")
    Checkpoint(ck).initial.clear()   # initial rows being written, never completed here
    stream = flush_stream(spark, ck, 2, 1, Flush("flush", ticks=False), initial_pending=True)
    query = stream.writeStream.format("noop").option("checkpointLocation", str(tmp_path / "q")).start()
    time.sleep(1.0)
    assert query.isActive and not query.recentProgress   # waiting at its first offset
    started = time.perf_counter()
    query.stop()
    assert time.perf_counter() - started < 5
