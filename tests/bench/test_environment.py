"""The benchmark process turns huge pages off as ``streamjoin.SPARK_SETTINGS`` has Spark's workers."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys

import pytest

from streamjoin.bench import environment

_PROBE = """
import subprocess, sys
from streamjoin.bench import environment
print(environment.apply())
print(environment.huge_pages())
print(subprocess.run([sys.executable, "-c", "from streamjoin.bench import environment; print(environment.huge_pages())"],
                     capture_output=True, text=True, check=True).stdout.strip())
"""


def _as_started_fresh() -> None:
    """The probe starts with huge pages allowed, whatever this test process inherited (a test
    before it in this worker may have run ``streamjoin bench`` in process, which turns them off)."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None).prctl(41, 0, 0, 0, 0)   # PR_SET_THP_DISABLE, 0


def _probe(**variables: str) -> list[str]:
    env = {k: v for k, v in os.environ.items() if k not in environment.VARIABLES}
    env.update(variables)
    done = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, env=env, check=True,
                          preexec_fn=_as_started_fresh)
    return done.stdout.splitlines()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_THP_DISABLE is Linux's")
def test_environment_apply_turns_huge_pages_off_for_the_process_and_its_children() -> None:
    said, here, child = _probe()
    assert said.startswith("huge pages off")
    assert here == "off"
    assert child == "off"


def test_environment_apply_keeps_the_variables_a_user_set() -> None:
    said, here, child = _probe(MIMALLOC_ALLOW_THP="1")
    assert said == "huge pages as the environment sets them (MIMALLOC_ALLOW_THP=1)"
    assert here == child == "MIMALLOC_ALLOW_THP=1"
