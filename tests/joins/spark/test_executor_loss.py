"""Executors lost mid-query on a Spark standalone cluster (two workers of one core on this
machine): a view over three tables, two chained table-table joins in one streaming query whose
local stores live in each executor's own directory, equals DuckDB's three-way join of the final
tables after two executors' JVMs are killed (``SIGKILL``) while it runs. A lost executor takes its
Python workers, the stores they kept open, its local disk and the shuffle files of the stages it
ran: Spark starts another executor, runs again the map stages whose output it needs (a stage of
the join then executes a version again after other tasks read its first output) and retries the
tasks; every store it held is rebuilt from the changelog.

The query runs in a driver process of its own (``python -m tests.joins.spark.test_executor_loss
MASTER ROOT``): a process has one Spark context, and the suite's is a local one."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from typing import Iterator

import pyarrow.parquet as pq
import pytest

from streamjoin.bench.interval import executor_jvms
from tests.joins.spark.three_tables import expected_view, same_rows, view, write_history

pytestmark = pytest.mark.spark

BATCHES, PER_BATCH = 10, 200
#: Spark's micro-batches after whose commit an executor is killed (one each time).
KILL_AFTER = (1, 4)
#: Seconds the whole query may take (its first micro-batch starts the executors' Python workers).
QUERY_TIMEOUT = 300
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


@dataclass
class Cluster:
    url: str
    workers: list[subprocess.Popen]

    def executors(self) -> list[int]:
        """The pids of the executor JVMs the workers run now."""
        return sorted(pid for worker in self.workers for pid in executor_jvms(worker.pid))


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _alive_workers(ui: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{ui}/json/", timeout=2) as answer:
            return int(json.load(answer).get("aliveworkers", 0))
    except OSError:
        return -1


@pytest.fixture
def cluster(tmp_path) -> Iterator[Cluster]:
    """A standalone master and two workers (one core, 1 GiB each) on 127.0.0.1, stopped after the test."""
    import pyspark

    home = os.path.dirname(pyspark.__file__)
    env = {**os.environ, "SPARK_HOME": home, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable,
           "SPARK_LOCAL_DIRS": str(tmp_path / "spark-local")}
    port, ui = _free_port(), _free_port()
    spark_class = os.path.join(home, "bin", "spark-class")
    logs = tmp_path / "logs"
    logs.mkdir()
    files = [open(logs / name, "wb") for name in ("master.log", "worker0.log", "worker1.log")]
    master = subprocess.Popen([spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                               "--port", str(port), "--webui-port", str(ui)], env=env,
                              stdout=files[0], stderr=subprocess.STDOUT)
    workers: list[subprocess.Popen] = []
    try:
        url = f"spark://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while _alive_workers(ui) < 0:
            assert time.monotonic() < deadline, "the standalone master did not start: " + (logs / "master.log").read_text()
            time.sleep(0.5)
        for i in range(2):
            workers.append(subprocess.Popen(
                [spark_class, "org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1", "--cores", "1",
                 "--memory", "1g", "--webui-port", str(_free_port()), "--work-dir", str(tmp_path / f"worker{i}")],
                env=env, stdout=files[1 + i], stderr=subprocess.STDOUT))
        while _alive_workers(ui) < 2:
            assert time.monotonic() < deadline, "the standalone workers did not register"
            time.sleep(0.5)
        yield Cluster(url, workers)
    finally:
        leftovers = [pid for w in workers for pid in executor_jvms(w.pid)]   # (orphaned once their worker is gone)
        for process in [*workers, master]:
            process.kill()
            process.wait()
        for pid in leftovers:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for file in files:
            file.close()


def test_table_chain_with_executors_killed_equals_duckdbs_three_way_join(cluster, tmp_path):
    root = str(tmp_path / "data")
    changes = write_history(root, seed=5, batches=BATCHES, per_batch=PER_BATCH)
    output = open(tmp_path / "driver.log", "wb")
    driver = subprocess.Popen([sys.executable, "-m", "tests.joins.spark.test_executor_loss", cluster.url, root],
                              cwd=REPO, env={**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"},
                              stdout=output, stderr=subprocess.STDOUT)
    kills = []
    deadline = time.monotonic() + QUERY_TIMEOUT
    try:
        for batch in KILL_AFTER:   # each once Spark committed that micro-batch, while the next one runs
            while not os.path.exists(f"{root}/spark/commits/{batch}") and driver.poll() is None:
                assert time.monotonic() < deadline, "the query did not reach micro-batch " + str(batch)
                time.sleep(0.05)
            executors = cluster.executors()
            if driver.poll() is None and executors:
                os.kill(executors[0], signal.SIGKILL)
                kills.append(batch)
        driver.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
        output.close()
    log = (tmp_path / "driver.log").read_text(errors="replace")
    assert driver.returncode == 0, log[-5000:]
    assert kills == list(KILL_AFTER), f"executors killed after micro-batches {kills}, not {KILL_AFTER}"
    assert "Lost executor" in log   # (Spark saw the executors go)
    assert same_rows(pq.read_table(f"{root}/view.parquet"), expected_view(changes))


def _drive(master: str, root: str) -> None:
    """The driver: the view over ``root``'s files on ``master``, its final rows to ``root/view.parquet``."""
    from pyspark.sql import SparkSession

    from streamjoin import SPARK_SETTINGS, view_sink

    spark = (SparkSession.builder.master(master).appName("streamjoin executor loss")
             .config(map={**SPARK_SETTINGS, "spark.executor.memory": "640m", "spark.task.maxFailures": "4",
                          "spark.sql.shuffle.partitions": "3", "spark.ui.enabled": "false",
                          "spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"})
             .getOrCreate())
    try:
        joined = view(spark, root, state_dirs=False)
        with view_sink(f"{root}/view", left_key="order_id", right_key="product_id", schema=joined) as sink:
            query = (joined.writeStream.foreachBatch(sink).option("checkpointLocation", f"{root}/spark")
                     .trigger(availableNow=True).start())
            query.awaitTermination()
            pq.write_table(sink.rows(), f"{root}/view.parquet")
    finally:
        spark.stop()


if __name__ == "__main__":
    _drive(*sys.argv[1:3])
