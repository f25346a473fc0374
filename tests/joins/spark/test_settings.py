"""``streamjoin.SPARK_SETTINGS``: the session settings the joins run best with, used by the test
kit's session, the jobs' and the benchmarks'."""

from __future__ import annotations

import pytest

import streamjoin


def test_spark_settings_are_a_read_only_mapping_of_sql_worker_and_transport_settings() -> None:
    settings = streamjoin.SPARK_SETTINGS
    assert settings["spark.sql.execution.arrow.maxBytesPerBatch"] == str(2**31 - 1)
    assert settings["spark.executorEnv.MIMALLOC_ALLOW_THP"] == "0"
    assert settings["spark.executorEnv.NUMPY_MADVISE_HUGEPAGE"] == "0"
    assert settings["spark.python.unix.domain.socket.enabled"] == "true"
    assert all(isinstance(k, str) and k.startswith(("spark.sql.", "spark.executorEnv.", "spark.python."))
               and isinstance(v, str) for k, v in settings.items())
    with pytest.raises(TypeError):
        settings["spark.sql.shuffle.partitions"] = "8"   # type: ignore[index]


def test_spark_settings_hold_in_the_test_kits_session(spark) -> None:
    for key, value in streamjoin.SPARK_SETTINGS.items():
        assert spark.conf.get(key) == value
    # Spark then skips its per-row byte check of the Arrow batches it hands mapInArrow
    assert spark._jsparkSession.sessionState().conf().arrowMaxBytesPerBatch() == 2**31 - 1
    # and the Python workers start with the environment the settings give them
    names = [key.removeprefix("spark.executorEnv.") for key in streamjoin.SPARK_SETTINGS
             if key.startswith("spark.executorEnv.")]
    found = spark.range(1).mapInArrow(_environment(names), "name string, value string").collect()
    assert {row["name"]: row["value"] for row in found} == {name: "0" for name in names}
    # and Spark reaches them over a Unix domain socket, not TCP (no delayed acknowledgement)
    families = spark.range(1).mapInArrow(_socket_families, "family string").collect()
    assert {row["family"] for row in families} == {"AF_UNIX"}


def _environment(names: list[str]):
    def read(batches):
        import os

        import pyarrow as pa
        for _ in batches:
            pass
        yield pa.RecordBatch.from_pydict({"name": names, "value": [os.environ.get(n) for n in names]})
    return read


def _socket_families(batches):
    """The address families of the Python worker's stream sockets (Linux's ``/proc/self/fd``)."""
    import os
    import socket
    import stat

    import pyarrow as pa
    for _ in batches:
        pass
    families = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            if not stat.S_ISSOCK(os.fstat(int(fd)).st_mode):
                continue
            sock = socket.socket(fileno=os.dup(int(fd)))
        except OSError:   # (the listing's own descriptor, closed by then)
            continue
        try:
            if sock.type == socket.SOCK_STREAM:
                families.add(sock.family.name)
        finally:
            sock.close()
    yield pa.RecordBatch.from_pydict({"family": sorted(families)})
