"""Which Python Spark's workers run, checked when a join is defined (no Spark session needed:
the check reads the session's ``SparkContext``, given here as a stand-in)."""

from __future__ import annotations

import logging
import subprocess
import sys
from types import SimpleNamespace

import pytest

from streamjoin.errors import JoinDefinitionError
from streamjoin.spark import workers


def _session(master: str, python: str) -> SimpleNamespace:
    return SimpleNamespace(_sc=SimpleNamespace(master=master, pythonExec=python))


def test_workers_local_session_on_a_python_without_streamjoin_is_refused_naming_what_to_set(tmp_path):
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "bare")], check=True)
    bare = str(tmp_path / "bare" / "bin" / "python")
    with pytest.raises(JoinDefinitionError, match=f"export PYSPARK_PYTHON={sys.executable}"):
        workers.check_worker_python(_session("local[2]", bare))
    workers.check_worker_python(_session("local[2]", sys.executable))   # the driver's own: fine


def test_workers_cluster_without_pyspark_python_is_a_warning_not_a_refusal(caplog, monkeypatch):
    monkeypatch.setattr(workers, "_WARNED", set())
    with caplog.at_level(logging.WARNING, logger="streamjoin"):
        workers.check_worker_python(_session("yarn", "python3"))
        workers.check_worker_python(_session("yarn", "python3"))   # once a process
        workers.check_worker_python(_session("spark://host:7077", "/opt/env/bin/python"))   # set: silent
    assert [r.getMessage() for r in caplog.records if "PYSPARK_PYTHON is not set" in r.getMessage()] != []
    assert len(caplog.records) == 1
    workers.check_worker_python(SimpleNamespace())   # Spark Connect: no SparkContext, nothing checked
