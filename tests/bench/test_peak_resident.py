"""``streamjoin.bench.harness.peak_resident``: a process's own peak resident memory, which the
benchmarks that restart or restore in a child process report beside their figures."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np

from streamjoin.bench.harness import peak_resident, resident_pages

_CHILD = "from streamjoin.bench.harness import peak_resident; print(peak_resident())"


def test_peak_resident_is_at_least_what_the_process_holds_now():
    held = np.ones(64 << 17)   # 64 MB, touched
    assert peak_resident() >= resident_pages(os.getpid())[0] > held.nbytes


def test_peak_resident_of_a_child_is_its_own_not_its_large_parents():
    held = np.ones(400 << 17)   # 400 MB resident here; ru_maxrss would hand it to the child
    child = int(subprocess.run([sys.executable, "-c", _CHILD], check=True, capture_output=True, text=True).stdout)
    assert 0 < child < held.nbytes / 2
