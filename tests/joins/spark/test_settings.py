"""``streamjoin.SPARK_SETTINGS``: the session settings the joins run best with, used by the test
kit's session, the jobs' and the benchmarks'; and the test kit's session, whose driver listens on
the loopback only."""

from __future__ import annotations

import ipaddress
import os

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


def test_test_kits_session_listens_on_the_loopback_only(spark) -> None:
    """Every TCP port the session's JVM listens on is bound to the loopback (the test kit sets
    ``spark.driver.host`` and ``spark.driver.bindAddress``), whatever the machine's name resolves to."""
    pid = spark._jvm.java.lang.ProcessHandle.current().pid()
    addresses = _listening(pid)
    assert addresses, "the JVM listens on no TCP port (py4j's gateway, at least, should be found)"
    assert all(address.is_loopback for address in addresses), addresses


def _listening(pid: int) -> list[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    """The local addresses of process ``pid``'s listening TCP sockets (Linux's ``/proc``), an
    IPv4-mapped IPv6 address as its IPv4 one."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:   # (closed since listed)
            continue
        if link.startswith("socket:["):
            inodes.add(link[len("socket:["):-1])
    found: list[ipaddress.IPv4Address | ipaddress.IPv6Address] = []
    for table in ("tcp", "tcp6"):
        with open(f"/proc/{pid}/net/{table}") as f:
            next(f)   # (the header)
            for line in f:
                fields = line.split()
                if fields[3] != "0A" or fields[9] not in inodes:   # 0A: LISTEN
                    continue
                raw = fields[1].split(":")[0]   # each 32-bit word in the machine's (little-endian) order
                packed = b"".join(bytes.fromhex(raw[i:i + 8])[::-1] for i in range(0, len(raw), 8))
                address = ipaddress.ip_address(packed)
                mapped = getattr(address, "ipv4_mapped", None)
                found.append(mapped or address)
    return found


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
