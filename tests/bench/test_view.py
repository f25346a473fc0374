"""``streamjoin bench view``: its star workload, a tiny run of both variants (figures not checked) and
its results table."""

from __future__ import annotations

import argparse
import json

from streamjoin.bench import view
from streamjoin.bench.compare import figures, results_path


def test_bench_view_star_references_loaded_products_and_runs_both_variants(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr("streamjoin.bench.view.results_dir", lambda: str(tmp_path))
    monkeypatch.setattr("streamjoin.bench.harness.results_dir", lambda: str(tmp_path))
    data = view.star(200, 100)
    orders_load, _ = data.orders
    assert orders_load.schema.names[-1] == "product_id"
    assert max(orders_load.column("product_id").to_pylist()) < data.products[0].num_rows == 20
    args = argparse.Namespace(rows=200, changes=100, batches=2, partitions=1, store="memory", spark=False,
                              key_stages="fused", spark_repeat=1)
    assert view.run(args) == 0
    out = capsys.readouterr().out
    assert "two tables:" in out and "three tables:" in out and "bytes per input row" in out
    path = results_path(out)
    assert path is not None and path.startswith(str(tmp_path))
    with open(path) as fh:
        results = json.load(fh)
    assert [row["variant"] for row in results["rows"]] == ["streamjoin-memory two tables", "streamjoin-memory three tables"]
    found = figures(results)   # what ``bench compare`` reads: per variant, its numbers
    assert found[("streamjoin-memory two tables", "s / two tables' s")] == 1.0
    assert found[("streamjoin-memory three tables", "changes")] == 300


def test_bench_view_summary_table_puts_the_spark_ratios_in_their_rows():
    args = argparse.Namespace(changes=100, store="arranged")
    run = {"seconds": 2.0, "cpu": 2.5, "changes": 200, "bytes": 1000, "rows": 10, "held": {"first/join": 500}, "peak": 100.0,
           "view changes": 50}
    table = view.summary_table({"two tables": run, "three tables": {**run, "seconds": 3.0, "changes": 300}},
                               {"spark two tables": 4.0, "spark three tables": 6.0, "spark recompute (est.)": 12.0},
                               args, {"spark two tables": 300 * 2**20, "spark three tables": 450 * 2**20},
                               {"spark three tables": (10.004, 20.0)})
    rows = {row["variant"]: row for row in table.as_records()}
    assert rows["streamjoin-arranged three tables"]["s / two tables' s"] == 1.5
    assert rows["streamjoin-arranged three tables"]["CPU s"] == 2.5 and rows["spark three tables, arranged"]["CPU s"] == "-"
    assert rows["spark three tables, arranged"]["s / two tables' s"] == 1.5
    assert rows["spark three tables, arranged"]["recompute s / s"] == 2.0
    assert rows["spark three tables, arranged"]["input changes/s"] == 50.0
    assert rows["spark recompute (est.)"]["recompute s / s"] == 1.0
    # each streaming query's largest Python worker; none for what ran in process or is Spark's own
    assert rows["spark three tables, arranged"]["worker RSS MB"] == 450
    assert rows["streamjoin-arranged three tables"]["worker RSS MB"] == "-"
    assert rows["spark recompute (est.)"]["worker RSS MB"] == "-"
    # the CPU split of the queries' change micro-batches, where it was read
    assert (rows["spark three tables, arranged"]["JVM CPU s"], rows["spark three tables, arranged"]["worker CPU s"]) == (10.0, 20.0)
    assert rows["spark two tables, arranged"]["JVM CPU s"] == "-" and rows["streamjoin-arranged two tables"]["worker CPU s"] == "-"


def test_bench_spark_cpu_reads_a_span_between_its_samples():
    from streamjoin.bench.interval import SparkCpu

    cpu = SparkCpu.__new__(SparkCpu)   # (its samples, without the thread or a Spark to read)
    cpu.samples = [(100.0, 1.0, 10.0), (101.0, 3.0, 12.0), (102.0, 4.0, 16.0)]
    jvm, workers = cpu.between(100.5, 101.5)   # halfway into the first and the second interval
    assert (round(jvm, 6), round(workers, 6)) == (1.5, 3.0)
    assert cpu.between(99.0, 103.0) == (3.0, 6.0)   # (outside the samples: the first and the last)
