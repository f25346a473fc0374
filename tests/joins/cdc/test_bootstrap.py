"""``table_table_join`` over tables that predate their slots: ``left_bootstrap=`` / ``right_bootstrap=``
from the slots' exported snapshots, then the changes after them, equals PostgreSQL's own join."""

from __future__ import annotations

import pytest

from streamjoin.cdc import connect, create_slot, drop_slot
from streamjoin.jobs.postgres_workload import SCHEMA, VIEW_DIFFERENCES

pytestmark = [pytest.mark.postgres, pytest.mark.spark]


def test_table_table_join_bootstrap_from_the_slots_snapshots_equals_postgres_join(spark, dsn, slot, tmp_path):
    from streamjoin import table_table_join
    from streamjoin.spark.postgres_sink import PostgresSink
    from streamjoin.spark.postgres_source import postgres_change_format, read_postgres_changes

    with connect(dsn) as conn:
        conn.execute(SCHEMA)
        conn.execute("INSERT INTO products SELECT g, 'p' || g, g + 0.5 FROM generate_series(1, 5) g")
        conn.execute("INSERT INTO orders SELECT g, 1, g % 5 + 1, g, 'free' FROM generate_series(1, 20) g")
        orders = create_slot(dsn, f"{slot}_o", ["public.orders"])
        products = create_slot(dsn, f"{slot}_p", ["public.products"])
        try:
            # after the slots: a pre-existing order moved and deleted, a product renamed, a new order
            conn.execute("UPDATE orders SET product_id = 5, quantity = 99 WHERE order_id = 1")
            conn.execute("DELETE FROM orders WHERE order_id = 2")
            conn.execute("UPDATE products SET name = 'renamed' WHERE product_id = 3")
            conn.execute("INSERT INTO orders VALUES (21, 1, 4, 1, 'free')")
            view = table_table_join(
                read_postgres_changes(spark, dsn, f"{slot}_o", "public.orders"),
                read_postgres_changes(spark, dsn, f"{slot}_p", "public.products"), "product_id",
                left_key="order_id", right_key="product_id",
                left_format=postgres_change_format("order_id"), right_format=postgres_change_format("product_id"),
                left_bootstrap=spark.createDataFrame(orders.snapshot["public.orders"]),
                right_bootstrap=spark.createDataFrame(products.snapshot["public.products"]),
                checkpoint=str(tmp_path / "view"), partitions=2)
            sink = PostgresSink(dsn, "public.order_lines", key=["order_id", "product_id"], columns={
                "order_id": "order_id", "product_id": "product_id_left", "quantity": "quantity",
                "product_name": "name", "price": "price"})
            query = (view.writeStream.foreachBatch(sink).trigger(availableNow=True)
                     .option("checkpointLocation", str(tmp_path / "spark")).start())
            query.awaitTermination(120)
            assert query.exception() is None
            differences, rows = conn.execute(VIEW_DIFFERENCES).fetchone()
            assert (differences, rows) == (0, 20)
        finally:
            drop_slot(conn, f"{slot}_o")
            drop_slot(conn, f"{slot}_p")
