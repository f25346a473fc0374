"""A throw-away PostgreSQL cluster for the ``postgres`` tests, one per session, and a database per test.

Without PostgreSQL's server programs or wal2json the tests fail (never skip), saying how to
install them; ``.ci/run`` installs them before the suite runs.
"""

from __future__ import annotations

import itertools
import os

import pytest

from streamjoin.cdc import connect
from streamjoin.cdc.cluster import Cluster, start_cluster
from streamjoin.cdc.errors import ServerBinariesMissing

_names = itertools.count()


@pytest.fixture(scope="session")
def cluster():
    try:
        server = start_cluster(prefix="streamjoin-test-pg-")
    except ServerBinariesMissing as exc:
        pytest.fail(f"the postgres tests need a PostgreSQL server: {exc}", pytrace=False)
    yield server
    server.destroy()


@pytest.fixture
def dsn(cluster: Cluster) -> str:
    """A new empty database on the session's cluster."""
    name = f"t{os.getpid()}_{next(_names)}"
    with connect(cluster.dsn) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return cluster.dsn.replace("dbname=postgres", f"dbname={name}")


@pytest.fixture
def slot(dsn: str) -> str:
    """A replication slot name of the test's own (slots belong to the cluster, not the database)."""
    return dsn.split("dbname=")[1].split()[0] + "_slot"
