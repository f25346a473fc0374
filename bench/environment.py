"""The benchmark process runs its in-process joins as ``streamjoin.SPARK_SETTINGS`` runs Spark's workers.

``SPARK_SETTINGS`` gives Spark's Python workers ``MIMALLOC_ALLOW_THP=0`` and
``NUMPY_MADVISE_HUGEPAGE=0``: no transparent huge pages, which the kernel zeroes 2 MB at a time at
every fresh allocation (the settings' page says why). A benchmark's variants that run the joins in
its own process (``--in-process``, ``--no-spark`` stages, ``bench store-time``, ``bench view``'s
in-process chain) would otherwise measure a process that asks for them: on the 2-core benchmark
machine ``bench store-time`` gave the table join 1.37x the store time with them (3.23 against
2.35 us a row) and the enrichment 2.4x (1.47 against 0.61), medians of three alternated pairs. ``apply`` turns them off for this process and the processes it
starts (Linux's ``PR_SET_THP_DISABLE``, which children inherit, and the two variables), unless
the benchmark's environment sets either variable itself: then it is run as set.
"""

from __future__ import annotations

import ctypes
import os
import sys

__all__ = ["apply", "huge_pages", "VARIABLES"]

#: The workers' variables of ``streamjoin.SPARK_SETTINGS`` that concern huge pages.
VARIABLES = ("MIMALLOC_ALLOW_THP", "NUMPY_MADVISE_HUGEPAGE")
_PR_SET_THP_DISABLE = 41
_PR_GET_THP_DISABLE = 42


def apply() -> str:
    """Turn transparent huge pages off for this process and its children as Spark's workers have
    them off; return how the process runs ("huge pages off", or why they are as they were)."""
    if any(name in os.environ for name in VARIABLES):
        return "huge pages as the environment sets them (" + ", ".join(
            f"{name}={os.environ[name]}" for name in VARIABLES if name in os.environ) + ")"
    if not sys.platform.startswith("linux"):
        return "huge pages as the system has them (not Linux)"
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_THP_DISABLE, 1, 0, 0, 0) != 0:
            return f"huge pages as the system has them (prctl refused: errno {ctypes.get_errno()})"
    except (OSError, AttributeError) as exc:
        return f"huge pages as the system has them (no prctl: {exc})"
    os.environ.update({name: "0" for name in VARIABLES})
    return "huge pages off, as streamjoin.SPARK_SETTINGS has Spark's workers"


def huge_pages() -> str:
    """Whether this process may get transparent huge pages: "off" (``PR_SET_THP_DISABLE``), the
    variables as set, or "system" where neither applies."""
    if sys.platform.startswith("linux"):
        try:
            if ctypes.CDLL(None).prctl(_PR_GET_THP_DISABLE, 0, 0, 0, 0) == 1:
                return "off"
        except (OSError, AttributeError):
            pass
    named = {name: os.environ[name] for name in VARIABLES if name in os.environ}
    return ", ".join(f"{k}={v}" for k, v in named.items()) or "system"
