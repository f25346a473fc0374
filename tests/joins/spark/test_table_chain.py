"""A view over three tables end to end through Spark: orders x customers x products as two
``table_table_join`` calls in one streaming query, the first one's output given as it comes to
the second, maintained by ``view_sink``. After every micro-batch the view equals the relational
three-way join of the tables as they stand, across inserts, updates, deletes, a foreign-key move,
a primary-key change and a product update that reaches several orders, and across a restart after
which the first join's local state is lost (rebuilt from its changelog)."""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from streamjoin import progress_metrics, read_state, table_table_join, view_sink
from streamjoin.errors import JoinDefinitionError
from streamjoin.testing.table import Change, ReferenceTable
from tests.joins.table.chains import TABLES, reference_chain

pytestmark = pytest.mark.spark

EPOCH = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
SCHEMAS = [pa.schema([pa.field(f.name, pa.timestamp("us", "UTC")) if pa.types.is_timestamp(f.type) else f
                      for f in t.schema]) for t in TABLES]
DDL = ["order_id bigint, cust bigint, prod string, qty bigint, op string, o_at timestamp",
       "customer_id bigint, name string, op string, c_at timestamp",
       "product_id string, title string, op string, p_at timestamp"]
# per batch, per table: (primary key, op, seconds, values)
BATCHES = [
    [[(1, "insert", 1, {"cust": 10, "prod": "a", "qty": 1}), (2, "insert", 1, {"cust": 11, "prod": "b", "qty": 2}),
      (3, "insert", 1, {"cust": 10, "prod": "a", "qty": 1})],
     [(10, "insert", 1, {"name": "ann"}), (11, "insert", 1, {"name": "bob"})],
     [("a", "insert", 1, {"title": "pen"}), ("b", "insert", 1, {"title": "ink"})]],
    [[(2, "update", 3, {"cust": 10, "prod": "b", "qty": 2})],                       # a foreign-key move
     [(11, "update", 3, {"name": "bo"})],
     [("a", "update", 3, {"title": "pen 2"})]],                                     # reaches orders 1 and 3
    [[(3, "delete", 5, {}), (4, "insert", 5, {"cust": 12, "prod": "c", "qty": 4})],
     [(10, "delete", 5, {}), (13, "insert", 5, {"name": "ann"})],                  # a primary-key change
     [("c", "insert", 5, {"title": "cup"})]],
    [[(1, "update", 6, {"cust": 13, "prod": "a", "qty": 1})],
     [(12, "insert", 6, {"name": "cy"})],
     [("b", "delete", 6, {})]],
]
HOW = ("left", "left")
VIEW_KEY = ["order_id", "customer_id"]


def _write(root: str, files: range) -> None:
    for table, schema, name in zip(range(3), SCHEMAS, ("orders", "customers", "products")):
        t = TABLES[table]
        os.makedirs(f"{root}/{name}", exist_ok=True)
        for i in files:
            rows = [{t.key: pk, **values, "op": op, t.time: EPOCH + dt.timedelta(seconds=s)}
                    for pk, op, s, values in BATCHES[i][table]]
            path = f"{root}/{name}/part-{i:03d}.parquet"
            pq.write_table(pa.Table.from_pylist(rows, schema), path)
            os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))


def _view_changes(spark, root: str):
    orders, customers, products = (
        spark.readStream.schema(ddl).option("maxFilesPerTrigger", 1).parquet(f"{root}/{name}")
        for ddl, name in zip(DDL, ("orders", "customers", "products")))
    first = table_table_join(orders, customers, (["cust"], ["customer_id"]), left_key="order_id",
                             right_key="customer_id", how=HOW[0], left_time="o_at", right_time="c_at",
                             checkpoint=f"{root}/ck1", state_dir=f"{root}/local1", partitions=2)
    # the first join's output, as it comes, is the second join's left table
    return table_table_join(first, products, (["prod"], ["product_id"]), left_key=VIEW_KEY, right_key="product_id",
                            how=HOW[1], right_time="p_at", checkpoint=f"{root}/ck2", state_dir=f"{root}/local2",
                            partitions=2)


def _expected() -> list[set[tuple]]:
    tables = [ReferenceTable((t.key,)) for t in TABLES]
    out = []
    for batch in BATCHES:
        for t, reference, changes in zip(TABLES, tables, batch):
            reference.apply([Change((pk,), "delete" if op == "delete" else "upsert", s, None,
                                    {t.key: pk, **values, t.time: s}) for pk, op, s, values in changes])
        out.append({tuple(row) for row in reference_chain(*(r.rows for r in tables), HOW)[1].values()})
    return out


def _plain(value):
    return int((value - EPOCH).total_seconds()) if isinstance(value, dt.datetime) else value


def test_table_table_join_chain_of_three_tables_in_one_query_equals_the_join_after_every_batch(spark, tmp_path):
    root = str(tmp_path)
    _write(root, range(2))
    seen: dict[int, set[tuple]] = {}
    changes = _view_changes(spark, root)
    assert changes.columns[-4:] == ["_change_type", "_commit_version", "_seq", "_change_timestamp"]
    with view_sink(f"{root}/view", left_key=VIEW_KEY, right_key="product_id", schema=changes) as sink:
        def each(df, batch_id):
            sink(df, batch_id)
            columns = sink.rows().column_names
            seen[batch_id] = {tuple(_plain(r[c]) for c in columns) for r in sink.rows().to_pylist()}

        def run(stream):
            query = (stream.writeStream.foreachBatch(each).option("checkpointLocation", f"{root}/spark")
                     .trigger(availableNow=True).start())
            query.awaitTermination()
            return query

        run(changes)
        assert sorted(seen) == [0, 1]
        # the query stops; the first join's local state is lost, then the query goes on
        shutil.rmtree(f"{root}/local1")
        _write(root, range(2, 4))
        query = run(_view_changes(spark, root))
    expected = _expected()
    assert sorted(seen) == [0, 1, 2, 3]
    for batch_id in range(4):
        assert seen[batch_id] == expected[batch_id], f"after micro-batch {batch_id}"
    assert any(row[-3:] == ("a", "pen 2", 3) for row in seen[1])
    assert len(seen[3]) == 3
    # each join of the chain is named by its checkpoint in the query's progress and in its state
    progress = query.recentProgress[-1]
    # (the second join is one stage: the view's changes carry their pre-images, products are
    # keyed by the join key; so its state is in its checkpoint itself)
    with pytest.raises(JoinDefinitionError, match="ck1/join.*ck2'|ck2'.*ck1/join"):
        progress_metrics(progress)
    first = progress_metrics(progress, checkpoint=f"{root}/ck1/join")
    second = progress_metrics(progress, checkpoint=f"{root}/ck2")
    assert first["output_rows"] > 0 and second["output_rows"] > 0
    # the first view's changes are the second join's left input, every one read
    assert second["input_rows_left_changes"] == first["output_rows"]
    # the second join holds the first view's rows: order 1 with customer 13, 2 padded, 4 with 12
    held = read_state(spark, f"{root}/ck2", side="left").collect()
    assert sorted(json.loads(r.primary_key) for r in held) == [[1, 13], [2, None], [4, 12]]
