"""Shared test set-up: Hypothesis profiles, and the ``spark`` fixture.

Profiles: ``ci`` (bounded; the default when CI=true), ``dev`` (the default), ``thorough`` (many
examples, for a local soak: ``HYPOTHESIS_PROFILE=thorough scripts/test``; properties that pin
a small budget run more of them there, see ``tests/examples.py``).
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True
)
settings.register_profile("dev", max_examples=150, deadline=None)
settings.register_profile(
    "thorough", max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
_default = "ci" if os.environ.get("CI", "").lower() in ("1", "true", "yes") else "dev"
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", _default))


@pytest.fixture(scope="session")
def spark(streamjoin_spark):
    """One local Spark session for every Spark test, wherever it lives: the kit's ``streamjoin_spark``
    fixture (:mod:`streamjoin.testing.plugin`, ``local[2,4]``: a failed task is tried up to four
    times, as on a cluster), under the name the tests use."""
    return streamjoin_spark


@pytest.fixture
def moto_s3(monkeypatch, tmp_path):
    """A local S3-compatible server (``moto_server``, on a free port of 127.0.0.1) with one empty
    bucket; yields its ``s3://`` root. pyarrow's S3 filesystem finds it through ``AWS_ENDPOINT_URL``,
    set here for this process and, when the test also has the ``spark`` session, for the Python
    processes Spark starts from now on (``SparkContext.environment``; ask for ``spark`` first).
    The server stops after the test."""
    import shutil
    import socket
    import subprocess
    import sys
    import time

    import pyarrow.fs as pafs

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = shutil.which("moto_server", path=os.path.dirname(sys.executable)) or shutil.which("moto_server")
    assert server, "moto_server not found: install the test extra (pip install -e '.[test]')"
    log = open(tmp_path / "moto.log", "wb")
    process = subprocess.Popen([server, "-H", "127.0.0.1", "-p", str(port)], stdout=log, stderr=subprocess.STDOUT)
    env = {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}", "AWS_ACCESS_KEY_ID": "testing",
           "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    workers = _spark_environment()
    saved = {name: workers.get(name) for name in env} if workers is not None else {}
    if workers is not None:
        workers.update(env)
    try:
        for _ in range(3000):   # until it accepts connections (a readiness check, not a timing one)
            if process.poll() is not None:
                raise RuntimeError(f"moto_server exited: {(tmp_path / 'moto.log').read_text()}")
            with socket.socket() as client:
                if client.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.01)
        fs = pafs.S3FileSystem(endpoint_override=env["AWS_ENDPOINT_URL"], access_key="testing",
                               secret_key="testing", region="us-east-1", allow_bucket_creation=True)
        fs.create_dir("streamjoin-test")
        yield "s3://streamjoin-test"
    finally:
        if workers is not None:
            for name, value in saved.items():
                if value is None:
                    workers.pop(name, None)
                else:
                    workers[name] = value
        process.terminate()
        process.wait(30)
        log.close()


def _spark_environment():
    """The environment Spark gives the Python processes it starts, if this run has a session."""
    try:
        from pyspark import SparkContext
    except ImportError:
        return None
    context = SparkContext._active_spark_context
    return None if context is None else context.environment
