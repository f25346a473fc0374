"""The table benchmark's generated workload (no Spark, no timing): the mix of changes, that
updates and deletes hit live rows and inserts new ones, that reassigned orders and new orders
reference customers that exist by then, and that the expected view sizes are the join's."""

from __future__ import annotations

import numpy as np
import pytest

from streamjoin.bench.table import bounds, expected_view_rows, generate


def _replay(workload, ends):
    orders = {r["order_id"]: r for r in workload.orders.load.to_pylist()}
    customers = {r["customer_id"]: r for r in workload.customers.load.to_pylist()}
    seen_customers = set(customers)
    sizes = [sum(1 for o in orders.values() if o["customer_id"] in customers)]
    o_changes, c_changes, start = workload.orders.changes.to_pylist(), workload.customers.changes.to_pylist(), 0
    for end in ends:
        for o, c in zip(o_changes[start:end], c_changes[start:end]):
            for table, key, row in ((orders, "order_id", o), (customers, "customer_id", c)):
                if row["op"] == "delete":
                    assert table.pop(row[key], None) is not None
                else:
                    assert (row[key] in table) == (row["op"] == "update")
                    table[row[key]] = row
            seen_customers.update(customers)
            if o["op"] != "delete":
                assert o["customer_id"] in seen_customers   # loaded or inserted by then (maybe deleted since)
        sizes.append(sum(1 for o in orders.values() if o["customer_id"] in customers))
        start = end
    return sizes


def test_table_workload_shape_and_view_sizes():
    workload = generate(rows=600, changes=400, seed=3)
    for side in workload.sides():
        assert side.load.num_rows == 600 and side.changes.num_rows == 400
        ops = side.changes.column("op").to_pylist()
        assert (ops.count("update"), ops.count("delete"), ops.count("insert")) == (80, 20, 300)
        times = side.changes.column("changed_at").cast("int64").to_numpy()
        assert np.all(np.diff(times) > 0) and times[0] > side.load.column("changed_at").cast("int64").to_numpy().max()
    assert 0 < workload.moves < 80
    loaded = dict(zip(workload.orders.load.column("order_id").to_pylist(),
                      workload.orders.load.column("customer_id").to_pylist()))
    moved = {r["order_id"] for r in workload.orders.changes.to_pylist()
             if r["op"] == "update" and r["customer_id"] != loaded[r["order_id"]]}
    assert moved  # some updates change the join key
    for batches in (1, 3):
        ends = bounds(400, batches)
        assert expected_view_rows(workload, ends) == _replay(workload, ends)
    assert expected_view_rows(workload, bounds(400, 1))[0] == 600


def test_table_summary_floor_ratio():
    """The floor's changes seconds over each streamed variant's; none for recomputing (no Spark)."""
    from streamjoin.bench.table import Outcome, Params, summary_table

    params = Params(100, 40, (2,), 1, 4)
    ours = Outcome(1.0, [3.0, 5.0], [10, 12], [100, 101, 102])
    floor = Outcome(0.5, [1.0, 1.0], [40, 40], [0, 0, 0])
    recompute = Outcome(0.0, [6.0, 10.0], [], [100, 102], measured=[0, 1])
    rows = summary_table(params, {2: {"streamjoin-arranged": [ours], "spark-floor": [floor],
                                      "spark-recompute": [recompute]}}).as_records()
    by = {r["variant"]: r for r in rows}
    assert by["streamjoin-arranged"]["floor s / s"] == 0.25
    assert by["spark-floor"]["floor s / s"] == 1.0
    assert by["spark-floor"]["rows out/batch"] == 40 and by["spark-floor"]["view changes"] == "-"
    assert by["spark-recompute"]["floor s / s"] == "-"
    assert by["streamjoin-arranged"]["recompute s / s"] == 2.0


def test_spark_cpu_seconds_counts_workers_under_root():
    """A PySpark worker under the root counts as a worker's CPU, nothing as the JVM's."""
    import subprocess
    import sys
    import time

    from streamjoin.bench.interval import spark_cpu_seconds

    burn = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass\ntime.sleep(60)"
    parent = ("import signal, subprocess, sys, time\n"
              f"child = subprocess.Popen([sys.executable, '-c', {burn!r}, 'pyspark.daemon'])\n"
              "signal.signal(signal.SIGTERM, lambda *_: (child.kill(), child.wait(), sys.exit(0)))\n"
              "time.sleep(60)")
    root = subprocess.Popen([sys.executable, "-c", parent])
    try:
        deadline = time.monotonic() + 20
        jvm, worker = spark_cpu_seconds(root.pid)
        while worker < 0.25 and time.monotonic() < deadline:
            time.sleep(0.1)
            jvm, worker = spark_cpu_seconds(root.pid)
        assert jvm == 0.0 and 0.25 <= worker < 5
    finally:
        root.terminate()
        root.wait(timeout=20)


def test_table_in_process_keeps_its_stages_sums_as_results(tmp_path, monkeypatch, capsys):
    # what ``streamjoin bench compare REV table --in-process`` reads back: a row a stage and their sum
    import json
    import tempfile

    from streamjoin.bench.table import Params, in_process

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    assert in_process(generate(rows=300, changes=200, seed=5), Params(300, 200, (2,), 1, 2), ["memory"], True) == 0
    path = [line for line in capsys.readouterr().out.splitlines() if line.startswith("results:")][-1][len("results:"):]
    with open(path.strip()) as fh:
        results = json.load(fh)
    assert results["benchmark"] == "table-in-process" and results["params"]["store"] == "memory"
    rows = {row["stage"]: row for row in results["rows"]}
    assert set(rows) == {"left_keys", "join", "all"}   # fused: the customers' key step runs in the join stage
    both = rows["left_keys"]["changes s"] + rows["join"]["changes s"]
    assert rows["all"]["changes s"] == pytest.approx(both, abs=0.002) and both > 0
    assert rows["all"]["input changes/s"] == pytest.approx(400 / rows["all"]["changes s"], rel=0.01)
