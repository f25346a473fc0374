"""Python workers killed mid-query (``SIGKILL``, as the kernel's out-of-memory killer or a lost
machine does it): a view over three tables, two chained table-table joins in one streaming
query, equals DuckDB's three-way join of the final tables. A killed worker leaves what it was
writing half done, its locks, and the stores it kept warm for the next task; Spark retries its
task in another worker. The kills are few (at most one less than the session's task attempts),
so every task succeeds in the end, and at least one lands while the query runs."""

from __future__ import annotations

import os
import random
import signal
import threading

import pytest

from streamjoin import view_sink
from streamjoin.bench.interval import task_workers
from tests.joins.spark.three_tables import expected_view, same_rows, view, write_history

pytestmark = pytest.mark.spark

BATCHES, PER_BATCH = 6, 120
#: Kills at most: the session tries a task four times (``local[2,4]``).
KILLS = 3


class _Killer(threading.Thread):
    """Kills a random Python worker every 0.4-1.2 s until ``KILLS`` are done or it is stopped."""

    def __init__(self, seed: int) -> None:
        super().__init__(daemon=True)
        self.rng, self.kills, self.done = random.Random(seed), 0, threading.Event()

    def run(self) -> None:
        while self.kills < KILLS and not self.done.wait(self.rng.uniform(0.4, 1.2)):
            workers = task_workers(os.getpid())   # (this session's own, not another test process's)
            if workers:
                try:
                    os.kill(self.rng.choice(workers), signal.SIGKILL)
                    self.kills += 1
                except ProcessLookupError:
                    pass


def test_table_chain_with_python_workers_killed_equals_duckdbs_three_way_join(spark, tmp_path):
    root = str(tmp_path)
    changes = write_history(root, seed=5, batches=BATCHES, per_batch=PER_BATCH)
    joined = view(spark, root)
    killer = _Killer(seed=11)
    with view_sink(f"{root}/view", left_key="order_id", right_key="product_id", schema=joined) as sink:
        query = (joined.writeStream.foreachBatch(sink).option("checkpointLocation", f"{root}/spark")
                 .trigger(availableNow=True).start())
        killer.start()
        query.awaitTermination()
        killer.done.set()
        killer.join()
        got = sink.rows()
    assert query.exception() is None
    assert killer.kills >= 1, "no worker was killed while the query ran"
    assert same_rows(got, expected_view(changes))
