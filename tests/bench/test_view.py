"""``streamjoin bench view``: its star workload and a tiny run of both variants (figures not checked)."""

from __future__ import annotations

import argparse

from streamjoin.bench import view


def test_bench_view_star_references_loaded_products_and_runs_both_variants(capsys):
    data = view.star(200, 100)
    orders_load, _ = data.orders
    assert orders_load.schema.names[-1] == "product_id"
    assert max(orders_load.column("product_id").to_pylist()) < data.products[0].num_rows == 20
    args = argparse.Namespace(rows=200, changes=100, batches=2, partitions=1, store="memory", spark=False,
                              key_stages="fused")
    assert view.run(args) == 0
    out = capsys.readouterr().out
    assert "two tables:" in out and "three tables:" in out and "bytes per input row" in out
