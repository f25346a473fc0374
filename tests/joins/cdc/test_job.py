"""The PostgreSQL job end to end: the derived view equals PostgreSQL's join after the query is killed
and restarted mid-way, and after PostgreSQL itself restarts mid-way (one run through both)."""

from __future__ import annotations

import pytest

from streamjoin.cdc import connect, drop_slot
from streamjoin.jobs.postgres_cdc import SLOTS, catch_up, check, prepare_database, start_queries, stop_queries
from streamjoin.jobs.postgres_workload import Workload

pytestmark = [pytest.mark.postgres, pytest.mark.spark]


@pytest.fixture
def shop(cluster, tmp_path):
    """A fresh shop in the session's cluster (the job's slot names are the cluster's: drop them after)."""
    workload = Workload(seed=5)
    prepare_database(cluster.dsn, str(tmp_path), workload, users=40)
    yield workload
    with connect(cluster.dsn) as conn:
        conn.execute("DROP TABLE users, products, orders, order_lines, orders_enriched, streamjoin_sink_progress")
        for slot, _ in SLOTS.values():
            drop_slot(conn, slot)


def test_postgres_job_view_equal_after_the_query_is_killed_and_after_postgres_restarts(spark, cluster, shop,
                                                                                        tmp_path):
    """One pipeline through both disruptions (each costs a job set-up and a catch-up): the queries
    are killed mid-way and restarted while the workload goes on, then PostgreSQL crashes under the
    restarted queries; the view and the enrichment are right at the end."""
    queries = start_queries(spark, cluster.dsn, str(tmp_path), trigger="0 seconds")
    with connect(cluster.dsn) as conn:
        shop.run(conn, 60)
        stop_queries(queries)  # mid-way: the workload goes on while no query runs
        shop.run(conn, 60)
    queries = start_queries(spark, cluster.dsn, str(tmp_path), trigger="0 seconds")
    try:
        with connect(cluster.dsn) as conn:
            shop.run(conn, 40)
        cluster.restart("immediate")  # a crash: the source and the sinks reconnect with backoff
        with connect(cluster.dsn) as conn:
            shop.run(conn, 60)
        catch_up(cluster.dsn, queries, timeout=150)
    finally:
        stop_queries(queries)
    _assert_view_and_enrichment_right(cluster, shop)


def _assert_view_and_enrichment_right(cluster, shop) -> None:
    """The job's view equals the database's join, and every inserted order was enriched rightly."""
    result = check(cluster.dsn, shop.orders_inserted)
    assert result.view_differences == 0 and result.view_rows > 0
    assert (result.enriched, result.enriched_wrong) == (shop.orders_inserted, 0)
